"""The task page's links to where its work lives: the branch, the commit, the pull request.

Why a module of its own: which web address a repository has is read from
several places (the pull request's URL, the repository named at submit, the
GitHub issue a task came from), and a branch or commit is linked only once it
was pushed (a pull request, or a finished `git_push` effect): before that it
lives only in the daemon's mirror, and a link would lead to a 404. Only
http(s) addresses become links (`common.web_url`); anything else is shown as
text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote

from agent_team.common.repo_spec import RemoteRepo, parse_repo
from agent_team.common.web_url import web_url
from agent_team.exceptions import InvalidRepoError

__all__ = ["Link", "repo_web_url", "work_links"]

# `https://host/owner/name/pull/12` (GitHub) or `.../-/merge_requests/12` (GitLab).
_PULL = re.compile(r"^(?P<repo>https?://[^?#]+?)/(?:-/)?(?:pull|merge_requests)/\d+/?$")
_SCP = re.compile(r"^[A-Za-z0-9_.-]+@(?P<host>[A-Za-z0-9.-]+):(?P<path>.+)$")
_SOURCE = "github:"


@dataclass(frozen=True, slots=True)
class Link:
    """What a page shows: the label, the text (a branch, a short commit), where it leads."""

    label: str
    text: str
    url: str | None
    title: str = ""


def repo_web_url(repo: str | None, *, github_host: str) -> str | None:
    """The web page of a repository named as a task names one, or None (a path, nonsense).

    `owner/name` lives on `github_host`; `https://host/owner/name.git` is its own page
    without `.git`; `git@host:owner/name.git` is `https://host/owner/name`.
    """
    if not repo:
        return None
    try:
        spec = parse_repo(repo, github_host=github_host)
    except InvalidRepoError:
        return None
    if not isinstance(spec, RemoteRepo):
        return None
    scp = _SCP.match(spec.url)
    if scp is not None:
        return web_url(f"https://{scp['host']}/{scp['path'].removesuffix('.git')}")
    return web_url(spec.url.removesuffix(".git"))


def _from_pull(url: str | None) -> str | None:
    found = _PULL.match(url or "")
    return web_url(found["repo"]) if found else None


def _from_source(source: str, *, github_host: str) -> str | None:
    """A task from a GitHub issue names its repository in its source (`github:owner/name`)."""
    if not source.startswith(_SOURCE):
        return None
    return repo_web_url(source.removeprefix(_SOURCE), github_host=github_host)


def work_links(
    *,
    branch: str | None,
    commit: str | None,
    pull_url: str | None,
    pull_name: str | None,
    pushed: bool,
    repos: Iterable[str | None],
    source: str,
    github_host: str,
) -> list[Link]:
    """The branch, the commit and the pull request, each linked where its page is known.

    Args:
        branch, commit: the build's (None before a build).
        pull_url, pull_name: the task's pull request (`acme/app#12`), if one was opened.
        pushed: whether the branch left the daemon (a pull request, a `git_push` done).
        repos: the repository as named at submit, best first (None: not known).
        source: the task's source (`github:owner/name` names its repository).
        github_host: where `owner/name` lives (`common.git_host.git_host_url`).
    """
    home = _from_pull(pull_url)
    for named in repos:
        home = home or repo_web_url(named, github_host=github_host)
    home = home or _from_source(source, github_host=github_host)
    where = home if pushed else None
    links: list[Link] = []
    if branch:
        url = f"{where}/tree/{quote(branch, safe='/')}" if where else None
        links.append(Link("Branch", branch, web_url(url), "" if pushed else "not pushed"))
    if commit:
        url = f"{where}/commit/{quote(commit, safe='')}" if where else None
        links.append(Link("Commit", commit[:12], web_url(url), commit))
    if pull_name or pull_url:
        link = web_url(pull_url)
        links.append(Link("Pull request", pull_name or pull_url or "", link))
    return links
