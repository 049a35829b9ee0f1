"""The draft pull request after a build: push the task branch, open one draft PR, once.

`GraphDeps.publish` calls `PullRequestPublisher(state)` in the `publish` node.
The push goes to the local repository's `origin` with the token in an
`http.extraHeader` handed to git through `GIT_CONFIG_COUNT/KEY_0/VALUE_0`, so
it is in no URL, no argv and no log line. Both side effects are recorded
(`github:push:<task>` with the pushed commit, `github:pr:<task>` with the PR
number and URL). A `pending` PR record means a crash may have happened after
GitHub created the PR, so the PR is looked up by branch before one is
created: a task never gets two pull requests.
"""

from __future__ import annotations

import base64
import logging
import shutil
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_team import db
from agent_team.builders._proc import ProcessTimeout, inherited_env, run_process
from agent_team.exceptions import PublishFailedError
from agent_team.intake.github import SOURCE, GitHubClient, GitHubError, parse_issue_url
from agent_team.task_model import TaskState

__all__ = ["PUSH_TIMEOUT_S", "PullRequestPublisher", "auth_env"]

log = logging.getLogger(__name__)

PUSH_TIMEOUT_S = 300.0


def auth_env(token: str | None) -> dict[str, str]:
    """git configuration through the environment: the auth header, never in argv or a URL."""
    env = {"GIT_TERMINAL_PROMPT": "0"}
    if token:
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode("ascii")
        env |= {
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "http.extraHeader",
            "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
        }
    return env


class PullRequestPublisher:
    """`publish(state) -> {"url", "number"} | None` for GitHub tasks.

    Args:
        client: the GitHub client.
        connect: opens a ledger connection (lazily: the ledger is created by the
            coordinator, which is built after this object).
        token: the token git pushes with.
        repos: the configured `owner/repo` names; other tasks are not published.
        default_repo_path: `AGENT_TEAM_REPO_PATH`, used when the task names no repository.
        remote: the git remote to push to.
    """

    def __init__(
        self,
        client: GitHubClient,
        connect: Callable[[], sqlite3.Connection],
        *,
        token: str | None,
        repos: list[str],
        default_repo_path: Path | None,
        remote: str = "origin",
    ) -> None:
        self.client = client
        self._connect = connect
        self._conn: sqlite3.Connection | None = None
        self._guard = threading.Lock()
        self._token = token
        self.repos = {repo.lower() for repo in repos}
        self.default_repo_path = default_repo_path
        self.remote = remote

    @property
    def conn(self) -> sqlite3.Connection:
        with self._guard:
            if self._conn is None:
                self._conn = self._connect()
            return self._conn

    def close_ledger(self) -> None:
        """Close the ledger connection (a later use opens a new one)."""
        with self._guard:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __call__(self, state: TaskState) -> dict[str, Any] | None:
        try:
            return self._publish(state)
        except GitHubError as exc:
            raise PublishFailedError(
                f"{exc}; the build is kept on its branch: fix the cause (token, remote, "
                "repository settings)"
            ) from exc

    def _publish(self, state: TaskState) -> dict[str, Any] | None:
        task = db.get_task(self.conn, state["task_id"])
        build = state.get("build") or {}
        if task is None or task.source != SOURCE or not build:
            return None
        where = parse_issue_url(task.source_ref)
        if where is None or where[0].lower() not in self.repos:
            return None
        repo, number = where
        branch, commit = str(build["branch"]), str(build["commit"])
        named = state.get("repo")
        checkout = Path(named) if named else self.default_repo_path
        if checkout is None:
            raise GitHubError(
                "cannot push: the task names no repository and AGENT_TEAM_REPO_PATH is not "
                "set; point it at a clone of " + repo
            )
        self.push(task.id, checkout, branch, commit)
        return self.open_pr(task, repo, number, branch)

    # -- push --------------------------------------------------------------------------

    def push(self, task_id: str, checkout: Path, branch: str, commit: str) -> None:
        effect_id = f"github:push:{task_id}"
        effect = db.begin_effect(
            self.conn, effect_id=effect_id, task_id=task_id, kind="git_push",
            request={"branch": branch, "commit": commit, "remote": self.remote},
        )  # fmt: skip
        if effect.state == "done" and effect.result_ref == commit:
            return  # pushing again would change nothing
        git = shutil.which("git")
        if git is None:
            raise GitHubError("git is not on PATH; install git to push task branches")
        argv = [git, "push", "--porcelain", self.remote, f"refs/heads/{branch}:refs/heads/{branch}"]
        env = inherited_env() | auth_env(self._token)
        log.info("github: pushing %s from %s (%s)", branch, checkout, " ".join(argv[1:]))
        try:
            done = run_process(argv, cwd=checkout, env=env, timeout_s=PUSH_TIMEOUT_S)
        except ProcessTimeout:
            raise GitHubError(
                f"git push of {branch} did not finish within {PUSH_TIMEOUT_S:g} s"
            ) from None
        except OSError as exc:
            raise GitHubError(f"cannot run git in {checkout}: {exc.strerror}") from None
        if done.returncode != 0:
            output = self.client.clean((done.stderr or done.stdout).strip())[-1500:]
            raise GitHubError(
                f"git push of {branch} to {self.remote} failed (exit {done.returncode}): "
                f"{output}; check the remote and the token's contents:write permission"
            )
        db.finish_effect(self.conn, effect_id=effect_id, result_ref=commit, request={
            "branch": branch, "commit": commit, "remote": self.remote,
        })  # fmt: skip

    # -- pull request ------------------------------------------------------------------

    def open_pr(self, task: db.Task, repo: str, number: int, branch: str) -> dict[str, Any]:
        effect_id = f"github:pr:{task.id}"
        effect = db.begin_effect(
            self.conn, effect_id=effect_id, task_id=task.id, kind="github_pr",
            request={"repo": repo, "issue": number, "head": branch},
        )  # fmt: skip
        if effect.state == "done" and isinstance(effect.result, dict):
            return dict(effect.result)
        request = effect.request if isinstance(effect.request, dict) else {}
        found = self._find(repo, branch) if request.get("posting") else None
        if found is None:
            db.finish_effect(
                self.conn, effect_id=effect_id, state="pending",
                request={"repo": repo, "issue": number, "head": branch, "posting": True},
            )  # fmt: skip
            found = self._create(task, repo, number, branch)
        result = {"url": found["html_url"], "number": found["number"]}
        db.finish_effect(
            self.conn, effect_id=effect_id, result_ref=str(found["number"]), result=result
        )
        log.info("github: task %s has draft pull request %s", task.id, result["url"])
        return result

    def _create(self, task: db.Task, repo: str, number: int, branch: str) -> dict[str, Any]:
        info = self.client.json("GET", f"repos/{repo}")
        base = info.get("default_branch") if isinstance(info, dict) else None
        if not isinstance(base, str) or not base:
            raise GitHubError(f"GitHub did not say {repo}'s default branch")
        body = {
            "title": task.title,
            "head": branch,
            "base": base,
            "body": f"Closes #{number}\n\nOpened by agent-team for task `{task.id}`.",
            "draft": True,
        }
        try:
            created = self.client.json("POST", f"repos/{repo}/pulls", ok=(201,), json=body)
        except GitHubError as exc:
            if exc.status != 422:
                raise
            found = self._find(repo, branch)  # "A pull request already exists"
            if found is None:
                raise
            return found
        return self._checked(created)

    def _find(self, repo: str, branch: str) -> dict[str, Any] | None:
        owner = repo.split("/")[0]
        pulls = self.client.json(
            "GET", f"repos/{repo}/pulls",
            params={"head": f"{owner}:{branch}", "state": "all", "per_page": "100"},
        )  # fmt: skip
        for pull in pulls if isinstance(pulls, list) else []:
            if isinstance(pull, dict) and (pull.get("head") or {}).get("ref") == branch:
                return self._checked(pull)
        return None

    @staticmethod
    def _checked(pull: Any) -> dict[str, Any]:
        if (
            not isinstance(pull, dict)
            or not isinstance(pull.get("number"), int)
            or not isinstance(pull.get("html_url"), str)
        ):
            raise GitHubError("GitHub's pull request has no number or html_url")
        return pull
