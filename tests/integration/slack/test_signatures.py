"""Every kind of request Slack sends, forged or replayed: refused or a duplicate, never stored.

Issue #17 ("keep it so"): for a thread reply, a button click and a modal
submission, a forged, stale, future, non-numeric, wrong-prefix or missing
signature is a 401; a signed request replayed inside the five-minute window
is a 200 that changes nothing. Each test compares every ledger table a
request could write before and after, counts what reached the loopback
Slack, and bounds the log: lines, their length, and no trace of the body.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable

import pytest

from agent_team import db
from tests.integration.slack.conftest import (
    ALICE,
    SlackWorld,
    block_action,
    form_body,
    json_body,
    message_event,
    sign,
    view_submission,
)
from tests.ledger_rows import stored_rows

MARKER = "Zq9-body-marker"  # in every body: it must never reach the log
LINE_CHARS = 300
REPLAYS = 5

Request = tuple[bytes, dict[str, str]]
MakeRequest = Callable[[db.Question], Request]


def thread_reply(question: db.Question) -> Request:
    payload = message_event(question.channel_ref or "", ALICE, "approve", event_id="Ev0SIGNED")
    payload["marker"] = MARKER
    return json_body(payload)


def button(question: db.Question) -> Request:
    payload = block_action(
        question.channel_ref or "", ALICE, "agent_team.approve", question.question_id
    )
    payload["marker"] = MARKER
    return form_body(payload)


def modal(question: db.Question) -> Request:
    metadata = f"{question.question_id}|{question.channel_ref}"
    return form_body(view_submission(ALICE, metadata, f"revise it {MARKER}"))


KINDS: dict[str, MakeRequest] = {"thread reply": thread_reply, "button": button, "modal": modal}


def forge(case: str, body: bytes) -> dict[str, str]:
    good = sign(body)
    now = int(time.time())
    return {
        "wrong secret": sign(body, secret="not-the-signing-secret"),
        "stale": sign(body, timestamp=now - 5 * 60 - 30),
        "future": sign(body, timestamp=now + 5 * 60 + 30),
        "non-numeric timestamp": {**good, "X-Slack-Request-Timestamp": "1e9"},
        "wrong prefix": {**good, "X-Slack-Signature": "v1=" + good["X-Slack-Signature"][3:]},
        "no signature": {"X-Slack-Request-Timestamp": good["X-Slack-Request-Timestamp"]},
        "no timestamp": {"X-Slack-Signature": good["X-Slack-Signature"]},
        "no headers": {},
        "other body": sign(body + b" "),
    }[case]


FORGERIES = (
    "wrong secret",
    "stale",
    "future",
    "non-numeric timestamp",
    "wrong prefix",
    "no signature",
    "no timestamp",
    "no headers",
    "other body",
)


def ours(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What the daemon logged (the test's own HTTP client logs each request too)."""
    return [r.getMessage() for r in caplog.records if not r.name.startswith(("httpx", "httpcore"))]


def assert_bounded(lines: list[str], most: int) -> None:
    assert len(lines) <= most, lines
    assert all(len(line) < LINE_CHARS for line in lines), lines
    assert not [line for line in lines if MARKER in line or "\n" in line], lines


@pytest.mark.parametrize("case", FORGERIES)
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_forged_request_is_401_stores_nothing_and_logs_one_short_line(
    world: SlackWorld, caplog: pytest.LogCaptureFixture, kind: str, case: str
) -> None:
    question = world.waiting_question()
    body, content_type = KINDS[kind](question)
    before, calls = stored_rows(world.conn), len(world.fake.calls)

    with caplog.at_level(logging.INFO):
        for _ in range(5):  # a source that keeps trying is summed up, not logged each time
            response = world.http.post(
                world.server.url, content=body, headers={**content_type, **forge(case, body)}
            )
            assert response.status_code == 401, response.text
    world.settle()

    assert stored_rows(world.conn) == before
    assert len(world.fake.calls) == calls, "nothing was said to Slack"
    assert_bounded(ours(caplog), 1)


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_replayed_request_is_200_and_changes_nothing(
    world: SlackWorld, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    """The exact bytes and headers again, as someone who captured them would send them."""
    question = world.waiting_question()
    body, content_type = KINDS[kind](question)
    headers = {**content_type, **sign(body)}
    assert world.http.post(world.server.url, content=body, headers=headers).status_code == 200
    world.settle()
    answered = world.question(question.question_id)
    assert answered.status == "answered" and answered.answered_via == f"slack:{ALICE}"
    before, calls = stored_rows(world.conn), len(world.fake.calls)

    with caplog.at_level(logging.INFO):
        for _ in range(REPLAYS):
            replay = world.http.post(world.server.url, content=body, headers=headers)
            assert replay.status_code == 200
            if kind == "modal":  # the form says why, and nothing is stored
                assert replay.json()["response_action"] == "errors"
    world.settle()

    assert stored_rows(world.conn) == before
    said = [call.method for call in world.fake.calls[calls:]]
    if kind == "button":  # "already answered", once a minute at most (#17 item 7)
        assert said in ([], ["chat.postEphemeral"]), said
    else:
        assert said == [], said
    assert_bounded(ours(caplog), 3 * REPLAYS)  # who and what, never the body


def test_a_replay_after_the_five_minute_window_is_refused(world: SlackWorld) -> None:
    """The same signed reply with its original timestamp, six minutes on: stale, 401."""
    question = world.waiting_question()
    body, content_type = thread_reply(question)
    captured = sign(body, timestamp=int(time.time()) - 6 * 60)
    before = stored_rows(world.conn)
    response = world.http.post(world.server.url, content=body, headers={**content_type, **captured})
    assert response.status_code == 401
    assert stored_rows(world.conn) == before
    assert json.loads(body)["event_id"] == "Ev0SIGNED"
    assert not db.event_seen(world.conn, source="slack", event_id="Ev0SIGNED")
