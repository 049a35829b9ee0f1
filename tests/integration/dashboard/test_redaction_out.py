"""One redaction rule wherever text leaves the process: the API, GitHub, the log."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import httpx
from starlette.testclient import TestClient

from agent_team.common.log_format import JsonFormatter, SafeFormatter
from agent_team.integrations.github.intake import GitHubClient
from tests.integration.dashboard.conftest import TOKEN, auth

PAT = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
SLACK = "xoxb-1234567890-abcdefghijkl"


def test_a_token_pasted_into_a_task_is_hidden_from_api_readers(client: TestClient) -> None:
    created = client.post(
        "/api/tasks",
        json={"title": f"Rotate {SLACK}", "body": f"use {PAT} and the dashboard's {TOKEN}"},
        headers=auth(),
    )
    assert created.status_code == 201
    task_id = created.json()["task_id"]
    for path in (f"/api/task/{task_id}", "/api/tasks", "/api/triage"):
        text = client.get(path, headers=auth()).text
        assert PAT not in text and SLACK not in text and TOKEN not in text, path
    report = client.get(f"/api/task/{task_id}", headers=auth()).json()
    assert report["task"]["title"] == "Rotate [redacted]"
    assert report["task"]["body"] == "use [redacted] and the dashboard's [redacted]"


def test_what_goes_to_github_is_redacted() -> None:
    sent: list[Any] = []

    def github(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(201, json={"id": 1})

    client = GitHubClient("https://github.test/api/v3", "t", transport=httpx.MockTransport(github))
    client.request("POST", "repos/o/r/issues/1/comments", json={"body": f"done; {PAT}"})
    assert sent == [{"body": "done; [redacted]"}]


def test_log_lines_are_redacted_in_both_formats() -> None:
    for formatter in (SafeFormatter(), JsonFormatter()):
        stream = io.StringIO()
        handler = logging.StreamHandler(stream)
        handler.setFormatter(formatter)
        logger = logging.getLogger("agent_team.test_redaction_out")
        logger.propagate = False
        logger.addHandler(handler)
        try:
            try:
                raise RuntimeError(f"push failed for https://x:{PAT}@github.com/o/r")
            except RuntimeError:
                logger.exception("could not publish with %s", SLACK)
        finally:
            logger.removeHandler(handler)
        text = stream.getvalue()
        assert PAT not in text and SLACK not in text and "[redacted]" in text
