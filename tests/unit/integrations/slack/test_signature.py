"""Slack's v0 request signature as the listener checks it on bodies Bolt cannot parse."""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_team.config import load_settings
from agent_team.integrations.slack.ingress import SlackListener
from agent_team.integrations.slack.settings import SlackSettings
from agent_team.integrations.slack.transport import SlackTransport

SECRET = "unit-test-signing-secret"


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[SlackListener]:
    settings = load_settings(
        db_path=tmp_path / "a.db",
        transport="slack",
        slack_bot_token="xoxb-unit-test-000",
        slack_signing_secret=SECRET,
        slack_channel="C1",
        slack_allowed_users=["U0001"],
        slack_api_url="http://127.0.0.1:9/api/",
    )
    slack = SlackSettings.from_settings(settings)
    made = SlackListener(slack, SlackTransport(slack))
    yield made
    made.close()


def headers(body: bytes, *, ts: float | None = None, secret: str = SECRET) -> dict[str, str]:
    stamp = str(int(time.time() if ts is None else ts))
    digest = hmac.new(secret.encode(), b"v0:" + stamp.encode() + b":" + body, hashlib.sha256)
    return {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": f"v0={digest.hexdigest()}"}


def test_a_signature_made_as_slack_makes_it_is_accepted(listener: SlackListener) -> None:
    body = "é not utf-8 safe".encode("latin-1")
    assert listener._signed(body, headers(body))
    assert listener._signed(body, {k.lower(): v for k, v in headers(body).items()})


@pytest.mark.parametrize(
    "case",
    ["wrong secret", "stale", "future", "other body", "no headers", "bad timestamp", "no v0"],
)
def test_anything_else_is_refused(listener: SlackListener, case: str) -> None:
    body = b'{"type":"event_callback"}'
    sent = {
        "wrong secret": headers(body, secret="nope"),
        "stale": headers(body, ts=time.time() - 301),
        "future": headers(body, ts=time.time() + 301),
        "other body": headers(b"{}"),
        "no headers": {},
        "bad timestamp": {**headers(body), "X-Slack-Request-Timestamp": "soon"},
        "no v0": {**headers(body), "X-Slack-Signature": headers(body)["X-Slack-Signature"][3:]},
    }[case]
    assert not listener._signed(body, sent)
