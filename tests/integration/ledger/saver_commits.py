"""What each commit of a SQLite saver's connection wrote, and whether it waited for the disk."""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass, field


@dataclass
class SaverCommits:
    """A trace callback on the saver's connection (its writes run under the saver's lock, so
    each commit's statements arrive together)."""

    level: str = "FULL"  # read from the connection by `watch`
    pending: list[str] = field(default_factory=list)
    done: list[tuple[str, str]] = field(default_factory=list)  # (level, what it wrote)
    guard: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, sql: str) -> None:
        statement = sql.strip()
        upper = statement.upper()
        with self.guard:
            if upper.startswith("PRAGMA SYNCHRONOUS ="):
                self.level = upper.split("=", 1)[1].strip()
            elif upper.startswith(("INSERT", "UPDATE", "DELETE")):
                self.pending.append(statement)
            elif upper == "COMMIT":
                self.done.append((self.level, "\n".join(self.pending)))
                self.pending.clear()

    def watch(self, conn: sqlite3.Connection) -> SaverCommits:
        (level,) = conn.execute("PRAGMA synchronous").fetchone()
        self.level = {1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(int(level), str(level))
        conn.set_trace_callback(self)
        return self

    def flushed(self) -> list[str]:
        return [wrote for level, wrote in self.done if level == "FULL"]

    def unflushed(self) -> list[str]:
        return [wrote for level, wrote in self.done if level == "NORMAL"]


def writes_channel(wrote: str, channel: str) -> bool:
    """Whether a commit stored a node write on `channel` (its value is bound as SQL text)."""
    return "INTO writes" in wrote and f"'{channel}'" in wrote
