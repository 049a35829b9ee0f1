"""The Confluence lane end to end in-process: Coordinator + offline model + loopback Confluence.

Direct flow (`confluence` tasks) and post-build flow (`code` tasks after the
build), dry-run (nothing reaches the server, the exact request is recorded)
and real writes (one POST/PUT with version + 1), revise/reject answers, the
409 re-apply, and bad input parking the task with nothing written.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from starlette.testclient import TestClient

from agent_team import db
from agent_team.config import DEFAULT_MERMAID_MACROS
from agent_team.coordinator import Coordinator, thread_config
from agent_team.dashboard import DashboardContext, create_app
from agent_team.exceptions import TaskRefusedError
from agent_team.graph import build_graph
from agent_team.integrations.confluence import adf, mermaid
from agent_team.integrations.confluence.lane import ConfluenceLane
from agent_team.models.caller import ModelCaller
from agent_team.models.schemas import ConfluenceDraft
from agent_team.nodes.common import GraphDeps
from tests.fakes import confluence_api as fc
from tests.integration.confluence.conftest import MakeLaneCoordinator, fixture_text
from tests.integration.pipeline.conftest import (
    LONG_BODY,
    Clock,
    RecordingTransport,
    ToolChat,
    tool_reply,
)

DIRECT_JOURNEY = ["intake", "conf_draft", "conf_gate", "conf_write", "done"]
PAT = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
# A bullet: the offline model makes it a step, a diagram node and a line of the page.
TOKEN_BODY = f"{LONG_BODY}- Rotate {PAT} after the release\n"


def journey(coordinator: Coordinator, task_id: str) -> list[str]:
    phases = [row.to_phase for row in db.list_transitions(coordinator.ledger, task_id)]
    return [p for i, p in enumerate(phases) if i == 0 or phases[i - 1] != p]


def task(coordinator: Coordinator, task_id: str) -> db.Task:
    found = db.get_task(coordinator.ledger, task_id)
    assert found is not None
    return found


def open_question(coordinator: Coordinator, task_id: str) -> db.Question:
    (question,) = db.list_questions(coordinator.ledger, status="open", thread_id=task_id)
    return question


def run(coordinator: Coordinator) -> None:
    assert coordinator.tick(until_idle=True, timeout_s=60).idle


def effects(coordinator: Coordinator, task_id: str) -> list[db.SideEffect]:
    return db.list_effects(coordinator.ledger, task_id=task_id, kind="confluence_write")


def submit_docs(coordinator: Coordinator, body: str = LONG_BODY, title: str = "Login") -> str:
    task_id = coordinator.start_task(title=title, body=body, kind="confluence")
    run(coordinator)
    return task_id


def answer(coordinator: Coordinator, task_id: str, text: str) -> db.Question:
    question = open_question(coordinator, task_id)
    coordinator.answer(question.question_id, text, via="cli:tester")
    run(coordinator)
    return question


# -- the flag --------------------------------------------------------------------------------

BASE_NODES = {
    "__start__",
    "__end__",
    "intake",
    "clarify",
    "clarify_gate",
    "plan",
    "plan_review",
    "build",
    "done",
}
BASE_EDGES = {
    ("__start__", "intake", False),
    ("clarify", "clarify_gate", True),
    ("clarify", "plan", True),
    ("clarify_gate", "clarify", False),
    ("done", "__end__", False),
    ("intake", "clarify", True),
    ("plan", "plan_review", False),
    ("plan_review", "build", True),
    ("plan_review", "done", True),
    ("plan_review", "plan", True),
}


def shape(deps: GraphDeps) -> tuple[set[str], set[tuple[str, str, bool]]]:
    graph = build_graph(deps, None).get_graph()
    return set(graph.nodes), {(e.source, e.target, e.conditional) for e in graph.edges}


def bare_deps(**kw: Any) -> GraphDeps:
    return GraphDeps(
        ledger=None,
        caller=None,  # type: ignore[arg-type]
        build=lambda task, plan: None,  # type: ignore[arg-type,return-value]
        clock=lambda: datetime.now(UTC),
        **kw,
    )


def test_flag_off_the_graph_is_exactly_as_before() -> None:
    nodes, edges = shape(bare_deps())
    assert nodes == BASE_NODES
    assert edges == BASE_EDGES | {("build", "done", False)}
    nodes, edges = shape(bare_deps(publish=lambda state: None))
    assert nodes == BASE_NODES | {"publish"}
    assert edges == BASE_EDGES | {("build", "publish", False), ("publish", "done", False)}


def test_flag_on_adds_the_lane_after_intake_and_after_build() -> None:
    lane = ConfluenceLane(
        space_id="1", parent_id=None, dry_run=True, macro_keys=DEFAULT_MERMAID_MACROS
    )
    nodes, edges = shape(bare_deps(confluence=lane, publish=lambda state: None))
    assert nodes == BASE_NODES | {"publish", "conf_draft", "conf_gate", "conf_write"}
    assert edges == BASE_EDGES | {
        ("intake", "conf_draft", True),
        ("build", "publish", False),
        ("publish", "conf_draft", False),
        ("conf_draft", "conf_gate", False),
        ("conf_gate", "conf_write", True),
        ("conf_gate", "conf_draft", True),
        ("conf_gate", "done", True),
        ("conf_write", "done", False),
    }


def test_flag_off_refuses_a_confluence_task_at_submit(
    make_lane: MakeLaneCoordinator, fake: fc.FakeConfluence
) -> None:
    coordinator = make_lane(confluence_enabled=False)
    assert coordinator.deps.confluence is None
    with pytest.raises(TaskRefusedError, match="documentation lane, which is off"):
        coordinator.start_task(title="Docs", body="x", kind="confluence")
    assert db.list_tasks(coordinator.ledger) == []


# -- direct flow -----------------------------------------------------------------------------


def test_direct_flow_dry_run_records_the_exact_request_and_sends_nothing(
    make_lane: MakeLaneCoordinator, fake: fc.FakeConfluence
) -> None:
    transport = RecordingTransport()
    coordinator = make_lane(transport=transport)
    task_id = submit_docs(coordinator)
    assert (task(coordinator, task_id).status, task(coordinator, task_id).phase) == (
        "waiting",
        "conf_gate",
    )
    question = open_question(coordinator, task_id)
    assert question.kind == "confluence_approval"
    text = question.payload["text"]
    assert "DRY RUN" in text and "create page 'Design: Login' in space 1001" in text
    assert "Request: POST /api/v2/pages" in text and "[code: mermaid]" in text
    assert "publish [comment]" in question.payload["help"]

    answer(coordinator, task_id, "publish")

    assert task(coordinator, task_id).status == "done"
    assert journey(coordinator, task_id) == DIRECT_JOURNEY
    assert fake.writes() == [], "dry-run sends nothing"
    (effect,) = effects(coordinator, task_id)
    assert effect.effect_id == f"confluence:write:{task_id}:1" and effect.state == "done"
    assert effect.result["dry_run"] is True and effect.result["sent"] is False
    request = effect.request
    assert (request["method"], request["path"]) == ("POST", "/api/v2/pages")
    body = request["json"]
    assert (body["spaceId"], body["status"], body["title"]) == ("1001", "current", "Design: Login")
    assert body["body"]["representation"] == "atlas_doc_format"
    doc = adf.parse(body["body"]["value"])
    (diagram,) = mermaid.find_diagrams(doc, DEFAULT_MERMAID_MACROS)
    assert diagram.source.startswith("flowchart TD") and "Store the email" in diagram.source
    assert {"started", "waiting", "done"} <= {e for t, e, _ in transport.notices if t == task_id}
    shown = f"confluence dry run: POST /api/v2/pages recorded as {effect.effect_id}, nothing sent"
    assert db.list_transitions(coordinator.ledger, task_id)[-1].note == shown
    assert (task_id, "done", shown) in transport.notices


def test_direct_flow_real_write_creates_one_page(
    make_lane: MakeLaneCoordinator, fake: fc.FakeConfluence
) -> None:
    parent_id = fake.add_page("Design docs", fixture_text("no_diagram.json"))
    coordinator = make_lane(confluence_dry_run=False, confluence_parent_id=parent_id)
    task_id = submit_docs(coordinator)
    assert (
        "this will be written to Confluence" in open_question(coordinator, task_id).payload["text"]
    )
    answer(coordinator, task_id, "publish ship it")

    assert task(coordinator, task_id).status == "done"
    (post,) = fake.writes()
    assert (post.method, post.path, post.auth) == ("POST", "/wiki/api/v2/pages", "basic")
    assert post.body["parentId"] == parent_id
    (page,) = [p for p in fake.pages.values() if p.id != parent_id]
    assert page.title == "Design: Login" and page.version == 1
    (effect,) = effects(coordinator, task_id)
    assert effect.state == "done" and effect.result_ref == page.id
    assert effect.result == {
        "dry_run": False,
        "page_id": page.id,
        "version": 1,
        "title": "Design: Login",
        "url": f"{fake.base_url}/spaces/S1001/pages/{page.id}",
        "recovered": False,
    }
    values = coordinator.graph.get_state(thread_config(task_id)).values
    assert values["confluence"]["result"]["page_id"] == page.id
    note = db.list_transitions(coordinator.ledger, task_id)[-1].note
    assert note == f"confluence {effect.result['url']} at version 1"


def test_update_of_an_existing_page_is_one_put_with_version_plus_one(
    make_lane: MakeLaneCoordinator, fake: fc.FakeConfluence
) -> None:
    raw = fixture_text("mixed_macros.json")
    page_id = fake.add_page("Architecture", raw, version=3)
    coordinator = make_lane(confluence_dry_run=False)
    task_id = submit_docs(coordinator, body=f"{LONG_BODY}\nconfluence-page: {page_id}\n")
    question = open_question(coordinator, task_id)
    assert f"update page {page_id} ('Architecture') from version 3 to 4" in question.payload["text"]
    assert "replace the source of diagram 1 (macro mermaid-macro" in question.payload["diff"]

    answer(coordinator, task_id, "publish")

    (put,) = fake.writes()
    assert put.method == "PUT" and put.path == f"/wiki/api/v2/pages/{page_id}"
    assert put.body["version"] == {
        "number": 4,
        "message": f"agent-team task {task_id}: Architecture",
    }
    page = fake.pages[page_id]
    assert page.version == 4
    before, after = adf.parse(raw), adf.parse(page.body)
    old, new = (mermaid.find_diagrams(d, DEFAULT_MERMAID_MACROS) for d in (before, after))
    assert new[0].source.startswith("flowchart TD") and new[0].local_id == "mermaid-connect"
    assert [d.source for d in new[1:]] == [d.source for d in old[1:]]
    for position, node in enumerate(before["content"]):
        if position != old[0].path[0]:
            assert adf.dumps(after["content"][position]) == adf.dumps(node)
    assert task(coordinator, task_id).status == "done"


def test_a_page_without_a_diagram_gets_one_after_its_first_heading(
    make_lane: MakeLaneCoordinator, fake: fc.FakeConfluence
) -> None:
    page_id = fake.add_page("Notes", fixture_text("no_diagram.json"))
    coordinator = make_lane(confluence_dry_run=False)
    task_id = submit_docs(coordinator, body=f"{LONG_BODY}\nconfluence-page: {page_id}")
    assert "after heading 'Overview'" in open_question(coordinator, task_id).payload["diff"]
    answer(coordinator, task_id, "yes")
    doc = adf.parse(fake.pages[page_id].body)
    assert doc["content"][1]["type"] == "codeBlock"
    assert len(mermaid.find_diagrams(doc, DEFAULT_MERMAID_MACROS)) == 1


def test_revise_drafts_again_with_the_feedback_then_reject_cancels(
    make_lane: MakeLaneCoordinator, fake: fc.FakeConfluence
) -> None:
    coordinator = make_lane(confluence_dry_run=False)
    task_id = submit_docs(coordinator)
    first = answer(coordinator, task_id, "revise mention the cookie lifetime")
    second = open_question(coordinator, task_id)
    assert (first.turn, second.turn) == (1, 2)
    assert "Address review feedback: mention the cookie lifetime" in second.payload["preview"]
    answer(coordinator, task_id, "reject not needed after all")
    assert task(coordinator, task_id).status == "cancelled"
    assert fake.writes() == [] and effects(coordinator, task_id) == []
    values = coordinator.graph.get_state(thread_config(task_id)).values
    assert values["confluence"]["reject_reason"] == "not needed after all"
    calls = [row.stage for row in db.task_usage(coordinator.ledger, thread_id=task_id)]
    assert calls == ["conf_draft"]  # one stage, two calls
    assert sum(row.calls for row in db.task_usage(coordinator.ledger, thread_id=task_id)) == 2


def test_a_bad_confluence_answer_is_refused_and_the_question_stays_open(
    make_lane: MakeLaneCoordinator,
) -> None:
    coordinator = make_lane()
    task_id = submit_docs(coordinator)
    question = open_question(coordinator, task_id)
    with pytest.raises(Exception, match="revise` needs feedback"):
        coordinator.answer(question.question_id, "revise", via="cli:tester")
    with pytest.raises(Exception, match="publish \\[comment\\]"):
        coordinator.answer(question.question_id, "maybe", via="cli:tester")
    assert open_question(coordinator, task_id).status == "open"


# -- post-build flow -------------------------------------------------------------------------


def approve_plan_then_docs(coordinator: Coordinator, docs_answer: str) -> str:
    task_id = coordinator.start_task(title="Remember the email", body=LONG_BODY)
    run(coordinator)
    assert open_question(coordinator, task_id).kind == "plan_decision"
    answer(coordinator, task_id, "approve")
    question = open_question(coordinator, task_id)
    assert question.kind == "confluence_approval" and question.turn == 2
    answer(coordinator, task_id, docs_answer)
    return task_id


POST_BUILD = ["intake", "clarify", "plan", "plan_review", "build", "conf_draft", "conf_gate"]


def test_post_build_flow_dry_run(make_lane: MakeLaneCoordinator, fake: fc.FakeConfluence) -> None:
    transport = RecordingTransport()
    coordinator = make_lane(transport=transport)
    task_id = approve_plan_then_docs(coordinator, "publish")
    assert task(coordinator, task_id).status == "done"
    assert journey(coordinator, task_id) == [*POST_BUILD, "conf_write", "done"]
    assert fake.writes() == []
    (effect,) = effects(coordinator, task_id)
    assert effect.effect_id == f"confluence:write:{task_id}:2" and effect.result["dry_run"]
    rows = db.list_transitions(coordinator.ledger, task_id)
    assert rows[-1].note is not None and rows[-1].note.startswith("branch agent-team/")
    (done_text,) = [text for t, e, text in transport.notices if t == task_id and e == "done"]
    assert done_text.startswith("branch agent-team/") and "; confluence dry run: POST" in done_text
    draft = json.dumps(effect.request)
    assert "Remember the email" in draft


def test_post_build_flow_real_write_and_reject(
    make_lane: MakeLaneCoordinator, fake: fc.FakeConfluence
) -> None:
    coordinator = make_lane(confluence_dry_run=False)
    written = approve_plan_then_docs(coordinator, "publish")
    assert task(coordinator, written).status == "done"
    assert [w.method for w in fake.writes()] == ["POST"]
    rejected = approve_plan_then_docs(coordinator, "reject")
    # The build stands: a rejected page ends the code task `done`, with nothing written.
    assert task(coordinator, rejected).status == "done"
    assert journey(coordinator, rejected) == [*POST_BUILD, "done"]
    assert [w.method for w in fake.writes()] == ["POST"]


# -- conflicts -------------------------------------------------------------------------------


def test_a_stale_version_is_re_read_and_the_same_edit_re_applied(
    make_lane: MakeLaneCoordinator, fake: fc.FakeConfluence
) -> None:
    page_id = fake.add_page("Architecture", fixture_text("mixed_macros.json"), version=3)
    coordinator = make_lane(confluence_dry_run=False)
    task_id = submit_docs(coordinator, body=f"{LONG_BODY}\nconfluence-page: {page_id}")
    fake.bump_before_put[page_id] = 2  # someone saves versions 4 and 5 first
    answer(coordinator, task_id, "publish")
    assert [w.body["version"]["number"] for w in fake.writes()] == [4, 6]
    assert fake.pages[page_id].version == 6
    assert task(coordinator, task_id).status == "done"
    (effect,) = effects(coordinator, task_id)
    assert effect.result["version"] == 6


def test_a_conflicting_edit_is_refused_and_the_task_parks(
    make_lane: MakeLaneCoordinator, fake: fc.FakeConfluence
) -> None:
    raw = fixture_text("mixed_macros.json")
    page_id = fake.add_page("Architecture", raw, version=3)
    transport = RecordingTransport()
    coordinator = make_lane(confluence_dry_run=False, transport=transport)
    task_id = submit_docs(coordinator, body=f"{LONG_BODY}\nconfluence-page: {page_id}")
    # Before the approval lands, someone rewrites the very diagram the draft replaces.
    theirs = raw.replace("graph TD\\n  A-->B", "graph TD\\n  A-->Z")
    assert theirs != raw
    fake.pages[page_id].body, fake.pages[page_id].version = theirs, 4
    answer(coordinator, task_id, "publish")
    parked = task(coordinator, task_id)
    assert (parked.status, parked.parked_reason) == ("parked", "confluence_refused")
    assert fake.writes() == [] and fake.pages[page_id].body == theirs
    (effect,) = effects(coordinator, task_id)
    assert effect.state == "failed" and "changed since the edit was drafted" in (effect.error or "")
    notes = [text for t, event, text in transport.notices if t == task_id and event == "parked"]
    assert notes and "changed since the edit was drafted" in notes[0]


# -- bad input -------------------------------------------------------------------------------


def parks(coordinator: Coordinator, task_id: str, reason: str) -> None:
    found = task(coordinator, task_id)
    assert (found.status, found.parked_reason) == ("parked", "confluence_refused")
    note = db.list_transitions(coordinator.ledger, task_id)[-1].note or ""
    assert reason in note, note
    assert db.list_questions(coordinator.ledger, thread_id=task_id) == []


def test_a_page_that_does_not_exist_parks_the_task(
    make_lane: MakeLaneCoordinator, fake: fc.FakeConfluence
) -> None:
    coordinator = make_lane(confluence_dry_run=False)
    task_id = submit_docs(coordinator, body="confluence-page: 424242")
    parks(coordinator, task_id, "page 424242 does not exist")
    assert fake.writes() == []


def test_a_page_in_another_space_parks_the_task(
    make_lane: MakeLaneCoordinator, fake: fc.FakeConfluence
) -> None:
    page_id = fake.add_page("Elsewhere", fixture_text("no_diagram.json"), space_id="2002")
    coordinator = make_lane()
    task_id = submit_docs(coordinator, body=f"confluence-page: {page_id}")
    parks(coordinator, task_id, "is in space 2002, not in AGENT_TEAM_CONFLUENCE_SPACE_ID (1001)")


def test_a_wrong_space_id_parks_the_task(make_lane: MakeLaneCoordinator) -> None:
    coordinator = make_lane(confluence_space_id="9999")
    task_id = submit_docs(coordinator)
    parks(coordinator, task_id, "space 9999 does not exist")


def test_a_page_id_that_is_not_a_number_parks_the_task(make_lane: MakeLaneCoordinator) -> None:
    coordinator = make_lane()
    task_id = submit_docs(coordinator, body="confluence-page: my-page")
    parks(coordinator, task_id, "is not a page id")


@pytest.mark.parametrize(
    ("body_adf", "reason"),
    [("{not json", "not valid JSON"), ('{"type": "paragraph"}', "not an ADF `doc`")],
)
def test_a_drafted_body_that_is_not_adf_parks_the_task(
    make_lane: MakeLaneCoordinator, fake: fc.FakeConfluence, body_adf: str, reason: str
) -> None:
    coordinator = make_lane(confluence_dry_run=False)
    args = {"title": "T", "summary": "S", "mermaid": "graph TD\nA", "body_adf": body_adf}
    chat = ToolChat(responses=[tool_reply(ConfluenceDraft.__name__, args)])
    coordinator.deps.caller = ModelCaller(
        coordinator.ledger,
        chat,
        model="scripted",
        billing_mode="api",
        daily_budget_usd=1.0,
        daily_token_cap=100_000,
        clock=Clock(),
    )
    task_id = submit_docs(coordinator)
    parks(coordinator, task_id, reason)
    assert fake.writes() == []


def test_a_page_with_no_diagram_and_no_heading_parks_the_task(
    make_lane: MakeLaneCoordinator, fake: fc.FakeConfluence
) -> None:
    page_id = fake.add_page(
        "Bare", {"type": "doc", "version": 1, "content": [adf.paragraph("just text")]}
    )
    coordinator = make_lane()
    task_id = submit_docs(coordinator, body=f"confluence-page: {page_id}")
    parks(coordinator, task_id, "no Mermaid diagram to update and no heading")


# -- the dashboard shows the lane ------------------------------------------------------------


def test_the_dashboard_shows_the_lane_and_its_question(make_lane: MakeLaneCoordinator) -> None:
    coordinator = make_lane()
    task_id = submit_docs(coordinator)
    ctx = DashboardContext(settings=coordinator.settings, clock=coordinator.clock)
    with TestClient(create_app(ctx)) as client:
        page = client.get(f"/task/{task_id}")
        assert page.status_code == 200
        assert "conf_draft" in page.text and "conf_gate" in page.text
        assert "DRY RUN" in page.text and "revise &lt;feedback&gt;" in page.text
        data = client.get(f"/api/task/{task_id}").json()
        assert data["task"]["phase"] == "conf_gate"
        assert data["questions"][0]["kind"] == "confluence_approval"


def test_a_429_on_the_write_is_retried_after_retry_after(
    make_lane: MakeLaneCoordinator, fake: fc.FakeConfluence
) -> None:
    page_id = fake.add_page("Architecture", fixture_text("mixed_macros.json"), version=3)
    coordinator = make_lane(confluence_dry_run=False)  # Retry-After capped at 0.05 s
    task_id = submit_docs(coordinator, body=f"{LONG_BODY}\nconfluence-page: {page_id}")
    fake.fail_next[("PUT", "/wiki/api/v2/pages/")] = [(429, {"Retry-After": "1"})]
    answer(coordinator, task_id, "publish")
    assert [w.body["version"]["number"] for w in fake.writes()] == [4, 4]  # refused, then taken
    assert fake.pages[page_id].version == 4
    assert task(coordinator, task_id).status == "done"


def test_parallel_workers_write_each_page_once(
    make_lane: MakeLaneCoordinator, fake: fc.FakeConfluence
) -> None:
    coordinator = make_lane(confluence_dry_run=False, workers=3)
    ids = [
        coordinator.start_task(title=f"Docs {n}", body=LONG_BODY, kind="confluence")
        for n in range(4)
    ]
    run(coordinator)
    for task_id in ids:
        coordinator.answer(open_question(coordinator, task_id).question_id, "publish", via="t")
    run(coordinator)  # the pool runs the four writes on three threads
    assert sorted(w.body["title"] for w in fake.writes()) == [f"Design: Docs {n}" for n in range(4)]
    assert len(fake.pages) == 4
    assert {task(coordinator, t).status for t in ids} == {"done"}


# -- a write whose response is lost lands once -----------------------------------------------


def test_a_lost_write_response_parks_and_retry_recognises_the_write(
    make_lane: MakeLaneCoordinator, fake: fc.FakeConfluence
) -> None:
    page_id = fake.add_page("Notes", fixture_text("no_diagram.json"), version=3)
    coordinator = make_lane(confluence_dry_run=False)
    task_id = submit_docs(coordinator, body=f"{LONG_BODY}\nconfluence-page: {page_id}")
    fake.lose_response[("PUT", "/wiki/api/v2/pages/")] = ["drop"]  # lands, answer lost
    answer(coordinator, task_id, "publish")
    parked = task(coordinator, task_id)
    assert (parked.status, parked.parked_reason) == ("parked", "confluence_unavailable")
    (effect,) = effects(coordinator, task_id)
    assert effect.state == "pending"
    assert [w.body["version"]["number"] for w in fake.writes()] == [4]

    coordinator.retry(task_id)
    run(coordinator)

    assert task(coordinator, task_id).status == "done"
    assert [w.method for w in fake.writes()] == ["PUT"], "never sent twice"
    doc = adf.parse(fake.pages[page_id].body)
    assert fake.pages[page_id].version == 4
    assert len(mermaid.find_diagrams(doc, DEFAULT_MERMAID_MACROS)) == 1, "inserted once"
    (effect,) = effects(coordinator, task_id)
    assert effect.state == "done" and effect.result["recovered"] is True
    assert effect.result["version"] == 4


def test_a_409_after_our_own_write_landed_is_recorded_not_re_applied(
    make_lane: MakeLaneCoordinator, fake: fc.FakeConfluence
) -> None:
    page_id = fake.add_page("Notes", fixture_text("no_diagram.json"), version=3)
    coordinator = make_lane(confluence_dry_run=False)
    task_id = submit_docs(coordinator, body=f"{LONG_BODY}\nconfluence-page: {page_id}")
    # A gateway answers 503 after the PUT landed; the retried PUT meets 409 (version 4 taken).
    fake.lose_response[("PUT", "/wiki/api/v2/pages/")] = ["503"]
    answer(coordinator, task_id, "publish")
    assert task(coordinator, task_id).status == "done"
    assert [w.body["version"]["number"] for w in fake.writes()] == [4, 4]  # no PUT of 5
    assert fake.pages[page_id].version == 4
    doc = adf.parse(fake.pages[page_id].body)
    assert len(mermaid.find_diagrams(doc, DEFAULT_MERMAID_MACROS)) == 1, "inserted once"
    (effect,) = effects(coordinator, task_id)
    assert effect.state == "done" and effect.result["version"] == 4


# -- an approval covers the mode it was asked in ---------------------------------------------


def test_a_dry_run_approval_never_becomes_a_real_write(
    make_lane: MakeLaneCoordinator, fake: fc.FakeConfluence
) -> None:
    transport = RecordingTransport()
    asked = make_lane()  # dry run: the question says nothing will be sent
    task_id = submit_docs(asked)
    question = open_question(asked, task_id)
    assert "DRY RUN: nothing will be sent" in question.payload["text"]
    assert question.payload["dry_run"] is True
    asked.close()
    # The operator restarts with dry-run off; a person then answers the dry-run question.
    real = make_lane(confluence_dry_run=False, transport=transport)
    answer(real, task_id, "publish")

    assert fake.writes() == [], "approved as a dry run: nothing is sent"
    assert task(real, task_id).status == "done"
    (effect,) = effects(real, task_id)
    assert effect.state == "done" and effect.result["dry_run"] is True
    note = db.list_transitions(real.ledger, task_id)[-1].note or ""
    assert "nothing sent" in note and "a real write needs a new approval" in note


def test_a_real_write_approval_is_a_dry_run_when_dry_run_was_turned_on(
    make_lane: MakeLaneCoordinator, fake: fc.FakeConfluence
) -> None:
    asked = make_lane(confluence_dry_run=False)
    task_id = submit_docs(asked)
    assert open_question(asked, task_id).payload["dry_run"] is False
    asked.close()
    dry = make_lane()  # the operator turned dry-run back on: it wins
    answer(dry, task_id, "publish")
    assert fake.writes() == []
    (effect,) = effects(dry, task_id)
    assert effect.result["dry_run"] is True


# -- the flag turned off with lane tasks in flight -------------------------------------------


def test_turning_the_lane_off_parks_its_tasks_with_the_fix(
    make_lane: MakeLaneCoordinator, fake: fc.FakeConfluence
) -> None:
    on = make_lane(confluence_dry_run=False)
    task_id = submit_docs(on)
    assert task(on, task_id).phase == "conf_gate"
    on.close()
    off = make_lane(confluence_enabled=False)
    answer(off, task_id, "publish")

    parked = task(off, task_id)
    assert (parked.status, parked.parked_reason) == ("parked", "confluence_disabled")
    note = db.list_transitions(off.ledger, task_id)[-1].note or ""
    assert note == (
        "the Confluence lane is off; set AGENT_TEAM_CONFLUENCE_ENABLED=true, then "
        f"agent-team retry {task_id}"
    )
    assert fake.writes() == []
    off.close()

    again = make_lane(confluence_dry_run=False)  # the operator turned it back on
    again.retry(task_id)
    run(again)
    assert task(again, task_id).status == "done"
    assert [w.method for w in fake.writes()] == ["POST"]


def test_a_write_continued_with_the_lane_off_parks_instead_of_ending_short(
    make_lane: MakeLaneCoordinator, fake: fc.FakeConfluence
) -> None:
    page_id = fake.add_page("Notes", fixture_text("no_diagram.json"), version=3)
    on = make_lane(confluence_dry_run=False)
    task_id = submit_docs(on, body=f"{LONG_BODY}\nconfluence-page: {page_id}")
    fake.lose_response[("PUT", "/wiki/api/v2/pages/")] = ["drop"]
    answer(on, task_id, "publish")  # parks in conf_write (confluence_unavailable)
    on.close()
    off = make_lane(confluence_enabled=False)
    off.retry(task_id)
    run(off)
    parked = task(off, task_id)
    assert (parked.status, parked.parked_reason) == ("parked", "confluence_disabled")
    assert "AGENT_TEAM_CONFLUENCE_ENABLED=true" in (
        db.list_transitions(off.ledger, task_id)[-1].note or ""
    )
    off.close()
    again = make_lane(confluence_dry_run=False)
    again.retry(task_id)
    run(again)
    assert task(again, task_id).status == "done"
    assert [w.method for w in fake.writes()] == ["PUT"] and fake.pages[page_id].version == 4


# -- the parent page is checked before drafting ----------------------------------------------


@pytest.mark.parametrize(
    ("parent", "reason"),
    [
        ("424242", "parent page 424242 does not exist"),
        ("not-a-page", "parent page 'not-a-page' is not a page id"),
        ("elsewhere", "parent page {id} is in space 2002"),
    ],
)
def test_a_wrong_parent_page_parks_the_task_before_drafting(
    make_lane: MakeLaneCoordinator, fake: fc.FakeConfluence, parent: str, reason: str
) -> None:
    if parent == "elsewhere":
        parent = fake.add_page("Other space", fixture_text("no_diagram.json"), space_id="2002")
        reason = reason.format(id=parent)
    coordinator = make_lane(confluence_dry_run=False, confluence_parent_id=parent)
    task_id = submit_docs(coordinator)
    parks(coordinator, task_id, reason)
    note = db.list_transitions(coordinator.ledger, task_id)[-1].note or ""
    assert "AGENT_TEAM_CONFLUENCE_PARENT_ID" in note
    assert fake.writes() == []
    assert db.task_usage(coordinator.ledger, thread_id=task_id) == [], "no model call was paid for"


@pytest.mark.parametrize("body", [LONG_BODY, TOKEN_BODY], ids=["plain", "a token in the task"])
def test_a_lost_create_response_parks_and_retry_finds_the_page(
    make_lane: MakeLaneCoordinator, fake: fc.FakeConfluence, body: str
) -> None:
    """The retry finds the page and compares it with the approved draft; with a token in
    the task both are redacted (#17), so the page is still recognised as ours."""
    coordinator = make_lane(confluence_dry_run=False)
    task_id = submit_docs(coordinator, body=body)
    fake.lose_response[("POST", "/wiki/api/v2/pages")] = ["drop"]
    answer(coordinator, task_id, "publish")
    assert task(coordinator, task_id).parked_reason == "confluence_unavailable"
    coordinator.retry(task_id)
    run(coordinator)
    assert task(coordinator, task_id).status == "done"
    assert [w.method for w in fake.writes()] == ["POST"] and len(fake.pages) == 1
    (effect,) = effects(coordinator, task_id)
    assert effect.result["recovered"] is True
    assert PAT not in json.dumps([w.body for w in fake.writes()])
