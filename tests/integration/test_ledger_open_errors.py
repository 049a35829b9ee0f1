"""Why a ledger cannot be used, told apart: a read-only folder, a lock, a damaged file.

Each case gets its own one-line message and fix; restoring a backup is advised
only when `PRAGMA quick_check` finds the file damaged. The commands run as the
installed console script, as a person would run them.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from agent_team.config import ENV_PREFIX
from tests.readonly_mount import read_only_prefix

AGENT_TEAM = Path(sys.executable).with_name("agent-team")


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(ENV_PREFIX)}
    env.update(NO_COLOR="1", COLUMNS="200", PYTHONIOENCODING="utf-8")
    env.update(AGENT_TEAM_DASHBOARD_PORT="0", AGENT_TEAM_LOG_LEVEL="warning")
    env.update(extra or {})
    return env


def run(
    cwd: Path, *args: str, prefix: list[str] | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*(prefix or []), str(AGENT_TEAM), *args],
        cwd=cwd,
        env=_env(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=90,
        check=False,
    )


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("agent-team: "), lines[0]
    assert "unexpected error" not in lines[0]
    return lines[0]


def flat(text: str) -> str:
    """The text with table borders and line breaks gone, so wrapped cells read as one."""
    return " ".join(text.replace("│", " ").split())


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    """A ledger with one task, made by another process (so this one holds no connection)."""
    path = tmp_path / "data" / "agent-team.db"
    made = run(tmp_path, "--db", str(path), "submit", "--title", "Remember", "--body", "it")
    assert made.returncode == 0, made.stderr
    return path


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[list[str]]:
    prefix = read_only_prefix(tmp_path / "probe")
    if prefix is None:
        pytest.skip(
            "cannot mount a folder read-only here (needs `unshare --mount` as root, or user "
            "namespaces); chmod does not stop root, so there is no honest other way"
        )
    yield prefix


@pytest.mark.slow
def test_a_read_only_folder_is_named_as_such_and_never_called_damaged(
    ledger: Path, tmp_path: Path, read_only: list[str]
) -> None:
    before = ledger.read_bytes()
    folder = ledger.parent
    ro = [*read_only, str(folder)]

    for args in (
        ("tasks",),
        ("submit", "--title", "more", "--body", "text"),
        ("migrate",),
        ("tick",),
        ("daemon",),
        ("daemon", "--demo"),
    ):
        line = one_line_error(run(tmp_path, "--db", str(ledger), *args, prefix=ro))
        assert str(folder) in line and "read-only file system" in line, (args, line)
        assert "-wal" in line and "--db" in line, (args, line)
        for wrong in ("damaged", "backup", "migrate`", "schema_meta"):
            assert wrong not in line, (args, line)

    doctor = run(tmp_path, "--db", str(ledger), "doctor", prefix=ro)
    assert doctor.returncode == 1, doctor.stdout
    text = flat(doctor.stdout)
    assert "✗ ledger" in text and "read-only file system" in text, text
    assert "backup" not in text and "migrate" not in text, text

    assert ledger.read_bytes() == before
    assert sorted(p.name for p in folder.iterdir()) == ["agent-team.db"]


def test_a_new_ledger_in_a_read_only_folder_is_refused_by_doctor(
    tmp_path: Path, read_only: list[str]
) -> None:
    folder = tmp_path / "empty"
    folder.mkdir()
    ro = [*read_only, str(folder)]

    doctor = run(tmp_path, "--db", str(folder / "agent-team.db"), "doctor", prefix=ro)

    assert doctor.returncode == 1, doctor.stdout
    text = flat(doctor.stdout)
    assert "✗ ledger" in text and "read-only file system" in text, text
    assert "creates it on start" not in text


def corrupt(path: Path) -> None:
    """Overwrite the start of the file's last page: a b-tree page of the task tables."""
    size = path.stat().st_size
    with path.open("r+b") as file:
        file.seek(size - 4096)
        file.write(b"\xff" * 200)


@pytest.mark.slow
def test_a_damaged_ledger_is_confirmed_by_quick_check_and_only_then_backup_is_advised(
    ledger: Path, tmp_path: Path
) -> None:
    script = (
        "import sys; from agent_team import db; from agent_team.requests import inbox; "
        "conn = db.open_ledger(sys.argv[1]); "
        "[inbox.submit_task(conn, title=f'task {n}', body='x' * 600) for n in range(60)]"
    )
    subprocess.run([sys.executable, "-c", script, str(ledger)], check=True, timeout=60)
    corrupt(ledger)

    line = one_line_error(run(tmp_path, "--db", str(ledger), "tasks"))
    assert "damaged" in line and "quick_check" in line and "backup" in line, line

    doctor = run(tmp_path, "--db", str(ledger), "doctor")
    assert doctor.returncode == 1, doctor.stdout
    text = flat(doctor.stdout)
    assert "✗ ledger" in text and "damaged" in text and "backup" in text, text


def test_a_file_that_is_not_sqlite_says_check_the_path(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("these are my notes, not a ledger\n" * 200, encoding="utf-8")

    line = one_line_error(run(tmp_path, "--db", str(notes), "tasks"))

    assert "not a SQLite database" in line and "--db" in line, line
    assert "backup" not in line and "damaged" not in line, line


@pytest.mark.slow
def test_a_locked_ledger_says_another_process_holds_it(ledger: Path, tmp_path: Path) -> None:
    with closing(sqlite3.connect(ledger, isolation_level=None)) as holder:
        holder.execute("PRAGMA locking_mode = EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")

        line = one_line_error(run(tmp_path, "--db", str(ledger), "tasks"))

        holder.execute("ROLLBACK")
    assert "locked by another process" in line, line
    for wrong in ("damaged", "backup", "schema_meta", "not a SQLite"):
        assert wrong not in line, line
