"""A live daemon with the LangGraph API on, and the real `langgraph_sdk` client pointed at it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from agent_team import db
from agent_team.config import Settings, load_settings
from agent_team.service.daemon import Daemon
from tests.integration.pipeline.conftest import LONG_BODY
from tests.waiting import wait_for

ADA_KEY = "lg-ada-key-0123456789"
BOB_KEY = "lg-bob-key-9876543210"
INBOX_ORIGIN = "http://localhost:3000"
SHORT_BODY = "make it better"  # under 12 words: the offline model asks to clarify
DEADLINE_S = 60.0


@pytest.fixture(autouse=True)
def _no_agent_team_env(isolated_env: Path) -> None:
    """Settings come from the test alone (see tests/conftest.py)."""


def api_settings(tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "db_path": tmp_path / "agent-team.db",
        "state_dir": tmp_path / "state",
        "dashboard_port": 0,
        "poll_s": 0.05,
        "langgraph_api": True,
        "langgraph_api_origins": INBOX_ORIGIN,
        "dashboard_tokens": f"ada:{ADA_KEY},bob:{BOB_KEY}",
    }
    values.update(overrides)
    return load_settings(**values)


class Live:
    """The daemon's `run()` on a thread, the SDK client, and a ledger connection of the test's."""

    def __init__(self, settings: Settings) -> None:
        self.daemon = Daemon(settings)
        self.thread = threading.Thread(target=self.daemon.run, name="daemon", daemon=True)
        self.thread.start()
        wait_for(lambda: self.daemon.bound is not None, "the daemon's HTTP server")
        self.url = self.daemon.url + "langgraph"
        self.client: SyncLangGraphClient = get_sync_client(url=self.url, api_key=ADA_KEY)
        self.http = httpx.Client(base_url=self.url + "/", timeout=DEADLINE_S)
        self.conn = db.open_ledger(settings.ledger_target)

    def stop(self) -> None:
        self.client.close()
        self.http.close()
        self.conn.close()
        self.daemon.request_stop()
        self.thread.join(timeout=30)

    def submit(self, *, clarify: bool, title: str = "Remember the email") -> str:
        body = SHORT_BODY if clarify else LONG_BODY
        return self.daemon.coordinator.start_task(title=title, body=body)

    def open_question(self, task_id: str, kind: str | None = None) -> db.Question:
        def found() -> db.Question | None:
            task = db.get_task(self.conn, task_id)
            if task is None or task.status != "waiting":
                return None
            for question in db.list_questions(self.conn, status="open", thread_id=task_id):
                if kind is None or question.kind == kind:
                    return question
            return None

        question: db.Question = wait_for(found, f"an open question on {task_id}")
        return question

    def three_waiting(self, titles: tuple[str, str, str]) -> tuple[list[str], list[db.Question]]:
        """A plan question and two clarify questions, each open: (task ids, questions)."""
        tasks = [self.submit(clarify=index > 0, title=t) for index, t in enumerate(titles)]
        return tasks, [self.open_question(task_id) for task_id in tasks]

    def task(self, task_id: str) -> db.Task:
        task = db.get_task(self.conn, task_id)
        assert task is not None
        return task

    def key(self, key: str = ADA_KEY) -> dict[str, str]:
        return {"x-api-key": key}


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    running = Live(api_settings(tmp_path))
    try:
        yield running
    finally:
        running.stop()
