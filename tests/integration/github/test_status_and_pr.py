"""The status comment and the draft PR, through a real coordinator, across restarts and crashes."""

from __future__ import annotations

import base64
import logging
from pathlib import Path
from typing import Any

import pytest

from agent_team import db
from agent_team.integrations.github.intake import task_id_for
from agent_team.integrations.github.integration import make_publisher
from agent_team.integrations.github.settings import GitHubSettings
from agent_team.integrations.github.status import marker
from tests.fakes.github_api import FakeGitHub
from tests.integration.github.conftest import (
    APP,
    LONG_BODY,
    TOKEN,
    Process,
    Setup,
    clone_with_bare_origin,
    git,
    make_settings,
)


def posts(fake: FakeGitHub, path: str) -> list[Any]:
    return fake.seen("POST", path)


def test_the_comment_is_edited_across_a_restart_and_one_draft_pr_is_opened(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fake, comments_path = setup.fake, f"/repos/{APP}/issues/{setup.number}/comments"
    first = Process(setup.settings)
    assert first.github.poll().tasks_created == 1
    first.coordinator.tick(until_idle=True, timeout_s=60)
    task = db.get_task(first.coordinator.ledger, setup.task_id)
    assert task is not None and task.status == "waiting"
    (comment,) = fake.comments_on(APP, setup.number)
    assert "waiting on a person" in comment["body"] and marker(setup.task_id) in comment["body"]
    assert f"http://agent-team.example/task/{setup.task_id}" in comment["body"]
    assert len(posts(fake, comments_path)) == 1  # `started` posted it, `waiting` edited it
    first.close()

    second = Process(setup.settings)  # a restart: new objects on the same ledger
    (question,) = db.list_questions(second.coordinator.ledger, status="open")
    second.coordinator.answer(question.question_id, "approve")
    second.coordinator.tick(until_idle=True, timeout_s=60)

    task = db.get_task(second.coordinator.ledger, setup.task_id)
    assert task is not None and (task.status, task.phase) == ("waiting", "pr_open")
    (pull,) = fake.repos[APP].pulls
    assert pull["draft"] is True and pull["body"].startswith(f"Closes #{setup.number}")
    assert pull["base"]["ref"] == "main" and pull["title"] == "Remember the email"
    # The branch really is on the remote, at the build's commit.
    state = second.coordinator.graph.get_state(
        {"configurable": {"thread_id": setup.task_id}}
    ).values
    assert (
        git(setup.bare, "rev-parse", f"refs/heads/{pull['head']['ref']}")
        == state["build"]["commit"]
    )
    assert state["pull_request"] == {
        "url": pull["html_url"],
        "number": pull["number"],
        "repo": APP,
        "head": state["build"]["commit"],
    }
    (comment,) = fake.comments_on(APP, setup.number)
    assert "**pull request open**" in comment["body"] and pull["html_url"] in comment["body"]
    # Merged on GitHub: the PR gate ends the task, and the same comment says so.
    fake.merge_pull(APP, pull["number"])
    assert second.github.watch_pulls().answered == 1
    second.coordinator.tick(until_idle=True, timeout_s=60)
    task = db.get_task(second.coordinator.ledger, setup.task_id)
    assert task is not None and task.status == "done"
    (comment,) = fake.comments_on(APP, setup.number)
    assert "**done**" in comment["body"] and f"{pull['html_url']} merged" in comment["body"]
    assert len(posts(fake, comments_path)) == 1
    # `waiting` before the restart, `waiting` on the PR, `done` after the merge.
    assert len(fake.seen("PATCH")) == 3
    effect = db.get_effect(second.coordinator.ledger, f"github:pr:{setup.task_id}")
    assert effect is not None and effect.state == "done"
    assert effect.result_ref == str(pull["number"])

    # Run the publisher again (a replayed node): the recorded PR comes back, nothing is sent.
    before = len(fake.requests)
    publisher = make_publisher(GitHubSettings.from_settings(setup.settings))
    assert publisher is not None
    assert publisher(state) == state["pull_request"]
    assert len(fake.requests) == before and len(fake.repos[APP].pulls) == 1
    publisher.client.close()
    second.close()
    assert TOKEN not in caplog.text


def test_a_pending_pr_record_after_a_crash_finds_the_pr_instead_of_opening_another(
    setup: Setup,
) -> None:
    process = Process(setup.settings)
    process.github.poll()
    process.coordinator.tick(until_idle=True, timeout_s=60)
    (question,) = db.list_questions(process.coordinator.ledger, status="open")
    process.coordinator.answer(question.question_id, "approve")
    process.coordinator.tick(until_idle=True, timeout_s=60)
    conn = process.coordinator.ledger
    state = process.coordinator.graph.get_state(
        {"configurable": {"thread_id": setup.task_id}}
    ).values
    assert len(setup.fake.repos[APP].pulls) == 1
    effect_id = f"github:pr:{setup.task_id}"
    # As if the process died after GitHub created the PR but before the record said so.
    request = {"repo": APP, "issue": setup.number, "head": state["build"]["branch"]}
    for posting in (True, False):
        assert db.finish_effect(
            conn, effect_id=effect_id, state="pending", request={**request, "posting": posting}
        )
        publisher = make_publisher(GitHubSettings.from_settings(setup.settings))
        assert publisher is not None
        assert publisher(state) == state["pull_request"]
        publisher.client.close()
        assert len(setup.fake.repos[APP].pulls) == 1
        assert len(posts(setup.fake, f"/repos/{APP}/pulls")) == 1 + (not posting)
    process.close()


def test_a_pending_comment_record_finds_the_posted_comment(setup: Setup) -> None:
    process = Process(setup.settings)
    process.github.poll()
    conn = process.coordinator.ledger
    # The last process posted the comment and died before recording its id.
    process.github.client.json(
        "POST",
        f"repos/{APP}/issues/{setup.number}/comments",
        ok=(201,),
        json={"body": f"{marker(setup.task_id)}\nstarted"},
    )
    db.begin_effect(
        conn,
        effect_id=f"github:comment:{setup.task_id}",
        task_id=setup.task_id,
        kind="github_comment",
        request={"repo": APP, "issue": setup.number, "posting": True},
    )

    process.coordinator.tick(until_idle=True, timeout_s=60)

    (comment,) = setup.fake.comments_on(APP, setup.number)
    assert "waiting on a person" in comment["body"]
    assert len(posts(setup.fake, f"/repos/{APP}/issues/{setup.number}/comments")) == 1
    effect = db.get_effect(conn, f"github:comment:{setup.task_id}")
    assert effect is not None and effect.state == "done"
    assert effect.result_ref == str(comment["id"])
    process.close()


def test_a_broken_github_never_fails_the_task(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    process = Process(setup.settings)
    process.github.poll()
    setup.fake.repos[APP].broken = 502
    caplog.set_level(logging.WARNING)
    process.coordinator.tick(until_idle=True, timeout_s=60)
    task = db.get_task(process.coordinator.ledger, setup.task_id)
    assert task is not None and task.status == "waiting"
    assert "could not update the status comment" in caplog.text
    assert setup.fake.comments_on(APP, setup.number) == []
    process.close()


def test_a_failed_push_parks_clearly_without_the_token_and_retry_publishes(
    setup: Setup,
) -> None:
    moved = setup.bare.with_name("moved.git")
    setup.bare.rename(moved)  # the repository is unreachable: the push fails
    process = Process(setup.settings)
    process.github.poll()
    process.coordinator.tick(until_idle=True, timeout_s=60)
    (question,) = db.list_questions(process.coordinator.ledger, status="open")
    process.coordinator.answer(question.question_id, "approve")
    process.coordinator.tick(until_idle=True, timeout_s=60)

    task = db.get_task(process.coordinator.ledger, setup.task_id)
    assert task is not None and (task.status, task.parked_reason) == ("parked", "publish_failed")
    (last, *_) = reversed(db.list_transitions(process.coordinator.ledger, thread_id=task.id))
    assert last.note is not None and "git push of agent-team/" in last.note
    assert f"agent-team retry {task.id}" in last.note
    assert TOKEN not in last.note
    assert setup.fake.repos[APP].pulls == []
    (comment,) = setup.fake.comments_on(APP, setup.number)
    assert "**parked**" in comment["body"] and TOKEN not in comment["body"]

    moved.rename(setup.bare)  # the operator fixes the cause
    process.coordinator.retry(task.id)
    process.coordinator.tick(until_idle=True, timeout_s=60)

    task = db.get_task(process.coordinator.ledger, setup.task_id)
    assert task is not None and (task.status, task.phase) == ("waiting", "pr_open")
    assert len(setup.fake.repos[APP].pulls) == 1
    (comment,) = setup.fake.comments_on(APP, setup.number)
    assert "pull" in comment["body"]
    process.close()


def test_the_push_ignores_hooks_and_remotes_planted_in_the_checkout(
    setup: Setup, tmp_path: Path
) -> None:
    # What a builder working in a worktree of this checkout could write into the shared .git.
    evil = tmp_path / "evil.git"
    evil.mkdir()
    git(evil, "init", "-q", "--bare")
    loot = tmp_path / "loot.txt"
    hook = setup.clone / ".git" / "hooks" / "pre-push"
    hook.write_text(f"#!/bin/sh\nenv > '{loot}'\n")
    hook.chmod(0o755)
    git(setup.clone, "config", "remote.origin.pushurl", str(evil))
    git(setup.clone, "config", f"url.{evil}.insteadOf", setup.fake.url + "/")
    git(setup.clone, "config", f"url.{evil}.pushInsteadOf", setup.fake.url + "/")
    git(setup.clone, "checkout", "-q", "-b", "agent-team/planted")
    git(setup.clone, "commit", "-q", "--allow-empty", "-m", "built")
    commit = git(setup.clone, "rev-parse", "HEAD")
    process = Process(setup.settings)
    process.github.poll()
    publisher = make_publisher(GitHubSettings.from_settings(setup.settings))
    assert publisher is not None
    state: Any = {
        "task_id": setup.task_id,
        "repo": str(setup.clone),
        "build": {"branch": "agent-team/planted", "commit": commit},
    }

    result = publisher(state)

    assert not loot.exists()  # no hook of the checkout ran
    assert git(evil, "for-each-ref") == ""  # neither pushurl nor insteadOf was used
    assert git(setup.bare, "rev-parse", "refs/heads/agent-team/planted") == commit
    # The push went to the GitHub host named by the settings, with the token.
    basic = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    pushes = [r for r in setup.fake.git_requests if r.path == f"/{APP}.git/git-receive-pack"]
    assert pushes and all(r.headers["authorization"] == f"Basic {basic}" for r in pushes)
    assert result is not None and result["number"] == setup.fake.repos[APP].pulls[0]["number"]
    publisher.client.close()
    process.close()


def test_finding_our_comment_never_follows_a_link_to_another_server(setup: Setup) -> None:
    process = Process(setup.settings)
    process.github.poll()
    conn = process.coordinator.ledger
    for n in range(3):  # other people's comments, two a page
        process.github.client.json(
            "POST",
            f"repos/{APP}/issues/{setup.number}/comments",
            ok=(201,),
            json={"body": f"comment {n}"},
        )
    setup.fake.comments_page_cap = 2
    with FakeGitHub() as elsewhere:
        setup.fake.link_base = elsewhere.url  # page 2 lives on another server
        # A crash around the POST: the commenter searches the comments first.
        db.begin_effect(
            conn,
            effect_id=f"github:comment:{setup.task_id}",
            task_id=setup.task_id,
            kind="github_comment",
            request={"repo": APP, "issue": setup.number, "posting": True},
        )
        process.coordinator.tick(until_idle=True, timeout_s=60)
        assert elsewhere.requests == []  # the token never went there
    assert len(setup.fake.comments_on(APP, setup.number)) == 3  # nothing posted blind
    process.close()


def test_a_shallow_checkout_pushes_too(setup: Setup, tmp_path: Path) -> None:
    git(setup.clone, "commit", "-q", "--allow-empty", "-m", "second")
    git(setup.clone, "push", "-q", "origin", "main")
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{setup.bare}", str(shallow))
    assert git(shallow, "rev-parse", "--is-shallow-repository") == "true"
    git(shallow, "checkout", "-q", "-b", "agent-team/shallow")
    git(shallow, "commit", "-q", "--allow-empty", "-m", "built")
    commit = git(shallow, "rev-parse", "HEAD")
    process = Process(setup.settings)
    process.github.poll()
    publisher = make_publisher(GitHubSettings.from_settings(setup.settings))
    assert publisher is not None
    state: Any = {
        "task_id": setup.task_id,
        "repo": str(shallow),
        "build": {"branch": "agent-team/shallow", "commit": commit},
    }

    assert publisher(state) is not None

    assert git(setup.bare, "rev-parse", "refs/heads/agent-team/shallow") == commit
    publisher.client.close()
    process.close()


def test_an_issue_without_a_configured_clone_builds_from_its_mirror_and_pushes_from_there(
    tmp_path: Path,
) -> None:
    _clone, bare = clone_with_bare_origin(tmp_path)
    with FakeGitHub(token=TOKEN) as fake:
        fake.add_repo(APP, remote=bare)
        number = fake.add_issue(
            APP, labels=("agent-team",), title="Remember the email", body=LONG_BODY
        )
        # No AGENT_TEAM_GITHUB_CHECKOUTS: the task names the issue's repository itself.
        settings = make_settings(tmp_path, fake, github_repos=APP, github_open_pr=True)
        process = Process(settings)
        assert process.github.poll().tasks_created == 1
        task_id = task_id_for(APP, number)
        start = db.get_command(process.coordinator.ledger, f"start:{task_id}")
        assert start is not None and start.payload["repo"] == APP
        process.coordinator.tick(until_idle=True, timeout_s=60)
        (question,) = db.list_questions(process.coordinator.ledger, status="open")
        process.coordinator.answer(question.question_id, "approve")
        process.coordinator.tick(until_idle=True, timeout_s=60)

        task = db.get_task(process.coordinator.ledger, task_id)
        assert task is not None and (task.status, task.phase) == ("waiting", "pr_open"), task
        state = process.coordinator.graph.get_state({"configurable": {"thread_id": task_id}}).values
        commit = state["build"]["commit"]
        # Built on the remote's main as fetched (with the token: the fake refuses without it)...
        (mirror,) = (tmp_path / "state" / "mirrors").glob("acme-app-*.git")
        assert git(mirror, "rev-parse", f"{commit}^") == git(bare, "rev-parse", "main")
        fetches = [r for r in fake.git_requests if r.path.endswith("git-upload-pack")]
        assert fetches and all("authorization" in r.headers for r in fetches)
        # ...and pushed from the mirror's objects to the issue's repository, with one draft PR.
        (pull,) = fake.repos[APP].pulls
        assert git(bare, "rev-parse", f"refs/heads/{pull['head']['ref']}") == commit
        assert not (tmp_path / "state" / "repos" / "default").exists()
        process.close()
