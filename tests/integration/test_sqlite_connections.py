"""A SQLite ledger read from many short-lived threads keeps no connection per dead thread.

LangGraph runs a graph's steps (and its checkpoint writes) on fresh executor
threads for every run, so a per-thread connection that outlives its thread
costs a page cache per task run: the daemon's memory grew by ~0.6 MiB a task.
(Counting file descriptors would not tell: SQLite's unix VFS keeps closed
connections' descriptors for reuse while other connections hold the file.)
"""

from __future__ import annotations

import gc
import sqlite3
import threading
import time
from pathlib import Path

from agent_team import db


def live_connections() -> int:
    gc.collect()
    return sum(isinstance(obj, sqlite3.Connection) for obj in gc.get_objects())


def test_readers_of_finished_threads_are_closed(tmp_path: Path) -> None:
    path = tmp_path / "agent-team.db"
    db.init_db(path)
    with db.open_ledger(path) as ledger:
        db.list_tasks(ledger)
        before = live_connections()
        for _ in range(50):
            reader = threading.Thread(target=lambda: db.list_tasks(ledger))
            reader.start()
            reader.join()
        # A finished thread's locals are dropped as its state is torn down, just after join.
        deadline = time.monotonic() + 10
        while live_connections() > before + 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert live_connections() <= before + 1
