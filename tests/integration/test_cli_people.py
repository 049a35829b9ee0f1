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
        # atk_<12-character id>_<secret>; the secret may hold "_" itself (URL-safe base64)
        secret = key.split("_", 2)[2]
        assert len(secret) == 43
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


LEGACY = {"AGENT_TEAM_DASHBOARD_TOKENS": "ada:ada-legacy-token-1f9e,bo:bo-legacy-token-77c2"}


def imports(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`people import` with two named tokens configured in the environment."""
    return run_cli(home, "--db", str(home / "agent-team.db"), "people", "import", *args, env=LEGACY)


def test_people_import_moves_named_tokens_into_the_ledger_once(home: Path) -> None:
    ok(home, "people", "add", "ada", "--role", "owner")
    missing = cli(home, "people", "import")  # typer's usage error
    assert missing.returncode == 2 and "--role" in missing.stderr
    done = imports(home, "--role", "viewer")
    assert done.returncode == 0, done.stderr
    assert "ada: token stored as key" in done.stdout  # ada existed: keeps her role
    assert "bo: added as viewer; token stored as key" in done.stdout
    again = imports(home, "--role", "viewer")
    assert (
        "ada: token imported before" in again.stdout and "bo: token imported before" in again.stdout
    )
    path = home / "agent-team.db"
    with db.open_ledger(path) as ledger:
        people = {p.name: p.role for p in db.list_people(ledger)}
        assert people == {"ada": "owner", "bo": "viewer"}
        assert len(db.list_keys(ledger)) == 2  # nothing stored twice
        # The same tokens work from the ledger, and nothing else does.
        for name, token in (("ada", "ada-legacy-token-1f9e"), ("bo", "bo-legacy-token-77c2")):
            hit = verify_key(ledger, token)
            assert hit is not None and hit[1].name == name
        assert verify_key(ledger, "ada-legacy-token-1f9f") is None
    raw = b"".join(p.read_bytes() for p in home.glob("agent-team.db*"))
    assert b"legacy-token" not in raw
    # A viewer may not import.
    refused = imports(home, "--role", "viewer", "--as", "bo")
    assert refused.returncode == 3, refused.stderr


def test_people_import_with_nothing_configured_says_so(home: Path) -> None:
    assert "nothing to import" in ok(home, "people", "import", "--role", "viewer")


def test_a_bad_role_for_import_stores_nothing(home: Path) -> None:
    done = imports(home, "--role", "czar")
    line = assert_one_line_error(done, 2)
    assert line.startswith("agent-team: role:"), line
    with db.open_ledger(home / "agent-team.db") as ledger:
        assert db.list_people(ledger) == [] and db.list_keys(ledger) == []


def test_notes_on_a_task_follow_the_role_table_and_show(home: Path) -> None:
    ok(home, "people", "add", "ada", "--role", "owner")
    ok(home, "people", "add", "cy", "--role", "contributor")
    ok(home, "people", "add", "vi", "--role", "viewer")
    with db.open_ledger(home / "agent-team.db") as ledger:
        assert db.create_task(ledger, task_id="t1", kind="code", title="Note me")
    assert "noted on t1" in ok(
        home, "note", "t1", "the", "staging", "DB", "is", "down", "--as", "cy"
    )
    line = assert_one_line_error(cli(home, "note", "t1", "hello", "--as", "vi"), 3)
    assert "note needs contributor or above" in line
    assert_one_line_error(cli(home, "note", "t1", "   ", "--as", "cy"), 2)
    assert_one_line_error(cli(home, "note", "t1", "x" * 4001), 2)
    assert_one_line_error(cli(home, "note", "nope", "hello"), 2)  # no such task: bad input
    shown = ok(home, "show", "t1")
    assert "cy via cli:" in shown and "the staging DB is down" in shown
    report = json.loads(ok(home, "show", "t1", "--json"))
    assert [(n["who"], n["text"]) for n in report["notes"]] == [("cy", "the staging DB is down")]


def test_the_local_operator_stays_an_owner_when_a_person_shares_their_user_name(
    home: Path,
) -> None:
    me = {"USER": "ops", "LOGNAME": "ops"}  # getpass.getuser() reads these first
    db_args = ("--db", str(home / "agent-team.db"))
    added = run_cli(home, *db_args, "people", "add", "ops", "--role", "viewer", env=me)
    assert added.returncode == 0, added.stderr
    again = run_cli(home, *db_args, "people", "add", "cy", "--role", "viewer", env=me)
    assert again.returncode == 0, again.stderr  # the operator, not the viewer "ops"
    as_ops = run_cli(home, *db_args, "people", "add", "di", "--role", "viewer", "--as", "ops")
    assert as_ops.returncode == 3, as_ops.stderr  # --as names the person: their role
