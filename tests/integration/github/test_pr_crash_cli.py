"""`kill -9` around a follow-up's push, through `agent-team tick` subprocesses: one push.

`AGENT_TEAM_CRASH_AT=pr_open:pushing` dies with the push recorded as pending and
nothing sent; `pr_open:pushed` dies after git pushed and before the record says
so. After a clean `tick` the PR's branch holds exactly one follow-up commit, and
the remote received exactly one push for it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_team import db
from agent_team.config import ENV_PREFIX
from tests.integration.github.conftest import APP, TOKEN, Setup, git, open_pr_and_stop

AGENT_TEAM = Path(sys.executable).with_name("agent-team")
CRASHED = 137


def tick(setup: Setup, crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
    settings = setup.settings
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(ENV_PREFIX)}
    env.update(
        AGENT_TEAM_DB_PATH=str(settings.db_path),
        AGENT_TEAM_STATE_DIR=str(settings.state_dir),
        AGENT_TEAM_SANDBOX="none",
        AGENT_TEAM_LOG_LEVEL="warning",
        AGENT_TEAM_GITHUB_REPOS=APP,
        AGENT_TEAM_GITHUB_API_URL=setup.fake.url,
        AGENT_TEAM_GITHUB_TOKEN=TOKEN,
        AGENT_TEAM_GITHUB_OPEN_PR="true",
        AGENT_TEAM_GITHUB_CHECKOUTS=f"{APP}={setup.clone}",
        AGENT_TEAM_GITHUB_REVIEWERS="reviewer",
    )
    if crash_at:
        env["AGENT_TEAM_CRASH_AT"] = crash_at
    return subprocess.run(
        [str(AGENT_TEAM), "tick", "--until-idle", "--timeout", "60"],
        cwd=settings.state_dir.parent,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(("crash_at", "pushed_at_crash"), [("pushing", 1), ("pushed", 2)])
@pytest.mark.slow
def test_a_crash_around_a_follow_up_push_pushes_once(
    setup: Setup, crash_at: str, pushed_at_crash: int
) -> None:
    open_pr_and_stop(setup)  # intake, plan approved, build, draft PR
    (pull,) = setup.fake.repos[APP].pulls
    branch, built = pull["head"]["ref"], pull["head"]["sha"]
    path = git(setup.bare, "show", "--name-only", "--format=", built).splitlines()[0]
    setup.fake.submit_review(
        APP, pull["number"], comments=[{"path": path, "line": 1, "body": "Shorter, please."}]
    )
    assert len(setup.fake.pushes(APP)) == 1

    died = tick(setup, f"pr_open:{crash_at}")
    assert died.returncode == CRASHED, died.stderr
    assert len(setup.fake.pushes(APP)) == pushed_at_crash
    conn = db.open_ledger(setup.settings.db_path)
    try:
        effect = db.get_effect(conn, f"github:push:{setup.task_id}:r1")
        assert effect is not None and effect.state == "pending"
    finally:
        conn.close()

    done = tick(setup)
    assert done.returncode == 0, done.stderr
    assert len(setup.fake.pushes(APP)) == 2  # the build, and the follow-up once
    head = git(setup.bare, "rev-parse", f"refs/heads/{branch}")
    assert git(setup.bare, "rev-parse", f"{head}^") == built
    conn = db.open_ledger(setup.settings.db_path)
    try:
        effect = db.get_effect(conn, f"github:push:{setup.task_id}:r1")
        assert effect is not None and (effect.state, effect.result_ref) == ("done", head)
        task = db.get_task(conn, setup.task_id)
        assert task is not None and (task.status, task.phase) == ("waiting", "pr_open")
        replies = [c for c in setup.fake.repos[APP].review_comments.values() if c["in_reply_to_id"]]
        assert len(replies) == 1
    finally:
        conn.close()
