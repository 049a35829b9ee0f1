"""`kill -9` after the PR gate heard of the merge and before `done`: the task still ends done.

The gate decides the outcome (merged) a node before `done`; the recovery must
not take that for the end of the graph while `done` is still due.
"""

from __future__ import annotations

import pytest

from agent_team import db
from tests.integration.github.conftest import APP, Setup, open_pr_and_stop
from tests.integration.github.test_pr_crash_cli import CRASHED, tick


@pytest.mark.slow
def test_a_crash_between_the_merge_and_done_still_ends_the_task_done(setup: Setup) -> None:
    open_pr_and_stop(setup)  # intake, plan approved, build, draft PR
    (pull,) = setup.fake.repos[APP].pulls
    setup.fake.merge_pull(APP, pull["number"])
    died = tick(setup, "done:before")
    assert died.returncode == CRASHED, died.stderr
    again = tick(setup)
    assert again.returncode == 0, again.stderr
    with db.open_ledger(setup.settings.db_path) as conn:
        task = db.get_task(conn, setup.task_id)
        assert task is not None and (task.status, task.phase) == ("done", "done")
