"""The draft pull request after a build: push the task branch, open one draft PR, once.

`GraphDeps.publish` calls `PullRequestPublisher(state)` in the `publish` node.
Both side effects are recorded (`github:push:<task>` with the pushed commit,
`github:pr:<task>` with the PR number and URL). A `pending` PR record means a
crash may have happened after GitHub created the PR, so the PR is looked up by
branch before one is created: a task never gets two pull requests.

The checkout is the repository the build was recorded in: the clone the
task names (`AGENT_TEAM_GITHUB_CHECKOUTS`), else `AGENT_TEAM_REPO_PATH`; for a
task naming `owner/name` or a URL, the mirror it was built from
(`agent_team.builders.repos`). The host and the header (`git_host_url`,
`auth_env`) live in `agent_team.common.git_host`, which the builders' fetch
shares.

The push hands the token to git, so it must not trust the checkout: the
builder (a coding agent) works in a worktree that shares the checkout's
`.git/config` and hooks, and could plant a `pre-push` hook, a
`remote.origin.pushurl` or a `url.*.insteadOf` to receive the token. So:

- git never runs with the token in the checkout. The push runs in a fresh
  temporary bare repository of our own (no hooks, no remotes, empty config)
  that borrows the checkout's objects through `objects/info/alternates`, and
  pushes the recorded build commit, not whatever the branch points at now.
- The destination is an explicit URL built from the settings,
  `<git host>/<owner>/<repo>.git` (`git_host_url`), never a remote name.
- The header is scoped to that host (`http.<host>/.extraHeader`), handed to
  git through `GIT_CONFIG_COUNT/KEY_0/VALUE_0` (not argv, not a URL, not a log).
- System and global git config are off (`GIT_CONFIG_NOSYSTEM=1`,
  `GIT_CONFIG_GLOBAL=/dev/null`), hooks are off (`core.hooksPath=/dev/null`,
  `--no-verify`).

What remains trusted: the checkout's object store (objects are
content-addressed, so they can change what is pushed but cannot read the
token), and the `git` binary and environment of the daemon itself (proxy
variables such as `HTTPS_PROXY` are passed on).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agent_team import db
from agent_team.builders.proc import Completed, ProcessTimeout, inherited_env, run_process
from agent_team.builders.repos import mirror_path
from agent_team.common.git_host import auth_env, git_host_url
from agent_team.common.repo_spec import RemoteRepo, parse_repo
from agent_team.exceptions import InvalidRepoError, PublishFailedError
from agent_team.integrations.github.intake import SOURCE, GitHubClient, GitHubError, parse_issue_url
from agent_team.task_model import TaskState

__all__ = ["PUSH_TIMEOUT_S", "PullRequestPublisher", "auth_env", "git_host_url"]

log = logging.getLogger(__name__)

PUSH_TIMEOUT_S = 300.0


# git reads these from the environment; the push sets its own or none at all.
_GIT_CONFIG_VARS = ("GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG_SYSTEM")


def _git_env(extra: dict[str, str]) -> dict[str, str]:
    env = {
        key: value
        for key, value in inherited_env().items()
        if key not in _GIT_CONFIG_VARS
        and not key.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))
    }
    return env | extra


class PullRequestPublisher:
    """`publish(state) -> {"url", "number"} | None` for GitHub tasks.

    Args:
        client: the GitHub client.
        ledger: the process's ledger, shared (the composition root's).
        connect: or, standing alone, how to open a ledger of its own on first use.
        token: the token git pushes with.
        repos: the configured `owner/repo` names; other tasks are not published.
        default_repo_path: `AGENT_TEAM_REPO_PATH`, used when the task names no repository.
        api_url: `AGENT_TEAM_GITHUB_API_URL`; the git host is derived from it
            (`git_host_url`) and branches are pushed to `<host>/<owner>/<repo>.git`.
        state_dir: the state folder, where a task that names a remote repository
            (`owner/name`, a URL) was built, in its mirror (`builders.repos.mirror_path`).
    """

    def __init__(
        self,
        client: GitHubClient,
        *,
        ledger: db.Ledger | None = None,
        connect: Callable[[], db.Ledger] | None = None,
        token: str | None,
        repos: Sequence[str],
        default_repo_path: Path | None,
        api_url: str = "https://api.github.com",
        state_dir: Path | None = None,
    ) -> None:
        self.client = client
        if (ledger is None) == (connect is None):
            raise ValueError("give the publisher a shared `ledger` or a `connect` to open one")
        self._ledger = ledger
        self._connect = connect  # when set, the ledger it opens is its own to close
        self._guard = threading.Lock()
        self._token = token
        self.repos = {repo.lower() for repo in repos}
        self.default_repo_path = default_repo_path
        self.host_url = git_host_url(api_url)
        self.state_dir = state_dir

    @property
    def ledger(self) -> db.Ledger:
        with self._guard:
            if self._ledger is None:
                assert self._connect is not None
                self._ledger = self._connect()
            return self._ledger

    def close_ledger(self) -> None:
        """Close the ledger it opened itself (a later use opens it again); a shared one stays."""
        with self._guard:
            if self._connect is not None and self._ledger is not None:
                self._ledger.close()
                self._ledger = None

    def __call__(self, state: TaskState) -> dict[str, Any] | None:
        try:
            return self._publish(state)
        except GitHubError as exc:
            raise PublishFailedError(
                f"{exc}; the build is kept on its branch: fix the cause (token, repository "
                "settings, AGENT_TEAM_GITHUB_API_URL)"
            ) from exc

    def _publish(self, state: TaskState) -> dict[str, Any] | None:
        task = db.get_task(self.ledger, state["task_id"])
        build = state.get("build") or {}
        if task is None or task.source != SOURCE or not build:
            return None
        where = parse_issue_url(task.source_ref)
        if where is None or where[0].lower() not in self.repos:
            return None
        repo, number = where
        branch, commit = str(build["branch"]), str(build["commit"])
        self.push(task.id, repo, self.checkout_for(state, repo), branch, commit)
        # The PR gate (nodes.pull_request) follows this PR: where it lives, the head it has.
        return {**self.open_pr(task, repo, number, branch), "repo": repo, "head": commit}

    def checkout_for(self, state: TaskState, repo: str) -> Path:
        """The repository the task's builds are recorded in (the build's and follow-ups')."""
        named = state.get("repo")
        checkout = self._built_in(named) if named else self.default_repo_path
        if checkout is None:
            raise GitHubError(
                "cannot push: the task names no repository and AGENT_TEAM_REPO_PATH is not "
                "set; point it at a clone of " + repo
            )
        return checkout

    def _built_in(self, named: str) -> Path:
        """The repository the build was recorded in: a local clone, or a remote's mirror."""
        try:
            spec = parse_repo(named, github_host=self.host_url)
        except InvalidRepoError as exc:
            raise GitHubError(str(exc)) from None
        if not isinstance(spec, RemoteRepo):
            return spec.path
        if self.state_dir is None:
            raise GitHubError(
                f"cannot push: the task was built in a mirror of {spec.text}, and this "
                "publisher was given no state folder (AGENT_TEAM_STATE_DIR)"
            )
        return mirror_path(self.state_dir, spec)

    # -- push --------------------------------------------------------------------------

    def push_url(self, repo: str) -> str:
        """Where `repo`'s branches go: from the settings, never from the checkout's config."""
        return f"{self.host_url}{repo}.git"

    def push(
        self,
        task_id: str,
        repo: str,
        checkout: Path,
        branch: str,
        commit: str,
        *,
        effect_id: str | None = None,
        crash: Callable[[str], None] | None = None,
    ) -> None:
        """Push `commit` to `refs/heads/<branch>` of `repo`, from an isolated repository.

        A fast-forward only: a follow-up (`effect_id` names its round) never rewrites
        what reviewers saw, and a branch someone else moved is refused, not overwritten.
        `crash` is the test hook's (`AGENT_TEAM_CRASH_AT=pr_open:pushing|pushed`).
        """
        effect_id = effect_id or f"github:push:{task_id}"
        url = self.push_url(repo)
        request = {"branch": branch, "commit": commit, "url": url}
        effect = db.begin_effect(
            self.ledger, effect_id=effect_id, task_id=task_id, kind="git_push", request=request
        )
        if effect.state == "done" and effect.result_ref == commit:
            return  # pushing again would change nothing
        if crash is not None:
            crash("pushing")
        git = shutil.which("git")
        if git is None:
            raise GitHubError("git is not on PATH; install git to push task branches")
        common = self._common_dir(git, checkout)
        with tempfile.TemporaryDirectory(prefix="agent-team-push-") as scratch:
            # A repository only we configure: it borrows the checkout's objects and
            # nothing else (no hooks, no remotes, no url rewrites).
            made = self._git(
                git, ["init", "-q", "--bare", "--template=", scratch], cwd=Path(scratch)
            )
            if made.returncode != 0:
                raise GitHubError(f"cannot make a scratch repository to push from: {made.stderr}")
            alternates = Path(scratch) / "objects" / "info" / "alternates"
            alternates.parent.mkdir(parents=True, exist_ok=True)
            alternates.write_text(f"{common / 'objects'}\n", encoding="utf-8")
            args = [
                "-c",
                f"core.hooksPath={os.devnull}",
                "--git-dir",
                scratch,
                "push",
                "--porcelain",
                "--no-verify",
                url,
                f"{commit}:refs/heads/{branch}",
            ]
            log.info("github: pushing %s (%s) of %s to %s", branch, commit[:12], checkout, url)
            done = self._git(git, args, cwd=Path(scratch), token=self._token)
        if done.returncode != 0:
            output = self.client.clean((done.stderr or done.stdout).strip())[-1500:]
            raise GitHubError(
                f"git push of {branch} to {url} failed (exit {done.returncode}): "
                f"{output}; check the repository, the build commit and the token's "
                "contents:write permission"
            )
        if crash is not None:
            crash("pushed")
        db.finish_effect(self.ledger, effect_id=effect_id, result_ref=commit, request=request)

    def _common_dir(self, git: str, checkout: Path) -> Path:
        # Run without the token: the checkout's config may be hostile.
        done = self._git(
            git, ["rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=checkout
        )
        common = done.stdout.strip()
        if done.returncode != 0 or not common:
            raise GitHubError(
                f"{checkout} is not a git repository; point AGENT_TEAM_GITHUB_CHECKOUTS or "
                "AGENT_TEAM_REPO_PATH at a clone"
            )
        return Path(common)

    def _git(self, git: str, args: list[str], *, cwd: Path, token: str | None = None) -> Completed:
        env = _git_env(auth_env(token, self.host_url))
        try:
            return run_process([git, *args], cwd=cwd, env=env, timeout_s=PUSH_TIMEOUT_S)
        except ProcessTimeout:
            raise GitHubError(f"git did not finish within {PUSH_TIMEOUT_S:g} s") from None
        except OSError as exc:
            raise GitHubError(f"cannot run git in {cwd}: {exc.strerror}") from None

    # -- pull request ------------------------------------------------------------------

    def open_pr(self, task: db.Task, repo: str, number: int, branch: str) -> dict[str, Any]:
        effect_id = f"github:pr:{task.id}"
        effect = db.begin_effect(
            self.ledger,
            effect_id=effect_id,
            task_id=task.id,
            kind="github_pr",
            request={"repo": repo, "issue": number, "head": branch},
        )
        if effect.state == "done" and isinstance(effect.result, dict):
            return dict(effect.result)
        request = effect.request if isinstance(effect.request, dict) else {}
        found = self._find(repo, branch) if request.get("posting") else None
        if found is None:
            db.finish_effect(
                self.ledger,
                effect_id=effect_id,
                state="pending",
                request={"repo": repo, "issue": number, "head": branch, "posting": True},
            )
            found = self._create(task, repo, number, branch)
        result = {"url": found["html_url"], "number": found["number"]}
        db.finish_effect(
            self.ledger, effect_id=effect_id, result_ref=str(found["number"]), result=result
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
            "GET",
            f"repos/{repo}/pulls",
            params={"head": f"{owner}:{branch}", "state": "all", "per_page": "100"},
        )
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
