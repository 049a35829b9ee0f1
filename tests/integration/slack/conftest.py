"""The Slack transport against a loopback Slack Web API and a real HTTP endpoint.

`SlackWorld` holds a real `Coordinator` (offline model and builder, a settable
clock), the `SlackTransport` posting to `FakeSlack`, the `SlackListener`, and
a uvicorn server on an ephemeral port serving `POST /slack/events`. Requests
are signed exactly as Slack signs them: `v0=` + HMAC-SHA256 of
`v0:{timestamp}:{body}` with the signing secret.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette

from agent_team import db
from agent_team.config import ENV_PREFIX, Settings, load_settings
from agent_team.coordinator import Coordinator
from agent_team.integrations.slack.ingress import EVENTS_PATH, SlackListener
from agent_team.integrations.slack.settings import SlackSettings
from agent_team.integrations.slack.transport import SlackTransport
from agent_team.service.wiring import build_coordinator
from tests.fakes.slack_api import BOT_TOKEN, FakeSlack
from tests.integration.pipeline.conftest import LONG_BODY, Clock

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
CHANNEL = "C0QUESTIONS"
ALICE = "UALICE001"
BOB = "UBOB00001"
MALLORY = "UMALLORY1"
BOSS = "UBOSS0001"


def sign(body: bytes, *, secret: str = SECRET, timestamp: int | None = None) -> dict[str, str]:
    """The two headers Slack sends with every request."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    base = b"v0:" + ts.encode() + b":" + body
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}"}


def message_event(
    ref: str, user: str, text: str, *, event_id: str | None = None, **extra: Any
) -> dict[str, Any]:
    """An Events API `message` callback replying in the thread of `ref`."""
    channel, thread_ts = ref.split(":")
    event = {
        "type": "message",
        "channel": channel,
        "user": user,
        "text": text,
        "ts": f"{time.time():.6f}",
        "thread_ts": thread_ts,
        **extra,
    }
    return {
        "token": "legacy",
        "team_id": "T00000001",
        "api_app_id": "A00000001",
        "type": "event_callback",
        "event_id": event_id or f"Ev{uuid.uuid4().hex[:10].upper()}",
        "event_time": int(time.time()),
        "authorizations": [{"team_id": "T00000001", "user_id": "UBOT00001", "is_bot": True}],
        "event": event,
    }


def block_action(ref: str, user: str, action_id: str, question_id: str) -> dict[str, Any]:
    """An interactivity `block_actions` payload for a button on the message at `ref`."""
    channel, ts = ref.split(":")
    return {
        "type": "block_actions",
        "team": {"id": "T00000001"},
        "user": {"id": user, "team_id": "T00000001"},
        "api_app_id": "A00000001",
        "trigger_id": f"trig.{uuid.uuid4().hex[:8]}",
        "container": {"type": "message", "message_ts": ts, "channel_id": channel},
        "channel": {"id": channel},
        "message": {"ts": ts, "type": "message"},
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": f"answer:{question_id}",
                "value": question_id,
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }


def view_submission(user: str, private_metadata: str, feedback: str) -> dict[str, Any]:
    return {
        "type": "view_submission",
        "team": {"id": "T00000001"},
        "user": {"id": user, "team_id": "T00000001"},
        "api_app_id": "A00000001",
        "view": {
            "id": "V1",
            "type": "modal",
            "callback_id": "agent_team.revise_modal",
            "private_metadata": private_metadata,
            "state": {
                "values": {"feedback": {"text": {"type": "plain_text_input", "value": feedback}}}
            },
        },
    }


def json_body(payload: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    return json.dumps(payload).encode(), {"Content-Type": "application/json"}


def form_body(payload: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    body = urlencode({"payload": json.dumps(payload)}).encode()
    return body, {"Content-Type": "application/x-www-form-urlencoded"}


class Server:
    """uvicorn on 127.0.0.1:<ephemeral> in a thread, like the daemon's HTTP server."""

    def __init__(self, app: Starlette) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.005)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{EVENTS_PATH}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


@dataclass
class SlackWorld:
    settings: Settings
    fake: FakeSlack
    clock: Clock
    coordinator: Coordinator
    transport: SlackTransport
    listener: SlackListener
    server: Server
    http: httpx.Client

    @property
    def conn(self) -> db.Ledger:
        return self.coordinator.ledger

    def send(
        self,
        payload: dict[str, Any],
        *,
        form: bool = False,
        headers: dict[str, str] | None = None,
        body: bytes | None = None,
        timestamp: int | None = None,
        secret: str = SECRET,
    ) -> httpx.Response:
        raw, content_type = form_body(payload) if form else json_body(payload)
        raw = raw if body is None else body
        sent = {**content_type, **sign(raw, secret=secret, timestamp=timestamp), **(headers or {})}
        return self.http.post(self.server.url, content=raw, headers=sent)

    def waiting_question(self, title: str = "Remember the email") -> db.Question:
        """Submit a task, run it to its plan question (posted to the fake), return the row."""
        task_id = self.coordinator.start_task(title=title, body=LONG_BODY)
        self.coordinator.tick(until_idle=True, timeout_s=60)
        (question,) = db.list_questions(self.conn, status="open", thread_id=task_id)
        assert question.channel_ref is not None and question.channel_ref.startswith(CHANNEL)
        return question

    def question(self, question_id: str) -> db.Question:
        found = db.get_question(self.conn, question_id)
        assert found is not None
        return found

    def settle(self) -> None:
        assert self.listener.drain(10), "follow-up Slack calls did not finish"


@pytest.fixture(autouse=True)
def _no_agent_team_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in list(os.environ):
        if key.upper().startswith(ENV_PREFIX) or key.startswith("SLACK_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    server = FakeSlack().start()
    yield server
    server.stop()


def slack_settings(tmp_path: Path, fake: FakeSlack, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "db_path": tmp_path / "agent-team.db",
        "state_dir": tmp_path / "state",
        "transport": "slack",
        "slack_bot_token": BOT_TOKEN,
        "slack_signing_secret": SECRET,
        "slack_channel": CHANNEL,
        "slack_allowed_users": [ALICE, BOB],
        "slack_escalate_to": [BOSS],
        "slack_api_url": fake.base_url,
        "dashboard_url": "http://dash.test/",
    }
    values.update(overrides)
    return load_settings(**values)


@pytest.fixture
def make_world(tmp_path: Path, fake: FakeSlack) -> Iterator[Any]:
    made: list[SlackWorld] = []

    def make(**overrides: Any) -> SlackWorld:
        settings = slack_settings(tmp_path, fake, **overrides)
        clock = Clock()
        slack = SlackSettings.from_settings(settings)
        transport = SlackTransport(slack, clock=clock)
        coordinator = build_coordinator(settings, transport=transport, clock=clock)
        listener = SlackListener(slack, transport, answer=coordinator.answer, clock=clock)
        server = Server(Starlette(routes=[listener.route()]))
        world = SlackWorld(
            settings,
            fake,
            clock,
            coordinator,
            transport,
            listener,
            server,
            httpx.Client(timeout=10),
        )
        made.append(world)
        return world

    yield make
    for world in made:
        world.http.close()
        world.server.stop()
        world.listener.close()
        world.transport.close()
        world.coordinator.close()


@pytest.fixture
def world(make_world: Any) -> SlackWorld:
    world: SlackWorld = make_world()
    return world
