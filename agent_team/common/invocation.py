"""How to run agent-team from the folder the person is in, for every hint we print.

A fresh checkout has the command at `.venv/bin/agent-team`, not on PATH, so a
hint saying "run `agent-team migrate`" does not work as typed. The command
this process was started as does: `agent-team` when PATH finds this very
script, else the path as it was typed (relative to the working folder), else
the full path. Messages keep writing "`agent-team ...`" in backticks (layers
below the CLI cannot know how it was started); `localize` rewrites them as
they are printed.
"""

from __future__ import annotations

import re
import shlex
import shutil
import sys
from pathlib import Path

__all__ = ["NAME", "command", "localize"]

NAME = "agent-team"
_HINT = re.compile(r"`agent-team(?= )")


def command(argv0: str | None = None, cwd: Path | None = None) -> str:
    """The agent-team command that works from `cwd` (default: this process's own start)."""
    given = sys.argv[0] if argv0 is None else argv0
    exe = Path(given) if given else None
    where = cwd or Path.cwd()
    if exe is None or exe.name != NAME or not (where / exe).is_file():
        return NAME  # started some other way (python -c, a test runner): the plain name
    found = shutil.which(NAME)
    if found is not None and Path(found).resolve() == (where / exe).resolve():
        return NAME
    if exe.is_absolute():
        try:
            exe = exe.relative_to(where)
        except ValueError:
            pass
    text = str(exe)
    if "/" not in text:
        text = f"./{text}"
    return shlex.quote(text)


def localize(text: str, cmd: str | None = None) -> str:
    """Every "`agent-team ...`" hint in `text` rewritten to the command that works here."""
    cmd = command() if cmd is None else cmd
    if cmd == NAME:
        return text
    return _HINT.sub(lambda _match: f"`{cmd}", text)
