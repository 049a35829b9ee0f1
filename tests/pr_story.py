"""One pull request's life written through the `db` functions the PR gate uses, for the
timeline's tests (the report, the task page, `/api/task`).

The story (offsets in seconds from `t0`), on `acme/app#12`:

- 100: the draft opens on commit `HEAD0`; gate q1 (`pull_request`) is posted.
- 1000: alice's review (its body is a script tag) and bob's inline comment on
  `src/app.py:3` answer q1 with feedback: round 1 opens.
- 1200: CI goes green on `HEAD0` (late: it belongs to round 0, whose head it is).
- 2000: follow-up 1 pushes `HEAD1`: one reply, one resolved thread; gate q2 is posted at 2010.
- 2150: CI reruns the failed `lint` job on `HEAD1`; at 2600 q2 is answered `ci_failed` by the
  CI watcher (the `ci_failed` event is stored with the answer).
- 2610: q3 (`pr_decision`, reason `ci_failed`) is posted; carol takes over at 2700.
- 2710: q4 (`pull_request`) is posted.
- 2800: a kind the timeline does not know (`labeled`) on `HEAD2`, a commit carol pushed.
- 3000: GitHub says merged on `HEAD2`, which answers q4.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from agent_team import db

__all__ = ["EVIL_BODY", "HEAD0", "HEAD1", "HEAD2", "PR_URL", "write_pr_story"]

PR_URL = "https://github.com/acme/app/pull/12"
HEAD0 = "a" * 40
HEAD1 = "b" * 40
HEAD2 = "c" * 40
EVIL_BODY = "<script>alert(1)</script> please handle the empty list"


def _ask(
    ledger: db.Ledger,
    task_id: str,
    turn: int,
    kind: str,
    posted: datetime,
    payload: dict[str, Any],
) -> str:
    question_id = f"{task_id}:q{turn}"
    assert db.ensure_question(
        ledger,
        question_id=question_id,
        thread_id=task_id,
        turn=turn,
        kind=kind,
        transport="local",
        deadline_at=None,
        payload_json=json.dumps(payload),
    )
    assert db.record_delivery(
        ledger, question_id=question_id, channel_ref=f"local:{question_id}", posted_at=posted
    )
    return question_id


def _answer(
    ledger: db.Ledger,
    question_id: str,
    answer: dict[str, Any],
    via: str,
    when: datetime,
    events: list[db.NewPrEvent] | None = None,
) -> None:
    assert db.answer_question(
        ledger,
        question_id=question_id,
        answer_json=json.dumps(answer),
        answered_via=via,
        answered_at=when,
        events=events or (),
    )


def write_pr_story(
    ledger: db.Ledger, task_id: str, t0: datetime, *, first_turn: int = 1
) -> list[str]:
    """Write the module docstring's story for `task_id` (which must exist).

    The gates are the task's questions from turn `first_turn` on (q1 to q4 above are
    its first four); returns their ids.
    """
    turns = range(first_turn, first_turn + 4)

    def at(offset_s: float) -> datetime:
        return t0 + timedelta(seconds=offset_s)

    db.watch_pull_request(
        ledger, task_id=task_id, repo="acme/app", number=12, url=PR_URL, head_sha=HEAD0, at=at(100)
    )
    gate = {"text": f"Draft pull request #12 is open: {PR_URL}", "url": PR_URL, "number": 12}
    q1 = _ask(ledger, task_id, turns[0], "pull_request", at(100), {**gate, "round": 0})
    items = [
        {"key": "review:11", "kind": "review", "id": 11, "user": "alice", "body": EVIL_BODY},
        {
            "key": "review_comment:22",
            "kind": "review_comment",
            "id": 22,
            "user": "bob",
            "body": "rename this",
            "path": "src/app.py",
            "line": 3,
            "thread_comment_id": 22,
        },
    ]
    _answer(
        ledger,
        q1,
        {"decision": "feedback", "head_sha": HEAD0, "items": items},
        "github:alice",
        at(1000),
        [
            db.NewPrEvent(
                str(item["key"]),
                str(item["kind"]),
                round=1,
                head_sha=HEAD0,
                actor=str(item["user"]),
                detail={"id": item["id"], "url": None},
            )
            for item in items
        ],
    )
    assert db.record_pr_event(
        ledger, task_id, db.NewPrEvent(f"ci_green:{HEAD0}", "ci_green", head_sha=HEAD0), at=at(1200)
    )
    assert db.note_pull_request(ledger, task_id, rounds=1, head_sha=HEAD1)
    assert db.record_pr_event(
        ledger,
        task_id,
        db.NewPrEvent(
            "follow_up:r1",
            "follow_up",
            round=1,
            head_sha=HEAD1,
            actor="agent-team",
            detail={
                "commit": HEAD1,
                "url": f"{PR_URL}/commits/{HEAD1}",
                "answers": ["review:11", "review_comment:22"],
                "replies": 1,
                "resolved": 1,
                "summary": "Handled the empty list and renamed the helper.",
            },
        ),
        at=at(2000),
    )
    q2 = _ask(ledger, task_id, turns[1], "pull_request", at(2010), {**gate, "round": 1})
    assert db.record_pr_event(
        ledger,
        task_id,
        db.NewPrEvent(
            f"ci_rerun:{HEAD1}",
            "ci_rerun",
            round=1,
            head_sha=HEAD1,
            actor="agent-team",
            detail={"checks": ["lint"], "run_ids": [501]},
        ),
        at=at(2150),
    )
    checks = [{"name": "lint", "conclusion": "failure"}]
    _answer(
        ledger,
        q2,
        {"decision": "ci_failed", "head_sha": HEAD1, "checks": checks},
        "github:acme/app",
        at(2600),
        [
            db.NewPrEvent(
                f"ci_failed:{HEAD1}",
                "ci_failed",
                round=1,
                head_sha=HEAD1,
                detail={"checks": checks},
            )
        ],
    )
    q3 = _ask(
        ledger,
        task_id,
        turns[2],
        "pr_decision",
        at(2610),
        {"text": "CI is red on the pull request's head: lint.", "reason": "ci_failed"},
    )
    _answer(ledger, q3, {"decision": "takeover", "text": "mine now"}, "dashboard:carol", at(2700))
    assert db.note_pull_request(ledger, task_id, hands_off=1)
    q4 = _ask(ledger, task_id, turns[3], "pull_request", at(2710), {**gate, "round": 1})
    assert db.record_pr_event(
        ledger,
        task_id,
        db.NewPrEvent(
            "labeled:bug",
            "labeled",
            round=1,
            head_sha=HEAD2,
            actor="dave",
            detail={"label": "bug", "ids": [1, 2]},
        ),
        at=at(2800),
    )
    _answer(
        ledger,
        q4,
        {"decision": "merged", "head_sha": HEAD2},
        "github:acme/app",
        at(3000),
        [db.NewPrEvent("pr:merged", "merged", head_sha=HEAD2)],
    )
    assert db.note_pull_request(ledger, task_id, state="merged", closed_at=at(3000))
    return [q1, q2, q3, q4]
