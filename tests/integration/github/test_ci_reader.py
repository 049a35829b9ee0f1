"""`CiReader`: a head commit's CI read from the loopback GitHub, folded, and acted on.

The CI watcher and gate of issue #29 trust only what this says, so it is tested
on the wire: check runs, statuses and workflow runs folded into green, red or
pending (no statuses at all is nothing to wait for); the base branch's required
checks from protection and rulesets; a job's log fetched through GitHub's 302
with no token, redacted and bounded, or a reason when it cannot be; flakiness
by the base branch and by the log; and `rerun-failed-jobs` starting a new attempt.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_team.integrations.github.ci import CiReader
from agent_team.integrations.github.ci_logs import LogExcerpt
from agent_team.integrations.github.ci_report import (
    Check,
    CiReport,
    WorkflowRun,
    flaky_reason,
    looks_flaky,
)
from agent_team.integrations.github.intake import GitHubClient, GitHubError
from tests.fakes.github_api import FakeGitHub
from tests.git_server import make_remote

APP = "acme/app"
BRANCH = "agent-team/t1"
TOKEN = "ghp_" + "CiReader0" * 4
LEAKED = "ghp_" + "L3akedInALog" * 3  # a token-shaped string a build printed


@dataclass
class Stand:
    fake: FakeGitHub
    client: GitHubClient
    ci: CiReader
    head: str
    base: str  # main's head


@pytest.fixture
def stand(tmp_path: Path) -> Iterator[Stand]:
    with FakeGitHub(token=TOKEN) as fake:
        fake.add_repo(APP, remote=make_remote(tmp_path / "remotes", APP))
        base = fake.push(APP, "main", {"README.md": "# app\n"}, "main moves")
        head = fake.push(APP, BRANCH, {"app.py": "print('hi')\n"}, "the build")
        client = GitHubClient(fake.url, TOKEN)
        try:
            yield Stand(fake, client, CiReader(client), head, base)
        finally:
            client.close()


def by_name(report: CiReport) -> dict[str, tuple[str, str, str | None]]:
    return {c.name: (c.kind, c.state, c.conclusion) for c in report.checks}


# -- the report ---------------------------------------------------------------------------


def test_check_runs_statuses_and_jobs_fold_into_red_with_the_failed_ones(stand: Stand) -> None:
    fake, ci, head = stand.fake, stand.ci, stand.head
    fake.set_checks(APP, head, {"lint": "success", "docs": "skipped", "typing": "neutral"})
    fake.set_status(APP, head, "deploy/preview", "success")
    fake.set_status(APP, head, "ci/legacy", "error")
    run_id = fake.add_workflow_run(APP, head, {"build": "success", "test": "failure"})

    report = ci.report(APP, head)

    assert by_name(report) == {
        "lint": ("check_run", "success", "success"),
        "docs": ("check_run", "neutral", "skipped"),
        "typing": ("check_run", "neutral", "neutral"),
        "build": ("check_run", "success", "success"),
        "test": ("check_run", "failure", "failure"),
        "deploy/preview": ("status", "success", "success"),
        "ci/legacy": ("status", "failure", "error"),
    }
    assert report.state == "red" and report.started
    assert sorted(c.name for c in report.failed) == ["ci/legacy", "test"]
    test = next(c for c in report.failed if c.name == "test")
    assert test.run_id == run_id and test.job_id == test.id  # an Actions job: rerunnable
    legacy = next(c for c in report.failed if c.name == "ci/legacy")
    assert (legacy.run_id, legacy.job_id) == (None, None)  # a status: nothing to rerun
    lint = next(c for c in report.checks if c.name == "lint")
    assert lint.run_id is None  # a check run of another app, not a workflow job
    (run,) = report.runs
    assert (run.id, run.finished, run.attempt) == (run_id, True, 1)


def test_red_waits_until_nothing_is_pending(stand: Stand) -> None:
    fake, ci, head = stand.fake, stand.ci, stand.head
    ids = fake.set_checks(APP, head, {"unit": "failure", "e2e": "in_progress"})
    fake.set_status(APP, head, "ci/external", "pending")

    report = ci.report(APP, head)
    assert report.state == "pending"  # a rerun could not start yet: the run is still going
    assert [c.name for c in report.failed] == ["unit"]  # but the failure is already known

    fake.update_check_run(APP, ids["e2e"], conclusion="success")
    assert ci.report(APP, head).state == "pending"  # the status still is
    fake.set_status(APP, head, "ci/external", "success")  # the latest per context counts
    assert ci.report(APP, head).state == "red"
    fake.set_check_run(APP, head, "unit", conclusion="success")  # a new run supersedes it
    assert ci.report(APP, head).state == "green"


def test_no_statuses_is_nothing_to_wait_for(stand: Stand) -> None:
    fake, ci, head = stand.fake, stand.ci, stand.head
    fake.set_checks(APP, head, {"lint": "success", "test": "success"})
    # GitHub's combined status says `pending` for a commit without any status at all.
    combined = stand.client.json("GET", f"repos/{APP}/commits/{head}/status")
    assert (combined["state"], combined["statuses"]) == ("pending", [])

    assert ci.statuses(APP, head) == []
    report = ci.report(APP, head)
    assert (report.state, report.required_state) == ("green", "green")


def test_a_commit_nothing_reported_on_has_not_started(stand: Stand) -> None:
    report = stand.ci.report(APP, stand.head)
    assert (report.started, report.checks, report.runs, report.failed) == (False, (), (), ())


def test_a_workflow_run_without_jobs_yet_is_pending() -> None:
    queued = WorkflowRun(1, "CI", "queued", None, "pull_request", 1, 7, "https://x/runs/1")
    assert CiReport("a" * 40, (), (queued,)).state == "pending"
    done = WorkflowRun(1, "CI", "completed", "success", "pull_request", 1, 7, "https://x/runs/1")
    assert CiReport("a" * 40, (), (done,)).state == "green"


def test_statuses_workflow_runs_and_jobs_across_pages(stand: Stand) -> None:
    fake, ci, head = stand.fake, stand.ci, stand.head
    fake.page_cap = 2
    for n in range(5):
        fake.set_status(APP, head, f"ctx-{n}", "success")
    first = fake.add_workflow_run(APP, head, {"a": "success", "b": "success", "c": "failure"})
    second = fake.add_workflow_run(APP, head, {"d": "success"}, name="Lint")
    third = fake.add_workflow_run(APP, head, {"e": "success"}, name="Docs")

    assert sorted(s.context for s in ci.statuses(APP, head)) == [f"ctx-{n}" for n in range(5)]
    assert [r.id for r in ci.workflow_runs(APP, head)] == [third, second, first]  # newest first
    jobs = ci.jobs(APP, first)
    assert [(j.name, j.conclusion, j.run_id) for j in jobs] == [
        ("a", "success", first),
        ("b", "success", first),
        ("c", "failure", first),
    ]
    assert ci.workflow_runs(APP, stand.base) == []  # another commit's runs are not these
    assert len(fake.seen("GET", f"/repos/{APP}/commits/{head}/status")) == 3  # 5 a 2 a page


def test_a_malformed_reply_is_refused_naming_the_field(
    stand: Stand, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand.fake.add_workflow_run(APP, stand.head, {"test": "success"})
    real = stand.client.request

    def without_event(method: str, url: str, **kwargs: Any) -> Any:
        response = real(method, url, **kwargs)
        data = response.json()
        for run in data.get("workflow_runs", []):
            run.pop("event")
        response._content = json.dumps(data).encode()
        return response

    monkeypatch.setattr(stand.client, "request", without_event)
    with pytest.raises(GitHubError, match=r"malformed workflow run on acme/app@\w+ \(bad event\)"):
        stand.ci.report(APP, stand.head)


# -- required checks ----------------------------------------------------------------------


def test_required_checks_come_from_protection_and_rulesets(stand: Stand) -> None:
    fake, ci = stand.fake, stand.ci
    assert ci.required_checks(APP, "main") is None  # 404 "Branch not protected"
    fake.protect_branch(APP, "main", None)
    assert ci.required_checks(APP, "main") is None  # 404 "Required status checks not enabled"

    fake.protect_branch(APP, "main", ["test", "ci/external"])
    assert ci.required_checks(APP, "main") == frozenset({"test", "ci/external"})
    fake.add_ruleset(APP, "main", ["build"])
    assert ci.required_checks(APP, "main") == frozenset({"test", "ci/external", "build"})

    # Reading classic protection needs admin rights; a 403 there leaves the rulesets.
    fake.force(f"/repos/{APP}/branches/main/protection", 403)
    assert ci.required_checks(APP, "main") == frozenset({"build"})

    fake.add_ruleset(APP, "release/1.x", ["e2e"])  # a branch name with a slash
    assert ci.required_checks(APP, "release/1.x") == frozenset({"e2e"})

    fake.force(f"/repos/{APP}/branches/main/protection", 500)
    with pytest.raises(GitHubError) as raised:
        ci.required_checks(APP, "main")
    assert raised.value.status == 500


def test_a_required_check_nobody_reported_is_waited_for(stand: Stand) -> None:
    fake, ci, head = stand.fake, stand.ci, stand.head
    fake.protect_branch(APP, "main", ["test", "ci/external"])
    required = ci.required_checks(APP, "main")
    fake.set_checks(APP, head, {"test": "success", "spelling": "failure"})

    report = ci.report(APP, head, required=required)
    assert report.missing == ("ci/external",)
    assert (report.state, report.required_state) == ("pending", "pending")

    fake.set_status(APP, head, "ci/external", "success")
    report = ci.report(APP, head, required=required)
    assert report.missing == ()
    # What merging needs is green; a check nobody requires still failed.
    assert (report.state, report.required_state) == ("red", "green")


# -- job logs -----------------------------------------------------------------------------


def _log(lines: list[str]) -> str:
    return "".join(
        f"2024-05-01T10:00:{n % 60:02d}.1234567Z {line}\n" for n, line in enumerate(lines)
    )


def test_a_log_excerpt_comes_through_the_redirect_without_the_token(stand: Stand) -> None:
    fake, ci, head = stand.fake, stand.ci, stand.head
    filler = [f"collecting item {n}" for n in range(200)]
    failure = [
        "tests/test_app.py::test_email FAILED",
        f"E   AssertionError: the token {LEAKED} was sent",
        "E   assert 'hi' == 'hello'",
    ]
    log = _log(["Run pytest", *filler, *failure, *[f"teardown {n}" for n in range(100)]])
    run_id = fake.add_workflow_run(APP, head, {"test": "failure"}, logs={"test": log})
    (failed,) = ci.report(APP, head).failed
    assert failed.run_id == run_id and failed.job_id is not None

    excerpt = ci.log_excerpt(APP, failed.job_id)

    assert excerpt.reason is None and excerpt.flaky is None
    lines = excerpt.text.splitlines()
    assert len(lines) <= 40 and len(excerpt.text) <= 4000
    assert "tests/test_app.py::test_email FAILED" in lines  # it starts near the failure
    assert "E   assert 'hi' == 'hello'" in lines
    assert "collecting item 0" not in excerpt.text and "2024-05-01T" not in excerpt.text
    assert LEAKED not in excerpt.text and "[redacted]" in excerpt.text

    (api_call,) = fake.seen("GET", f"/repos/{APP}/actions/jobs/{failed.job_id}/logs")
    assert api_call.headers["authorization"] == f"Bearer {TOKEN}"
    (download,) = [r for r in fake.seen("GET") if r.path.startswith("/_logs/")]
    assert "authorization" not in download.headers  # the pre-signed URL is the credential
    assert TOKEN not in json.dumps(download.headers)


def test_a_log_excerpt_is_bounded(stand: Stand) -> None:
    fake, head = stand.fake, stand.head
    long_lines = [f"step {n}: " + "x" * 300 for n in range(30)]
    late = _log(["Run make", *[f"line {n}" for n in range(200)], "Error: ETIMEDOUT at the end"])
    fake.add_workflow_run(
        APP,
        head,
        {"wide": "failure", "long": "failure"},
        logs={"wide": _log(long_lines), "long": late},
    )
    jobs = {c.name: c.job_id for c in stand.ci.report(APP, head).failed}

    wide = stand.ci.log_excerpt(APP, jobs["wide"] or 0, max_lines=40, max_chars=1000)
    assert len(wide.text) <= 1000 and wide.text.endswith("…")
    assert wide.text.startswith("step ")  # whole lines, from the last ones (no error line)

    small = CiReader(stand.client, log_max_bytes=2000)  # read at most ~2 kB of a log
    cut = small.log_excerpt(APP, jobs["long"] or 0)
    assert cut.reason is not None and "longer than 2000 bytes" in cut.reason
    assert "ETIMEDOUT" not in cut.text and cut.flaky is None  # past the limit: never read
    assert cut.text.splitlines()[-1].startswith("line ")


def test_a_log_that_cannot_be_read_is_an_empty_excerpt_with_a_reason(stand: Stand) -> None:
    fake, head = stand.fake, stand.head
    fake.add_workflow_run(APP, head, {"test": "failure"}, logs={"test": "boom\n"})
    (failed,) = stand.ci.report(APP, head).failed
    job_id = failed.job_id or 0

    gone = stand.ci.log_excerpt(APP, 424242)
    assert gone.text == "" and gone.reason is not None and "no log for job 424242" in gone.reason

    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(403, text="AuthenticationFailed")

    def unreachable(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    for transport, words in (
        (httpx.MockTransport(refuse), "answered 403"),
        (httpx.MockTransport(unreachable), "ConnectError"),
    ):
        reader = CiReader(stand.client, log_transport=transport)
        excerpt = reader.log_excerpt(APP, job_id)
        assert excerpt.text == "" and excerpt.reason is not None and words in excerpt.reason
        assert "sig=" not in excerpt.reason  # the pre-signed URL is a credential

    fake.force(f"/repos/{APP}/actions/jobs/{job_id}/logs", 502)
    broken = stand.ci.log_excerpt(APP, job_id)
    assert broken.text == "" and broken.reason is not None and "502" in broken.reason


# -- flakiness ----------------------------------------------------------------------------


def test_a_failure_looks_flaky_when_the_base_branch_passed_it(stand: Stand) -> None:
    fake, ci, head, base = stand.fake, stand.ci, stand.head, stand.base
    fake.set_checks(APP, base, {"test": "success", "lint": "failure"})
    fake.set_checks(APP, head, {"test": "failure", "lint": "failure", "new": "failure"})
    on_base = ci.report(APP, base)
    failed = {c.name: c for c in ci.report(APP, head).failed}

    reason = flaky_reason(failed["test"], "AssertionError: 2 != 3", on_base)
    assert reason is not None and "passed on the base branch's head" in reason
    assert not looks_flaky(failed["lint"], "AssertionError: 2 != 3", on_base)  # red there too
    assert not looks_flaky(failed["new"], "", on_base)  # the base has no such check


@pytest.mark.parametrize(
    "line",
    [
        "httpx.ConnectTimeout: timed out",
        "npm ERR! code ETIMEDOUT",
        "npm ERR! network read ECONNRESET",
        "ConnectionResetError: [Errno 104] Connection reset by peer",
        "fatal: unable to access 'https://github.com/x/y/': Could not resolve host: github.com",
        "ERROR: HTTP error 503 while getting https://pypi.org/simple/httpx/",
        "error: failed to download: 502 Bad Gateway",
        "##[error]The operation was canceled.",
    ],
)
def test_a_log_naming_a_timeout_or_network_error_looks_flaky(stand: Stand, line: str) -> None:
    fake, head = stand.fake, stand.head
    fake.add_workflow_run(APP, head, {"test": "failure"}, logs={"test": _log(["Run it", line])})
    (failed,) = stand.ci.report(APP, head).failed
    excerpt = stand.ci.log_excerpt(APP, failed.job_id or 0)
    assert excerpt.flaky is not None
    assert looks_flaky(failed, excerpt) and looks_flaky(failed, line)


def test_a_plain_failure_does_not_look_flaky(stand: Stand) -> None:
    fake, head = stand.fake, stand.head
    log = _log(["Run pytest", "E   AssertionError: assert 2 == 3", "1 failed, 41 passed"])
    fake.add_workflow_run(APP, head, {"test": "failure"}, logs={"test": log})
    (failed,) = stand.ci.report(APP, head).failed
    excerpt = stand.ci.log_excerpt(APP, failed.job_id or 0)
    assert excerpt.flaky is None and flaky_reason(failed, excerpt) is None
    assert not looks_flaky(failed, excerpt, stand.ci.report(APP, stand.base))


def test_a_job_that_ran_out_of_time_looks_flaky() -> None:
    check = Check("e2e", "check_run", "failure", "timed_out", 5, 4, None)
    assert flaky_reason(check, LogExcerpt("")) == "e2e ran out of time"


# -- rerun ----------------------------------------------------------------------------------


def test_rerun_failed_jobs_starts_a_new_attempt_once(stand: Stand) -> None:
    fake, ci, head = stand.fake, stand.ci, stand.head
    run_id = fake.add_workflow_run(APP, head, {"build": "success", "test": "failure"})
    fake.script_rerun(APP, run_id, "success")

    ci.rerun_failed_jobs(APP, run_id)

    (rerun,) = fake.reruns
    assert (rerun.run_id, rerun.attempt, rerun.jobs) == (run_id, 2, ("test",))
    report = ci.report(APP, head)
    assert report.state == "green" and report.runs[0].attempt == 2

    # Nothing failed any more: GitHub refuses, and says why in words a person can act on.
    with pytest.raises(GitHubError) as raised:
        ci.rerun_failed_jobs(APP, run_id)
    assert raised.value.status == 403
    assert f"will not rerun the failed jobs of workflow run {run_id}" in str(raised.value)
    assert "cannot be retried" in str(raised.value) and TOKEN not in str(raised.value)
    assert len(fake.reruns) == 1


def test_a_running_workflow_cannot_be_rerun(stand: Stand) -> None:
    run_id = stand.fake.add_workflow_run(APP, stand.head, {"slow": "in_progress"})
    with pytest.raises(GitHubError, match="already running"):
        stand.ci.rerun_failed_jobs(APP, run_id)
    with pytest.raises(GitHubError) as raised:
        stand.ci.rerun_failed_jobs(APP, 999999)
    assert raised.value.status == 404
