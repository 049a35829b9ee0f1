"""The Confluence lane: conf_draft -> conf_gate -> conf_write (docs/architecture.md §2).

- `conf_draft` reads the page the task names (if any), asks the model for a
  draft (its own node, so a resume never pays for the call twice), and turns
  it into the exact new ADF body: a new page, or a minimal edit of the
  existing one through the Mermaid editor, whose guards must pass.
- `conf_gate` asks a person to `publish`, `revise <feedback>` or
  `reject [reason]` the exact change, with a readable preview and a diff
  summary (one `interrupt()`, nothing before it that is wrong to repeat).
- `conf_write` applies it. Dry-run (the default) records the exact request in
  `side_effects` and sends nothing. An approval covers the mode its question
  showed: if the person approved a dry run and the lane now writes for real
  (the operator restarted with dry-run off), the dry run is recorded and the
  task ends with a note that a real write needs a new approval (submit the
  task again); nothing is sent without an approval that said so. A real
  write begins its effect record (pending, with the intended version) before
  sending and records the result (page id, version) before the node finishes;
  when a pending record is found on a re-run, the page is read first and a
  write that already landed is not sent again (docs/architecture.md §4).

Which page: a task body line `confluence-page: <numeric id>` names an existing
page to update; without one a new page is created in
`AGENT_TEAM_CONFLUENCE_SPACE_ID` under `AGENT_TEAM_CONFLUENCE_PARENT_ID`
(both checked before the model is asked: the space exists, the parent is a
page of that space). For an existing page the edit replaces the first Mermaid diagram's source,
or, when the page has none, inserts one after the heading the model names.

`reject`: a `confluence` task ends `cancelled` (nothing was produced); a code
task that came through the post-build flow ends `done` (its build stands) and
the rejection is kept in the state (`confluence.decision`).

Secrets: the draft is put under the one redaction rule when it is made
(`ConfluenceLane.clean`): the model's title, summary, diagram and page body,
and, for an update, anything credential-shaped already on the page, which the
diff summary then says. So the question shows exactly what is written, the
client's own pass over what it sends changes nothing, and the check that a
lost create landed (the page found equals the draft) still holds.

Bad input (ADF that is not JSON or not a doc, a page that does not exist, a
wrong space id, an edit a guard refuses) raises `ConfluenceRefusedError`:
the coordinator parks the task with the reason; nothing is written.
"""

from __future__ import annotations

from typing import Any

from agent_team import db
from agent_team.common.redact import MASK
from agent_team.exceptions import ConfluenceRefusedError
from agent_team.integrations.confluence import adf, mermaid
from agent_team.integrations.confluence.client import ConfluenceClient, StaleVersionError
from agent_team.integrations.confluence.lane import ConfluenceLane
from agent_team.integrations.confluence.pages import (
    check_space,
    edit_ops,
    names_task,
    page_id_from,
    page_result,
    read_page,
    request_for,
)
from agent_team.models.prompts import PageContext, confluence_messages
from agent_team.models.schemas import ConfluenceDraft, Plan
from agent_team.nodes.common import GraphDeps, ask_human, crash_point, enter
from agent_team.requests.answers import PUBLISH_HELP
from agent_team.task_model import Phase, QuestionKind, TaskKind, TaskState, question_id_for

__all__ = [
    "conf_draft",
    "conf_gate",
    "conf_write",
    "effect_id_for",
    "route_after_conf_gate",
]

EFFECT_KIND = "confluence_write"
_PREVIEW_CHARS = 3000


def effect_id_for(task_id: str, turn: int) -> str:
    return f"confluence:write:{task_id}:{turn}"


def _lane(deps: GraphDeps) -> ConfluenceLane:
    if deps.confluence is None:  # the graph has no lane nodes without it
        raise ConfluenceRefusedError("the Confluence lane is off (AGENT_TEAM_CONFLUENCE_ENABLED)")
    return deps.confluence


def _conf(state: TaskState) -> dict[str, Any]:
    return dict(state.get("confluence") or {})


# -- conf_draft --------------------------------------------------------------------------------


def _previous(conf: dict[str, Any]) -> str | None:
    draft = conf.get("draft") or {}
    if not draft:
        return None
    return f"Title: {draft.get('title', '')}\n\n{draft.get('summary', '')}"


def conf_draft(state: TaskState, deps: GraphDeps) -> dict[str, Any]:
    lane = _lane(deps)
    enter(deps, state, Phase.CONF_DRAFT)
    conf = _conf(state)
    page_id = page_id_from(state.get("body", ""))
    page = read_page(lane, page_id) if page_id else None
    space_id = page.space_id if page is not None else check_space(lane)
    plan = state.get("plan")
    build = state.get("build") or {}
    context = None
    if page is not None:
        context = PageContext(
            title=page.title,
            headings=[h for _, n in adf.iter_nodes(page.doc) if (h := adf.heading_text(n))],
            diagrams=[d.source for d in mermaid.find_diagrams(page.doc, lane.macro_keys)],
        )
    drafted_by_model = deps.caller.structured(
        thread_id=state["task_id"],
        stage=Phase.CONF_DRAFT.value,
        schema=ConfluenceDraft,
        messages=confluence_messages(
            state["title"],
            state.get("body", ""),
            plan_markdown=Plan.model_validate(plan).to_markdown() if plan else None,
            build_summary=str(build.get("summary") or "") or None,
            feedback=conf.get("feedback"),
            previous=_previous(conf),
            page=context,
        ),
    )
    # The ADF body is redacted once parsed (value by value), never as JSON text.
    draft = drafted_by_model.model_copy(
        update=lane.clean(drafted_by_model.model_dump(include={"title", "summary", "mermaid"}))
    )
    if page is not None:
        ops = edit_ops(page, draft, lane.macro_keys)
        edit = mermaid.safe_edit(page.doc, ops, lane.macro_keys)
        written, title = lane.clean(edit.doc), lane.clean(page.title)
        diff = lane.clean(mermaid.describe_ops(page.doc, ops, lane.macro_keys))
        if written != edit.doc or title != page.title:
            diff += f"\ncredential-shaped text already on the page is written as {MASK}"
        drafted: dict[str, Any] = {
            "mode": "update",
            "page_id": page.id,
            "space_id": space_id,
            "title": title,
            "base_version": page.version,
            "ops": ops,
            "doc": adf.dumps(written),
            "summary": draft.summary,
            "diff": diff,
            "preview": adf.to_preview(written, limit=_PREVIEW_CHARS),
        }
    else:
        doc = lane.clean(adf.parse(draft.body_adf, where="the drafted page body"))
        if not mermaid.find_diagrams(doc, lane.macro_keys):
            # The lane promises a diagram of the change; add the model's if the body lacks it.
            doc["content"].append(
                {
                    "type": "codeBlock",
                    "attrs": {"language": "mermaid"},
                    "content": [{"type": "text", "text": draft.mermaid}],
                }
            )
        count = len(mermaid.find_diagrams(doc, lane.macro_keys))
        drafted = {
            "mode": "create",
            "page_id": None,
            "space_id": space_id,
            "parent_id": lane.parent_id,
            "title": draft.title,
            "ops": [],
            "doc": adf.dumps(doc),
            "summary": draft.summary,
            "diff": f"create a new page {draft.title!r} in space {space_id} "
            f"({len(doc['content'])} blocks, {count} Mermaid diagram(s))",
            "preview": adf.to_preview(doc, limit=_PREVIEW_CHARS),
        }
    crash_point(deps, Phase.CONF_DRAFT, "after")
    return {"confluence": {**conf, "page_id": page_id, "draft": drafted, "decision": None}}


# -- conf_gate ---------------------------------------------------------------------------------


def _gate_text(state: TaskState, draft: dict[str, Any], dry_run: bool) -> str:
    # The preview holds no ``` of its own (adf.to_preview indents code), so these fences
    # read the same in Slack, the CLI and the dashboard.
    request = request_for(state["task_id"], draft)
    where = (
        f"update page {draft['page_id']} ({draft['title']!r}) from version "
        f"{draft['base_version']} to {int(draft['base_version']) + 1}"
        if draft["mode"] == "update"
        else f"create page {draft['title']!r} in space {draft['space_id']}"
    )
    mode = (
        "DRY RUN: nothing will be sent; the exact request is recorded"
        if dry_run
        else "this will be written to Confluence"
    )
    return "\n".join(
        [
            f"Confluence change for: {state['title']}",
            f"{where} ({mode}).",
            f"Request: {request['method']} {request['path']}",
            "",
            f"Summary: {draft.get('summary', '')}",
            "",
            "Changes:",
            "```",
            str(draft.get("diff", "")),
            "```",
            "",
            "Preview:",
            "```",
            str(draft.get("preview", "")),
            "```",
        ]
    )


def _asked_dry_run(deps: GraphDeps, task_id: str, turn: int) -> bool:
    """Whether the approval question of `turn` said "dry run" (True when unknown: safe)."""
    question = db.get_question(deps.ledger, question_id_for(task_id, turn))
    payload = question.payload if question is not None else None
    asked = payload.get("dry_run") if isinstance(payload, dict) else None
    return asked if isinstance(asked, bool) else True


def conf_gate(state: TaskState, deps: GraphDeps) -> dict[str, Any]:
    lane = _lane(deps)
    enter(deps, state, Phase.CONF_GATE)
    conf = _conf(state)
    draft = conf["draft"]
    answer = ask_human(
        deps,
        state,
        QuestionKind.CONFLUENCE_APPROVAL,
        lane.clean(
            {
                "text": _gate_text(state, draft, lane.dry_run),
                "title": state["title"],
                "page_title": draft["title"],
                "mode": draft["mode"],
                "page_id": draft.get("page_id"),
                "diff": draft.get("diff", ""),
                "preview": draft.get("preview", ""),
                "dry_run": lane.dry_run,
                "help": PUBLISH_HELP,
            }
        ),
    )
    decision = str(answer.get("decision", ""))
    text = str(answer.get("text", ""))
    conf["decision"] = decision
    # The node re-runs on resume with today's settings; what the person approved is the
    # mode the stored question showed them.
    conf["approved_dry_run"] = _asked_dry_run(deps, state["task_id"], state.get("turn", 0) + 1)
    update: dict[str, Any] = {"turn": state.get("turn", 0) + 1}
    if decision == "revise":
        conf["feedback"] = text
    elif decision == "publish":
        conf["comment"] = text
    else:
        conf["reject_reason"] = text
        if state.get("kind") == TaskKind.CONFLUENCE:
            update["outcome"] = "cancelled"
    update["confluence"] = conf
    crash_point(deps, Phase.CONF_GATE, "after")
    return update


def route_after_conf_gate(state: TaskState) -> str:
    decision = (state.get("confluence") or {}).get("decision")
    if decision == "publish":
        return Phase.CONF_WRITE.value
    if decision == "revise":
        return Phase.CONF_DRAFT.value
    return Phase.DONE.value


# -- conf_write --------------------------------------------------------------------------------


def _write_update(
    deps: GraphDeps,
    client: ConfluenceClient,
    state: TaskState,
    draft: dict[str, Any],
    effect_id: str,
    effect: db.SideEffect,
) -> dict[str, Any]:
    lane = _lane(deps)
    task_id = state["task_id"]
    page = client.get_page(str(draft["page_id"]))
    recorded = effect.request if isinstance(effect.request, dict) else {}
    intended = ((recorded.get("json") or {}).get("version") or {}).get("number")
    if page.version == intended and names_task(page, task_id):
        return page_result(page, recovered=True)  # it landed before a crash: never send twice
    for attempt in range(2):
        edit = mermaid.safe_edit(page.doc, draft["ops"], lane.macro_keys)
        # Redacted as the draft was, so an unchanged page is written exactly as approved.
        doc_text = adf.dumps(lane.clean(edit.doc))
        request = request_for(task_id, {**draft, "doc": doc_text}, page.version + 1)
        # Recorded (pending, with the intended version) before anything is sent.
        db.finish_effect(deps.ledger, effect_id=effect_id, state="pending", request=request)
        crash_point(deps, Phase.CONF_WRITE, "sending")
        try:
            written = client.update_page(request["json"])
        except StaleVersionError:
            if attempt == 1:
                raise ConfluenceRefusedError(
                    f"page {draft['page_id']} kept changing while agent-team wrote it (409 twice); "
                    "nothing was written. Revise the task once the page is quiet"
                ) from None
            page = client.get_page(str(draft["page_id"]))  # re-read; the edit is re-applied
            if page.version == request["json"]["version"]["number"] and names_task(page, task_id):
                # Our own write landed (its answer was lost and a retry met 409): record it.
                return page_result(page, recovered=True)
            continue
        crash_point(deps, Phase.CONF_WRITE, "sent")
        return page_result(written)
    raise AssertionError("unreachable")  # pragma: no cover


def _write_create(
    deps: GraphDeps,
    client: ConfluenceClient,
    state: TaskState,
    draft: dict[str, Any],
    effect_id: str,
) -> dict[str, Any]:
    request = request_for(state["task_id"], draft)
    # A create may have landed before a crash; a space holds one page per title.
    found = client.find_page(str(draft["space_id"]), str(draft["title"]))
    if found is not None:
        if adf.dumps(found.doc) == str(draft["doc"]):
            return page_result(found, recovered=True)
        raise ConfluenceRefusedError(
            f"a page titled {draft['title']!r} already exists in space {draft['space_id']} "
            "with other content; rename or remove it, then revise the task. Nothing was written"
        )
    db.finish_effect(deps.ledger, effect_id=effect_id, state="pending", request=request)
    crash_point(deps, Phase.CONF_WRITE, "sending")
    written = client.create_page(request["json"])
    crash_point(deps, Phase.CONF_WRITE, "sent")
    return page_result(written)


def conf_write(state: TaskState, deps: GraphDeps) -> dict[str, Any]:
    lane = _lane(deps)
    enter(deps, state, Phase.CONF_WRITE)
    conf = _conf(state)
    draft = conf["draft"]
    task_id = state["task_id"]
    effect_id = effect_id_for(task_id, state.get("turn", 0))
    first_request = request_for(task_id, draft)
    effect = db.begin_effect(
        deps.ledger, effect_id=effect_id, task_id=task_id, kind=EFFECT_KIND, request=first_request
    )
    # The approval covers the mode its question showed: a dry-run approval never becomes
    # a real write (dry-run also wins when it was turned on after a real-write approval).
    approved_dry_run = conf.get("approved_dry_run")
    if not isinstance(approved_dry_run, bool):  # a checkpoint from before the field
        approved_dry_run = _asked_dry_run(deps, task_id, state.get("turn", 0))
    if effect.state == "done" and isinstance(effect.result, dict):
        result = effect.result  # written (or recorded) before a crash: never again
    elif lane.dry_run or approved_dry_run:
        result = {
            "dry_run": True,
            "effect_id": effect_id,
            "method": first_request["method"],
            "path": first_request["path"],
            "page_id": draft.get("page_id"),
            "title": draft["title"],
            "sent": False,
        }
        if not lane.dry_run:
            result["approval_was_dry_run"] = True
        db.finish_effect(deps.ledger, effect_id=effect_id, state="done", result=result)
    else:
        client = lane.client("writing the page")
        # The page is read before every send, so a write that landed before a crash (the
        # effect row is still pending) is recognised and never sent twice.
        try:
            if draft["mode"] == "update":
                result = _write_update(deps, client, state, draft, effect_id, effect)
            else:
                result = _write_create(deps, client, state, draft, effect_id)
        except ConfluenceRefusedError as exc:
            db.finish_effect(deps.ledger, effect_id=effect_id, state="failed", error=str(exc))
            raise
        db.finish_effect(
            deps.ledger,
            effect_id=effect_id,
            state="done",
            result_ref=str(result["page_id"]),
            result=result,
        )
    crash_point(deps, Phase.CONF_WRITE, "after")
    return {"confluence": {**conf, "result": result}}
