"""The command line, for every role: `--as NAME` acts as that person, with their role.

The CLI runs in this process through its console entry (`cli.main.main`, which
turns a refusal into one line and exit 3), against a ledger shared by the
module; each attempt acts on a task, question or automation of its own. The
local operator (no `--as`) is an owner; `--as` naming nobody exits 2, untried.
(The installed console script's exit codes are tried as a process in
`tests/integration/test_cli_people.py`.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent_team import db
from agent_team.cli.main import main
from agent_team.requests.actors import cli_actor
from agent_team.task_model import Role
from tests.integration.roles.conftest import (
    ANSWERS,
    BODY,
    OFFERED,
    WORK_TABLES,
    Team,
    Who,
    automation,
    cases,
    expired_question,
    failed_task,
    fresh,
    judged,
    module_env,
    open_question,
    status_of,
    waiting_task,
)
from tests.ledger_rows import stored_rows


@dataclass
class Cli:
    team: Team
    ledger: db.Ledger
    path: Path


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cli]:
    home = tmp_path_factory.mktemp("roles-cli")
    with module_env(home):
        path = home / "agent-team.db"
        db.init_db(path)
        with db.open_ledger(path) as ledger:
            yield Cli(Team(ledger), ledger, path)


@dataclass(frozen=True)
class Output:
    code: int
    out: str
    err: str


def run(capsys: pytest.CaptureFixture[str], path: Path, *args: str) -> Output:
    """`agent-team --db PATH ARGS...` in this process: its exit code and what it printed."""
    capsys.readouterr()
    try:
        main(["--db", str(path), *args])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    printed = capsys.readouterr()
    return Output(code, printed.out, printed.err)


@dataclass(frozen=True)
class Attempt:
    args: tuple[str, ...]
    done: str | None  # the audit action a change writes under the actor's name
    check: Callable[[bool, Output], None]  # what the ledger and the output show after it


def attempt(op: str, ledger: db.Ledger, who: str) -> Attempt:
    """What `op` runs, on something of its own, and how to tell it happened (or not)."""
    if op == "submit":
        title = fresh("Submitted on the command line ")

        def submitted(allowed: bool, output: Output) -> None:
            titles = [task.title for task in db.list_tasks(ledger, limit=1000)]
            assert (title in titles) is allowed

        return Attempt(("submit", "--title", title), "submit", submitted)
    if op.startswith("answer "):
        kind = OFFERED["cli"][op].removeprefix("answer:")
        question = open_question(ledger, kind)

        def answered(allowed: bool, output: Output) -> None:
            found = db.get_question(ledger, question.question_id)
            assert found is not None
            if allowed:
                assert (found.status, found.answered_via) == ("answered", f"cli:{who}")
            else:
                assert (found.status, found.answer_json) == ("open", None)

        words = ANSWERS[kind].split()
        return Attempt(("answer", question.question_id, *words), "answer", answered)
    if op == "cancel":
        task_id = waiting_task(ledger, phase="plan_review")

        def cancelled(allowed: bool, output: Output) -> None:
            kinds = [command.kind for command in db.list_commands(ledger, task_id=task_id)]
            assert kinds == (["cancel"] if allowed else [])

        return Attempt(("cancel", task_id), "cancel", cancelled)
    if op == "retry":
        task_id = failed_task(ledger)

        def retried(allowed: bool, output: Output) -> None:
            task = db.get_task(ledger, task_id)
            assert task is not None and task.status == ("queued" if allowed else "failed")

        return Attempt(("retry", task_id), "retry", retried)
    if op == "reopen":
        question = expired_question(ledger)

        def reopened(allowed: bool, output: Output) -> None:
            assert status_of(ledger, question.question_id) == ("open" if allowed else "expired")

        return Attempt(("reopen", question.question_id), "reopen", reopened)
    if op == "automation add":
        name = fresh("made-on-the-cli-")

        def added(allowed: bool, output: Output) -> None:
            made = db.get_automation(ledger, name)
            if allowed:
                assert made is not None and made.created_by == f"cli:{who}"
            else:
                assert made is None

        args = ("automation", "add", name, "--title", "Review bumps", "--body", BODY)
        return Attempt((*args, "--every", "1d"), "automation.create", added)
    if op.startswith("automation "):
        verb = op.removeprefix("automation ")
        was = automation(ledger, status="paused" if verb == "resume" else "active")
        changed = {
            "update": {"title": "Review the bumps"},
            "pause": {"status": "paused"},
            "resume": {"status": "active"},
            "cancel": {"status": "cancelled"},
            "run-now": {},
        }[verb]

        def automation_after(allowed: bool, output: Output) -> None:
            now = db.get_automation(ledger, was.automation_id)
            assert now is not None
            if allowed:
                assert {field: getattr(now, field) for field in changed} == changed
            else:
                assert now == was
            runs = db.list_runs(ledger, was.automation_id)
            assert len(runs) == (1 if allowed and verb == "run-now" else 0)

        extra = ("--title", "Review the bumps") if verb == "update" else ()
        done = f"automation.{verb.replace('-', '_')}"
        return Attempt(("automation", verb, was.name, *extra), done, automation_after)
    if op == "audit":

        def listed(allowed: bool, output: Output) -> None:
            assert ('"action"' in output.out) is allowed

        return Attempt(("audit", "--json"), None, listed)
    if op == "people add":
        name = fresh("newcomer-")

        def person_added(allowed: bool, output: Output) -> None:
            assert (db.get_person(ledger, name) is not None) is allowed

        return Attempt(("people", "add", name, "--role", "viewer"), "person_add", person_added)
    assert op == "key add", op
    keys_before = len(db.list_keys(ledger, "vi"))

    def key_added(allowed: bool, output: Output) -> None:
        assert len(db.list_keys(ledger, "vi")) == keys_before + int(allowed)
        assert ("atk_" in output.out) is allowed

    return Attempt(("key", "add", "vi"), "key_add", key_added)


@pytest.mark.parametrize(("op", "action", "role"), cases("cli"))
def test_acting_as_each_person(
    cli: Cli,
    isolated_env: Path,
    capsys: pytest.CaptureFixture[str],
    op: str,
    action: str,
    role: Role,
) -> None:
    member = cli.team[role]
    tried = attempt(op, cli.ledger, member.name)
    with judged(cli.ledger, Who(member.name, "cli", role), action, done=tried.done) as verdict:
        output = run(capsys, cli.path, *tried.args, "--as", member.name)
        if verdict.allowed:
            assert output.code == 0, output.err
        else:
            assert output.code == 3, (output.out, output.err)
            said = f"{member.name} has the {role.value} role; {action} needs {verdict.needed.value}"
            assert output.err.strip().splitlines() == [f"agent-team: {said} or above"]
        tried.check(verdict.allowed, output)


@pytest.mark.parametrize("op", OFFERED["cli"])
def test_the_local_operator_may_do_everything(
    cli: Cli, isolated_env: Path, capsys: pytest.CaptureFixture[str], op: str
) -> None:
    operator = cli_actor()
    assert db.get_person(cli.ledger, operator.name) is None, "the operator is nobody of the team"
    tried = attempt(op, cli.ledger, operator.name)
    who = Who(operator.name, "cli", Role.OWNER)
    with judged(cli.ledger, who, OFFERED["cli"][op], done=tried.done) as verdict:
        output = run(capsys, cli.path, *tried.args)
        assert verdict.allowed and output.code == 0, output.err
        tried.check(True, output)


@pytest.mark.parametrize("op", OFFERED["cli"])
def test_as_naming_nobody_exits_2_and_tries_nothing(
    cli: Cli, isolated_env: Path, capsys: pytest.CaptureFixture[str], op: str
) -> None:
    tried = attempt(op, cli.ledger, "nobody")
    before = stored_rows(cli.ledger, (*WORK_TABLES, "audit_log", "api_keys"))
    output = run(capsys, cli.path, *tried.args, "--as", "nobody")
    assert output.code == 2, (output.out, output.err)
    assert output.err.strip().splitlines() == [
        "agent-team: --as: nobody is called 'nobody' (agent-team people list)"
    ]
    assert stored_rows(cli.ledger, (*WORK_TABLES, "audit_log", "api_keys")) == before
    tried.check(False, output)
