"""A loopback GitHub: enough of the documented REST and GraphQL wire formats for agent-team.

A real HTTP server on 127.0.0.1 (ephemeral port) in a thread. What every route shares:
`Link` pagination (`per_page` honoured, max 100; the next URL carries an
opaque `cursor` the client can only get by following the link), `ETag` /
`If-None-Match` -> 304 on every JSON GET (a 304 does not count against the
limit), the `x-ratelimit-*` headers, injected failures (`force`: a 429 with
`retry-after`, a 502; `broken`: a repository that always fails), and every
request recorded (`seen`).

Issues: list (labels, state, sort), get, comments (create, edit, list).

Pull requests (issue #29: the PR is a gate): create (draft), get (the full
object: `merged`, `mergeable_state`, `head.sha`...), list (`state`, `head`,
`base`; the "simple" object, without `merged` or `mergeable_state`, as
GitHub's list). A pull request is also an issue, so its comments are issue
comments. A PR can only be opened for a branch that exists in the
repository's remote, a real bare git repository: `head.sha` is that branch's
tip, so a push (by a test or the daemon) moves it. Reviews, review comments
(threads; replies, which GitHub files as a new COMMENTED review each),
requested reviewers.

CI per commit: check runs and check suites, commit statuses (and the
combined status), Actions workflow runs and their jobs (a job is a check run:
same id), job logs through a 302 to a plain-text URL on this server that
needs no token (GitHub's is a pre-signed URL on another host), and
`rerun-failed-jobs` (a new attempt; the test scripts what it yields).
Required checks of a base branch: classic branch protection's
`required_status_checks` (404 "Branch not protected" / "Required status checks
not enabled" without) and the active rules for a branch from rulesets.

GraphQL at `POST /graphql` (`tests/fakes/github_graphql.py`): review threads,
`resolveReviewThread`, `markPullRequestReadyForReview`.

The same server is also the git host: `<url>/<owner>/<repo>.git` speaks git's
smart HTTP protocol through `git http-backend` (`tests.git_server.http_backend`)
over the repository's bare remote, and only with the token as Basic auth
(`x-access-token:<token>`), as GitHub does. `git_requests` records who pushed with which header.

Test-side methods (`open_pull`, `push`, `submit_review`, `set_check_run`,
`add_workflow_run`, `script_rerun`, `protect_branch`, `add_ruleset`,
`merge_pull`...) change the world as a person, a CI or an admin would;
`tests/fakes/github_webhooks.py` turns that world into signed webhook deliveries.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import secrets
import subprocess
import threading
import time
import traceback
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

from tests.fakes import github_graphql
from tests.fakes.http_body import read_body
from tests.fakes.loopback import LoopbackServer
from tests.git_server import http_backend, push_commit

__all__ = ["ACTIONS_APP", "FakeGitHub", "FakeRepo", "Recorded", "Rerun"]

Reply = tuple[int, Any, dict[str, str]]

HTML = "https://github.example"  # where html_url values point (never fetched)
ACTIONS_APP = "github-actions"
_APPS = {ACTIONS_APP: (15368, "GitHub Actions")}
# Worst first: a suite's or a run's conclusion is the worst of its runs' (GitHub shows the same).
_CONCLUSIONS = (
    "action_required",
    "startup_failure",
    "failure",
    "timed_out",
    "cancelled",
    "stale",
    "neutral",
    "skipped",
    "success",
)
_FAILED = {"failure", "timed_out", "cancelled", "startup_failure"}
_SHA = re.compile(r"^[0-9a-f]{40}$")
_REVIEW_STATES = {
    "APPROVE": "APPROVED",
    "APPROVED": "APPROVED",
    "REQUEST_CHANGES": "CHANGES_REQUESTED",
    "CHANGES_REQUESTED": "CHANGES_REQUESTED",
    "COMMENT": "COMMENTED",
    "COMMENTED": "COMMENTED",
}


@dataclass
class FakeRepo:
    owner: str
    name: str
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    pulls: list[dict[str, Any]] = field(default_factory=list)
    default_branch: str = "main"
    remote: Path | None = None  # a bare git repository the branches are pushed to
    broken: int | None = None  # every request answers this status
    next_number: int = 1
    collaborators: set[str] | None = None  # who may be asked to review; None: anyone
    id: int = 0
    reviews: dict[int, dict[str, Any]] = field(default_factory=dict)
    review_comments: dict[int, dict[str, Any]] = field(default_factory=dict)
    threads: dict[str, dict[str, Any]] = field(default_factory=dict)  # by GraphQL node id
    check_suites: dict[int, dict[str, Any]] = field(default_factory=dict)
    check_runs: dict[int, dict[str, Any]] = field(default_factory=dict)  # Actions jobs too
    statuses: list[dict[str, Any]] = field(default_factory=list)
    workflow_runs: dict[int, dict[str, Any]] = field(default_factory=dict)
    protection: dict[str, dict[str, Any]] = field(default_factory=dict)  # by branch
    rulesets: list[dict[str, Any]] = field(default_factory=list)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


@dataclass(frozen=True)
class Rerun:
    """One `rerun-failed-jobs` (or `rerun`) GitHub accepted."""

    repo: str
    run_id: int
    attempt: int  # the attempt it started
    jobs: tuple[str, ...]  # the names of the jobs it ran again


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _node(prefix: str, number: int) -> str:
    """A global node id in GitHub's newer shape (`PR_kwDO...`); opaque to clients."""
    return f"{prefix}_kwDO" + base64.urlsafe_b64encode(f"fake:{number}".encode()).decode().rstrip(
        "="
    )


def _int(query: Mapping[str, str], key: str, default: int) -> int:
    try:
        return int(query.get(key, default))
    except ValueError:
        return default


def _worst(conclusions: Sequence[str | None]) -> str | None:
    found = [c for c in conclusions if c is not None]
    if not found:
        return None
    return min(found, key=lambda c: _CONCLUSIONS.index(c) if c in _CONCLUSIONS else 0)


class FakeGitHub:
    """`with FakeGitHub(token=...) as gh:` then point `AGENT_TEAM_GITHUB_API_URL` at `gh.url`."""

    def __init__(
        self, token: str | None = None, *, rate_limit: int = 5000, login: str = "agent-team[bot]"
    ) -> None:
        self.token = token
        self.login = login  # who the token is: the author of what the API creates
        self.repos: dict[str, FakeRepo] = {}
        self.comments: dict[int, dict[str, Any]] = {}
        self.requests: list[Recorded] = []
        self.rate_remaining = rate_limit
        self._rate_limit = rate_limit
        self.rate_reset = int(time.time()) + 3600
        self.forced: list[tuple[str, int, dict[str, str]]] = []  # (path prefix, status, headers)
        self.git_requests: list[Recorded] = []  # smart-HTTP requests to `<owner>/<repo>.git`
        self.link_base: str | None = None  # put next-page links on another server (a test)
        self.log_base: str | None = None  # serve job logs from another origin (a test)
        self.comments_page_cap = 100  # GitHub's per_page maximum; lower it to force pages
        self.page_cap = 100  # the same for every other list
        self.reruns: list[Rerun] = []
        self.graphql_calls: list[tuple[str, dict[str, Any]]] = []  # (root field, arguments)
        self.lock = threading.RLock()
        self._clock = 0
        self._next_id = 9000
        self._log_keys: dict[int, str] = {}  # job id -> the signature its log URL carries
        self._scripted: dict[tuple[str, int], dict[str, Any]] = {}  # the next rerun's outcome
        self._pushes = 0
        self._loopback = LoopbackServer(self._handler())

    # -- life cycle ---------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._loopback.port}"

    def __enter__(self) -> FakeGitHub:
        self._loopback.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._loopback.stop()

    # -- building the world ---------------------------------------------------------------

    def add_repo(self, full_name: str, **kwargs: Any) -> FakeRepo:
        owner, name = full_name.split("/")
        repo = FakeRepo(owner, name, **kwargs)
        with self.lock:
            repo.id = repo.id or self._new_id()
            self.repos[full_name.lower()] = repo
        return repo

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _repo(self, full_name: str) -> FakeRepo:
        return self.repos[full_name.lower()]

    def add_issue(
        self,
        full_name: str,
        *,
        title: str | None = None,
        body: str | None = "Please do the thing.",
        labels: tuple[str, ...] = (),
        pull_request: bool = False,
        state: str = "open",
        raw: dict[str, Any] | None = None,
    ) -> int:
        """Add an issue (or a pull request, which the issues API lists too); returns its number."""
        with self.lock:
            repo = self._repo(full_name)
            number = repo.next_number
            repo.next_number += 1
            item: dict[str, Any] = {
                "id": 100000 + number,
                "number": number,
                "title": title or f"Issue {number}",
                "body": body,
                "state": state,
                "html_url": f"{HTML}/{repo.full_name}/issues/{number}",
                "labels": [{"id": i, "name": name} for i, name in enumerate(labels)],
                "user": {"login": "someone"},
                "_updated": self._tick(),
            }
            if pull_request:
                item["pull_request"] = {"url": f"{self.url}/repos/{repo.full_name}/pulls/{number}"}
                item["html_url"] = f"{HTML}/{repo.full_name}/pull/{number}"
            if raw is not None:
                item = {**raw, "number": number, "_updated": self._tick()}
            repo.issues[number] = item
            return number

    def touch(self, full_name: str, number: int, **changes: Any) -> None:
        """Change an issue (labels as a tuple of names); it moves to the top of `sort=updated`."""
        with self.lock:
            item = self._repo(full_name).issues[number]
            if "labels" in changes:
                changes["labels"] = [{"id": 1, "name": n} for n in changes["labels"]]
            item.update(changes)
            item["_updated"] = self._tick()

    def force(self, path_prefix: str, status: int, headers: dict[str, str] | None = None) -> None:
        """The next request whose path starts with `path_prefix` gets `status` (once)."""
        with self.lock:
            self.forced.append((path_prefix, status, headers or {}))

    def seen(self, method: str | None = None, path: str | None = None) -> list[Recorded]:
        with self.lock:
            return [
                r
                for r in self.requests
                if (method is None or r.method == method) and (path is None or r.path == path)
            ]

    def comments_on(self, full_name: str, number: int) -> list[dict[str, Any]]:
        with self.lock:
            return [
                c
                for c in self.comments.values()
                if c["_repo"] == full_name.lower() and c["_issue"] == number
            ]

    def pushes(self, full_name: str) -> list[Recorded]:
        """The git pushes (`git-receive-pack` POSTs) made to `full_name` over smart HTTP."""
        wanted = f"/{full_name.lower()}.git/git-receive-pack"
        with self.lock:
            return [r for r in self.git_requests if r.method == "POST" and r.path.lower() == wanted]

    def graphql(self, root_field: str | None = None) -> list[dict[str, Any]]:
        """The arguments of each GraphQL root field answered (`resolveReviewThread`...)."""
        with self.lock:
            return [args for name, args in self.graphql_calls if root_field in (None, name)]

    # -- people and repositories on the wire ---------------------------------------------

    def user_json(self, login: str) -> dict[str, Any]:
        number = zlib.crc32(login.encode()) % 10_000_000 + 1
        return {
            "login": login,
            "id": number,
            "node_id": _node("U" if not login.endswith("[bot]") else "BOT", number),
            "avatar_url": f"{HTML}/avatars/{login}",
            "url": f"{self.url}/users/{login}",
            "html_url": f"{HTML}/{login}",
            "type": "Bot" if login.endswith("[bot]") else "User",
            "site_admin": False,
        }

    def repo_json(self, full_name: str) -> dict[str, Any]:
        repo = self._repo(full_name)
        return {
            "id": repo.id,
            "node_id": _node("R", repo.id),
            "name": repo.name,
            "full_name": repo.full_name,
            "private": False,
            "owner": self.user_json(repo.owner),
            "html_url": f"{HTML}/{repo.full_name}",
            "url": f"{self.url}/repos/{repo.full_name}",
            "default_branch": repo.default_branch,
        }

    # -- git: the remote is the truth about branches ----------------------------------------

    def _git(self, repo: FakeRepo, *args: str) -> subprocess.CompletedProcess[str]:
        assert repo.remote is not None
        return subprocess.run(
            ["git", "--git-dir", str(repo.remote), *args],
            capture_output=True,
            text=True,
            check=False,
            env={
                "PATH": os.environ.get("PATH", os.defpath),
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_CONFIG_GLOBAL": "/dev/null",
                "GIT_AUTHOR_NAME": "GitHub",
                "GIT_AUTHOR_EMAIL": "noreply@github.example",
                "GIT_COMMITTER_NAME": "GitHub",
                "GIT_COMMITTER_EMAIL": "noreply@github.example",
            },
        )

    def _tips(self, repo: FakeRepo) -> dict[str, str]:
        if repo.remote is None or not repo.remote.is_dir():
            return {}
        done = self._git(
            repo, "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads"
        )
        return dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)

    def refresh_heads(self, repo: FakeRepo) -> None:
        """Each open PR's `head.sha` is its branch's tip in the remote: a push moved it."""
        tips = self._tips(repo)
        for pull in repo.pulls:
            if pull["state"] != "open":
                continue
            sha = tips.get(pull["head"]["ref"])
            if sha and sha != pull["head"]["sha"]:
                if pull["head"]["sha"]:
                    pull["_heads"].append(pull["head"]["sha"])
                pull["head"]["sha"] = sha
                pull["updated_at"] = _now()
            base = tips.get(pull["base"]["ref"])
            if base:
                pull["base"]["sha"] = base

    def _resolve_ref(self, repo: FakeRepo, ref: str) -> str | None:
        """A commit sha for `ref` (a sha, a branch or a tag), or None if GitHub knows none."""
        if repo.remote is None or ref.startswith("-"):
            return ref if _SHA.match(ref) else None
        done = self._git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        sha = done.stdout.strip()
        return sha if done.returncode == 0 and sha else None

    def push(
        self,
        full_name: str,
        branch: str,
        files: Mapping[str, str] | None = None,
        message: str | None = None,
        *,
        start: str | None = None,
    ) -> str:
        """Commit on `branch` of the remote as someone's push would; the new tip's sha.

        A branch that does not exist yet starts at `start` (default: the default branch).
        """
        with self.lock:
            repo = self._repo(full_name)
            assert repo.remote is not None, f"{full_name} has no remote to push to"
            if branch not in self._tips(repo):
                origin = self._resolve_ref(repo, start or repo.default_branch)
                assert origin is not None, f"{full_name} has no {start or repo.default_branch}"
                self._git(repo, "update-ref", f"refs/heads/{branch}", origin)
            self._pushes += 1
            changed = files or {f"change-{self._pushes}.txt": f"change {self._pushes}\n"}
            sha = push_commit(
                repo.remote, message or f"change {self._pushes}", changed, branch=branch
            )
            self.refresh_heads(repo)
            return sha

    # -- pull requests ------------------------------------------------------------------

    def find_pull(self, repo: FakeRepo, number: int) -> dict[str, Any] | None:
        return next((p for p in repo.pulls if p["number"] == number), None)

    def _pull(self, full_name: str, number: int) -> tuple[FakeRepo, dict[str, Any]]:
        repo = self._repo(full_name)
        pull = self.find_pull(repo, number)
        assert pull is not None, f"{full_name} has no pull request #{number}"
        return repo, pull

    def _new_pull(
        self,
        repo: FakeRepo,
        *,
        head: str,
        base: str,
        title: str,
        body: str | None,
        draft: bool,
        user: str,
    ) -> dict[str, Any]:
        number = repo.next_number
        repo.next_number += 1
        pull_id = self._new_id()
        now = _now()
        html = f"{HTML}/{repo.full_name}/pull/{number}"
        tips = self._tips(repo)
        pull: dict[str, Any] = {
            "number": number,
            "id": pull_id,
            "node_id": _node("PR", pull_id),
            "html_url": html,
            "state": "open",
            "draft": draft,
            "title": title,
            "body": body,
            "user": user,
            "head": {"ref": head, "label": f"{repo.owner}:{head}", "sha": tips.get(head, "")},
            "base": {"ref": base, "label": f"{repo.owner}:{base}", "sha": tips.get(base, "")},
            "created_at": now,
            "updated_at": now,
            "closed_at": None,
            "merged_at": None,
            "merged_by": None,
            "merge_commit_sha": None,
            "requested_reviewers": [],
            "requested_teams": [],
            "mergeable_state": None,  # None: computed, as GitHub does in the background
            "_heads": [],  # earlier head shas, oldest first
        }
        repo.pulls.append(pull)
        # A pull request is an issue too: its comments are issue comments.
        repo.issues[number] = {
            "id": pull_id + 500_000,
            "number": number,
            "title": title,
            "body": body,
            "state": "open",
            "html_url": html,
            "labels": [],
            "user": {"login": user},
            "draft": draft,
            "pull_request": {
                "url": f"{self.url}/repos/{repo.full_name}/pulls/{number}",
                "html_url": html,
                "diff_url": f"{html}.diff",
                "patch_url": f"{html}.patch",
                "merged_at": None,
            },
            "_updated": self._tick(),
        }
        return pull

    def _sync_issue(self, repo: FakeRepo, pull: dict[str, Any]) -> None:
        issue = repo.issues.get(pull["number"])
        if issue is None:
            return
        issue["state"] = pull["state"]
        issue["draft"] = pull["draft"]
        issue["closed_at"] = pull["closed_at"]
        issue["pull_request"]["merged_at"] = pull["merged_at"]
        issue["_updated"] = self._tick()

    def open_pull(
        self,
        full_name: str,
        head: str,
        *,
        base: str | None = None,
        title: str | None = None,
        body: str | None = None,
        draft: bool = True,
        user: str = "someone",
    ) -> int:
        """Open a PR as `user` would in the UI (the branch must be on the remote); its number."""
        with self.lock:
            repo = self._repo(full_name)
            pull = self._new_pull(
                repo,
                head=head,
                base=base or repo.default_branch,
                title=title or f"Change {head}",
                body=body,
                draft=draft,
                user=user,
            )
            assert pull["head"]["sha"], f"{head} is not a branch of {full_name}'s remote"
            return int(pull["number"])

    def merge_pull(
        self, full_name: str, number: int, *, by: str = "maintainer", delete_branch: bool = False
    ) -> str:
        """Merge as a person would: a merge commit on the base branch; its sha."""
        with self.lock:
            repo, pull = self._pull(full_name, number)
            assert pull["state"] == "open", f"#{number} is {pull['state']}"
            self.refresh_heads(repo)
            head, base = pull["head"]["sha"], pull["base"]["sha"]
            merged = hashlib.sha1(f"merge {full_name} {number}".encode()).hexdigest()
            if repo.remote is not None and head and base:
                tree = self._git(
                    repo, "merge-tree", "--write-tree", "--allow-unrelated-histories", base, head
                ).stdout.split()
                assert tree, f"#{number} does not merge cleanly"
                made = self._git(
                    repo,
                    "commit-tree",
                    tree[0],
                    "-p",
                    base,
                    "-p",
                    head,
                    "-m",
                    f"Merge pull request #{number} from {repo.owner}/{pull['head']['ref']}",
                )
                merged = made.stdout.strip()
                self._git(repo, "update-ref", f"refs/heads/{pull['base']['ref']}", merged, base)
                if delete_branch:
                    self._git(repo, "update-ref", "-d", f"refs/heads/{pull['head']['ref']}")
            now = _now()
            pull.update(
                state="closed",
                closed_at=now,
                merged_at=now,
                updated_at=now,
                merged_by=by,
                merge_commit_sha=merged,
            )
            self._sync_issue(repo, pull)
            return merged

    def close_pull(self, full_name: str, number: int) -> None:
        """Close without merging."""
        with self.lock:
            repo, pull = self._pull(full_name, number)
            self.refresh_heads(repo)
            now = _now()
            pull.update(state="closed", closed_at=now, updated_at=now)
            self._sync_issue(repo, pull)

    def reopen_pull(self, full_name: str, number: int) -> None:
        with self.lock:
            repo, pull = self._pull(full_name, number)
            assert pull["merged_at"] is None, "a merged pull request cannot be reopened"
            pull.update(state="open", closed_at=None, updated_at=_now())
            self.refresh_heads(repo)
            self._sync_issue(repo, pull)

    def set_draft(self, full_name: str, number: int, draft: bool) -> None:
        with self.lock:
            repo, pull = self._pull(full_name, number)
            pull.update(draft=draft, updated_at=_now())
            self._sync_issue(repo, pull)

    def set_mergeable_state(self, full_name: str, number: int, state: str | None) -> None:
        """Pin `mergeable_state` ("dirty", "blocked", "behind"...); None computes it again."""
        with self.lock:
            self._pull(full_name, number)[1]["mergeable_state"] = state

    def pull_json(self, full_name: str, number: int, *, full: bool = True) -> dict[str, Any]:
        """The pull request as `GET /pulls/{n}` (full) or `GET /pulls` (simple) shows it."""
        with self.lock:
            repo, pull = self._pull(full_name, number)
            self.refresh_heads(repo)
            return self._pull_view(repo, pull, full=full)

    def _pull_view(self, repo: FakeRepo, pull: dict[str, Any], *, full: bool) -> dict[str, Any]:
        api = f"{self.url}/repos/{repo.full_name}"
        number, html = pull["number"], pull["html_url"]
        owner_json, repo_json = self.user_json(repo.owner), self.repo_json(repo.full_name)

        def ref(side: str) -> dict[str, Any]:
            return {**pull[side], "user": owner_json, "repo": repo_json}

        view: dict[str, Any] = {
            "url": f"{api}/pulls/{number}",
            "id": pull["id"],
            "node_id": pull["node_id"],
            "html_url": html,
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "issue_url": f"{api}/issues/{number}",
            "commits_url": f"{api}/pulls/{number}/commits",
            "review_comments_url": f"{api}/pulls/{number}/comments",
            "review_comment_url": f"{api}/pulls/comments{{/number}}",
            "comments_url": f"{api}/issues/{number}/comments",
            "statuses_url": f"{api}/statuses/{pull['head']['sha']}",
            "number": number,
            "state": pull["state"],
            "locked": False,
            "title": pull["title"],
            "user": self.user_json(pull["user"]),
            "body": pull["body"],
            "labels": [],
            "milestone": None,
            "active_lock_reason": None,
            "created_at": pull["created_at"],
            "updated_at": pull["updated_at"],
            "closed_at": pull["closed_at"],
            "merged_at": pull["merged_at"],
            "merge_commit_sha": pull["merge_commit_sha"],
            "assignee": None,
            "assignees": [],
            "requested_reviewers": [self.user_json(u) for u in pull["requested_reviewers"]],
            "requested_teams": [
                {"id": zlib.crc32(t.encode()), "slug": t, "name": t}
                for t in pull["requested_teams"]
            ],
            "head": ref("head"),
            "base": ref("base"),
            "_links": {
                "self": {"href": f"{api}/pulls/{number}"},
                "html": {"href": html},
                "issue": {"href": f"{api}/issues/{number}"},
                "comments": {"href": f"{api}/issues/{number}/comments"},
                "review_comments": {"href": f"{api}/pulls/{number}/comments"},
                "review_comment": {"href": f"{api}/pulls/comments{{/number}}"},
                "commits": {"href": f"{api}/pulls/{number}/commits"},
                "statuses": {"href": f"{api}/statuses/{pull['head']['sha']}"},
            },
            "author_association": "MEMBER",
            "auto_merge": None,
            "draft": pull["draft"],
        }
        if full:
            state = self._mergeable_state(repo, pull)
            view.update(
                merged=pull["merged_at"] is not None,
                mergeable=None if state == "unknown" else state != "dirty",
                rebaseable=None if state == "unknown" else state != "dirty",
                mergeable_state=state,
                merged_by=None if pull["merged_by"] is None else self.user_json(pull["merged_by"]),
                comments=len(self.comments_on(repo.full_name, number)),
                review_comments=sum(
                    1 for c in repo.review_comments.values() if c["_pull"] == number
                ),
                maintainer_can_modify=False,
                commits=1 + len(pull["_heads"]),
                additions=0,
                deletions=0,
                changed_files=0,
            )
        return view

    def _mergeable_state(self, repo: FakeRepo, pull: dict[str, Any]) -> str:
        if pull["mergeable_state"] is not None:
            return str(pull["mergeable_state"])
        if pull["state"] != "open":
            return "unknown"
        if pull["draft"]:
            return "draft"
        sha = pull["head"]["sha"]
        failing = any(
            r["conclusion"] in _FAILED for r in self._latest_runs(repo, sha)
        ) or self._combined_state(repo, sha) in ("failure", "error")
        return "unstable" if failing else "clean"

    def _pull_refs(self, repo: FakeRepo, sha: str) -> list[dict[str, Any]]:
        """The `pull_requests` a check or a run lists: open PRs whose head is `sha`."""
        api = f"{self.url}/repos/{repo.full_name}"
        repo_ref = {"id": repo.id, "url": api, "name": repo.name}
        return [
            {
                "url": f"{api}/pulls/{p['number']}",
                "id": p["id"],
                "number": p["number"],
                "head": {"ref": p["head"]["ref"], "sha": p["head"]["sha"], "repo": repo_ref},
                "base": {"ref": p["base"]["ref"], "sha": p["base"]["sha"], "repo": repo_ref},
            }
            for p in repo.pulls
            if p["state"] == "open" and p["head"]["sha"] == sha
        ]

    def branch_of(self, repo: FakeRepo, sha: str) -> str | None:
        for pull in repo.pulls:
            if pull["head"]["sha"] == sha or sha in pull["_heads"]:
                return str(pull["head"]["ref"])
        return None

    # -- reviews, review comments, threads ------------------------------------------------

    def submit_review(
        self,
        full_name: str,
        number: int,
        *,
        user: str = "reviewer",
        state: str = "CHANGES_REQUESTED",
        body: str = "",
        comments: Sequence[Mapping[str, Any]] = (),
        commit_id: str | None = None,
    ) -> dict[str, Any]:
        """A review as a person submits it, with inline comments (`path`, `line`, `body`).

        `state` is the stored one (APPROVED, CHANGES_REQUESTED, COMMENTED) or the
        event GitHub's API takes (APPROVE, REQUEST_CHANGES, COMMENT). Returns the
        review as `GET /reviews` lists it; each comment starts a thread.
        """
        with self.lock:
            repo, pull = self._pull(full_name, number)
            self.refresh_heads(repo)
            commit = commit_id or pull["head"]["sha"]
            review = self._new_review(repo, pull, user, _REVIEW_STATES[state.upper()], body, commit)
            for comment in comments:
                self._new_review_comment(
                    repo,
                    pull,
                    review,
                    body=str(comment["body"]),
                    path=str(comment["path"]),
                    line=int(comment["line"]),
                    side=str(comment.get("side", "RIGHT")),
                    commit_id=str(comment.get("commit_id", commit)),
                )
            return self.review_json(repo, review)

    def reply_as(
        self, full_name: str, number: int, comment_id: int, body: str, *, user: str
    ) -> dict[str, Any]:
        """A person's reply in a review thread (the daemon's go through the REST API)."""
        with self.lock:
            repo, pull = self._pull(full_name, number)
            parent = repo.review_comments[comment_id]
            review = self._new_review(repo, pull, user, "COMMENTED", "", parent["commit_id"])
            reply = self._new_review_comment(
                repo,
                pull,
                review,
                body=body,
                path=parent["path"],
                line=parent["line"],
                side=parent["side"],
                commit_id=parent["commit_id"],
                reply_to=parent,
            )
            return self.review_comment_json(repo, reply)

    def add_issue_comment(
        self, full_name: str, number: int, body: str, *, user: str = "someone"
    ) -> dict[str, Any]:
        """A person's comment on an issue or a pull request's conversation."""
        with self.lock:
            return _public(self._new_comment(self._repo(full_name), number, body, user))

    def _new_review(
        self,
        repo: FakeRepo,
        pull: dict[str, Any],
        user: str,
        state: str,
        body: str,
        commit_id: str,
    ) -> dict[str, Any]:
        review_id = self._new_id()
        review = {
            "id": review_id,
            "node_id": _node("PRR", review_id),
            "_pull": pull["number"],
            "user": user,
            "body": body,
            "state": state,
            "commit_id": commit_id,
            "submitted_at": _now(),
        }
        repo.reviews[review_id] = review
        if user in pull["requested_reviewers"]:  # a review answers the request
            pull["requested_reviewers"].remove(user)
        return review

    def _new_review_comment(
        self,
        repo: FakeRepo,
        pull: dict[str, Any],
        review: dict[str, Any],
        *,
        body: str,
        path: str,
        line: int,
        side: str,
        commit_id: str,
        reply_to: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        comment_id = self._new_id()
        now = _now()
        comment = {
            "id": comment_id,
            "node_id": _node("PRRC", comment_id),
            "_pull": pull["number"],
            "pull_request_review_id": review["id"],
            "user": review["user"],
            "body": body,
            "path": path,
            "line": line,
            "side": side,
            "commit_id": commit_id,
            "in_reply_to_id": None if reply_to is None else reply_to["id"],
            "created_at": now,
            "updated_at": now,
        }
        if reply_to is None:
            thread_id = _node("PRRT", comment_id)
            repo.threads[thread_id] = {
                "id": thread_id,
                "_pull": pull["number"],
                "comments": [comment_id],
                "resolved": False,
                "resolved_by": None,
                "path": path,
                "line": line,
                "commit_id": commit_id,
            }
            comment["_thread"] = thread_id
        else:
            comment["_thread"] = reply_to["_thread"]
            repo.threads[reply_to["_thread"]]["comments"].append(comment_id)
        repo.review_comments[comment_id] = comment
        return comment

    def review_json(self, repo: FakeRepo, review: dict[str, Any]) -> dict[str, Any]:
        api = f"{self.url}/repos/{repo.full_name}/pulls/{review['_pull']}"
        html = f"{HTML}/{repo.full_name}/pull/{review['_pull']}#pullrequestreview-{review['id']}"
        return {
            "id": review["id"],
            "node_id": review["node_id"],
            "user": self.user_json(review["user"]),
            "body": review["body"],
            "state": review["state"],
            "html_url": html,
            "pull_request_url": api,
            "author_association": "COLLABORATOR",
            "_links": {"html": {"href": html}, "pull_request": {"href": api}},
            "submitted_at": review["submitted_at"],
            "commit_id": review["commit_id"],
        }

    def review_comment_json(self, repo: FakeRepo, comment: dict[str, Any]) -> dict[str, Any]:
        api = f"{self.url}/repos/{repo.full_name}"
        html = f"{HTML}/{repo.full_name}/pull/{comment['_pull']}#discussion_r{comment['id']}"
        view: dict[str, Any] = {
            "url": f"{api}/pulls/comments/{comment['id']}",
            "pull_request_review_id": comment["pull_request_review_id"],
            "id": comment["id"],
            "node_id": comment["node_id"],
            "diff_hunk": f"@@ -{comment['line']} +{comment['line']} @@",
            "path": comment["path"],
            "position": 1,
            "original_position": 1,
            "commit_id": comment["commit_id"],
            "original_commit_id": comment["commit_id"],
            "user": self.user_json(comment["user"]),
            "body": comment["body"],
            "created_at": comment["created_at"],
            "updated_at": comment["updated_at"],
            "html_url": html,
            "pull_request_url": f"{api}/pulls/{comment['_pull']}",
            "author_association": "COLLABORATOR",
            "_links": {
                "self": {"href": f"{api}/pulls/comments/{comment['id']}"},
                "html": {"href": html},
                "pull_request": {"href": f"{api}/pulls/{comment['_pull']}"},
            },
            "start_line": None,
            "original_start_line": None,
            "start_side": None,
            "line": comment["line"],
            "original_line": comment["line"],
            "side": comment["side"],
            "subject_type": "line",
        }
        if comment["in_reply_to_id"] is not None:  # GitHub leaves the key out on a thread's first
            view["in_reply_to_id"] = comment["in_reply_to_id"]
        return view

    def review_comments_on(self, full_name: str, number: int) -> list[dict[str, Any]]:
        with self.lock:
            repo = self._repo(full_name)
            return [
                self.review_comment_json(repo, c)
                for c in repo.review_comments.values()
                if c["_pull"] == number
            ]

    def reviews_on(self, full_name: str, number: int) -> list[dict[str, Any]]:
        with self.lock:
            repo = self._repo(full_name)
            return [
                self.review_json(repo, r) for r in repo.reviews.values() if r["_pull"] == number
            ]

    def threads_on(self, full_name: str, number: int) -> list[dict[str, Any]]:
        """Each review thread: `id` (GraphQL node id), `resolved`, `resolved_by`, `comments` ids."""
        with self.lock:
            repo = self._repo(full_name)
            return [
                {k: (list(v) if isinstance(v, list) else v) for k, v in t.items() if k != "_pull"}
                for t in repo.threads.values()
                if t["_pull"] == number
            ]

    def thread_outdated(self, repo: FakeRepo, thread: dict[str, Any]) -> bool:
        """Outdated once the head changed the commented file (GitHub looks at the diff hunk)."""
        pull = self.find_pull(repo, thread["_pull"])
        if pull is None or repo.remote is None or pull["head"]["sha"] == thread["commit_id"]:
            return False
        done = self._git(
            repo, "diff", "--quiet", thread["commit_id"], pull["head"]["sha"], "--", thread["path"]
        )
        return done.returncode == 1

    def review_decision(self, full_name: str, number: int) -> str | None:
        """GraphQL's `reviewDecision` from each reviewer's latest approving or blocking review."""
        repo = self._repo(full_name)
        latest: dict[str, str] = {}
        for review in sorted(repo.reviews.values(), key=lambda r: r["id"]):
            if review["_pull"] == number and review["state"] in ("APPROVED", "CHANGES_REQUESTED"):
                latest[review["user"]] = review["state"]
        if "CHANGES_REQUESTED" in latest.values():
            return "CHANGES_REQUESTED"
        return "APPROVED" if latest else None

    def find_node(self, node_id: str) -> tuple[str, FakeRepo, Any] | None:
        """What a GraphQL global id names: (type, repository, record)."""
        for repo in self.repos.values():
            if node_id in repo.threads:
                return "PullRequestReviewThread", repo, repo.threads[node_id]
            for pull in repo.pulls:
                if pull["node_id"] == node_id:
                    return "PullRequest", repo, pull
            for comment in repo.review_comments.values():
                if comment["node_id"] == node_id:
                    return "PullRequestReviewComment", repo, comment
            for review in repo.reviews.values():
                if review["node_id"] == node_id:
                    return "PullRequestReview", repo, review
            if _node("R", repo.id) == node_id:
                return "Repository", repo, repo
        return None

    # -- CI: check suites and runs, statuses, Actions ---------------------------------------

    def _app_json(self, slug: str) -> dict[str, Any]:
        app_id, name = _APPS.get(slug, (zlib.crc32(slug.encode()) % 1_000_000, slug))
        return {
            "id": app_id,
            "slug": slug,
            "node_id": _node("A", app_id),
            "owner": self.user_json("github" if slug == ACTIONS_APP else slug),
            "name": name,
            "description": "",
            "external_url": f"{HTML}/apps/{slug}",
            "html_url": f"{HTML}/apps/{slug}",
            "created_at": "2018-07-30T09:30:17Z",
            "updated_at": "2019-12-10T19:04:12Z",
            "permissions": {"checks": "write", "metadata": "read"},
            "events": [],
        }

    def _suite(
        self, repo: FakeRepo, sha: str, app: str, *, run_id: int | None = None
    ) -> dict[str, Any]:
        if run_id is None:
            for suite in repo.check_suites.values():
                if suite["head_sha"] == sha and suite["app"] == app and suite["_run"] is None:
                    return suite
        suite_id = self._new_id()
        now = _now()
        suite = {
            "id": suite_id,
            "node_id": _node("CS", suite_id),
            "head_sha": sha,
            "head_branch": self.branch_of(repo, sha),
            "app": app,
            "_run": run_id,
            "created_at": now,
            "updated_at": now,
        }
        repo.check_suites[suite_id] = suite
        return suite

    def _new_check_run(
        self,
        repo: FakeRepo,
        suite: dict[str, Any],
        name: str,
        *,
        status: str,
        conclusion: str | None,
        details_url: str | None = None,
        title: str | None = None,
        summary: str | None = None,
        job: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        run_id = self._new_id()
        now = _now()
        record = {
            "id": run_id,
            "node_id": _node("CR", run_id),
            "name": name,
            "head_sha": suite["head_sha"],
            "_suite": suite["id"],
            "app": suite["app"],
            "status": status,
            "conclusion": conclusion if status == "completed" else None,
            "details_url": details_url,
            "output": {"title": title, "summary": summary, "text": None},
            "started_at": now,
            "completed_at": now if status == "completed" else None,
            "_job": job,  # an Actions job: run id, attempt, log
        }
        if job is not None and details_url is None:
            record["details_url"] = (
                f"{HTML}/{repo.full_name}/actions/runs/{job['run_id']}/job/{run_id}"
            )
        repo.check_runs[run_id] = record
        suite["updated_at"] = now
        return record

    def set_check_run(
        self,
        full_name: str,
        ref: str,
        name: str,
        *,
        conclusion: str | None = "success",
        status: str = "completed",
        app: str = "ci",
        details_url: str | None = None,
        title: str | None = None,
        summary: str | None = None,
    ) -> int:
        """A new check run `name` on `ref`'s commit (a branch or a sha) by app `app`; its id.

        A later run with the same name supersedes it in `filter=latest` lists, as
        on GitHub (a CI that runs again makes a new check run).
        """
        with self.lock:
            repo = self._repo(full_name)
            self.refresh_heads(repo)
            sha = self._resolve_ref(repo, ref)
            assert sha is not None, f"no commit {ref} in {full_name}"
            suite = self._suite(repo, sha, app)
            record = self._new_check_run(
                repo,
                suite,
                name,
                status=status,
                conclusion=conclusion,
                details_url=details_url,
                title=title,
                summary=summary,
            )
            return int(record["id"])

    def set_checks(
        self, full_name: str, ref: str, results: Mapping[str, str], *, app: str = "ci"
    ) -> dict[str, int]:
        """Several check runs at once: name -> conclusion ("in_progress" leaves one running)."""
        return {
            name: self.set_check_run(
                full_name,
                ref,
                name,
                app=app,
                status="completed" if result not in ("queued", "in_progress") else result,
                conclusion=None if result in ("queued", "in_progress") else result,
            )
            for name, result in results.items()
        }

    def update_check_run(
        self,
        full_name: str,
        check_run_id: int,
        *,
        status: str = "completed",
        conclusion: str | None = "success",
    ) -> None:
        """Move a check run on (a CI that reports `in_progress`, then its result)."""
        with self.lock:
            record = self._repo(full_name).check_runs[check_run_id]
            record["status"] = status
            record["conclusion"] = conclusion if status == "completed" else None
            record["completed_at"] = _now() if status == "completed" else None

    def set_status(
        self,
        full_name: str,
        sha: str,
        context: str,
        state: str,
        *,
        description: str | None = None,
        target_url: str | None = None,
        creator: str = "ci-bot",
    ) -> int:
        """A commit status as an external CI posts it; its id."""
        with self.lock:
            repo = self._repo(full_name)
            resolved = self._resolve_ref(repo, sha)
            assert resolved is not None, f"no commit {sha} in {full_name}"
            return int(
                self._new_status(repo, resolved, context, state, description, target_url, creator)[
                    "id"
                ]
            )

    def _new_status(
        self,
        repo: FakeRepo,
        sha: str,
        context: str,
        state: str,
        description: str | None,
        target_url: str | None,
        creator: str,
    ) -> dict[str, Any]:
        status_id = self._new_id()
        now = _now()
        record = {
            "id": status_id,
            "node_id": _node("SC", status_id),
            "sha": sha,
            "state": state,
            "context": context,
            "description": description,
            "target_url": target_url,
            "creator": creator,
            "created_at": now,
            "updated_at": now,
        }
        repo.statuses.append(record)
        return record

    def add_workflow_run(
        self,
        full_name: str,
        ref: str,
        jobs: Mapping[str, str],
        *,
        name: str = "CI",
        logs: Mapping[str, str] | None = None,
        event: str = "pull_request",
        path: str = ".github/workflows/ci.yml",
    ) -> int:
        """An Actions run on `ref`'s commit with `jobs` (name -> conclusion, or "queued" /
        "in_progress" for one still running) and their logs; its id.

        Each job is a check run (same id) in the run's own check suite, as on GitHub.
        """
        with self.lock:
            repo = self._repo(full_name)
            self.refresh_heads(repo)
            sha = self._resolve_ref(repo, ref)
            assert sha is not None, f"no commit {ref} in {full_name}"
            run_id = self._new_id()
            suite = self._suite(repo, sha, ACTIONS_APP, run_id=run_id)
            now = _now()
            repo.workflow_runs[run_id] = {
                "id": run_id,
                "name": name,
                "path": path,
                "event": event,
                "head_sha": sha,
                "head_branch": self.branch_of(repo, sha),
                "run_number": len(repo.workflow_runs) + 1,
                "run_attempt": 1,
                "_suite": suite["id"],
                "created_at": now,
                "run_started_at": now,
                "updated_at": now,
            }
            for job_name, result in jobs.items():
                self._new_job(repo, run_id, job_name, result, (logs or {}).get(job_name, ""), 1)
            return run_id

    def _new_job(
        self, repo: FakeRepo, run_id: int, name: str, result: str, log: str, attempt: int
    ) -> dict[str, Any]:
        run = repo.workflow_runs[run_id]
        unfinished = result in ("queued", "in_progress")
        return self._new_check_run(
            repo,
            repo.check_suites[run["_suite"]],
            name,
            status=result if unfinished else "completed",
            conclusion=None if unfinished else result,
            job={"run_id": run_id, "attempt": attempt, "log": log},
        )

    def _jobs(self, repo: FakeRepo, run_id: int, *, latest: bool = True) -> list[dict[str, Any]]:
        jobs = [r for r in repo.check_runs.values() if r["_job"] and r["_job"]["run_id"] == run_id]
        if not latest:
            return sorted(jobs, key=lambda r: r["id"])
        newest: dict[str, dict[str, Any]] = {}
        for job in sorted(jobs, key=lambda r: r["id"]):
            newest[job["name"]] = job
        return sorted(newest.values(), key=lambda r: r["id"])

    def _run_state(self, repo: FakeRepo, run_id: int) -> tuple[str, str | None]:
        jobs = self._jobs(repo, run_id)
        if any(j["status"] == "in_progress" for j in jobs):
            return "in_progress", None
        if any(j["status"] != "completed" for j in jobs):
            return "queued", None
        return "completed", _worst([j["conclusion"] for j in jobs]) or "success"

    def complete_run(
        self,
        full_name: str,
        run_id: int,
        jobs: Mapping[str, str] | None = None,
        *,
        logs: Mapping[str, str] | None = None,
    ) -> None:
        """Finish a run's unfinished jobs (each "success" unless `jobs` names a conclusion)."""
        with self.lock:
            repo = self._repo(full_name)
            for job in self._jobs(repo, run_id):
                if job["status"] == "completed":
                    continue
                job["status"] = "completed"
                job["conclusion"] = (jobs or {}).get(job["name"], "success")
                job["completed_at"] = _now()
                if logs and job["name"] in logs:
                    job["_job"]["log"] = logs[job["name"]]
            repo.workflow_runs[run_id]["updated_at"] = _now()

    def script_rerun(
        self,
        full_name: str,
        run_id: int,
        jobs: Mapping[str, str] | str = "success",
        *,
        logs: Mapping[str, str] | None = None,
        complete: bool = True,
    ) -> None:
        """What the next rerun of `run_id` yields: one conclusion for every job it runs
        again, or one per job name. `complete=False` leaves them queued (`complete_run`).

        Unscripted, a rerun fails again the same way (a real failure, not a flake).
        """
        with self.lock:
            self._scripted[(full_name.lower(), run_id)] = {
                "jobs": jobs,
                "logs": dict(logs or {}),
                "complete": complete,
            }

    def _rerun(self, repo: FakeRepo, run_id: int, *, only_failed: bool) -> Reply:
        run = repo.workflow_runs.get(run_id)
        if run is None:
            return 404, {"message": "Not Found"}, {}
        status, _conclusion = self._run_state(repo, run_id)
        if status != "completed":
            return 403, {"message": "This workflow is already running"}, {}
        latest = self._jobs(repo, run_id)
        again = [j for j in latest if not only_failed or j["conclusion"] in _FAILED]
        if not again:
            return 403, {"message": "This workflow run cannot be retried"}, {}
        script = self._scripted.pop((repo.full_name.lower(), run_id), None)
        attempt = run["run_attempt"] + 1
        run.update(run_attempt=attempt, updated_at=_now(), run_started_at=_now())
        for job in again:
            if script is None:
                result, log = job["conclusion"], job["_job"]["log"]
            else:
                wanted = script["jobs"]
                result = wanted if isinstance(wanted, str) else wanted.get(job["name"], "success")
                log = script["logs"].get(job["name"], "")
                if not script["complete"]:
                    result = "queued"
            self._new_job(repo, run_id, job["name"], result, log, attempt)
        self.reruns.append(Rerun(repo.full_name, run_id, attempt, tuple(j["name"] for j in again)))
        return 201, {}, {}

    def protect_branch(
        self,
        full_name: str,
        branch: str,
        contexts: Sequence[str] | None = (),
        *,
        strict: bool = False,
    ) -> None:
        """Classic branch protection on `branch` requiring `contexts` (None: protected,
        but without required status checks)."""
        with self.lock:
            self._repo(full_name).protection[branch] = {
                "contexts": None if contexts is None else list(contexts),
                "strict": strict,
            }

    def add_ruleset(self, full_name: str, branch: str, contexts: Sequence[str]) -> int:
        """An active ruleset on `branch` requiring `contexts`, beside a `deletion` rule (as
        rulesets usually carry more than one rule); its id."""
        with self.lock:
            ruleset_id = self._new_id()
            self._repo(full_name).rulesets.append(
                {"id": ruleset_id, "branch": branch, "contexts": list(contexts)}
            )
            return ruleset_id

    def check_run_json(self, repo: FakeRepo, record: dict[str, Any]) -> dict[str, Any]:
        api = f"{self.url}/repos/{repo.full_name}"
        suite = repo.check_suites[record["_suite"]]
        return {
            "id": record["id"],
            "head_sha": record["head_sha"],
            "node_id": record["node_id"],
            "external_id": "",
            "url": f"{api}/check-runs/{record['id']}",
            "html_url": f"{HTML}/{repo.full_name}/runs/{record['id']}",
            "details_url": record["details_url"],
            "status": record["status"],
            "conclusion": record["conclusion"],
            "started_at": record["started_at"],
            "completed_at": record["completed_at"],
            "output": {
                **record["output"],
                "annotations_count": 0,
                "annotations_url": f"{api}/check-runs/{record['id']}/annotations",
            },
            "name": record["name"],
            "check_suite": {"id": suite["id"]},
            "app": self._app_json(record["app"]),
            "pull_requests": self._pull_refs(repo, record["head_sha"]),
        }

    def _latest_runs(
        self, repo: FakeRepo, sha: str, suite_id: int | None = None
    ) -> list[dict[str, Any]]:
        """`filter=latest`: the newest check run per (app, name)."""
        newest: dict[tuple[str, str], dict[str, Any]] = {}
        for record in sorted(repo.check_runs.values(), key=lambda r: r["id"]):
            if record["head_sha"] == sha and suite_id in (None, record["_suite"]):
                newest[(record["app"], record["name"])] = record
        return sorted(newest.values(), key=lambda r: r["id"])

    def check_suite_json(self, repo: FakeRepo, suite: dict[str, Any]) -> dict[str, Any]:
        api = f"{self.url}/repos/{repo.full_name}"
        runs = self._latest_runs(repo, suite["head_sha"], suite["id"])
        if not runs:
            status, conclusion = "queued", None
        elif any(r["status"] != "completed" for r in runs):
            status, conclusion = "in_progress", None
        else:
            status, conclusion = "completed", _worst([r["conclusion"] for r in runs])
        return {
            "id": suite["id"],
            "node_id": suite["node_id"],
            "head_branch": suite["head_branch"],
            "head_sha": suite["head_sha"],
            "status": status,
            "conclusion": conclusion,
            "url": f"{api}/check-suites/{suite['id']}",
            "before": None,
            "after": suite["head_sha"],
            "pull_requests": self._pull_refs(repo, suite["head_sha"]),
            "app": self._app_json(suite["app"]),
            "repository": self.repo_json(repo.full_name),
            "created_at": suite["created_at"],
            "updated_at": suite["updated_at"],
            "head_commit": {
                "id": suite["head_sha"],
                "tree_id": None,
                "message": "",
                "timestamp": suite["created_at"],
            },
            "latest_check_runs_count": len(runs),
            "check_runs_url": f"{api}/check-suites/{suite['id']}/check-runs",
            "rerequestable": True,
            "runs_rerequestable": True,
        }

    def status_json(
        self, repo: FakeRepo, record: dict[str, Any], *, creator: bool = True
    ) -> dict[str, Any]:
        view = {
            "url": f"{self.url}/repos/{repo.full_name}/statuses/{record['sha']}",
            "avatar_url": f"{HTML}/avatars/{record['creator']}",
            "id": record["id"],
            "node_id": record["node_id"],
            "state": record["state"],
            "description": record["description"],
            "target_url": record["target_url"],
            "context": record["context"],
            "created_at": record["created_at"],
            "updated_at": record["updated_at"],
        }
        if creator:
            view["creator"] = self.user_json(record["creator"])
        return view

    def _latest_statuses(self, repo: FakeRepo, sha: str) -> list[dict[str, Any]]:
        newest: dict[str, dict[str, Any]] = {}
        for record in repo.statuses:
            if record["sha"] == sha:
                newest[record["context"]] = record
        return list(newest.values())

    def _combined_state(self, repo: FakeRepo, sha: str) -> str:
        """GitHub's rule: failure if any context is error/failure; pending if none or any
        pending; else success."""
        states = [s["state"] for s in self._latest_statuses(repo, sha)]
        if any(s in ("error", "failure") for s in states):
            return "failure"
        if not states or "pending" in states:
            return "pending"
        return "success"

    def workflow_run_json(self, repo: FakeRepo, run: dict[str, Any]) -> dict[str, Any]:
        api = f"{self.url}/repos/{repo.full_name}"
        status, conclusion = self._run_state(repo, run["id"])
        run_api = f"{api}/actions/runs/{run['id']}"
        workflow_id = zlib.crc32(run["path"].encode()) % 10_000_000
        return {
            "id": run["id"],
            "name": run["name"],
            "node_id": _node("WFR", run["id"]),
            "head_branch": run["head_branch"],
            "head_sha": run["head_sha"],
            "path": run["path"],
            "display_title": run["name"],
            "run_number": run["run_number"],
            "event": run["event"],
            "status": status,
            "conclusion": conclusion,
            "workflow_id": workflow_id,
            "check_suite_id": run["_suite"],
            "check_suite_node_id": _node("CS", run["_suite"]),
            "url": run_api,
            "html_url": f"{HTML}/{repo.full_name}/actions/runs/{run['id']}",
            "pull_requests": self._pull_refs(repo, run["head_sha"]),
            "created_at": run["created_at"],
            "updated_at": run["updated_at"],
            "actor": self.user_json("someone"),
            "triggering_actor": self.user_json("someone"),
            "run_attempt": run["run_attempt"],
            "run_started_at": run["run_started_at"],
            "jobs_url": f"{run_api}/jobs",
            "logs_url": f"{run_api}/logs",
            "check_suite_url": f"{api}/check-suites/{run['_suite']}",
            "artifacts_url": f"{run_api}/artifacts",
            "cancel_url": f"{run_api}/cancel",
            "rerun_url": f"{run_api}/rerun",
            "previous_attempt_url": (
                f"{run_api}/attempts/{run['run_attempt'] - 1}" if run["run_attempt"] > 1 else None
            ),
            "workflow_url": f"{api}/actions/workflows/{workflow_id}",
            "head_commit": {"id": run["head_sha"], "message": "", "timestamp": run["created_at"]},
            "repository": self.repo_json(repo.full_name),
            "head_repository": self.repo_json(repo.full_name),
        }

    def job_json(self, repo: FakeRepo, record: dict[str, Any]) -> dict[str, Any]:
        api = f"{self.url}/repos/{repo.full_name}"
        job = record["_job"]
        run = repo.workflow_runs[job["run_id"]]
        step_status = record["status"]
        return {
            "id": record["id"],
            "run_id": job["run_id"],
            "run_url": f"{api}/actions/runs/{job['run_id']}",
            "run_attempt": job["attempt"],
            "node_id": _node("CR", record["id"]),
            "head_sha": record["head_sha"],
            "url": f"{api}/actions/jobs/{record['id']}",
            "html_url": record["details_url"],
            "status": record["status"],
            "conclusion": record["conclusion"],
            "created_at": record["started_at"],
            "started_at": record["started_at"],
            "completed_at": record["completed_at"],
            "name": record["name"],
            "steps": [
                {
                    "name": f"Run {record['name']}",
                    "status": step_status,
                    "conclusion": record["conclusion"],
                    "number": 1,
                    "started_at": record["started_at"],
                    "completed_at": record["completed_at"],
                }
            ],
            "check_run_url": f"{api}/check-runs/{record['id']}",
            "labels": ["ubuntu-latest"],
            "runner_id": 1,
            "runner_name": "GitHub Actions 1",
            "runner_group_id": 1,
            "runner_group_name": "GitHub Actions",
            "workflow_name": run["name"],
            "head_branch": run["head_branch"],
        }

    # -- the server -----------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _serve(self, method: str) -> None:
                raw = read_body(self)
                parts = urlsplit(self.path)
                if _GIT_PATH.match(parts.path):
                    self._send(*fake._git_http(method, parts.path, parts.query, self.headers, raw))
                    return
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                headers = {k.lower(): v for k, v in self.headers.items()}
                with fake.lock:
                    fake.requests.append(
                        Recorded(method, parts.path, parse_qs(parts.query), headers, body)
                    )
                    try:
                        status, payload, extra = fake._route(
                            method, parts.path, parse_qs(parts.query), headers, body
                        )
                    except Exception:  # a bug in the fake: say so, do not hang the client
                        status, extra = 500, {}
                        payload = {"message": "fake GitHub failed", "trace": traceback.format_exc()}
                if isinstance(payload, bytes):  # a log: plain text, not JSON
                    data = payload
                else:
                    data = b"" if payload is None else json.dumps(payload).encode()
                    extra = {"Content-Type": "application/json; charset=utf-8", **extra}
                self._send(status, extra, data)

            def _send(self, status: int, headers: dict[str, str], data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                if data:
                    self.wfile.write(data)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def do_PATCH(self) -> None:
                self._serve("PATCH")

            def do_PUT(self) -> None:
                self._serve("PUT")

            def do_DELETE(self) -> None:
                self._serve("DELETE")

        return Handler

    def _git_http(
        self, method: str, path: str, query: str, headers: Any, body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        """git smart HTTP for `/<owner>/<repo>.git/...`, through `git http-backend` (CGI)."""
        match = _GIT_PATH.match(path)
        assert match is not None
        lowered = {k.lower(): v for k, v in headers.items()}
        with self.lock:
            self.git_requests.append(Recorded(method, path, parse_qs(query), lowered, None))
            repo = self.repos.get(f"{match.group(1)}/{match.group(2)}".lower())
        wanted = "Basic " + base64.b64encode(f"x-access-token:{self.token}".encode()).decode()
        if self.token is not None and lowered.get("authorization") != wanted:
            return 401, {"WWW-Authenticate": 'Basic realm="GitHub"'}, b"Bad credentials"
        if repo is None or repo.remote is None or not repo.remote.is_dir():
            return 404, {}, b"Repository not found."
        return http_backend(
            repo.remote.parent,
            f"/{repo.remote.name}{match.group(3)}",
            method=method,
            query=query,
            headers=lowered,
            body=body,
            remote_user="x-access-token",  # lets http-backend accept a push
        )

    def _rate_headers(self) -> dict[str, str]:
        return {
            "x-ratelimit-limit": "5000",
            "x-ratelimit-remaining": str(max(self.rate_remaining, 0)),
            "x-ratelimit-reset": str(self.rate_reset),
            "x-ratelimit-used": str(max(self._rate_limit - self.rate_remaining, 0)),
            "x-ratelimit-resource": "core",
        }

    def _route(
        self,
        method: str,
        path: str,
        query: dict[str, list[str]],
        headers: dict[str, str],
        body: Any,
    ) -> Reply:
        status, payload, extra = self._dispatch(method, path, query, headers, body)
        if method != "GET" or status != 200 or "ETag" in extra or isinstance(payload, bytes):
            return status, payload, extra
        # Every JSON GET carries a weak ETag; a matching If-None-Match is a free 304.
        etag = 'W/"' + hashlib.sha256(json.dumps([path, payload]).encode()).hexdigest() + '"'
        if headers.get("if-none-match") == etag:
            self.rate_remaining += 1
            return 304, None, {**self._rate_headers(), "ETag": etag}
        return status, payload, {**extra, "ETag": etag}

    def _dispatch(
        self,
        method: str,
        path: str,
        query: dict[str, list[str]],
        headers: dict[str, str],
        body: Any,
    ) -> Reply:
        for index, (prefix, status, extra) in enumerate(self.forced):
            if path.startswith(prefix):
                del self.forced[index]
                return status, {"message": f"forced {status}"}, {**self._rate_headers(), **extra}
        one = {k: v[0] for k, v in query.items()}
        if path.startswith("/_logs/"):  # a pre-signed log URL: no token, as GitHub's
            return self._serve_log(path, one)
        if self.token is not None and headers.get("authorization") != f"Bearer {self.token}":
            return 401, {"message": "Bad credentials"}, {}
        self.rate_remaining -= 1
        rate = self._rate_headers()
        if path == "/graphql":
            if method != "POST":
                return 404, {"message": "Not Found"}, rate
            return self._graphql(body, rate)
        segments = [s for s in path.split("/") if s]
        if len(segments) < 3 or segments[0] != "repos":
            return 404, {"message": "Not Found"}, rate
        repo = self.repos.get(f"{segments[1]}/{segments[2]}".lower())
        if repo is None:
            return 404, {"message": "Not Found"}, rate
        if repo.broken is not None:
            return repo.broken, {"message": "Server Error"}, rate
        rest = segments[3:]
        if method == "GET" and not rest:
            return 200, self.repo_json(repo.full_name), rate
        if method == "GET" and rest == ["issues"]:
            return self._list_issues(repo, path, one, headers, rate)
        if method == "GET" and len(rest) == 2 and rest[0] == "issues" and rest[1].isdigit():
            item = repo.issues.get(int(rest[1]))
            if item is None:
                return 404, {"message": "Not Found"}, rate
            return 200, _public(item), rate
        if len(rest) == 3 and rest[0] == "issues" and rest[2] == "comments" and rest[1].isdigit():
            number = int(rest[1])
            if number not in repo.issues:
                return 404, {"message": "Not Found"}, rate
            if method == "POST":
                if not isinstance(body, dict) or not isinstance(body.get("body"), str):
                    return 422, {"message": "body is required"}, rate
                return 201, _public(self._new_comment(repo, number, body["body"], self.login)), rate
            return self._list_comments(repo, number, path, one, rate)
        if method == "PATCH" and len(rest) == 3 and rest[:2] == ["issues", "comments"]:
            found = self.comments.get(int(rest[2])) if rest[2].isdigit() else None
            if found is None or found["_repo"] != repo.full_name.lower():
                return 404, {"message": "Not Found"}, rate
            if not isinstance(body, dict) or not isinstance(body.get("body"), str):
                return 422, {"message": "body is required"}, rate
            found["body"] = body["body"]
            found["updated_at"] = _now()
            return 200, _public(found), rate
        self.refresh_heads(repo)
        joined = "/".join(rest)
        for verb, pattern, handler in self._routes:
            match = pattern.fullmatch(joined)
            if match is not None and verb == method:
                status, payload, extra = handler(self, repo, match, one, body, path)
                return status, payload, {**rate, **extra}
        return 404, {"message": "Not Found"}, rate

    def _new_comment(self, repo: FakeRepo, number: int, text: str, user: str) -> dict[str, Any]:
        comment_id = self._new_id()
        now = _now()
        api = f"{self.url}/repos/{repo.full_name}"
        comment = {
            "id": comment_id,
            "node_id": _node("IC", comment_id),
            "url": f"{api}/issues/comments/{comment_id}",
            "body": text,
            "user": self.user_json(user),
            "html_url": f"{repo.issues[number]['html_url']}#issuecomment-{comment_id}",
            "issue_url": f"{api}/issues/{number}",
            "author_association": "MEMBER",
            "created_at": now,
            "updated_at": now,
            "_repo": repo.full_name.lower(),
            "_issue": number,
        }
        self.comments[comment_id] = comment
        return comment

    # -- pagination -------------------------------------------------------------------------

    def _page(
        self, items: list[Any], path: str, query: dict[str, str]
    ) -> tuple[list[Any], dict[str, str]] | None:
        """One page of `items` and its `Link` header; None for a page the client made up."""
        per_page = max(1, min(_int(query, "per_page", 30), self.page_cap, 100))
        if "cursor" in query:  # only a followed Link carries it
            page = _int({"c": query["cursor"].removeprefix("c")}, "c", 1)
        elif query.get("page", "1") != "1":
            return None
        else:
            page = 1
        last = max(1, -(-len(items) // per_page))
        base = self.link_base or self.url
        others = {k: v for k, v in query.items() if k not in ("cursor", "page")}

        def link(number: int, rel: str) -> str:
            return f'<{base}{path}?{urlencode({**others, "cursor": f"c{number}"})}>; rel="{rel}"'

        links = []
        if page < last:
            links += [link(page + 1, "next"), link(last, "last")]
        if page > 1:
            links += [link(page - 1, "prev"), link(1, "first")]
        extra = {"Link": ", ".join(links)} if links else {}
        return items[(page - 1) * per_page : page * per_page], extra

    def _paged_list(self, items: list[Any], path: str, query: dict[str, str]) -> Reply:
        paged = self._page(items, path, query)
        if paged is None:
            return 400, {"message": "follow the Link header"}, {}
        return 200, paged[0], paged[1]

    def _paged_wrapped(self, key: str, items: list[Any], path: str, query: dict[str, str]) -> Reply:
        """GitHub's wrapped lists: `{"total_count": n, key: [...]}`, paginated the same way."""
        paged = self._page(items, path, query)
        if paged is None:
            return 400, {"message": "follow the Link header"}, {}
        return 200, {"total_count": len(items), key: paged[0]}, paged[1]

    def _list_issues(
        self,
        repo: FakeRepo,
        path: str,
        query: dict[str, str],
        headers: dict[str, str],
        rate: dict[str, str],
    ) -> Reply:
        per_page = min(int(query.get("per_page", "30")), 100)
        page = 1
        if "cursor" in query:  # only a followed Link carries it
            page = int(query["cursor"].removeprefix("c"))
        elif "page" in query:
            return 400, {"message": "follow the Link header"}, rate
        wanted = {name for name in query.get("labels", "").split(",") if name}
        state = query.get("state", "open")
        items = [
            item
            for item in repo.issues.values()
            if (state == "all" or item.get("state", "open") == state)
            and wanted <= {label["name"] for label in item.get("labels", [])}
        ]
        if query.get("sort") == "updated":
            items.sort(key=lambda item: item["_updated"], reverse=query.get("direction") != "asc")
        else:
            items.sort(key=lambda item: item["number"], reverse=True)
        chunk = [_public(item) for item in items[(page - 1) * per_page : page * per_page]]
        extra = dict(rate)
        etag = 'W/"' + hashlib.sha256(json.dumps([path, query, chunk]).encode()).hexdigest() + '"'
        extra["ETag"] = etag
        if headers.get("if-none-match") == etag:
            self.rate_remaining += 1  # GitHub does not count a 304 against the limit
            return 304, None, {**self._rate_headers(), "ETag": etag}
        if page * per_page < len(items):
            following = {k: v for k, v in query.items() if k != "cursor"}
            following["cursor"] = f"c{page + 1}"
            base = self.link_base or self.url
            extra["Link"] = f'<{base}{path}?{urlencode(following)}>; rel="next"'
        return 200, chunk, extra

    def _list_comments(
        self, repo: FakeRepo, number: int, path: str, query: dict[str, str], rate: dict[str, str]
    ) -> Reply:
        per_page = min(int(query.get("per_page", "30")), self.comments_page_cap)
        page = int(query.get("cursor", "c1").removeprefix("c"))
        found = [_public(c) for c in self.comments_on(repo.full_name, number)]
        extra = dict(rate)
        if page * per_page < len(found):
            following = {k: v for k, v in query.items() if k != "cursor"}
            following["cursor"] = f"c{page + 1}"
            base = self.link_base or self.url
            extra["Link"] = f'<{base}{path}?{urlencode(following)}>; rel="next"'
        return 200, found[(page - 1) * per_page : page * per_page], extra

    # -- routes: pull requests --------------------------------------------------------------

    def _r_create_pull(
        self, repo: FakeRepo, _m: re.Match[str], _q: dict[str, str], body: Any, _p: str
    ) -> Reply:
        if not isinstance(body, dict) or not all(
            isinstance(body.get(key), str) for key in ("title", "head", "base")
        ):
            return 422, {"message": "title, head and base are required"}, {}
        head = body["head"].split(":", 1)[-1]  # "owner:branch" names the same branch
        if any(p["head"]["ref"] == head and p["state"] == "open" for p in repo.pulls):
            return 422, {"message": f"A pull request already exists for {repo.owner}:{head}."}, {}
        if repo.remote is None or not _has_branch(repo.remote, head):
            return 422, {"message": f"head {head} does not exist in the repository"}, {}
        pull = self._new_pull(
            repo,
            head=head,
            base=body["base"],
            title=body["title"],
            body=body.get("body"),
            draft=bool(body.get("draft")),
            user=self.login,
        )
        return 201, self._pull_view(repo, pull, full=True), {}

    def _r_list_pulls(
        self, repo: FakeRepo, _m: re.Match[str], q: dict[str, str], _b: Any, path: str
    ) -> Reply:
        state = q.get("state", "open")
        head = q.get("head")
        owner, _, branch = (head or "").partition(":")
        pulls = [
            p
            for p in repo.pulls
            if state in ("all", p["state"])
            and (
                head is None or (owner.lower() == repo.owner.lower() and p["head"]["ref"] == branch)
            )
            and q.get("base") in (None, p["base"]["ref"])
        ]
        pulls.sort(key=lambda p: p["number"], reverse=q.get("direction", "desc") == "desc")
        return self._paged_list([self._pull_view(repo, p, full=False) for p in pulls], path, q)

    def _r_get_pull(
        self, repo: FakeRepo, m: re.Match[str], _q: dict[str, str], _b: Any, _p: str
    ) -> Reply:
        pull = self.find_pull(repo, int(m["n"]))
        if pull is None:
            return 404, {"message": "Not Found"}, {}
        return 200, self._pull_view(repo, pull, full=True), {}

    def _r_list_reviews(
        self, repo: FakeRepo, m: re.Match[str], q: dict[str, str], _b: Any, path: str
    ) -> Reply:
        number = int(m["n"])
        if self.find_pull(repo, number) is None:
            return 404, {"message": "Not Found"}, {}
        reviews = sorted(
            (r for r in repo.reviews.values() if r["_pull"] == number), key=lambda r: r["id"]
        )
        return self._paged_list([self.review_json(repo, r) for r in reviews], path, q)

    def _r_get_review(
        self, repo: FakeRepo, m: re.Match[str], _q: dict[str, str], _b: Any, _p: str
    ) -> Reply:
        review = repo.reviews.get(int(m["id"]))
        if review is None or review["_pull"] != int(m["n"]):
            return 404, {"message": "Not Found"}, {}
        return 200, self.review_json(repo, review), {}

    def _r_list_review_comments(
        self, repo: FakeRepo, m: re.Match[str], q: dict[str, str], _b: Any, path: str
    ) -> Reply:
        number = int(m["n"])
        if self.find_pull(repo, number) is None:
            return 404, {"message": "Not Found"}, {}
        found = sorted(
            (c for c in repo.review_comments.values() if c["_pull"] == number),
            key=lambda c: c["id"],
            reverse=q.get("direction") == "desc",
        )
        return self._paged_list([self.review_comment_json(repo, c) for c in found], path, q)

    def _r_get_review_comment(
        self, repo: FakeRepo, m: re.Match[str], _q: dict[str, str], _b: Any, _p: str
    ) -> Reply:
        comment = repo.review_comments.get(int(m["id"]))
        if comment is None:
            return 404, {"message": "Not Found"}, {}
        return 200, self.review_comment_json(repo, comment), {}

    def _r_reply(
        self, repo: FakeRepo, m: re.Match[str], _q: dict[str, str], body: Any, _p: str
    ) -> Reply:
        if not isinstance(body, dict) or not isinstance(body.get("body"), str) or not body["body"]:
            return 422, {"message": 'Invalid request.\n\n"body" wasn\'t supplied.'}, {}
        return self._reply(repo, int(m["n"]), int(m["id"]), body["body"])

    def _reply(self, repo: FakeRepo, number: int, parent_id: int, text: str) -> Reply:
        pull = self.find_pull(repo, number)
        parent = repo.review_comments.get(parent_id)
        if pull is None or parent is None or parent["_pull"] != number:
            return 404, {"message": "Not Found"}, {}
        if parent["in_reply_to_id"] is not None:
            return (
                422,
                {
                    "message": "Replies to replies are not supported; "
                    "reply to the thread's first comment"
                },
                {},
            )
        # GitHub files each reply made outside a pending review as a COMMENTED review.
        review = self._new_review(repo, pull, self.login, "COMMENTED", "", parent["commit_id"])
        reply = self._new_review_comment(
            repo,
            pull,
            review,
            body=text,
            path=parent["path"],
            line=parent["line"],
            side=parent["side"],
            commit_id=parent["commit_id"],
            reply_to=parent,
        )
        return 201, self.review_comment_json(repo, reply), {}

    def _r_create_review_comment(
        self, repo: FakeRepo, m: re.Match[str], _q: dict[str, str], body: Any, _p: str
    ) -> Reply:
        number = int(m["n"])
        if not isinstance(body, dict) or not isinstance(body.get("body"), str) or not body["body"]:
            return 422, {"message": 'Invalid request.\n\n"body" wasn\'t supplied.'}, {}
        if body.get("in_reply_to") is not None:  # everything but the body is ignored then
            if not isinstance(body["in_reply_to"], int):
                return (
                    422,
                    {
                        "message": "Invalid request.\n\n"
                        "For 'properties/in_reply_to', is not an integer."
                    },
                    {},
                )
            return self._reply(repo, number, body["in_reply_to"], body["body"])
        pull = self.find_pull(repo, number)
        if pull is None:
            return 404, {"message": "Not Found"}, {}
        missing = [k for k in ("commit_id", "path") if not isinstance(body.get(k), str)]
        if missing or not isinstance(body.get("line"), int):
            return (
                422,
                {"message": "Invalid request.\n\ncommit_id, path and line are required."},
                {},
            )
        review = self._new_review(repo, pull, self.login, "COMMENTED", "", body["commit_id"])
        comment = self._new_review_comment(
            repo,
            pull,
            review,
            body=body["body"],
            path=body["path"],
            line=body["line"],
            side=str(body.get("side", "RIGHT")),
            commit_id=body["commit_id"],
        )
        return 201, self.review_comment_json(repo, comment), {}

    def _r_get_requested(
        self, repo: FakeRepo, m: re.Match[str], _q: dict[str, str], _b: Any, _p: str
    ) -> Reply:
        pull = self.find_pull(repo, int(m["n"]))
        if pull is None:
            return 404, {"message": "Not Found"}, {}
        view = self._pull_view(repo, pull, full=False)
        return 200, {"users": view["requested_reviewers"], "teams": view["requested_teams"]}, {}

    def _r_request_reviewers(
        self, repo: FakeRepo, m: re.Match[str], _q: dict[str, str], body: Any, _p: str
    ) -> Reply:
        pull = self.find_pull(repo, int(m["n"]))
        if pull is None:
            return 404, {"message": "Not Found"}, {}
        users = body.get("reviewers", []) if isinstance(body, dict) else None
        teams = body.get("team_reviewers", []) if isinstance(body, dict) else None
        if (
            not isinstance(users, list)
            or not isinstance(teams, list)
            or not (users or teams)
            or not all(isinstance(x, str) for x in [*users, *teams])
        ):
            return 422, {"message": 'Invalid request.\n\nNo subschema in "anyOf" matched.'}, {}
        if pull["user"] in users:
            return 422, {"message": "Review cannot be requested from pull request author."}, {}
        if repo.collaborators is not None and not set(users) <= repo.collaborators:
            return (
                422,
                {
                    "message": "Reviews may only be requested from collaborators. One or more "
                    "of the users or teams you specified is not a collaborator of the "
                    f"{repo.full_name} repository."
                },
                {},
            )
        for login in users:
            if login not in pull["requested_reviewers"]:
                pull["requested_reviewers"].append(login)
        for team in teams:
            if team not in pull["requested_teams"]:
                pull["requested_teams"].append(team)
        return 201, self._pull_view(repo, pull, full=False), {}

    def _r_unrequest_reviewers(
        self, repo: FakeRepo, m: re.Match[str], _q: dict[str, str], body: Any, _p: str
    ) -> Reply:
        pull = self.find_pull(repo, int(m["n"]))
        if pull is None:
            return 404, {"message": "Not Found"}, {}
        users = body.get("reviewers", []) if isinstance(body, dict) else []
        teams = body.get("team_reviewers", []) if isinstance(body, dict) else []
        pull["requested_reviewers"] = [u for u in pull["requested_reviewers"] if u not in users]
        pull["requested_teams"] = [t for t in pull["requested_teams"] if t not in teams]
        return 200, self._pull_view(repo, pull, full=False), {}

    # -- routes: CI ---------------------------------------------------------------------

    def _sha_or_422(self, repo: FakeRepo, ref: str) -> str | Reply:
        ref = unquote(ref)  # a branch name may hold slashes, sent raw or as %2F
        sha = self._resolve_ref(repo, ref)
        if sha is None:
            return 422, {"message": f"No commit found for SHA: {ref}"}, {}
        return sha

    def _r_check_runs(
        self, repo: FakeRepo, m: re.Match[str], q: dict[str, str], _b: Any, path: str
    ) -> Reply:
        sha = self._sha_or_422(repo, m["ref"])
        if not isinstance(sha, str):
            return sha
        if q.get("filter", "latest") == "all":
            runs = [r for r in repo.check_runs.values() if r["head_sha"] == sha]
        else:
            runs = self._latest_runs(repo, sha)
        runs = [
            r
            for r in sorted(runs, key=lambda r: r["id"], reverse=True)
            if q.get("check_name") in (None, r["name"])
            and q.get("status") in (None, r["status"])
            and q.get("app_id") in (None, str(self._app_json(r["app"])["id"]))
        ]
        return self._paged_wrapped(
            "check_runs", [self.check_run_json(repo, r) for r in runs], path, q
        )

    def _r_check_run(
        self, repo: FakeRepo, m: re.Match[str], _q: dict[str, str], _b: Any, _p: str
    ) -> Reply:
        record = repo.check_runs.get(int(m["id"]))
        if record is None:
            return 404, {"message": "Not Found"}, {}
        return 200, self.check_run_json(repo, record), {}

    def _r_check_suites(
        self, repo: FakeRepo, m: re.Match[str], q: dict[str, str], _b: Any, path: str
    ) -> Reply:
        sha = self._sha_or_422(repo, m["ref"])
        if not isinstance(sha, str):
            return sha
        suites = [
            s
            for s in sorted(repo.check_suites.values(), key=lambda s: s["id"])
            if s["head_sha"] == sha
            and q.get("app_id") in (None, str(self._app_json(s["app"])["id"]))
            and (
                q.get("check_name") is None
                or any(r["name"] == q["check_name"] for r in self._latest_runs(repo, sha, s["id"]))
            )
        ]
        return self._paged_wrapped(
            "check_suites", [self.check_suite_json(repo, s) for s in suites], path, q
        )

    def _r_check_suite(
        self, repo: FakeRepo, m: re.Match[str], _q: dict[str, str], _b: Any, _p: str
    ) -> Reply:
        suite = repo.check_suites.get(int(m["id"]))
        if suite is None:
            return 404, {"message": "Not Found"}, {}
        return 200, self.check_suite_json(repo, suite), {}

    def _r_suite_runs(
        self, repo: FakeRepo, m: re.Match[str], q: dict[str, str], _b: Any, path: str
    ) -> Reply:
        suite = repo.check_suites.get(int(m["id"]))
        if suite is None:
            return 404, {"message": "Not Found"}, {}
        runs = self._latest_runs(repo, suite["head_sha"], suite["id"])
        if q.get("filter") == "all":
            runs = [r for r in repo.check_runs.values() if r["_suite"] == suite["id"]]
        runs.sort(key=lambda r: r["id"], reverse=True)
        return self._paged_wrapped(
            "check_runs", [self.check_run_json(repo, r) for r in runs], path, q
        )

    def _r_combined_status(
        self, repo: FakeRepo, m: re.Match[str], q: dict[str, str], _b: Any, path: str
    ) -> Reply:
        sha = self._sha_or_422(repo, m["ref"])
        if not isinstance(sha, str):
            return sha
        latest = self._latest_statuses(repo, sha)
        paged = self._page([self.status_json(repo, s, creator=False) for s in latest], path, q)
        if paged is None:
            return 400, {"message": "follow the Link header"}, {}
        api = f"{self.url}/repos/{repo.full_name}"
        return (
            200,
            {
                "state": self._combined_state(repo, sha),
                "statuses": paged[0],
                "sha": sha,
                "total_count": len(latest),
                "repository": self.repo_json(repo.full_name),
                "commit_url": f"{api}/commits/{sha}",
                "url": f"{api}/commits/{sha}/status",
            },
            paged[1],
        )

    def _r_list_statuses(
        self, repo: FakeRepo, m: re.Match[str], q: dict[str, str], _b: Any, path: str
    ) -> Reply:
        sha = self._sha_or_422(repo, m["ref"])
        if not isinstance(sha, str):
            return sha
        found = [self.status_json(repo, s) for s in reversed(repo.statuses) if s["sha"] == sha]
        return self._paged_list(found, path, q)

    def _r_create_status(
        self, repo: FakeRepo, m: re.Match[str], _q: dict[str, str], body: Any, _p: str
    ) -> Reply:
        if not isinstance(body, dict) or body.get("state") not in (
            "error",
            "failure",
            "pending",
            "success",
        ):
            return (
                422,
                {
                    "message": "Validation Failed",
                    "errors": [{"resource": "Status", "field": "state", "code": "invalid"}],
                },
                {},
            )
        sha = self._resolve_ref(repo, m["sha"])
        if sha is None or sha != m["sha"]:
            return 422, {"message": f"No commit found for SHA: {m['sha']}"}, {}
        record = self._new_status(
            repo,
            sha,
            str(body.get("context") or "default"),
            body["state"],
            body.get("description"),
            body.get("target_url"),
            self.login,
        )
        return 201, self.status_json(repo, record), {}

    def _r_list_runs(
        self, repo: FakeRepo, _m: re.Match[str], q: dict[str, str], _b: Any, path: str
    ) -> Reply:
        views = [self.workflow_run_json(repo, r) for r in repo.workflow_runs.values()]
        wanted = q.get("status")
        runs = [
            v
            for v in sorted(views, key=lambda v: v["id"], reverse=True)
            if q.get("head_sha") in (None, v["head_sha"])
            and q.get("branch") in (None, v["head_branch"])
            and q.get("event") in (None, v["event"])
            and q.get("check_suite_id") in (None, str(v["check_suite_id"]))
            and wanted in (None, v["status"], v["conclusion"])  # GitHub takes either here
        ]
        return self._paged_wrapped("workflow_runs", runs, path, q)

    def _r_get_run(
        self, repo: FakeRepo, m: re.Match[str], _q: dict[str, str], _b: Any, _p: str
    ) -> Reply:
        run = repo.workflow_runs.get(int(m["id"]))
        if run is None:
            return 404, {"message": "Not Found"}, {}
        return 200, self.workflow_run_json(repo, run), {}

    def _r_run_jobs(
        self, repo: FakeRepo, m: re.Match[str], q: dict[str, str], _b: Any, path: str
    ) -> Reply:
        run_id = int(m["id"])
        if run_id not in repo.workflow_runs:
            return 404, {"message": "Not Found"}, {}
        jobs = self._jobs(repo, run_id, latest=q.get("filter", "latest") != "all")
        return self._paged_wrapped("jobs", [self.job_json(repo, j) for j in jobs], path, q)

    def _r_get_job(
        self, repo: FakeRepo, m: re.Match[str], _q: dict[str, str], _b: Any, _p: str
    ) -> Reply:
        record = repo.check_runs.get(int(m["id"]))
        if record is None or record["_job"] is None:
            return 404, {"message": "Not Found"}, {}
        return 200, self.job_json(repo, record), {}

    def _r_job_logs(
        self, repo: FakeRepo, m: re.Match[str], _q: dict[str, str], _b: Any, _p: str
    ) -> Reply:
        job_id = int(m["id"])
        record = repo.check_runs.get(job_id)
        if record is None or record["_job"] is None:
            return 404, {"message": "Not Found"}, {}
        key = self._log_keys.setdefault(job_id, secrets.token_urlsafe(12))
        base = self.log_base or self.url
        location = f"{base}/_logs/{repo.full_name}/jobs/{job_id}.txt?sig={key}"
        return 302, None, {"Location": location}

    def _serve_log(self, path: str, query: dict[str, str]) -> Reply:
        match = re.fullmatch(r"/_logs/([^/]+)/([^/]+)/jobs/(\d+)\.txt", path)
        repo = self.repos.get(f"{match[1]}/{match[2]}".lower()) if match else None
        if match is None or repo is None:
            return 404, b"BlobNotFound", {"Content-Type": "text/plain"}
        job_id = int(match[3])
        if query.get("sig") is None or query.get("sig") != self._log_keys.get(job_id):
            return 403, b"AuthenticationFailed", {"Content-Type": "text/plain"}
        log = repo.check_runs[job_id]["_job"]["log"]
        return 200, log.encode(), {"Content-Type": "text/plain; charset=utf-8"}

    def _r_required_checks(
        self, repo: FakeRepo, m: re.Match[str], _q: dict[str, str], _b: Any, _p: str
    ) -> Reply:
        branch = unquote(m["branch"])
        protection = repo.protection.get(branch)
        if protection is None:
            return 404, {"message": "Branch not protected"}, {}
        if protection["contexts"] is None:
            return 404, {"message": "Required status checks not enabled"}, {}
        url = (
            f"{self.url}/repos/{repo.full_name}/branches/{branch}/protection/required_status_checks"
        )
        return (
            200,
            {
                "url": url,
                "strict": protection["strict"],
                "contexts": protection["contexts"],
                "contexts_url": f"{url}/contexts",
                "checks": [{"context": c, "app_id": None} for c in protection["contexts"]],
            },
            {},
        )

    def _r_branch_rules(
        self, repo: FakeRepo, m: re.Match[str], q: dict[str, str], _b: Any, path: str
    ) -> Reply:
        """Active rules for a branch (which need not exist), each with its ruleset."""
        branch = unquote(m["branch"])
        rules: list[dict[str, Any]] = []
        for ruleset in repo.rulesets:
            if ruleset["branch"] != branch:
                continue
            source = {
                "ruleset_source_type": "Repository",
                "ruleset_source": repo.full_name,
                "ruleset_id": ruleset["id"],
            }
            rules.append({"type": "deletion", **source})
            checks = [{"context": c, "integration_id": None} for c in ruleset["contexts"]]
            parameters = {
                "strict_required_status_checks_policy": False,
                "do_not_enforce_on_create": False,
                "required_status_checks": checks,
            }
            rules.append({"type": "required_status_checks", "parameters": parameters, **source})
        return self._paged_list(rules, path, q)

    def _r_rerun_failed(
        self, repo: FakeRepo, m: re.Match[str], _q: dict[str, str], _b: Any, _p: str
    ) -> Reply:
        return self._rerun(repo, int(m["id"]), only_failed=True)

    def _r_rerun(
        self, repo: FakeRepo, m: re.Match[str], _q: dict[str, str], _b: Any, _p: str
    ) -> Reply:
        return self._rerun(repo, int(m["id"]), only_failed=False)

    # -- GraphQL --------------------------------------------------------------------------

    def _graphql(self, body: Any, rate: dict[str, str]) -> Reply:
        if not isinstance(body, dict):
            return 400, {"message": "Problems parsing JSON"}, rate
        answer = github_graphql.execute(
            self, body.get("query"), body.get("variables"), body.get("operationName")
        )
        return 200, answer, {**rate, "x-ratelimit-resource": "graphql"}

    _routes: ClassVar[list[tuple[str, re.Pattern[str], Callable[..., Reply]]]] = []


def _route_table() -> list[tuple[str, re.Pattern[str], Callable[..., Reply]]]:
    g = FakeGitHub
    table = [
        ("GET", r"pulls", g._r_list_pulls),
        ("POST", r"pulls", g._r_create_pull),
        ("GET", r"pulls/(?P<n>\d+)", g._r_get_pull),
        ("GET", r"pulls/(?P<n>\d+)/reviews", g._r_list_reviews),
        ("GET", r"pulls/(?P<n>\d+)/reviews/(?P<id>\d+)", g._r_get_review),
        ("GET", r"pulls/(?P<n>\d+)/comments", g._r_list_review_comments),
        ("POST", r"pulls/(?P<n>\d+)/comments", g._r_create_review_comment),
        ("POST", r"pulls/(?P<n>\d+)/comments/(?P<id>\d+)/replies", g._r_reply),
        ("GET", r"pulls/comments/(?P<id>\d+)", g._r_get_review_comment),
        ("GET", r"pulls/(?P<n>\d+)/requested_reviewers", g._r_get_requested),
        ("POST", r"pulls/(?P<n>\d+)/requested_reviewers", g._r_request_reviewers),
        ("DELETE", r"pulls/(?P<n>\d+)/requested_reviewers", g._r_unrequest_reviewers),
        ("GET", r"commits/(?P<ref>.+)/check-runs", g._r_check_runs),
        ("GET", r"commits/(?P<ref>.+)/check-suites", g._r_check_suites),
        ("GET", r"commits/(?P<ref>.+)/status", g._r_combined_status),
        ("GET", r"commits/(?P<ref>.+)/statuses", g._r_list_statuses),
        ("POST", r"statuses/(?P<sha>[^/]+)", g._r_create_status),
        ("GET", r"check-runs/(?P<id>\d+)", g._r_check_run),
        ("GET", r"check-suites/(?P<id>\d+)", g._r_check_suite),
        ("GET", r"check-suites/(?P<id>\d+)/check-runs", g._r_suite_runs),
        ("GET", r"actions/runs", g._r_list_runs),
        ("GET", r"actions/runs/(?P<id>\d+)", g._r_get_run),
        ("GET", r"actions/runs/(?P<id>\d+)/jobs", g._r_run_jobs),
        ("POST", r"actions/runs/(?P<id>\d+)/rerun-failed-jobs", g._r_rerun_failed),
        ("POST", r"actions/runs/(?P<id>\d+)/rerun", g._r_rerun),
        ("GET", r"actions/jobs/(?P<id>\d+)", g._r_get_job),
        ("GET", r"actions/jobs/(?P<id>\d+)/logs", g._r_job_logs),
        ("GET", r"branches/(?P<branch>.+)/protection/required_status_checks", g._r_required_checks),
        ("GET", r"rules/branches/(?P<branch>.+)", g._r_branch_rules),
    ]
    return [(verb, re.compile(pattern), handler) for verb, pattern, handler in table]


FakeGitHub._routes = _route_table()

_GIT_PATH = re.compile(r"^/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)\.git(/.*)$")


def _public(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if not k.startswith("_")}


def _has_branch(remote: Path, branch: str) -> bool:
    done = subprocess.run(
        [
            "git",
            "--git-dir",
            str(remote),
            "rev-parse",
            "--verify",
            "--quiet",
            f"refs/heads/{branch}",
        ],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0
