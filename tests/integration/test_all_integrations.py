"""Slack, GitHub and Confluence at once, through the real daemon, against the loopback fakes.

One `Daemon` runs in-process (uvicorn on 127.0.0.1, ephemeral port) with every
integration on: the GitHub poller picks up a labelled issue from `FakeGitHub`,
the plan question goes to `FakeSlack` with buttons, a signed `block_actions`
Approve comes back over real HTTP to `POST /slack/events`, the offline builder
builds on the configured checkout, the branch is pushed to a bare git remote
and one draft PR is opened, the docs lane asks for Publish in Slack, and the
page is written to `FakeConfluence` (or, dry-run, only recorded). The issue's
status comment, the Slack thread and `/api/task/<id>` all tell the same story.
"""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_team import db
from agent_team.config import load_settings
from agent_team.integrations.github.intake import task_id_for
from agent_team.service.daemon import Daemon
from tests.fakes import confluence_api as fc
from tests.fakes.github_api import FakeGitHub
from tests.fakes.github_webhooks import GitHubWebhooks
from tests.fakes.slack_api import BOT_TOKEN, FakeSlack, SlackCall
from tests.integration.confluence.conftest import lane_settings
from tests.integration.github.conftest import (
    APP,
    TOKEN,
    WEBHOOK_SECRET,
    clone_with_bare_origin,
    git,
)
from tests.integration.pipeline.conftest import LONG_BODY
from tests.integration.slack.conftest import ALICE, CHANNEL, SECRET, block_action, form_body, sign
from tests.waiting import wait_for

DEADLINE_S = 60.0
TITLE = "Remember the email"


@pytest.fixture(autouse=True)
def _no_agent_team_env(isolated_env: Path) -> None:
    """Settings come from the test alone (see tests/conftest.py)."""


@dataclass
class World:
    slack: FakeSlack
    github: FakeGitHub
    confluence: fc.FakeConfluence
    clone: Path
    bare: Path
    number: int
    tmp_path: Path

    @property
    def task_id(self) -> str:
        return task_id_for(APP, self.number)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    clone, bare = clone_with_bare_origin(tmp_path)
    slack = FakeSlack().start()
    try:
        with FakeGitHub(token=TOKEN) as github, fc.fake_confluence() as confluence:
            github.add_repo(APP, remote=bare)
            number = github.add_issue(APP, labels=("agent-team",), title=TITLE, body=LONG_BODY)
            yield World(slack, github, confluence, clone, bare, number, tmp_path)
    finally:
        slack.stop()


class Running:
    """The daemon's `run()` on a thread; `stop()` asks it to stop and joins it."""

    def __init__(self, world: World, **overrides: Any) -> None:
        settings = load_settings(
            db_path=world.tmp_path / "agent-team.db",
            state_dir=world.tmp_path / "state",
            dashboard_port=0,
            dashboard_url="http://agent-team.example/",
            poll_s=0.05,
            # Slack (HTTP mode: signed requests to /slack/events)
            transport="slack",
            slack_bot_token=BOT_TOKEN,
            slack_signing_secret=SECRET,
            slack_channel=CHANNEL,
            slack_allowed_users=[ALICE],
            slack_api_url=world.slack.base_url,
            # GitHub (the first poll runs as the poller loop starts)
            github_repos=APP,
            github_api_url=world.github.url,
            github_token=TOKEN,
            github_comment=True,
            github_open_pr=True,
            github_checkouts=f"{APP}={world.clone}",
            github_webhook_secret=WEBHOOK_SECRET,
            # Confluence (dry-run unless overridden)
            **lane_settings(world.confluence, **overrides),
        )
        self.daemon = Daemon(settings)  # creates the ledger
        self.conn = db.open_ledger(settings.db_path)  # the test's own, for its reads
        self.codes: list[int] = []
        self.thread = threading.Thread(
            target=lambda: self.codes.append(self.daemon.run()), name="daemon", daemon=True
        )
        self.thread.start()
        wait_for(lambda: self.daemon.bound is not None, "the daemon's HTTP server")
        self.http = httpx.Client(base_url=self.daemon.url, timeout=DEADLINE_S)

    def click(self, question: db.Question, action: str) -> httpx.Response:
        """A signed Slack `block_actions` request for a button on the question's message."""
        assert question.channel_ref is not None
        body, headers = form_body(
            block_action(question.channel_ref, ALICE, f"agent_team.{action}", question.question_id)
        )
        return self.http.post("slack/events", content=body, headers={**headers, **sign(body)})

    def question(self, task_id: str, kind: str) -> db.Question:
        """The task's `kind` question once it is delivered (posted, `channel_ref` recorded)."""

        def delivered() -> db.Question | None:
            for question in db.list_questions(self.conn, thread_id=task_id):
                if question.kind == kind and question.channel_ref is not None:
                    return question
            return None

        found: db.Question = wait_for(delivered, f"the {kind} question to be posted")
        return found

    def answered(self, question_id: str) -> db.Question:
        def read() -> db.Question | None:
            question = db.get_question(self.conn, question_id)
            return question if question is not None and question.status == "answered" else None

        found: db.Question = wait_for(read, f"question {question_id} to be answered")
        return found

    def stop(self) -> None:
        self.http.close()
        self.daemon.request_stop()
        self.thread.join(timeout=DEADLINE_S)
        self.conn.close()
        assert not self.thread.is_alive(), "the daemon did not stop"
        assert self.codes == [0]


def open_files(ledger: Path) -> list[str]:
    """The files of `ledger` (itself, -wal, -shm) this process still has open."""
    fds = Path("/proc/self/fd")
    if not fds.is_dir():
        pytest.skip("needs /proc/self/fd")
    found = []
    for fd in fds.iterdir():
        try:
            target = fd.readlink()
        except OSError:  # the directory's own fd, or one closed meanwhile
            continue
        if target.name.startswith(ledger.name) and target.parent == ledger.parent:
            found.append(str(target))
    return sorted(found)


def blocks_of(call: SlackCall) -> list[dict[str, Any]]:
    blocks = call.params.get("blocks") or []
    parsed: list[dict[str, Any]] = json.loads(blocks) if isinstance(blocks, str) else blocks
    return parsed


def buttons(call: SlackCall) -> list[tuple[str, str]]:
    return [
        (element["text"]["text"], element["action_id"])
        for block in blocks_of(call)
        if block.get("type") == "actions"
        for element in block["elements"]
    ]


def post_of(slack: FakeSlack, question: db.Question) -> SlackCall:
    """The chat.postMessage that delivered `question` (its ts is in the channel_ref)."""
    assert question.channel_ref is not None
    _channel, ts = question.channel_ref.split(":")
    posts = slack.of("chat.postMessage")
    (call,) = [c for c in posts if question.question_id in json.dumps(c.params)]
    assert call.params["channel"] == CHANNEL and not call.params.get("thread_ts")
    assert ts.startswith("1700000000.")
    return call


def updates_of(slack: FakeSlack, question: db.Question) -> list[SlackCall]:
    assert question.channel_ref is not None
    channel, ts = question.channel_ref.split(":")
    return [
        c
        for c in slack.of("chat.update")
        if c.params.get("channel") == channel and c.params.get("ts") == ts
    ]


@pytest.mark.parametrize("dry_run", [True, False], ids=["confluence-dry-run", "confluence-write"])
def test_an_issue_goes_from_github_through_slack_to_a_pr_and_a_page(
    world: World, dry_run: bool
) -> None:
    running = Running(world, confluence_dry_run=dry_run)
    try:
        conn, slack, github = running.conn, world.slack, world.github
        task_id = world.task_id

        # 1. The poller turned the labelled issue into exactly one task.
        wait_for(lambda: db.get_task(conn, task_id), "the poller to start the task")
        assert [t.id for t in db.list_tasks(conn, limit=100)] == [task_id]
        task = db.get_task(conn, task_id)
        assert task is not None and task.source == "github" and task.title == TITLE

        # 2. The plan question is posted to the channel with its three buttons.
        plan = running.question(task_id, "plan_decision")
        assert buttons(post_of(slack, plan)) == [
            ("Approve", "agent_team.approve"),
            ("Request changes", "agent_team.revise"),
            ("Reject", "agent_team.reject"),
        ]
        assert github.repos[APP].pulls == [], "nothing is published before the approval"

        # 3. A signed Approve click over real HTTP answers it; the message loses its buttons.
        response = running.click(plan, "approve")
        assert response.status_code == 200
        answered = running.answered(plan.question_id)
        assert answered.answered_via is not None and ALICE in answered.answered_via
        redrawn = wait_for(lambda: updates_of(slack, plan), "the plan message to be redrawn")
        assert "Approved" in redrawn[-1].params["text"] and buttons(redrawn[-1]) == []

        # 4a. The task waits on its draft PR; merged on GitHub, the signed webhook makes the
        # daemon read the PR at once (4. below checks the PR itself).
        gate = running.question(task_id, "pull_request")
        assert gate.turn == plan.turn + 1
        (opened,) = github.repos[APP].pulls
        github.merge_pull(APP, opened["number"])
        delivery = GitHubWebhooks(github, WEBHOOK_SECRET).pull_request(
            APP, opened["number"], "closed"
        )
        response = delivery.send(f"{running.daemon.url.rstrip('/')}/github/webhook")
        assert (response.status_code, response.json()) == (200, {"pull_request": "answered"})
        assert running.answered(gate.question_id).answered_via == f"github:{APP}"

        # 5. The docs lane asks for Publish in Slack (after the merge).
        docs = running.question(task_id, "confluence_approval")
        assert docs.turn == gate.turn + 1
        assert buttons(post_of(slack, docs)) == [
            ("Publish", "agent_team.publish"),
            ("Request changes", "agent_team.revise"),
            ("Reject", "agent_team.reject"),
        ]
        assert ("DRY RUN" in docs.payload["text"]) is dry_run

        # 4. The build ran on the checkout, its branch is on the remote, one draft PR is open.
        (pull,) = github.repos[APP].pulls
        assert pull["merged_at"] is not None and pull["title"] == TITLE
        assert pull["body"].startswith(f"Closes #{world.number}")
        state = running.daemon.coordinator.graph.get_state(
            {"configurable": {"thread_id": task_id}}
        ).values
        branch = state["build"]["branch"]
        assert pull["head"]["ref"] == branch and pull["base"]["ref"] == "main"
        assert git(world.bare, "rev-parse", f"refs/heads/{branch}") == state["build"]["commit"]
        assert world.confluence.writes() == [], "nothing is written before Publish"

        response = running.click(docs, "publish")
        assert response.status_code == 200
        running.answered(docs.question_id)

        # 7. The task ends done.
        def finished() -> bool:
            found = db.get_task(conn, task_id)
            return found is not None and found.status == "done"

        wait_for(finished, "the task to finish")
        redrawn = wait_for(lambda: updates_of(slack, docs), "the docs message to be redrawn")
        assert "Publish approved" in redrawn[-1].params["text"] and buttons(redrawn[-1]) == []

        # 6. conf_write: dry-run records the request and sends nothing; else one page write.
        (effect,) = db.list_effects(conn, task_id=task_id, kind="confluence_write")
        assert effect.state == "done"
        assert (effect.request["method"], effect.request["path"]) == ("POST", "/api/v2/pages")
        if dry_run:
            assert world.confluence.writes() == []
            assert effect.result["dry_run"] is True and effect.result["sent"] is False
        else:
            (write,) = world.confluence.writes()
            assert (write.method, write.path, write.auth) == ("POST", "/wiki/api/v2/pages", "basic")
            (page,) = world.confluence.pages.values()
            assert page.title == f"Design: {TITLE}" and effect.result_ref == page.id

        # 7. One status comment, created once and edited in place, ends done with the PR.
        # (The task row says `done` a moment before its observers hear of it.)
        def comment_says_done() -> list[dict[str, Any]]:
            comments = github.comments_on(APP, world.number)
            return comments if any("**done**" in c["body"] for c in comments) else []

        (comment,) = wait_for(comment_says_done, "the status comment to say done")
        assert pull["html_url"] in comment["body"]
        assert f"http://agent-team.example/task/{task_id}" in comment["body"]
        comments_path = f"/repos/{APP}/issues/{world.number}/comments"
        assert len(github.seen("POST", comments_path)) == 1, "created once, then edited"
        edits = {r.path for r in github.seen("PATCH")}
        assert edits == {f"/repos/{APP}/issues/comments/{comment['id']}"}
        assert len(github.repos[APP].pulls) == 1
        assert len(github.seen("POST", f"/repos/{APP}/pulls")) == 1

        # The Slack thread got the done notice with the PR's URL.
        def done_notice() -> list[SlackCall]:
            return [
                c
                for c in slack.of("chat.postMessage")
                if "is done" in str(c.params.get("text"))
                and pull["html_url"] in str(c.params.get("text"))
            ]

        (notice,) = wait_for(done_notice, "the done notice in Slack")
        assert docs.channel_ref is not None
        assert notice.params["channel"] == CHANNEL
        assert notice.params.get("thread_ts") == docs.channel_ref.split(":")[1]
        questions_posted = [
            c for c in slack.of("chat.postMessage") if not c.params.get("thread_ts")
        ]
        assert len(questions_posted) == 3, "each question was posted once (plan, PR, docs)"
        assert all(c.authorized for c in slack.calls)

        # The dashboard API lists what the task did outside, the PR among it.
        # (Each outside call is recorded done just after its reply, so poll for the last ones.)
        def report() -> dict[str, Any] | None:
            response = running.http.get(f"api/task/{task_id}")
            assert response.status_code == 200
            found: dict[str, Any] = response.json()
            return found if all(e["state"] == "done" for e in found["effects"]) else None

        body: dict[str, Any] = wait_for(report, "every effect recorded done")
        assert body["task"]["status"] == "done"
        kinds = [e["kind"] for e in body["effects"]]
        for kind in ("git_push", "github_pr", "github_comment", "confluence_write"):
            assert kinds.count(kind) == 1, (kind, kinds)
        effects = {e["kind"]: e for e in body["effects"]}
        assert effects["github_pr"]["url"] == pull["html_url"]
        assert effects["confluence_write"]["dry_run"] is dry_run
        if not dry_run:
            assert effects["confluence_write"]["url"] == effect.result["url"]
        assert {q["kind"] for q in body["questions"]} == {
            "plan_decision",
            "pull_request",
            "confluence_approval",
        }
        assert body["pull_request"]["state"] == "merged"
    finally:
        running.stop()
    assert running.daemon.github is not None
    assert running.daemon.github.totals.tasks_created == 1
    # Nothing the daemon opened on the ledger stays open once it has stopped. (Writer
    # connections cached by its finished threads go with them, once collected.)
    ledger = world.tmp_path / "agent-team.db"
    wait_for(lambda: gc.collect() >= 0 and open_files(ledger) == [], "the ledger closed", 10)


def test_a_build_that_ends_during_the_stop_grace_still_opens_its_pr(
    world: World, tmp_path: Path
) -> None:
    """SIGTERM mid-build: the run finishes within the grace period and publishes normally."""
    started, go = tmp_path / "build-started", tmp_path / "build-go"
    command = f"touch {started}; while [ ! -e {go} ]; do sleep 0.05; done; echo built > built.txt"
    running = Running(world, builder="command", build_command=command, stop_grace_s=DEADLINE_S)
    try:
        plan = running.question(world.task_id, "plan_decision")
        assert running.click(plan, "approve").status_code == 200
        wait_for(started.exists, "the build to start")
        running.daemon.request_stop()
        health = running.daemon.health

        def poller_stopped() -> bool:
            loops = {status.name: status for status in health.loops()}
            return not loops["github-poller"].alive

        wait_for(poller_stopped, "the GitHub poller to stop")
    finally:
        go.touch()  # the build finishes inside the grace period
        running.stop()
    conn = db.open_ledger(world.tmp_path / "agent-team.db")
    try:
        task = db.get_task(conn, world.task_id)
        note = db.list_transitions(conn, world.task_id)[-1].note
    finally:
        conn.close()
    # The run went on: published, then waiting on its pull request (the docs lane follows
    # the merge).
    assert task is not None and (task.status, task.phase) == ("waiting", "pr_open"), note
    (pull,) = world.github.repos[APP].pulls
    assert pull["draft"] is True
    assert git(world.bare, "ls-tree", "--name-only", pull["head"]["ref"]) == "built.txt"
    del running  # an HTTP client the daemon left open warns (ResourceWarning) now, not at exit
    gc.collect()
