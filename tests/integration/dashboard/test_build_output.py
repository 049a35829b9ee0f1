"""The build output card and `GET /api/task/{id}/log`, over the seeded ledger of `conftest.py`.

The log files are written by the real writer (`BuildLog`) into the state
folder the dashboard's settings name, with its clock pinned so elapsed times
are exact; the dashboard's clock is `NOW`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from agent_team import db
from agent_team.builders.live_log import BuildLog, log_path
from tests.integration.dashboard.conftest import NOW, TOKEN, Seeded
from tests.waiting import wait_for


def _task(seeded: Seeded, task_id: str, status: str, phase: str = "build") -> None:
    conn = db.open_ledger(seeded.path)
    try:
        db.create_task(conn, task_id=task_id, kind="code", title=f"Build {task_id}")
        reason = "builder_unavailable" if status == "parked" else None
        db.set_task_status(conn, task_id, status, phase=phase, parked_reason=reason)
    finally:
        conn.close()


@pytest.fixture
def writer(seeded: Seeded) -> Iterator[Callable[[str], BuildLog]]:
    """Opens a build log for a task as `run_build` would."""
    opened: list[BuildLog] = []

    def open_for(task_id: str) -> BuildLog:
        path = log_path(seeded.path.parent / "state", task_id)
        # Started 65 s before NOW; it ends (if it is closed) at NOW.
        moments = iter([NOW - timedelta(seconds=65)])
        log = BuildLog(path, task_id, clock=lambda: next(moments, NOW))
        opened.append(log)
        return log

    yield open_for
    for log in opened:
        log.close("ok")


def _written(seeded: Seeded, task_id: str, text: str) -> Callable[[], bool]:
    path = log_path(seeded.path.parent / "state", task_id)
    return lambda: path.exists() and text in path.read_text(encoding="utf-8")


def test_a_running_build_is_followed_by_offset(
    client: TestClient, seeded: Seeded, writer: Callable[[str], BuildLog]
) -> None:
    _task(seeded, "tR", "running")
    log = writer("tR")
    log(b"compiling 1/3\ncompiling 2/3\n")
    wait_for(_written(seeded, "tR", "compiling 2/3"), "compiling 2/3 written", timeout_s=30)

    body = client.get("/api/task/tR/log").json()
    assert body["running"] is True and body["follow"] is True and body["exists"] is True
    assert body["elapsed_s"] == 65.0 and body["ended_at"] is None and body["outcome"] is None
    assert body["text"].splitlines()[1:] == ["compiling 1/3", "compiling 2/3"]
    assert body["start"] == 0 and body["end"] == len(body["text"])

    assert client.get(f"/api/task/tR/log?after={body['end']}").json()["text"] == ""
    log(b"compiling 3/3\n")
    wait_for(_written(seeded, "tR", "compiling 3/3"), "compiling 3/3 written", timeout_s=30)
    more = client.get(f"/api/task/tR/log?after={body['end']}").json()
    assert more["text"] == "compiling 3/3\n" and more["dropped"] is False
    assert more["end"] == body["end"] + len("compiling 3/3\n")

    log.close("ok")
    done = client.get(f"/api/task/tR/log?after={more['end']}").json()
    assert done["running"] is False and done["outcome"] == "ok"
    assert done["text"].startswith("── agent-team: build finished after 65.0 s")
    assert done["follow"] is True  # the task itself is still running (it commits next)


def test_a_log_whose_writer_died_reads_as_stopped_not_running(
    client: TestClient, seeded: Seeded, writer: Callable[[str], BuildLog]
) -> None:
    _task(seeded, "tK", "failed")
    log = writer("tK")
    log(b"half way\n")
    wait_for(_written(seeded, "tK", "half way"), "half way written", timeout_s=30)
    body = client.get("/api/task/tK/log").json()
    assert body["running"] is False and body["follow"] is False
    assert body["outcome"] == "stopped" and body["elapsed_s"] is None
    page = client.get("/task/tK").text
    assert "the last build stopped without finishing" in page
    assert 'data-log-follow="0"' in page


def test_no_output_yet_and_unknown_tasks(client: TestClient) -> None:
    queued = client.get("/api/task/tB/log").json()
    assert queued == {
        "task_id": "tB",
        "text": "",
        "start": 0,
        "end": 0,
        "dropped": False,
        "exists": False,
        "running": False,
        "follow": False,  # tB waits on a person
        "started_at": None,
        "ended_at": None,
        "elapsed_s": None,
        "outcome": None,
    }
    assert client.get("/api/task/tC/log").json()["follow"] is True  # queued
    missing = client.get("/api/task/nope/log")
    assert missing.status_code == 404 and missing.json()["id"] == "nope"
    for bad in ("-1", "ten"):
        refused = client.get(f"/api/task/tB/log?after={bad}")
        assert refused.status_code == 400 and refused.json()["parameter"] == "after"


def test_the_dashboard_token_and_markup_in_output_are_never_shown(
    client: TestClient, seeded: Seeded, writer: Callable[[str], BuildLog]
) -> None:
    _task(seeded, "tS", "running")
    log = writer("tS")
    log(f"echo {TOKEN}\n<script>alert(1)</script>\n".encode())
    wait_for(_written(seeded, "tS", "alert(1)"), "the markup written", timeout_s=30)
    body = client.get("/api/task/tS/log").json()
    assert TOKEN not in body["text"] and "echo [redacted]" in body["text"]
    page = client.get("/task/tS").text
    assert TOKEN not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert" not in page


def test_the_task_page_card_follows_a_running_build_and_keeps_the_tail_after(
    client: TestClient, seeded: Seeded, writer: Callable[[str], BuildLog]
) -> None:
    _task(seeded, "tR", "running")
    log = writer("tR")
    log(b"step one\n")
    wait_for(_written(seeded, "tR", "step one"), "step one written", timeout_s=30)
    page = client.get("/task/tR").text
    card = page[page.index('data-live="build-output"') :]
    card = card[: card.index("</section>")]
    assert 'data-log-src="/api/task/tR/log"' in card
    assert 'data-log-follow="1"' in card and 'data-log-running="1"' in card
    assert '<span class="running">running</span> for <span data-elapsed-s="65.0">1m 05s</span>' in (
        card
    )
    assert "step one\n" in card

    log.close("ok")
    conn = db.open_ledger(seeded.path)
    try:
        db.set_task_status(conn, "tR", "done", phase="done")
    finally:
        conn.close()
    after = client.get("/task/tR").text
    card = after[after.index('data-live="build-output"') :]
    assert "the last build finished after 1m 05s" in card
    assert 'data-log-follow="0"' in card and "step one\n" in card


def test_tasks_with_nothing_to_show_have_an_empty_region(client: TestClient) -> None:
    for task_id in ("tA", "tC"):  # done with no output; a confluence task (no build)
        page = client.get(f"/task/{task_id}").text
        region = page[page.index('data-live="build-output"') :]
        assert region[: region.index("</div>")].strip() == 'data-live="build-output">'
    # A queued code task gets the card, waiting for output.
    conn = db.open_ledger(Path(client.app.state.ctx.settings.db_path))  # type: ignore[attr-defined]
    try:
        db.create_task(conn, task_id="tQ", kind="code", title="Queued")
    finally:
        conn.close()
    page = client.get("/task/tQ").text
    assert "no build has printed anything yet" in page and 'data-log-follow="1"' in page
