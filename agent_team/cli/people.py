"""`agent-team people ...` and `agent-team key ...`: who may act, and their keys.

The local operator (who can read the ledger's file) is an owner; `--as NAME`
acts as that person instead, with their role checked like any surface's.
Bad input is one line naming the field and exit 2; a refused role exit 3.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Annotated, TypeVar

import typer

from agent_team import db
from agent_team.cli.support import (
    AsOption,
    acting_actor,
    context_of,
    err,
    open_ready,
    open_writable,
    out,
    print_json,
)
from agent_team.exceptions import LedgerInputError
from agent_team.requests.access import DashboardTokens
from agent_team.requests.actors import Actor
from agent_team.requests.people import PeopleRequests

__all__ = ["key_app", "people_app"]

people_app = typer.Typer(
    help="People and their roles: viewer < contributor < maintainer < owner.",
    no_args_is_help=True,
)
key_app = typer.Typer(
    help="A person's keys: shown once when made, stored only as a hash.", no_args_is_help=True
)

NameArg = Annotated[str, typer.Argument(help="The person's name.", show_default=False)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]

_T = TypeVar("_T")


@contextmanager
def _requests(ctx: typer.Context, acting_as: str | None) -> Iterator[_Acting]:
    with open_writable(ctx) as ledger:
        yield _Acting(ledger, acting_as)


class _Acting:
    """The ledger and who acts: the local operator (an owner), or `--as` a person."""

    def __init__(self, ledger: db.Ledger, acting_as: str | None) -> None:
        self.people = PeopleRequests(ledger)
        self.ledger = ledger
        self.actor: Actor = acting_actor(ledger, acting_as)

    def run(self, call: Callable[[], _T]) -> _T:
        try:
            return call()
        except LedgerInputError as exc:  # a refused role (audited) exits 3 in `main`
            _refuse(2, str(exc))
        raise AssertionError("unreachable")


def _refuse(code: int, message: str) -> None:
    err.print(f"agent-team: {message}", soft_wrap=True)
    sys.exit(code)


@people_app.command("add")
def people_add(
    ctx: typer.Context,
    name: NameArg,
    role: Annotated[str, typer.Option("--role", help="viewer, contributor, maintainer, owner.")],
    slack: Annotated[str | None, typer.Option("--slack", help="Their Slack user id.")] = None,
    github: Annotated[str | None, typer.Option("--github", help="Their GitHub login.")] = None,
    acting_as: AsOption = None,
) -> None:
    """Add a person with a role (and the identities Slack and GitHub know them by)."""
    with _requests(ctx, acting_as) as acting:
        person = acting.run(
            lambda: acting.people.add(
                name,
                role,
                slack_id=slack,
                github_login=github,
                actor=acting.actor,
            )
        )
    out.print(f"added {person.name} ({person.role})")


@people_app.command("list")
def people_list(ctx: typer.Context, as_json: JsonOpt = False, acting_as: AsOption = None) -> None:
    """Everyone, with their role, identities and live keys."""
    with open_ready(ctx) as ledger:
        acting_actor(ledger, acting_as)
        people = db.list_people(ledger)
        keys = db.list_keys(ledger)
    live = {
        p.name: sum(1 for k in keys if k.name == p.name and k.revoked_at is None) for p in people
    }
    used = {
        p.name: max(
            (k.last_used_at for k in keys if k.name == p.name and k.last_used_at), default=None
        )
        for p in people
    }
    if as_json:
        print_json(
            [asdict(p) | {"keys": live[p.name], "key_last_used_at": used[p.name]} for p in people]
        )
        return
    if not people:
        out.print("nobody yet: agent-team people add NAME --role owner")
        return
    for p in people:
        out.print(
            f"{p.name}  {p.role}  slack={p.slack_id or '-'}  github={p.github_login or '-'}  "
            f"keys={live[p.name]}  last used={(used[p.name] or '-')[:19].replace('T', ' ')}"
        )


@people_app.command("set-role")
def people_set_role(
    ctx: typer.Context,
    name: NameArg,
    role: Annotated[str, typer.Argument(help="viewer, contributor, maintainer, owner.")],
    acting_as: AsOption = None,
) -> None:
    """Change a person's role (the last owner keeps theirs)."""
    with _requests(ctx, acting_as) as acting:
        person = acting.run(lambda: acting.people.set_role(name, role, actor=acting.actor))
    out.print(f"{person.name} is now {person.role}")


@people_app.command("remove")
def people_remove(ctx: typer.Context, name: NameArg, acting_as: AsOption = None) -> None:
    """Remove a person; their keys stop working at once."""
    with _requests(ctx, acting_as) as acting:
        acting.run(lambda: acting.people.remove(name, actor=acting.actor))
    out.print(f"removed {name}")


@people_app.command("import")
def people_import(
    ctx: typer.Context,
    role: Annotated[
        str,
        typer.Option(
            "--role", help="The role of each token holder not yet a person (viewer ... owner)."
        ),
    ],
    acting_as: AsOption = None,
) -> None:
    """Move the named dashboard tokens of the environment or a file into the ledger.

    Each token becomes its holder's key (only its hash is stored, and the same token
    keeps working); a holder who is not a person yet is added with --role. Then remove
    AGENT_TEAM_DASHBOARD_TOKENS / _TOKENS_FILE. Running it again adds nothing twice.
    """
    tokens = DashboardTokens(context_of(ctx).settings()).outside_ledger()
    if not tokens:
        out.print(
            "no named dashboard tokens are configured (AGENT_TEAM_DASHBOARD_TOKENS or "
            "AGENT_TEAM_DASHBOARD_TOKENS_FILE): nothing to import"
        )
        return
    pairs = [(t.name, t.secret) for t in tokens if t.name is not None]
    with _requests(ctx, acting_as) as acting:
        done = acting.run(lambda: acting.people.import_tokens(pairs, role=role, actor=acting.actor))
        owners = [p for p in db.list_people(acting.ledger) if p.role == "owner"]
    for item in done:
        added = f"added as {item.added_as}; " if item.added_as else ""
        key = f"token stored as key {item.key_id}" if item.key_id else "token imported before"
        out.print(f"{item.name}: {added}{key}")
    out.print(
        "the same tokens now work from the ledger: remove AGENT_TEAM_DASHBOARD_TOKENS / "
        "AGENT_TEAM_DASHBOARD_TOKENS_FILE and restart the daemon"
    )
    if not owners:
        out.print("nobody is an owner yet: agent-team people set-role NAME owner")


def _show_key(key: str, name: str, verb: str) -> None:
    out.print(f"{verb} a key for {name}; it is shown this once, store it now:")
    out.print(key, soft_wrap=True, highlight=False)


@key_app.command("add")
def key_add(ctx: typer.Context, name: NameArg, acting_as: AsOption = None) -> None:
    """Make a key for a person (their other keys keep working)."""
    with _requests(ctx, acting_as) as acting:
        minted = acting.run(lambda: acting.people.add_key(name, actor=acting.actor))
    _show_key(minted.key, name, "made")


@key_app.command("rotate")
def key_rotate(ctx: typer.Context, name: NameArg, acting_as: AsOption = None) -> None:
    """Make a new key for a person and end their other keys at once."""
    with _requests(ctx, acting_as) as acting:
        minted = acting.run(lambda: acting.people.add_key(name, actor=acting.actor, rotate=True))
    _show_key(minted.key, name, "rotated:")


@key_app.command("revoke")
def key_revoke(ctx: typer.Context, name: NameArg, acting_as: AsOption = None) -> None:
    """End every key of a person at once."""
    with _requests(ctx, acting_as) as acting:
        count = acting.run(lambda: acting.people.revoke_keys(name, actor=acting.actor))
    out.print(f"revoked {count} key(s) of {name}")
