"""Git and process helpers for the builder tests (real git, real processes, tmp_path only)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

# The tests' own git calls ignore the developer's git config, like the builders do.
GIT_ENV = {
    "PATH": os.environ.get("PATH", os.defpath),
    "LC_ALL": "C",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
}


def git(cwd: Path, *args: str) -> str:
    """Run git in `cwd` as a test user; return stripped stdout, fail loudly."""
    done = subprocess.run(
        ["git", "-c", "user.name=Tester", "-c", "user.email=tester@example.com", *args],
        cwd=cwd,
        env=GIT_ENV,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, f"git {args} failed: {done.stderr}"
    return done.stdout.strip()


def make_repo(path: Path, *, files: dict[str, str] | None = None) -> Path:
    """A repository at `path` with one commit holding `files` (default: a README)."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    for name, text in (files or {"README.md": "hello\n"}).items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "first")
    return path


def head(cwd: Path, ref: str = "HEAD") -> str:
    return git(cwd, "rev-parse", ref)


def changed_files(cwd: Path, commit: str) -> list[str]:
    """Paths a commit changed (against its parent)."""
    out = git(cwd, "show", "--name-only", "--format=", commit)
    return [line for line in out.splitlines() if line]


def is_gone(pid: int) -> bool:
    """True when `pid` has exited (a zombie nobody reaped counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    # The state letter follows the parenthesised command name.
    return stat.rsplit(")", 1)[1].split()[0] in {"Z", "X"}


def wait_until_gone(pid: int, deadline_s: float = 5.0) -> bool:
    """Poll until `pid` is gone or the deadline passes."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if is_gone(pid):
            return True
        time.sleep(0.02)
    return is_gone(pid)


def git_words(argv: list[str]) -> list[str]:
    """A git argv without the program, `--no-pager` and `-c name=value` pairs: `[command, ...]`."""
    words = argv[1:]
    while words and words[0] in {"--no-pager", "-c"}:
        words = words[2:] if words[0] == "-c" else words[1:]
    return words


def processes_with(marker: str) -> list[int]:
    """Pids of the processes on this host whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found
