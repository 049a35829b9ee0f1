"""The pipeline end to end through the CLI: submit, tick, answer, tick ... done."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import LONG_BODY, SHORT_BODY, Cli

DAY_S = 86400


def journey(report: dict[str, object]) -> list[tuple[str, str]]:
    return [(t["to_phase"], t["status"]) for t in report["transitions"]]  # type: ignore[attr-defined]


# The offline builder records on the task's branch of the default repository, with no
# worktree: what was built is read from the branch.
def _repo(cli: Cli) -> str:
    return str(cli.home / "state" / "repos" / "default")


def build_commits(cli: Cli, task_id: str) -> list[str]:
    """Commits on the task's branch that record a build (one per approved plan)."""
    fmt = "--format=%H %(trailers:key=Agent-Team-Plan,valueonly)"
    log = subprocess.run(
        ["git", "-C", _repo(cli), "log", fmt, f"refs/heads/agent-team/{task_id}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line for line in log.splitlines() if line.split(" ", 1)[-1].strip()]


def built_document(cli: Cli, task_id: str) -> str:
    """The plan document the offline builder wrote, as the task's branch holds it."""
    path = f"refs/heads/agent-team/{task_id}:docs/agent-team/{task_id}.md"
    return subprocess.run(
        ["git", "-C", _repo(cli), "show", path], capture_output=True, text=True, check=True
    ).stdout


def has_branch(cli: Cli, task_id: str) -> bool:
    ref = f"refs/heads/agent-team/{task_id}"
    verify = ["git", "-C", _repo(cli), "rev-parse", "--verify", "--quiet", ref]
    return subprocess.run(verify, capture_output=True, check=False).returncode == 0


def assert_one_open_row_at_most(report: dict[str, object]) -> None:
    rows = report["transitions"]
    assert sum(1 for t in rows if t["exited_at"] is None) <= 1  # type: ignore[attr-defined]


@pytest.mark.slow
def test_approve_path_builds_once_and_finishes(cli: Cli) -> None:
    task_id = cli.submit("Remember the email", LONG_BODY)
    cli.tick()
    report = cli.show(task_id)
    assert report["task"]["status"] == "waiting"
    question = cli.open_question(task_id)
    assert question["kind"] == "plan_decision"
    assert "Store the email in a cookie" in question["payload"]["plan_markdown"]

    cli.answer(question["question_id"], "approve looks right")
    cli.tick()
    report = cli.show(task_id)
    assert report["task"]["status"] == "done"
    assert report["task"]["phase"] == "done"
    assert journey(report) == [
        ("intake", "running"),
        ("clarify", "running"),
        ("plan", "running"),
        ("plan_review", "running"),
        ("plan_review", "waiting"),
        ("plan_review", "running"),
        ("build", "running"),
        ("done", "done"),
    ]
    assert all(t["exited_at"] for t in report["transitions"])
    assert report["questions"][0]["answer"] == {"decision": "approve", "text": "looks right"}
    assert report["questions"][0]["answered_via"] == "cli:tester"
    assert set(report["cost_by_stage"]) == {"clarify", "plan"}
    assert report["total_tokens"] > 0
    assert len(build_commits(cli, task_id)) == 1
    assert "Prefill the email field" in built_document(cli, task_id)
    assert not (cli.home / "state" / "worktrees" / task_id).exists()


@pytest.mark.slow
def test_revise_loop_asks_again_with_a_new_plan(cli: Cli) -> None:
    task_id = cli.submit("Remember the email", LONG_BODY)
    cli.tick()
    first = cli.open_question(task_id)
    cli.answer(first["question_id"], "revise add a rollback step")
    cli.tick()
    second = cli.open_question(task_id)
    assert second["question_id"] != first["question_id"]
    assert second["turn"] == first["turn"] + 1
    assert "Address review feedback: add a rollback step" in second["payload"]["plan_markdown"]
    cli.answer(second["question_id"], "lgtm")
    cli.tick()
    report = cli.show(task_id)
    assert report["task"]["status"] == "done"
    assert [q["status"] for q in report["questions"]] == ["answered", "answered"]
    assert sum(u["calls"] for u in report["usage"] if u["stage"] == "plan") == 2
    assert len(build_commits(cli, task_id)) == 1


@pytest.mark.slow
def test_edit_path_builds_the_humans_plan(cli: Cli) -> None:
    task_id = cli.submit("Remember the email", LONG_BODY)
    cli.tick()
    question = cli.open_question(task_id)
    cli.answer(question["question_id"], "edit Keep it small.\n- Use localStorage instead\n- Ship")
    cli.tick()
    assert cli.show(task_id)["task"]["status"] == "done"
    text = built_document(cli, task_id)
    assert "Use localStorage instead" in text
    assert "Store the email in a cookie" not in text


@pytest.mark.slow
def test_reject_cancels_without_building(cli: Cli) -> None:
    task_id = cli.submit("Remember the email", LONG_BODY)
    cli.tick()
    cli.answer(cli.open_question(task_id)["question_id"], "reject not now")
    cli.tick()
    report = cli.show(task_id)
    assert report["task"]["status"] == "cancelled"
    assert ("build", "running") not in journey(report)
    assert journey(report)[-1] == ("done", "cancelled")
    assert not has_branch(cli, task_id)


@pytest.mark.slow
def test_clarify_path_for_a_short_body(cli: Cli) -> None:
    task_id = cli.submit("Login", SHORT_BODY)
    cli.tick()
    question = cli.open_question(task_id)
    assert question["kind"] == "clarify"
    invalid = cli.answer(question["question_id"], "   ", check=False)
    assert invalid.returncode == 2 and "empty" in invalid.stderr  # bad input
    cli.answer(
        question["question_id"],
        "Remember the email address on the login form so returning users type less.",
    )
    cli.tick()
    review = cli.open_question(task_id)
    assert review["kind"] == "plan_decision"
    cli.answer(review["question_id"], "ship it")
    cli.tick()
    report = cli.show(task_id)
    assert report["task"]["status"] == "done"
    assert [q["kind"] for q in report["questions"]] == ["clarify", "plan_decision"]


@pytest.mark.slow
def test_invalid_and_duplicate_answers_change_nothing(cli: Cli) -> None:
    task_id = cli.submit("Remember the email", LONG_BODY)
    cli.tick()
    qid = cli.open_question(task_id)["question_id"]
    maybe = cli.answer(qid, "maybe", check=False)
    assert maybe.returncode == 2  # bad input; a refusal given the state (below) is 1
    assert "approve [comment]" in maybe.stderr and "Traceback" not in maybe.stderr
    assert cli.open_question(task_id)["question_id"] == qid

    cli.answer(qid, "approve")
    again = cli.answer(qid, "reject", check=False)
    assert again.returncode == 1
    assert "already answered by cli:tester" in again.stderr
    cli.tick()
    report = cli.show(task_id)
    assert report["task"]["status"] == "done"
    assert report["questions"][0]["answer"]["decision"] == "approve"


@pytest.mark.slow
def test_answer_to_a_superseded_question_is_refused(cli: Cli) -> None:
    task_id = cli.submit("Remember the email", LONG_BODY)
    cli.tick()
    qid = cli.open_question(task_id)["question_id"]
    cli.run("cancel", task_id)
    cli.tick()
    report = cli.show(task_id)
    assert report["task"]["status"] == "cancelled"
    assert report["questions"][0]["status"] == "superseded"
    late = cli.answer(qid, "approve", check=False)
    assert late.returncode == 1 and "superseded" in late.stderr


@pytest.mark.slow
def test_deadline_expiry_parks_then_reopen_and_answer_finish(cli: Cli) -> None:
    task_id = cli.submit("Remember the email", LONG_BODY)
    cli.tick()
    qid = cli.open_question(task_id)["question_id"]
    later = {"AGENT_TEAM_CLOCK_OFFSET_S": str(73 * 3600)}  # plan deadline is 72 h
    cli.tick(**later)
    report = cli.show(task_id)
    assert report["task"]["status"] == "parked"
    assert report["task"]["parked_reason"] == "question_expired"
    assert report["questions"][0]["status"] == "expired"
    refused = cli.answer(qid, "approve", check=False, **later)
    assert refused.returncode == 1 and "expired" in refused.stderr

    cli.run("reopen", qid, "--deadline", "2h", extra_env=later)
    cli.tick(**later)
    assert cli.show(task_id)["task"]["status"] == "waiting"
    cli.answer(qid, "approve", **later)
    cli.tick(**later)
    report = cli.show(task_id)
    assert report["task"]["status"] == "done"
    assert_one_open_row_at_most(report)


@pytest.mark.slow
def test_budget_exhaustion_parks_and_unparks_after_midnight(cli: Cli) -> None:
    tiny = {"AGENT_TEAM_DAILY_TOKEN_CAP": "1"}
    task_id = cli.submit("Remember the email", LONG_BODY)
    cli.tick(**tiny)
    report = cli.show(task_id)
    assert report["task"]["status"] == "parked"
    assert report["task"]["parked_reason"] == "budget_exhausted"
    assert report["total_tokens"] == 0, "nothing is spent past the cap"

    cli.tick(**tiny)  # same UTC day: stays parked
    assert cli.show(task_id)["task"]["status"] == "parked"

    tomorrow = {"AGENT_TEAM_CLOCK_OFFSET_S": str(DAY_S)}
    cli.tick(**tomorrow)
    report = cli.show(task_id)
    assert report["task"]["status"] == "waiting"
    assert cli.open_question(task_id)["kind"] == "plan_decision"


def test_a_confluence_task_is_refused_with_a_clear_message(cli: Cli, tmp_path: Path) -> None:
    result = cli.run(
        "submit", "--title", "Docs", "--body", "Write docs", "--kind", "confluence", check=False
    )
    assert result.returncode == 1
    assert "documentation lane" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_a_builder_that_cannot_run_parks_and_retry_finishes_after_the_fix(
    cli: Cli, tmp_path: Path
) -> None:
    broken = {"AGENT_TEAM_BUILDER": "claude-code", "AGENT_TEAM_CLAUDE_BIN": str(tmp_path / "no")}
    task_id = cli.submit("Remember the email", LONG_BODY)
    cli.tick(**broken)
    cli.answer(cli.open_question(task_id)["question_id"], "approve")
    cli.tick(**broken)
    report = cli.show(task_id)
    assert (report["task"]["status"], report["task"]["parked_reason"]) == (
        "parked",
        "builder_unavailable",
    )

    refused = cli.run("retry", "no-such-task", check=False)
    assert refused.returncode == 2 and "no task 'no-such-task'" in refused.stderr
    cli.run("retry", task_id)  # the operator went back to the offline builder
    cli.tick()

    report = cli.show(task_id)
    assert report["task"]["status"] == "done"
    again = cli.run("retry", task_id, check=False)
    assert again.returncode == 1 and "only parked and failed tasks" in again.stderr


README = Path(__file__).resolve().parents[2] / "README.md"
EXAMPLE_ID = "t3f9c2a1b0d"


def readme_first_example() -> list[list[str]]:
    """The `$A ...` lines of README's "A task from start to finish", as argument lists."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## A task from start to finish") :]
    start = section.index("```sh\n") + len("```sh\n")
    block = section[start : section.index("\n```", start)]
    lines = [line for line in block.splitlines() if line.startswith("$A ")]
    return [shlex.split(line, comments=True)[1:] for line in lines]


@pytest.mark.slow
def test_the_readme_first_example_runs_in_an_empty_folder(cli: Cli) -> None:
    # #31 (13): it used an `issue.md` a new user does not have.
    steps = readme_first_example()
    assert [step[0] for step in steps][:2] == ["submit", "tick"]
    task_id = ""
    for step in steps:
        args = [arg.replace(EXAMPLE_ID, task_id) for arg in step]
        result = cli.run(*args)
        if step[0] == "submit":
            task_id = result.stdout.strip()
    assert cli.show(task_id)["task"]["status"] == "done"
