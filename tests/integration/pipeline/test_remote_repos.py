"""Tasks whose repository lives elsewhere, through a real coordinator and a loopback git host.

What must hold: a remote that cannot be fetched parks the task at its build
(`repo_unavailable`, git's words in the note, the fix in the triage inbox);
`agent-team retry` continues it there once the remote is back, asking nothing
again; an automation naming `owner/name` builds in that repository on the
GitHub host (`AGENT_TEAM_GITHUB_API_URL`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from agent_team import db
from agent_team.automations import service
from agent_team.builders.repos import mirror_path
from agent_team.common.repo_spec import RemoteRepo, parse_repo
from agent_team.coordinator import Coordinator
from agent_team.reports import triage
from agent_team.requests.actors import Actor
from tests.git_server import GitServer, git
from tests.integration.pipeline.conftest import (
    LONG_BODY,
    Clock,
    MakeCoordinator,
    RecordingTransport,
    open_question,
    serving,
    status_is,
    task_of,
    usage_calls,
)
from tests.waiting import wait_for

REPO = "acme/widgets"


def build_of(coordinator: Coordinator, task_id: str) -> dict[str, str]:
    values = coordinator.graph.get_state({"configurable": {"thread_id": task_id}}).values
    build = values["build"]
    assert isinstance(build, dict)
    return build


def test_a_remote_gone_at_the_build_parks_the_task_and_retry_continues_it_there(
    make_coordinator: MakeCoordinator, git_server: GitServer, tmp_path: Path
) -> None:
    bare = git_server.add(REPO)
    url = git_server.url_of(REPO)
    transport = RecordingTransport()
    coordinator = make_coordinator(transport=transport)
    with serving(coordinator):
        task_id = coordinator.start_task(title="Add the widget", body=LONG_BODY, repo=url)
        wait_for(lambda: status_is(coordinator, task_id, "waiting"), "the plan question")
        question = open_question(coordinator, task_id)
        assert question.kind == "plan_decision"
        git_server.gone = True
        coordinator.answer(question.question_id, "approve")

        parked = wait_for(lambda: status_is(coordinator, task_id, "parked", "failed"), "a park")
        assert (parked.status, parked.parked_reason, parked.phase) == (
            "parked",
            "repo_unavailable",
            "build",
        )
        note = db.list_transitions(coordinator.ledger, task_id)[-1].note or ""
        assert f"could not fetch {url}" in note and "503" in note, note
        assert f"agent-team retry {task_id}" in note
        items = triage.triage(coordinator.ledger, now=coordinator.clock(), budget=None)
        (item,) = [i for i in items if i.task_id == task_id]
        assert item.fix is not None and f"agent-team retry {task_id}" in item.fix
        assert "AGENT_TEAM_GITHUB_TOKEN" in item.fix

        git_server.gone = False
        coordinator.retry(task_id)
        done = wait_for(lambda: status_is(coordinator, task_id, "done", "failed"), "the build")
    assert done.status == "done", done
    assert usage_calls(coordinator.ledger, task_id) == {"clarify": 1, "plan": 1}, "nothing again"
    assert [q.question_id for q in db.list_questions(coordinator.ledger, thread_id=task_id)] == [
        question.question_id
    ]
    build = build_of(coordinator, task_id)
    spec = parse_repo(url)
    assert isinstance(spec, RemoteRepo)
    mirror = mirror_path(tmp_path / "state", spec)
    assert git(mirror, "rev-parse", f"{build['commit']}^") == git(bare, "rev-parse", "main")
    events = [event for tid, event, _ in transport.notices if tid == task_id]
    assert events.index("parked") < events.index("done") == len(events) - 1, events


def test_an_automation_naming_owner_name_builds_in_that_repository_on_the_github_host(
    make_coordinator: MakeCoordinator, git_server: GitServer, tmp_path: Path
) -> None:
    bare = git_server.add(REPO)
    t0 = datetime(2026, 12, 7, 8, 0, tzinfo=UTC)
    clock = Clock(t0 - timedelta(minutes=5))
    coordinator = make_coordinator(clock=clock, github_api_url=git_server.url)
    automation = service.create(
        coordinator.ledger,
        service.AutomationRequest(
            name="widgets",
            title="Review the widgets",
            body=LONG_BODY,
            repo=REPO,
            every="1h",
            first_run_at=t0.isoformat(),
        ),
        actor=Actor("ada", "cli"),
        now=clock.now,
    )
    assert automation.repo == REPO
    clock.now = t0 + timedelta(seconds=1)
    assert coordinator.run_automations().created == 1
    (view,) = db.list_runs(coordinator.ledger, automation.automation_id, limit=10)
    assert view.run.task_id is not None
    task_id = view.run.task_id
    coordinator.tick(until_idle=True, timeout_s=60)
    coordinator.answer(open_question(coordinator, task_id).question_id, "approve")
    coordinator.tick(until_idle=True, timeout_s=60)

    assert task_of(coordinator, task_id).status == "done"
    build = build_of(coordinator, task_id)
    spec = parse_repo(REPO, github_host=git_server.url + "/")
    assert isinstance(spec, RemoteRepo) and spec.url == git_server.url_of(REPO)
    mirror = mirror_path(tmp_path / "state", spec)
    assert git(mirror, "rev-parse", f"refs/heads/{build['branch']}") == build["commit"]
    assert git(mirror, "rev-parse", f"{build['commit']}^") == git(bare, "rev-parse", "main")
    assert git_server.fetches(), "it fetched from the GitHub host"
    assert not (tmp_path / "state" / "repos" / "default").exists(), "not the default repository"
