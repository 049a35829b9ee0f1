"""The loop after the pull request: the PR gate, a person's decision, a follow-up commit.

    publish -> pr_gate -(merged)-> [conf_draft ->] done
               pr_gate -(closed)-> done (cancelled)
               pr_gate -(feedback)-> follow_up -> pr_gate
               pr_gate -(feedback past the rounds cap, CI red)-> pr_decision
               pr_decision -(fix)-> follow_up;  -(ignore, take over)-> pr_gate

`pr_gate` asks a `pull_request` question that GitHub answers: the watcher
(`integrations/github/pr_watch.py`) reads reviews, comments, merges and closes
and answers with what happened, under the same compare-and-set as a person's
answer, naming the events it acts on so each is acted on once (`db.pull_requests`).
`follow_up` runs the builder once per round (same builder, sandbox and budget as
`build`; the round's instructions are its plan, so a resume reuses the recorded
commit) and hands the commit to the `PullRequestDesk`, which pushes it and
answers on GitHub, each write a recorded effect. `pr_decision` asks a person.
"""

from __future__ import annotations

from typing import Any

from agent_team import db
from agent_team.builders.base import BuildTask
from agent_team.models.schemas import Plan
from agent_team.nodes.build import run_priced_build
from agent_team.nodes.common import GraphDeps, ask_human, crash_point, enter
from agent_team.nodes.pr_desk import PullRequestDesk, PullRequestHook
from agent_team.requests.answers import PR_DECISION_HELP
from agent_team.task_model import Phase, QuestionKind, TaskState

__all__ = [
    "PullRequestDesk",
    "PullRequestHook",
    "follow_up",
    "follow_up_instructions",
    "pr_decision",
    "pr_gate",
    "route_after_pr",
]

# What the routes return; the graph maps `after` to conf_draft or done.
AFTER = "after"


def _pull(state: TaskState) -> dict[str, Any]:
    return state.get("pull_request") or {}


def pr_gate(state: TaskState, deps: GraphDeps) -> dict[str, Any]:
    enter(deps, state, Phase.PR_OPEN)
    pull = _pull(state)
    if deps.pulls is None or not pull.get("repo") or not pull.get("number"):
        return {"pr_next": AFTER}  # no PR to follow (a builder that opened none)
    db.watch_pull_request(
        deps.ledger,
        task_id=state["task_id"],
        repo=str(pull["repo"]),
        number=int(pull["number"]),
        url=str(pull.get("url", "")),
        head_sha=pull.get("head"),
        at=deps.clock(),
    )
    answer = ask_human(
        deps,
        state,
        QuestionKind.PULL_REQUEST,
        {
            "text": f"Draft pull request #{pull['number']} is open: {pull.get('url', '')}",
            "title": state["title"],
            "url": pull.get("url"),
            "number": pull["number"],
            "round": state.get("pr_round", 0),
        },
    )
    decision = answer["decision"]
    update: dict[str, Any] = {"pr_event": answer, "turn": state.get("turn", 0) + 1}
    if decision in ("merged", "closed"):
        update.update(_ended(deps, state, decision))
    elif decision == "feedback" and state.get("pr_round", 0) < deps.pr_rounds:
        update["pr_next"] = "follow_up"
    else:  # CI red, or feedback past the rounds cap: a person decides
        update["pr_next"] = "pr_decision"
    crash_point(deps, Phase.PR_OPEN, "after")
    return update


def _ended(deps: GraphDeps, state: TaskState, decision: str) -> dict[str, Any]:
    """The PR was merged or closed: the task ends (`done` after the docs lane, or cancelled)."""
    db.note_pull_request(deps.ledger, state["task_id"], state=decision, closed_at=deps.clock())
    if decision == "merged":
        return {"outcome": "merged", "pr_next": AFTER}
    return {"outcome": "cancelled", "pr_next": Phase.DONE.value}


def _why(state: TaskState, deps: GraphDeps) -> tuple[str, str]:
    """The reason code and the sentence a person reads."""
    event = state.get("pr_event") or {}
    refused = event.get("refused")
    if refused:
        return str(event.get("refused_code", "tests_removed")), f"No follow-up: {refused}."
    if event.get("decision") == "ci_failed":
        names = ", ".join(check["name"] for check in event.get("checks", ()))
        return "ci_failed", f"CI is red on the pull request's head: {names}."
    return (
        "rounds",
        f"Reviewers asked for more changes after {state.get('pr_round', 0)} follow-up "
        f"round(s), the cap (AGENT_TEAM_GITHUB_PR_ROUNDS={deps.pr_rounds}).",
    )


def pr_decision(state: TaskState, deps: GraphDeps) -> dict[str, Any]:
    enter(deps, state, Phase.PR_OPEN)
    pull = _pull(state)
    reason, why = _why(state, deps)
    event = state.get("pr_event") or {}
    answer = ask_human(
        deps,
        state,
        QuestionKind.PR_DECISION,
        {
            "text": f"{why} What should the agent do on {pull.get('url', 'the pull request')}?",
            "title": state["title"],
            "reason": reason,
            "url": pull.get("url"),
            "checks": list(event.get("checks", ())),
            "items": [
                {"user": item.get("user"), "body": str(item.get("body", ""))[:500]}
                for item in event.get("items", ())
            ],
            "help": PR_DECISION_HELP,
        },
    )
    decision = answer["decision"]
    update: dict[str, Any] = {"turn": state.get("turn", 0) + 1, "pr_note": None}
    if decision in ("merged", "closed"):  # GitHub's: the PR ended while a person decided
        update.update(_ended(deps, state, decision))
    elif decision == "fix":
        update["pr_next"] = "follow_up"
        update["pr_note"] = answer.get("text")  # only a fix's note reaches the builder
        # A person who read why the last follow-up was refused and still says fix wants it.
        update["pr_force"] = event.get("refused_code") == "tests_removed"
    else:
        if decision == "takeover":
            db.note_pull_request(deps.ledger, state["task_id"], hands_off=1)
        update["pr_next"] = "pr_gate"
        update["pr_event"] = None
    crash_point(deps, Phase.PR_OPEN, "after")
    return update


def follow_up_instructions(state: TaskState, round_: int) -> str:
    """The follow-up's plan: what to change and why, and what never to do.

    Its hash names the recorded commit (`Agent-Team-Plan`), so it holds the round:
    the same feedback in a later round is a new commit, a resumed round is not.
    """
    pull = _pull(state)
    event = state.get("pr_event") or {}
    lines = [
        f"# Follow-up {round_} on the pull request for: {state['title']}",
        "",
        f"The draft pull request {pull.get('url', '')} needs one follow-up commit on its "
        "branch. Change the code so the feedback below is addressed. Never skip, delete or "
        "loosen a test to make it pass; if a test is wrong, say so instead of changing it.",
        "",
    ]
    note = (state.get("pr_note") or "").strip()
    if note:
        lines += ["## From the person who asked for this follow-up", "", note, ""]
    items = event.get("items") or ()
    if items:
        lines += ["## Review feedback", ""]
        for item in items:
            where = f" on `{item['path']}`" if item.get("path") else ""
            if item.get("line"):
                where += f" line {item['line']}"
            body = " ".join(str(item.get("body", "")).split())
            lines.append(f"- {item.get('user')}{where}: {body}")
        lines.append("")
    checks = event.get("checks") or ()
    if checks:
        lines += ["## Failing checks", ""]
        for check in checks:
            lines.append(f"- {check['name']} ({check.get('conclusion', 'failure')})")
            if check.get("excerpt"):
                lines += ["", "```", str(check["excerpt"]).strip(), "```", ""]
        lines.append("")
    if state.get("plan"):
        lines += ["## The approved plan", "", Plan.model_validate(state["plan"]).to_markdown()]
    return "\n".join(lines).rstrip() + "\n"


def follow_up(state: TaskState, deps: GraphDeps) -> dict[str, Any]:
    enter(deps, state, Phase.PR_OPEN)
    round_ = state.get("pr_round", 0) + 1
    task = BuildTask(
        task_id=state["task_id"],
        title=state["title"],
        body=state.get("body", ""),
        repo=state.get("repo") or None,
    )
    event = state.get("pr_event") or {}
    spent = _ci_fix_spent(deps, state, event, round_)
    if spent:
        return {
            "pr_event": {**event, "refused": spent, "refused_code": "fix_cap"},
            "pr_next": "pr_decision",
        }
    built = run_priced_build(
        deps, state, task, follow_up_instructions(state, round_), stage=Phase.PR_OPEN
    )
    items = list(event.get("items") or ())
    assert deps.pulls is not None  # the graph has this node only with a desk
    result = deps.pulls.follow_up(
        state, built, round_, items, lambda when: crash_point(deps, Phase.PR_OPEN, when)
    )
    crash_point(deps, Phase.PR_OPEN, "after")
    if result.get("ended"):
        return {"pr_next": "pr_gate", "pr_force": False}  # merged or closed meanwhile
    if result.get("refused"):
        return {
            "pr_event": {
                **event,
                "refused": result["refused"],
                "refused_code": result.get("refused_code", "tests_removed"),
            },
            "pr_next": "pr_decision",
            "pr_force": False,
        }
    db.note_pull_request(deps.ledger, state["task_id"], rounds=round_, head_sha=built.commit)
    db.record_pr_event(
        deps.ledger,
        state["task_id"],
        db.NewPrEvent(
            event_key=f"follow_up:r{round_}",
            kind="follow_up",
            round=round_,
            head_sha=built.commit,
            actor="agent-team",
            detail={
                "commit": built.commit,
                "url": result.get("url"),
                "answers": [item.get("key") for item in items],
                "replies": result.get("replies", 0),
                "resolved": result.get("resolved", 0),
                "summary": built.summary[:500],
            },
        ),
        at=deps.clock(),
    )
    return {
        "pr_round": round_,
        "pr_next": "pr_gate",
        "pr_event": None,
        "pr_note": None,
        "pr_force": False,
        "pull_request": {**_pull(state), "head": built.commit},
    }


def _ci_fix_spent(
    deps: GraphDeps, state: TaskState, event: dict[str, Any], round_: int
) -> str | None:
    """Why no more CI fixes are made on this head (`AGENT_TEAM_GITHUB_CI_FIXES`), or None.

    Each attempt is a `ci_fix:<head>:r<round>` event, stored before the build: a
    re-run of the same round finds its own key and is not counted twice.
    """
    head = event.get("head_sha")
    if event.get("decision") != "ci_failed" or not head:
        return None
    mine = f"ci_fix:{head}:r{round_}"
    made = {
        k
        for k in db.pr_event_keys(deps.ledger, state["task_id"])
        if k.startswith(f"ci_fix:{head}:")
    }
    if mine not in made and len(made) >= deps.ci_fixes:
        return (
            f"the agent made {len(made)} fix attempt(s) for CI on {str(head)[:12]} "
            f"(AGENT_TEAM_GITHUB_CI_FIXES={deps.ci_fixes}); push a fix yourself, or answer "
            "`ignore` or `take over`"
        )
    db.record_pr_event(
        deps.ledger,
        state["task_id"],
        db.NewPrEvent(mine, "ci_fix", round=round_, head_sha=str(head), actor="agent-team"),
        at=deps.clock(),
    )
    return None


def route_after_pr(state: TaskState) -> str:
    """Where `pr_gate`, `pr_decision` and `follow_up` said to go next."""
    return state.get("pr_next") or AFTER
