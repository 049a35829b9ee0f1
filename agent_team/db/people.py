"""`people` and `api_keys`: who may act, with which role, known by which identities.

A person has a name, a role (`task_model.Role`) and optionally the identities
other surfaces name them by: a Slack user id, a GitHub login (lower case).
Each identity belongs to one person (a partial unique index). A person's keys
are stored as a hash only (`requests.people` mints them and shows a key once);
`key_id` is the public part of a key, so a key is found by one lookup.

Every change keeps at least one owner when there was one: the last owner
cannot be demoted or removed (a team must never lock itself out).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from agent_team.db.audit import AuditEntry, append_audit
from agent_team.db.clock import to_iso, utc_now
from agent_team.db.ledger import Ledger, Reader, Transaction
from agent_team.db.records import fetch_record, fetch_records
from agent_team.exceptions import LedgerInputError
from agent_team.task_model import Role

__all__ = [
    "ApiKey",
    "Person",
    "add_key",
    "add_person",
    "any_live_key",
    "check_person_name",
    "check_role_name",
    "find_key",
    "get_key",
    "get_person",
    "list_keys",
    "list_people",
    "list_people_exist",
    "person_by_github",
    "person_by_slack",
    "remove_person",
    "revoke_keys",
    "set_role",
    "touch_key",
]

_NAME = re.compile(r"^[^\W_][\w.-]{0,63}$")
_SLACK_ID = re.compile(r"^[UW][A-Z0-9]{2,20}$")
_GITHUB_LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}$")


@dataclass(frozen=True, slots=True)
class Person:
    name: str
    role: str
    slack_id: str | None
    github_login: str | None
    created_at: str
    updated_at: str

    @property
    def rank(self) -> int:
        return Role(self.role).rank


@dataclass(frozen=True, slots=True)
class ApiKey:
    key_id: str
    name: str
    key_hash: str
    created_at: str
    last_used_at: str | None
    revoked_at: str | None


# Names the audit log already gives to what is not a person (the shared dashboard token,
# the daemon itself, the CLI without a user): a person so named would inherit their rows.
RESERVED_NAMES = frozenset({"token", "agent-team", "unknown", "nobody", "ci"})


def check_person_name(name: str) -> str:
    if not _NAME.match(name or ""):
        raise LedgerInputError(
            f"name: {name[:40]!r} is not a person's name (letters, digits, '.', '_', '-'; "
            "up to 64, starting with a letter or a digit)"
        )
    if name.lower() in RESERVED_NAMES:
        raise LedgerInputError(f"name: {name!r} is reserved (the audit log uses it); pick another")
    return name


def check_role_name(role: str) -> str:
    try:
        return Role(role).value
    except ValueError:
        allowed = ", ".join(r.value for r in Role)
        raise LedgerInputError(f"role: {role[:40]!r} is not a role ({allowed})") from None


def _slack(slack_id: str | None) -> str | None:
    if slack_id is None:
        return None
    if not _SLACK_ID.match(slack_id):
        raise LedgerInputError(f"slack: {slack_id[:40]!r} is not a Slack user id (U0123ABC)")
    return slack_id


def _github(login: str | None) -> str | None:
    if login is None:
        return None
    if not _GITHUB_LOGIN.match(login):
        raise LedgerInputError(f"github: {login[:40]!r} is not a GitHub login")
    return login.lower()


def _taken(tx: Transaction, column: str, value: str | None, name: str) -> None:
    if value is None:
        return
    row = tx.execute(
        f"SELECT name FROM people WHERE {column} = ? AND name <> ?", (value, name)
    ).fetchone()
    if row is not None:
        field = {"slack_id": "slack", "github_login": "github"}[column]
        raise LedgerInputError(f"{field}: {value} already belongs to {row[0]}")


def _owners(tx: Transaction) -> int:
    row = tx.execute("SELECT count(*) FROM people WHERE role = 'owner'").fetchone()
    return int(row[0])


def add_person(
    ledger: Ledger,
    *,
    name: str,
    role: str,
    slack_id: str | None = None,
    github_login: str | None = None,
    audit: AuditEntry | None = None,
    at: datetime | None = None,
) -> Person:
    """Add a person (and the audit row, one transaction).

    Raises:
        LedgerInputError: a bad name, role, Slack id or login; a name, Slack id or
            login someone has already (the message names the field).
    """
    check_person_name(name)
    values = (name, check_role_name(role), _slack(slack_id), _github(github_login))
    when = to_iso(at or utc_now())

    def work(tx: Transaction) -> None:
        if tx.execute("SELECT 1 FROM people WHERE name = ?", (name,)).fetchone():
            raise LedgerInputError(f"name: {name} is already a person")
        _taken(tx, "slack_id", values[2], name)
        _taken(tx, "github_login", values[3], name)
        tx.execute(
            "INSERT INTO people (name, role, slack_id, github_login, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (*values, when, when),
        )
        if audit is not None:
            append_audit(tx, audit)

    ledger.write(work)
    person = get_person(ledger, name)
    assert person is not None  # just written
    return person


def set_role(ledger: Ledger, name: str, role: str, *, audit: AuditEntry | None = None) -> Person:
    """Change a person's role; the last owner keeps theirs.

    Raises:
        LedgerInputError: no such person, a bad role, or the last owner demoted.
    """
    new = check_role_name(role)

    def work(tx: Transaction) -> None:
        row = tx.execute("SELECT role FROM people WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise LedgerInputError(f"name: nobody is called {name[:64]!r}")
        if row[0] == "owner" and new != "owner" and _owners(tx) == 1:
            raise LedgerInputError(f"role: {name} is the last owner; make another owner first")
        tx.execute(
            "UPDATE people SET role = ?, updated_at = ? WHERE name = ?",
            (new, to_iso(utc_now()), name),
        )
        if audit is not None:
            append_audit(tx, audit)

    ledger.write(work)
    person = get_person(ledger, name)
    assert person is not None
    return person


def remove_person(ledger: Ledger, name: str, *, audit: AuditEntry | None = None) -> None:
    """Remove a person and revoke their keys; the last owner stays.

    Raises:
        LedgerInputError: no such person, or the last owner.
    """
    when = to_iso(utc_now())

    def work(tx: Transaction) -> None:
        row = tx.execute("SELECT role FROM people WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise LedgerInputError(f"name: nobody is called {name[:64]!r}")
        if row[0] == "owner" and _owners(tx) == 1:
            raise LedgerInputError(f"name: {name} is the last owner; make another owner first")
        tx.execute("DELETE FROM people WHERE name = ?", (name,))
        tx.execute(
            "UPDATE api_keys SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL",
            (when, name),
        )
        if audit is not None:
            append_audit(tx, audit)

    ledger.write(work)


def get_person(reader: Reader, name: str) -> Person | None:
    return fetch_record(reader, Person, "SELECT * FROM people WHERE name = ?", (name,))


def person_by_slack(reader: Reader, slack_id: str) -> Person | None:
    return fetch_record(reader, Person, "SELECT * FROM people WHERE slack_id = ?", (slack_id,))


def person_by_github(reader: Reader, login: str) -> Person | None:
    return fetch_record(
        reader, Person, "SELECT * FROM people WHERE github_login = ?", (login.lower(),)
    )


def list_people(reader: Reader) -> list[Person]:
    return fetch_records(reader, Person, "SELECT * FROM people ORDER BY name")


def add_key(
    ledger: Ledger,
    *,
    name: str,
    key_id: str,
    key_hash: str,
    revoke_others: bool = False,
    audit: AuditEntry | None = None,
) -> ApiKey:
    """Store a new key's hash for a person; `revoke_others` (a rotation) ends their other keys
    in the same transaction.

    Raises:
        LedgerInputError: no such person, or a malformed id or hash.
    """
    if not re.fullmatch(r"[a-z0-9]{8,32}", key_id) or not re.fullmatch(r"[0-9a-f]{64}", key_hash):
        raise LedgerInputError("a key needs an id of 8-32 [a-z0-9] and a SHA-256 hex hash")
    when = to_iso(utc_now())

    def work(tx: Transaction) -> None:
        if tx.execute("SELECT 1 FROM people WHERE name = ?", (name,)).fetchone() is None:
            raise LedgerInputError(f"name: nobody is called {name[:64]!r}; add them first")
        if revoke_others:
            tx.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL",
                (when, name),
            )
        tx.execute(
            "INSERT INTO api_keys (key_id, name, key_hash, created_at) VALUES (?, ?, ?, ?)",
            (key_id, name, key_hash, when),
        )
        if audit is not None:
            append_audit(tx, audit)

    ledger.write(work)
    found = fetch_record(ledger, ApiKey, "SELECT * FROM api_keys WHERE key_id = ?", (key_id,))
    assert found is not None
    return found


def revoke_keys(ledger: Ledger, name: str, *, audit: AuditEntry | None = None) -> int:
    """End every live key of a person at once; how many there were."""

    def work(tx: Transaction) -> int:
        count = tx.execute(
            "UPDATE api_keys SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL",
            (to_iso(utc_now()), name),
        ).rowcount
        if audit is not None:
            append_audit(tx, audit)
        return int(count)

    return ledger.write(work)


def get_key(reader: Reader, key_id: str) -> ApiKey | None:
    """A key's row by its id, live or revoked."""
    return fetch_record(reader, ApiKey, "SELECT * FROM api_keys WHERE key_id = ?", (key_id,))


def find_key(reader: Reader, key_id: str) -> tuple[ApiKey, Person] | None:
    """A live key and its person by the key's public id; None when unknown or revoked."""
    key = fetch_record(
        reader,
        ApiKey,
        "SELECT * FROM api_keys WHERE key_id = ? AND revoked_at IS NULL",
        (key_id,),
    )
    if key is None:
        return None
    person = get_person(reader, key.name)
    return None if person is None else (key, person)


def list_people_exist(reader: Reader) -> bool:
    """Whether any person is set up (roles apply only then)."""
    return reader.fetch_one("SELECT 1 AS x FROM people LIMIT 1") is not None


def any_live_key(reader: Reader) -> bool:
    return (
        reader.fetch_one("SELECT 1 AS x FROM api_keys WHERE revoked_at IS NULL LIMIT 1") is not None
    )


def list_keys(reader: Reader, name: str | None = None) -> list[ApiKey]:
    if name is None:
        return fetch_records(reader, ApiKey, "SELECT * FROM api_keys ORDER BY name, created_at")
    return fetch_records(
        reader, ApiKey, "SELECT * FROM api_keys WHERE name = ? ORDER BY created_at", (name,)
    )


def touch_key(ledger: Ledger, key_id: str, at: datetime) -> None:
    """Note a key's last use (history: no flush of its own)."""
    ledger.write(
        lambda tx: tx.execute(
            "UPDATE api_keys SET last_used_at = ? WHERE key_id = ?", (to_iso(at), key_id)
        ),
        flush=False,
    )
