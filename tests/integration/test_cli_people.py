"""`agent-team people` and `agent-team key` as subprocesses: roles, identities, keys kept hashed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from agent_team import db
from agent_team.requests.people import verify_key
from tests.integration.test_cli import assert_one_line_error, run_cli


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(home, "--db", str(home / "agent-team.db"), *args)


def ok(home: Path, *args: str) -> str:
    done = cli(home, *args)
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done.stdout


def minted(output: str) -> str:
    (key,) = [line.strip() for line in output.splitlines() if line.strip().startswith("atk_")]
    return key


def test_people_with_roles_and_identities(home: Path) -> None:
    assert "added ada (owner)" in ok(home, "people", "add", "ada", "--role", "owner")
    ok(home, "people", "add", "bo", "--role", "contributor", "--slack", "U0BO", "--github", "Bo-X")
    people = json.loads(ok(home, "people", "list", "--json"))
    assert [(p["name"], p["role"], p["slack_id"], p["github_login"]) for p in people] == [
        ("ada", "owner", None, None),
        ("bo", "contributor", "U0BO", "bo-x"),
    ]
    assert "bo is now maintainer" in ok(home, "people", "set-role", "bo", "maintainer")


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("people", "add", "ada", "--role", "owner"), "name"),
        (("people", "add", "cy", "--role", "emperor"), "role"),
        (("people", "add", "cy", "--role", "viewer", "--slack", "U0BO"), "slack"),
        (("people", "add", "cy", "--role", "viewer", "--github", "BO-x"), "github"),
        (("people", "add", "cy", "--role", "viewer", "--slack", "not-an-id"), "slack"),
        (("people", "add", "no spaces", "--role", "viewer"), "name"),
        (("people", "set-role", "ada", "viewer"), "role"),
        (("people", "remove", "ada"), "name"),
        (("key", "add", "nobody"), "name"),
    ],
)
def test_bad_input_is_one_line_naming_the_field_and_stores_nothing(
    home: Path, args: tuple[str, ...], field: str
) -> None:
    ok(home, "people", "add", "ada", "--role", "owner")
    ok(home, "people", "add", "bo", "--role", "viewer", "--slack", "U0BO", "--github", "bo-x")
    before = ok(home, "people", "list", "--json")
    line = assert_one_line_error(cli(home, *args), 2)
    assert line.startswith(f"agent-team: {field}:"), line
    assert ok(home, "people", "list", "--json") == before


def test_keys_are_shown_once_stored_hashed_and_end_on_rotate_and_revoke(home: Path) -> None:
    ok(home, "people", "add", "ada", "--role", "owner")
    first = minted(ok(home, "key", "add", "ada"))
    second = minted(ok(home, "key", "add", "ada"))
    path = home / "agent-team.db"
    with db.open_ledger(path) as ledger:
        hit = verify_key(ledger, first)
        assert hit is not None and hit[1].name == "ada"
        assert verify_key(ledger, second) is not None
        assert verify_key(ledger, first[:-1] + ("A" if first[-1] != "A" else "B")) is None
        assert verify_key(ledger, "atk_nothing") is None
    # Nowhere in the database file, its WAL, or a dump of it.
    dump = subprocess.run(
        ["sqlite3", str(path), ".dump"], capture_output=True, text=True, check=False
    ).stdout
    raw = b"".join(p.read_bytes() for p in home.glob("agent-team.db*"))
    for key in (first, second):
        secret = key.rsplit("_", 1)[1]
        assert secret.encode() not in raw and secret not in dump

    rotated = minted(ok(home, "key", "rotate", "ada"))
    with db.open_ledger(path) as ledger:
        assert verify_key(ledger, first) is None and verify_key(ledger, second) is None
        assert verify_key(ledger, rotated) is not None
    assert "revoked 1 key(s) of ada" in ok(home, "key", "revoke", "ada")
    with db.open_ledger(path) as ledger:
        assert verify_key(ledger, rotated) is None
        actions = [row.action for row in db.list_audit(ledger)]
    assert actions.count("key_add") == 2 and "key_rotate" in actions and "key_revoke" in actions


def test_acting_as_a_person_checks_their_role_and_audits_a_refusal(home: Path) -> None:
    ok(home, "people", "add", "ada", "--role", "owner")
    ok(home, "people", "add", "bo", "--role", "maintainer")
    line = assert_one_line_error(
        cli(home, "people", "add", "cy", "--role", "owner", "--as", "bo"), 3
    )
    assert "bo has the maintainer role; people needs owner or above" in line
    assert_one_line_error(cli(home, "key", "add", "ada", "--as", "bo"), 3)
    assert "added cy" in ok(home, "people", "add", "cy", "--role", "viewer", "--as", "ada")
    assert_one_line_error(cli(home, "people", "list", "--as", "nobody"), 2)
    with db.open_ledger(home / "agent-team.db") as ledger:
        refused = [r for r in db.list_audit(ledger) if r.action == "refused"]
        assert [(r.actor, r.via) for r in refused] == [("bo", "cli"), ("bo", "cli")]
        assert [p.name for p in db.list_people(ledger)] == ["ada", "bo", "cy"]


def test_answering_as_a_person_follows_their_role(home: Path) -> None:
    ok(home, "people", "add", "ada", "--role", "owner")
    ok(home, "people", "add", "cy", "--role", "contributor")
    with db.open_ledger(home / "agent-team.db") as ledger:
        assert db.create_task(ledger, task_id="t1", kind="code", title="Plan me")
        db.ensure_question(
            ledger,
            question_id="t1:q1",
            thread_id="t1",
            turn=1,
            kind="plan_decision",
            transport="local",
            deadline_at=None,
            payload_json='{"text": "Review the plan"}',
        )
    line = assert_one_line_error(cli(home, "answer", "t1:q1", "approve", "--as", "cy"), 3)
    assert "answer:plan_decision needs maintainer or above" in line
    ok(home, "answer", "t1:q1", "approve")  # the local operator is an owner
    with db.open_ledger(home / "agent-team.db") as ledger:
        question = db.get_question(ledger, "t1:q1")
        assert question is not None and question.status == "answered"
        refused = [r for r in db.list_audit(ledger) if r.action == "refused"]
        assert [(r.actor, r.via, r.target) for r in refused] == [("cy", "cli", "t1:q1")]
