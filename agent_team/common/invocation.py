"""How to run agent-team from the folder the person is in, for every hint we print.

A fresh checkout has the command at `.venv/bin/agent-team`, not on PATH, so a
hint saying "run `agent-team migrate`" does not work as typed. The command
this process was started as does: `agent-team` when PATH finds this very
script, else the path as it was typed (relative to the working folder), else
the full path. Messages keep writing "`agent-team ...`" in backticks (layers
below the CLI cannot know how it was started); `localize` rewrites them as
they are printed.

Some texts name commands bare, because they are shown where backticks would
be noise (the triage inbox's fixes, a park's note): "then: agent-team retry
t1". `localize(..., bare=True)` rewrites those too, but only where one of our
own commands follows (`COMMANDS`), so prose such as "the agent-team offline
builder" stays as it is.
"""

from __future__ import annotations

import re
import shlex
import shutil
import sys
from pathlib import Path

__all__ = ["COMMANDS", "NAME", "command", "localize"]

NAME = "agent-team"
_HINT = re.compile(r"`agent-team(?= )")
# The top-level commands of `agent_team.cli.main.app` (a test keeps the two the same).
COMMANDS = frozenset(
    {
        "answer",
        "audit",
        "automation",
        "backup",
        "budget",
        "cancel",
        "daemon",
        "daemons",
        "doctor",
        "inbox",
        "intake",
        "key",
        "ledger",
        "migrate",
        "migrate-to-postgres",
        "note",
        "people",
        "questions",
        "reopen",
        "retry",
        "schema",
        "show",
        "submit",
        "tasks",
        "tick",
    }
)
_BARE = re.compile(
    r"(?<![\w/.`'-])agent-team(?= (?:"
    + "|".join(re.escape(name) for name in sorted(COMMANDS, key=len, reverse=True))
    + r")(?![\w-]))"
)


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


def localize(text: str, cmd: str | None = None, *, bare: bool = False) -> str:
    """Every "`agent-team ...`" hint in `text` rewritten to the command that works here.

    With `bare`, also "agent-team <one of COMMANDS>" without backticks.
    """
    cmd = command() if cmd is None else cmd
    if cmd == NAME:
        return text
    text = _HINT.sub(lambda _match: f"`{cmd}", text)
    return _BARE.sub(lambda _match: cmd, text) if bare else text
