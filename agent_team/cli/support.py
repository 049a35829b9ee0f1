"""What every `agent-team` command module shares: the consoles, settings, the ledger, output.

`main.py` holds the commands of the core; bigger groups (`automation`,
`audit`, `inbox`) live in modules of their own and take these helpers from
here, so no command module imports another.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from agent_team import db
from agent_team.common.invocation import localize
from agent_team.common.log_format import formatter_for
from agent_team.common.timefmt import age_text, deadline_text, utc_text
from agent_team.config import Settings, load_hooks, load_settings
from agent_team.requests.actors import Actor, cli_actor

__all__ = [
    "AsOption",
    "CliContext",
    "RepoOption",
    "acting_actor",
    "age",
    "context_of",
    "deadline_cell",
    "err",
    "hint",
    "id_table",
    "open_ready",
    "open_writable",
    "out",
    "print_json",
    "when",
]

# Piped output (scripts, CI logs) gets a wide console so ids are never cut short.
out = Console(
    highlight=False, soft_wrap=True, markup=False, width=None if sys.stdout.isatty() else 200
)
err = Console(stderr=True, highlight=False, markup=False)

# `--repo` of `submit` and `automation add`: what a task may name (common/repo_spec.py).
RepoOption = Annotated[
    str | None,
    typer.Option(
        "--repo",
        help="The repository to build in: a path, https://host/owner/name, "
        "git@host:owner/name.git or owner/name (on the GitHub host); #branch names the base.",
    ),
]

# `--as NAME` of every command that changes something: act as that person, role checked.
AsOption = Annotated[
    str | None,
    typer.Option(
        "--as",
        help="Act as this person (their role is checked); without it the local operator acts.",
    ),
]


def acting_actor(reader: db.Reader, acting_as: str | None) -> Actor:
    """Who a command acts as: `--as` a person, else the operating-system user.

    The local operator can read the ledger's file, so they are an owner; `--as`
    names a person whose role every check then uses. Once people are set up,
    `--as` must name one of them (a typo must not act with the operator's rights).
    Without people, `--as` only labels the audit row, as it always did.
    """
    if acting_as is None or not acting_as.strip():
        return cli_actor()
    name = acting_as.strip()
    if db.list_people_exist(reader) and db.get_person(reader, name) is None:
        err.print(
            f"agent-team: --as: nobody is called {name[:64]!r} (agent-team people list)",
            soft_wrap=True,
        )
        raise typer.Exit(2)
    return Actor(name, "cli", as_person=True)


@dataclass
class CliContext:
    db_override: Path | None
    config_file: Path | None
    _settings: Settings | None = field(default=None, init=False)

    def now(self) -> datetime:
        """The CLI's clock (moved only by the clock test hook)."""
        return load_hooks().clock()()

    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(self.config_file, db_path=self.db_override)
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(formatter_for(self._settings.log_format))
            logging.basicConfig(level=self._settings.log_level.upper(), handlers=[handler])
        return self._settings


def context_of(ctx: typer.Context) -> CliContext:
    obj = ctx.find_root().obj
    assert isinstance(obj, CliContext)
    return obj


def id_table(*headers: str, ids: tuple[str, ...] = (), title: str | None = None) -> Table:
    """A table whose id columns are never truncated (they are meant to be copied)."""
    table = Table(title=title)
    for header in headers:
        if header in ids:
            table.add_column(header, no_wrap=True, overflow="fold", min_width=12)
        else:
            table.add_column(header)
    return table


def print_json(value: Any) -> None:
    # UTF-8 as it is: an emoji in an answer stays an emoji, not a pair of \u escapes.
    sys.stdout.write(
        json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False) + "\n"
    )


@contextmanager
def open_ready(ctx: typer.Context) -> Iterator[db.Ledger]:
    """An existing, current ledger; never creates one as a side effect of reading."""
    settings = context_of(ctx).settings()
    db.assert_ready(settings.ledger_target)
    with db.open_ledger(settings.ledger_target, files_dir=settings.db_path.parent) as ledger:
        yield ledger


@contextmanager
def open_writable(ctx: typer.Context) -> Iterator[db.Ledger]:
    """The ledger for a command that writes, created or upgraded first."""
    settings = context_of(ctx).settings()
    db.init_db(settings.ledger_target)
    with db.open_ledger(settings.ledger_target, files_dir=settings.db_path.parent) as ledger:
        yield ledger


def when(stamp: str | None) -> str:
    """A ledger time as people read it, to the second: `2026-12-05 18:26:29 UTC`.

    The ledger keeps microseconds (`2026-12-05T18:26:29.233081Z`) for order;
    `--json` prints them as stored.
    """
    return utc_text(db.from_iso(stamp)) if stamp else ""


def deadline_cell(stamp: str | None, now: datetime, *, status: str = "open") -> str:
    """`in 2d 23h (Fri 14:00 UTC)` while a question is open; empty once it is answered
    (a deadline no one has to meet is noise). `--json` keeps the ISO stamp."""
    if not stamp or status != "open":
        return ""
    return deadline_text(db.from_iso(stamp), now)


def hint(text: str) -> str:
    """A text naming our commands, bare or in backticks, with the command that works here."""
    return localize(text, bare=True)


def age(stamp: str, now: datetime) -> str:
    """As the dashboard says it (`timefmt.age_text`)."""
    return age_text((now - db.from_iso(stamp)).total_seconds())
