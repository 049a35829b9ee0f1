"""What reaches `POST /slack/events` that is not a good answer: forgeries, junk, unknown events."""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

from agent_team import db
from agent_team.integrations.slack.ingress import EVENTS_PATH, MAX_BODY
from tests.integration.slack.conftest import (
    ALICE,
    SlackWorld,
    block_action,
    message_event,
    sign,
)


def seen(world: SlackWorld, event_id: str) -> bool:
    return db.event_seen(world.conn, source="slack", event_id=event_id)


def test_a_forged_signature_is_refused_and_nothing_is_stored(world: SlackWorld) -> None:
    question = world.waiting_question()
    ref = question.channel_ref or ""
    payload = message_event(ref, ALICE, "approve", event_id="Ev0FORGED")
    response = world.send(payload, secret="not-the-signing-secret")
    assert response.status_code == 401
    forged_button = world.send(
        block_action(ref, ALICE, "agent_team.approve", question.question_id),
        form=True,
        secret="not-the-signing-secret",
    )
    assert forged_button.status_code == 401
    unsigned = world.http.post(world.server.url, content=json.dumps(payload).encode())
    assert unsigned.status_code == 401
    assert world.question(question.question_id).status == "open"
    assert not seen(world, "Ev0FORGED"), "not even the event id is recorded"


def test_a_stale_signature_is_refused(world: SlackWorld) -> None:
    question = world.waiting_question()
    payload = message_event(question.channel_ref or "", ALICE, "approve", event_id="Ev0STALE")
    response = world.send(payload, timestamp=int(time.time()) - 6 * 60)
    assert response.status_code == 401
    assert world.question(question.question_id).status == "open"
    assert not seen(world, "Ev0STALE")
    fresh = world.send(payload, timestamp=int(time.time()) - 60)
    assert fresh.status_code == 200 and world.question(question.question_id).status == "answered"


def test_malformed_json_is_acked_and_ignored_but_only_when_signed(world: SlackWorld) -> None:
    body = b'{"type": "event_callback", "event": {'
    headers = {"Content-Type": "application/json"}
    signed = world.http.post(world.server.url, content=body, headers={**headers, **sign(body)})
    assert signed.status_code == 200
    forged = world.http.post(
        world.server.url, content=body, headers={**headers, **sign(body, secret="wrong")}
    )
    assert forged.status_code == 401
    latin = "é".encode("latin-1")
    assert world.http.post(world.server.url, content=latin, headers=sign(latin)).status_code == 200


def test_unknown_events_and_payloads_are_acked_with_200(world: SlackWorld) -> None:
    reaction = message_event("C1:1.2", ALICE, "", event_id="Ev0REACTION")
    reaction["event"] = {"type": "reaction_added", "user": ALICE, "reaction": "tada"}
    assert world.send(reaction).status_code == 200
    assert not seen(world, "Ev0REACTION"), "nothing to de-duplicate: no write"
    assert world.send({"type": "shortcut", "callback_id": "nope"}, form=True).status_code == 200
    assert world.send({"type": "something_new"}).status_code == 200
    assert world.send({"nothing": "useful"}).status_code == 200


def test_the_url_verification_challenge_is_answered(world: SlackWorld) -> None:
    response = world.send(
        {
            "type": "url_verification",
            "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
        }
    )
    assert response.status_code == 200
    assert "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" in response.text


def test_json_that_is_not_an_object_is_acked_and_ignored(world: SlackWorld) -> None:
    for raw in (b"[1, 2]", b'"text"', b"null", b"{}", b"payload=%7Bnot-json"):
        headers = {"Content-Type": "application/json", **sign(raw)}
        assert world.http.post(world.server.url, content=raw, headers=headers).status_code == 200
        forged = {"Content-Type": "application/json", **sign(raw, secret="wrong")}
        assert world.http.post(world.server.url, content=raw, headers=forged).status_code == 401


def test_an_oversized_body_is_refused_before_it_is_read(world: SlackWorld) -> None:
    raw = b"x" * 1_000_001
    response = world.http.post(world.server.url, content=raw, headers=sign(raw))
    assert response.status_code == 413


def test_a_chunked_body_past_the_limit_is_refused_while_it_streams(world: SlackWorld) -> None:
    """No Content-Length: the limit is counted as the chunks arrive, not after buffering.

    The body is never finished, so a server that buffers it whole would wait
    for the rest and never answer; a streaming limit answers 413 past 1 MB.
    """
    question = world.waiting_question()
    sock = socket.create_connection(("127.0.0.1", world.server.port), timeout=10)
    chunk = b"x" * 65_536
    head = (
        f"POST {EVENTS_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode()

    def send() -> None:
        try:
            sock.sendall(head)
            for _ in range(MAX_BODY // len(chunk) + 4):  # a little past the limit, no last chunk
                sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        except OSError:  # the server answered and closed while we were still sending
            pass

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    try:
        reply = b""
        while b"\r\n" not in reply:
            data = sock.recv(4096)  # times out (the test fails) if the server waits for more
            if not data:
                break
            reply += data
        assert reply.startswith(b"HTTP/1.1 413"), reply[:100]
    finally:
        sock.close()
        sender.join(timeout=10)
    assert world.question(question.question_id).status == "open"


def test_bad_timestamps_and_missing_headers_are_401_never_500(world: SlackWorld) -> None:
    question = world.waiting_question()
    payload = message_event(question.channel_ref or "", ALICE, "approve", event_id="Ev0TS")
    raw = json.dumps(payload).encode()
    good = sign(raw)
    cases: list[dict[str, Any]] = [
        {**good, "X-Slack-Request-Timestamp": "not-a-number"},
        {**good, "X-Slack-Request-Timestamp": "9" * 40},
        {**good, "X-Slack-Request-Timestamp": "-5"},
        {**good, "X-Slack-Request-Timestamp": "١٢٣".encode()},  # digits, not ASCII ones
        sign(raw, timestamp=int(time.time()) + 10 * 60),  # from the future
        {k: v for k, v in good.items() if k != "X-Slack-Signature"},
        {k: v for k, v in good.items() if k != "X-Slack-Request-Timestamp"},
        {**good, "X-Slack-Signature": "v1=" + good["X-Slack-Signature"][3:]},  # wrong prefix
        {**good, "X-Slack-Signature": "v0=ü".encode()},
    ]
    for headers in cases:
        response = world.http.post(
            world.server.url, content=raw, headers={"Content-Type": "application/json", **headers}
        )
        assert response.status_code == 401, (headers, response.text)
    assert world.question(question.question_id).status == "open"
    assert not seen(world, "Ev0TS")


def test_a_flood_of_refused_requests_logs_a_bounded_line_per_source(
    world: SlackWorld, caplog: Any
) -> None:
    big = b'{"type": "event_callback", "text": "' + b"x" * 900_000 + b'"}\n2026 ERROR forged'
    with caplog.at_level("DEBUG"):
        for _ in range(20):
            response = world.http.post(
                world.server.url, content=big, headers={"Content-Type": "application/json"}
            )
            assert response.status_code == 401
    lines = [r.getMessage() for r in caplog.records if "slack" in r.name]
    assert len(lines) <= 2, lines  # one for the source, not twenty
    assert sum(len(line) for line in lines) < 1_000, "no body in the log"
    assert all("forged" not in line and "xxxx" not in line for line in lines)
