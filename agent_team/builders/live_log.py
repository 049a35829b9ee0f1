"""A task's build output as it is printed: a bounded, redacted tail beside the ledger.

Why a file in the state folder and not the ledger: output arrives many times
a second, and a ledger write per line would compete with answers and claims
for the write lock (and need a schema change). The tail is one small JSON
file per task, `<state>/build-logs/<task key>.json`, replaced atomically
(`os.replace`), so a reader (the dashboard, `agent-team show --follow`, in
any process) sees a whole old or a whole new version, never a torn one, and
never holds the writer up. It survives a restart, and a later build of the
same task appends to it.

Bounds: the last `MAX_CHARS` characters and `MAX_LINES` lines; a line longer
than `MAX_LINE_CHARS` is broken (at a space if it has one). Every line is
redacted (`agent_team.common.redact`) when it is complete and before it is kept, so
no secret is ever written. An unfinished line is held back until its end
arrives, since half a token may not look like one yet.

Offsets count characters of the redacted stream since the log was first
written; `LogTail.since(offset)` gives a follower only what is new.
"""

from __future__ import annotations

import codecs
import json
import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_team.builders.worktree import task_key
from agent_team.common.redact import redact

if TYPE_CHECKING:
    from agent_team.config import Settings

__all__ = [
    "FLUSH_S",
    "MAX_CHARS",
    "MAX_LINES",
    "MAX_LINE_CHARS",
    "BuildLog",
    "LogTail",
    "log_path",
    "open_build_log",
    "read_build_log",
    "state_dir_of",
]

log = logging.getLogger(__name__)

MAX_CHARS = 64 * 1024
MAX_LINES = 500
MAX_LINE_CHARS = 4096
# How often a running build's new lines reach the file (at most; nothing new, nothing written).
FLUSH_S = 0.25
_DIR = "build-logs"
_VERSION = 1


def state_dir_of(settings: Settings) -> Path:
    """The state folder as the coordinator uses it: the setting, else `state/` beside the ledger."""
    return settings.state_dir or settings.db_path.parent / "state"


def log_path(state_dir: Path, task_id: str) -> Path:
    """Where the task's build output is kept."""
    return state_dir / _DIR / f"{task_key(task_id)}.json"


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class LogTail:
    """What the file holds: the kept text and where it sits in the whole stream.

    Attributes:
        text: complete, redacted lines, each ending in a newline.
        start: the stream offset of `text[0]`.
        end: the stream offset just after the last kept character.
        started_at / ended_at: ISO times of the newest build run (`ended_at`
            None while it runs, or if its process died).
        running: the writer had not closed it at the last flush. After a crash
            this stays true; callers compare with the task's status.
        outcome: how the newest run ended (`ok`, `failed`), None while running.
    """

    task_id: str
    text: str
    start: int
    end: int
    started_at: str | None
    ended_at: str | None
    running: bool
    outcome: str | None

    def since(self, offset: int) -> tuple[str, bool]:
        """The text after stream offset `offset`, and whether some of it was already dropped.

        A follower that fell more than the kept tail behind gets all of it
        (and `True`), so it can show that lines are missing.
        """
        if offset >= self.end:
            return "", False
        if offset < self.start:
            return self.text, True
        return self.text[offset - self.start :], False


def read_build_log(state_dir: Path, task_id: str) -> LogTail | None:
    """The task's kept output, or None if no build of it has printed (or the file is unreadable)."""
    return _read(log_path(state_dir, task_id))


def _read(path: Path) -> LogTail | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("build log %s is unreadable (%s); showing none", path, type(exc).__name__)
        return None
    try:
        return _tail_from(data)
    except (KeyError, TypeError, ValueError):
        log.warning("build log %s is not one we wrote; showing none", path)
        return None


def _tail_from(data: Any) -> LogTail:
    if not isinstance(data, dict) or data.get("version") != _VERSION:
        raise ValueError("unknown build log format")
    text = str(data["text"])
    end = int(data["end"])
    return LogTail(
        task_id=str(data["task_id"]),
        text=text,
        start=end - len(text),
        end=end,
        started_at=data.get("started_at"),
        ended_at=data.get("ended_at"),
        running=bool(data.get("running")),
        outcome=data.get("outcome"),
    )


class BuildLog:
    """The writer: feed it raw output (`log(chunk)`), then `close()` it once.

    Feeding only decodes, splits and redacts in memory, under a lock held for
    microseconds; a thread of its own writes the file every `FLUSH_S` while
    something changed, so a slow disk slows nobody's build. A failed write is
    logged once and never fails the build.
    """

    def __init__(
        self,
        path: Path,
        task_id: str,
        *,
        secrets: Iterable[str | None] = (),
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._path = path
        self._task_id = task_id
        self._secrets = tuple(secrets)
        self._clock = clock
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()  # file versions land in the order they were taken
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial = ""
        self._lines: deque[str] = deque()
        self._chars = 0
        self._end = 0
        self._started = clock()
        self._ended: datetime | None = None
        self._outcome: str | None = None
        self._dirty = True
        self._closed = False
        self._warned = False
        self._stop = threading.Event()
        self._keep_previous()
        self._emit(f"── agent-team: build started at {_iso(self._started)} ──")
        self._flush()
        self._flusher = threading.Thread(
            target=self._run, name=f"build-log-{task_key(task_id)}", daemon=True
        )
        self._flusher.start()

    # feeding

    def __call__(self, chunk: bytes) -> None:
        """Take some raw output; complete lines are redacted and kept."""
        with self._lock:
            if self._closed:
                return
            self._take(self._decoder.decode(chunk))

    def _take(self, text: str) -> None:
        if not text:
            return
        # A lone carriage return (a progress bar redrawing) ends a line too.
        text = (self._partial + text).replace("\r\n", "\n").replace("\r", "\n")
        *complete, self._partial = text.split("\n")
        for line in complete:
            self._emit(line)
        while len(self._partial) > MAX_LINE_CHARS:
            cut = self._partial.rfind(" ", 0, MAX_LINE_CHARS) + 1 or MAX_LINE_CHARS
            self._emit(self._partial[:cut])
            self._partial = self._partial[cut:]

    def _emit(self, line: str) -> None:
        kept = redact(line, self._secrets)[: MAX_LINE_CHARS * 2] + "\n"
        self._lines.append(kept)
        self._chars += len(kept)
        self._end += len(kept)
        while self._lines and (self._chars > MAX_CHARS or len(self._lines) > MAX_LINES):
            self._chars -= len(self._lines.popleft())
        self._dirty = True

    def _keep_previous(self) -> None:
        """Carry on after the kept output of an earlier build of this task (its offsets too)."""
        previous = _read(self._path)
        if previous is None or previous.task_id != self._task_id:
            return
        self._end = previous.start
        for line in previous.text.splitlines(keepends=True):
            self._lines.append(line)
            self._chars += len(line)
            self._end += len(line)
        if previous.running:
            # Its process ended without closing it (a crash or a kill): say so in the stream.
            self._emit("── agent-team: the previous build stopped without finishing ──")

    # ending

    def close(self, outcome: str, note: str = "") -> None:
        """End this run: keep the unfinished line, say how it ended, write the file a last time.

        Args:
            outcome: `ok` or `failed`.
            note: one line for the log (already free of secrets, or redacted here).
        """
        with self._lock:
            if self._closed:
                return
            self._take(self._decoder.decode(b"", final=True))
            if self._partial:
                self._emit(self._partial)
                self._partial = ""
            self._ended = self._clock()
            self._outcome = outcome
            seconds = max(0.0, (self._ended - self._started).total_seconds())
            ending = "finished" if outcome == "ok" else "failed"
            self._emit(
                f"── agent-team: build {ending} after {seconds:.1f} s"
                + (f": {note}" if note else "")
                + " ──"
            )
            self._closed = True
        self._stop.set()
        self._flusher.join(timeout=10)
        self._flush()

    def __enter__(self) -> BuildLog:
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if exc is None:
            self.close("ok")
        else:
            first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
            self.close("failed", first or type(exc).__name__)

    # writing

    def _run(self) -> None:
        while not self._stop.wait(FLUSH_S):
            self._flush()

    def _flush(self) -> None:
        with self._write_lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        with self._lock:
            if not self._dirty:
                return
            data = {
                "version": _VERSION,
                "task_id": self._task_id,
                "started_at": _iso(self._started),
                "ended_at": _iso(self._ended) if self._ended is not None else None,
                "running": not self._closed,
                "outcome": self._outcome,
                "end": self._end,
                "text": "".join(self._lines),
            }
            self._dirty = False
        try:
            self._write(json.dumps(data, ensure_ascii=False))
        except OSError as exc:
            with self._lock:
                self._dirty = True  # try again at the next flush
                warned, self._warned = self._warned, True
            if not warned:
                log.warning("build log %s cannot be written: %s", self._path, exc)

    def _write(self, text: str) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        scratch = self._path.with_name(f".{self._path.name}.{os.getpid()}.tmp")
        scratch.write_text(text, encoding="utf-8")
        os.replace(scratch, self._path)


def open_build_log(
    state_dir: Path, task_id: str, *, secrets: Iterable[str | None] = ()
) -> BuildLog:
    """Start logging a build run of `task_id` (one writer per task: the task lock is held)."""
    return BuildLog(log_path(state_dir, task_id), task_id, secrets=secrets)
