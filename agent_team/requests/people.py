"""People and their keys, as requests: add, change a role, remove; mint, rotate, revoke a key.

A key is `atk_<key id>_<secret>`: the id (public, 12 characters) finds the
row, the secret (32 random bytes) proves it. The ledger keeps only the
SHA-256 of the whole key, so a copy of the database or its backups gives no
key away; the key is shown once, when it is made. Rotating revokes the
person's other keys in the same transaction, so a leaked key stops working
the moment its replacement exists. Every change is audited with who asked.

A dashboard token from the environment or a file (before people existed) can
be imported as its holder's key (`agent-team people import`): only its hash is
stored, under an id taken from that hash (the token carries none), so the
same token keeps working once the setting is removed and nobody needs a new one.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from agent_team import db
from agent_team.exceptions import LedgerInputError
from agent_team.requests.actors import Actor
from agent_team.requests.roles import authorize

__all__ = [
    "KEY_PREFIX",
    "Imported",
    "MintedKey",
    "PeopleRequests",
    "hash_key",
    "imported_key_id",
    "verify_key",
]

KEY_PREFIX = "atk_"
_KEY = re.compile(r"^atk_([a-z0-9]{12})_([A-Za-z0-9_-]{43})$")


@dataclass(frozen=True)
class MintedKey:
    """A new key: shown to the person once, never stored."""

    name: str
    key_id: str
    key: str


@dataclass(frozen=True)
class Imported:
    """What `import_tokens` did for one named token."""

    name: str
    added_as: str | None  # the role a new person was given; None: they existed
    key_id: str | None  # None: this token was imported before (and maybe revoked since)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def imported_key_id(token: str) -> str:
    """Where an imported token's row is found again: its id comes from its own hash."""
    return hash_key(token.strip())[:12]


def _mint(name: str) -> MintedKey:
    key_id = "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(12))
    return MintedKey(name, key_id, f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}")


def verify_key(ledger: db.Reader, presented: str) -> tuple[db.ApiKey, db.Person] | None:
    """The live key and the person a presented key belongs to; None for anything else
    (never says why)."""
    found = _KEY.match(presented.strip())
    key_id = found.group(1) if found else imported_key_id(presented)
    hit = db.find_key(ledger, key_id)
    if hit is None:
        return None
    key, _person = hit
    if not hmac.compare_digest(hash_key(presented.strip()), key.key_hash):
        return None
    return hit


class PeopleRequests:
    """The people and key requests of every surface (the CLI today), each checked against
    the role table like every request (`roles.authorize`: the CLI's local operator is an
    owner, `--as` acts with that person's role)."""

    def __init__(self, ledger: db.Ledger) -> None:
        self.ledger = ledger

    def add(
        self,
        name: str,
        role: str,
        *,
        slack_id: str | None = None,
        github_login: str | None = None,
        actor: Actor,
    ) -> db.Person:
        authorize(self.ledger, actor, "people", name)
        return db.add_person(
            self.ledger,
            name=name,
            role=role,
            slack_id=slack_id,
            github_login=github_login,
            audit=actor.entry("person_add", name, {"role": role}),
        )

    def set_role(self, name: str, role: str, *, actor: Actor) -> db.Person:
        authorize(self.ledger, actor, "people", name)
        return db.set_role(
            self.ledger, name, role, audit=actor.entry("person_role", name, {"role": role})
        )

    def remove(self, name: str, *, actor: Actor) -> None:
        authorize(self.ledger, actor, "people", name)
        db.remove_person(self.ledger, name, audit=actor.entry("person_remove", name))

    def add_key(self, name: str, *, actor: Actor, rotate: bool = False) -> MintedKey:
        """Mint a key for `name` (with `rotate`, their other keys end at once)."""
        authorize(self.ledger, actor, "keys", name)
        minted = _mint(name)
        db.add_key(
            self.ledger,
            name=name,
            key_id=minted.key_id,
            key_hash=hash_key(minted.key),
            revoke_others=rotate,
            audit=actor.entry(
                "key_rotate" if rotate else "key_add", name, {"key_id": minted.key_id}
            ),
        )
        return minted

    def import_tokens(
        self, tokens: Sequence[tuple[str, str]], *, role: str, actor: Actor
    ) -> list[Imported]:
        """Each named token (name, token) becomes its holder's key; a holder nobody is yet
        is added with `role`. Run again, it adds nothing twice (each step is its own
        transaction and finds what an earlier run stored)."""
        authorize(self.ledger, actor, "people", "import")
        authorize(self.ledger, actor, "keys", "import")
        db.check_role_name(role)
        done: list[Imported] = []
        for name, token in tokens:
            key_id = imported_key_id(token)
            if db.get_key(self.ledger, key_id) is not None:  # imported before (maybe revoked)
                done.append(Imported(name, None, None))
                continue
            added = None
            if db.get_person(self.ledger, name) is None:
                db.add_person(
                    self.ledger,
                    name=name,
                    role=role,
                    audit=actor.entry("person_add", name, {"role": role, "from": "token"}),
                )
                added = role
            db.add_key(
                self.ledger,
                name=name,
                key_id=key_id,
                key_hash=hash_key(token.strip()),
                audit=actor.entry("key_import", name, {"key_id": key_id}),
            )
            done.append(Imported(name, added, key_id))
        return done

    def revoke_keys(self, name: str, *, actor: Actor) -> int:
        authorize(self.ledger, actor, "keys", name)
        if db.get_person(self.ledger, name) is None:
            raise LedgerInputError(f"name: nobody is called {name[:64]!r}")
        return db.revoke_keys(self.ledger, name, audit=actor.entry("key_revoke", name))
