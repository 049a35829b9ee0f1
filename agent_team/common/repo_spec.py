"""Where a task's repository lives, read from the text a person gave: a path or a remote.

The forms taken (`ACCEPTED`):

- a local path, `/srv/clones/app` (the CLI also takes `./app`, resolved
  against its working folder; stored absolute);
- `https://host/owner/name[.git]` (or `http://`, for a host on a private
  network), with no user name or password in it;
- `git@host:owner/name.git`, git's scp-like ssh form (the daemon's own ssh
  key is used);
- `owner/name`, the repository on the configured GitHub host
  (`AGENT_TEAM_GITHUB_API_URL`, see `common.git_host.git_host_url`). To name a
  folder that looks like that, write `./owner/name`.

Any of them may end in `#<branch>`: the base branch new task branches start
from (`acme/widgets#develop`); without it, the remote's default branch (a
local clone's HEAD).

Refused, with one line saying what to write instead: `file://` (give the
path), `ssh://` (write `git@host:owner/name.git`), a URL carrying a user name
or password (it would be stored with the task, shown on pages and written
into the mirror's config; a private GitHub repository is read with
`AGENT_TEAM_GITHUB_TOKEN`, sent as a header), any other scheme, a query or
fragment, a path of fewer than two parts, control characters.

`parse_repo` is pure (no file system, no network). `checked_repo` is what a
submit runs: the syntax, and for a path that the folder is there. Nothing at
submit touches the network; a remote that cannot be fetched parks the task
at its build (`RepoUnavailableError`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

from agent_team.exceptions import InvalidRepoError

__all__ = [
    "ACCEPTED",
    "DEFAULT_GIT_HOST",
    "LocalRepo",
    "RemoteRepo",
    "RepoSpec",
    "checked_repo",
    "parse_repo",
]

# Where `owner/name` lives unless AGENT_TEAM_GITHUB_API_URL says otherwise (`git_host`).
DEFAULT_GIT_HOST = "https://github.com/"
ACCEPTED = (
    "a local path, https://host/owner/name[.git], git@host:owner/name.git "
    "or owner/name (on the GitHub host)"
)
# GitHub: owners are letters, digits and hyphens; repositories may hold dots but are never
# `.` or `..` (the same rule as AGENT_TEAM_GITHUB_REPOS).
_OWNER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*/(?!\.\.?$)[A-Za-z0-9_.-]+$")
_SEGMENT = re.compile(r"^(?!\.\.?$)[A-Za-z0-9_.-]+$")
_NETLOC = re.compile(
    r"^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$"
)
_SCP = re.compile(r"^(?P<user>[A-Za-z0-9_.-]+)@(?P<host>[A-Za-z0-9.-]+):(?P<path>.*)$")
_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# A branch name git takes and a shell or a URL cannot misread (a subset of check-ref-format).
_BRANCH = re.compile(r"^(?![-/.])(?!.*(?:\.\.|//|@\{|\.lock$|/$|\.$))[A-Za-z0-9._/-]{1,200}$")


@dataclass(frozen=True)
class LocalRepo:
    """A repository on this machine: a clone (or any git folder with a commit).

    Attributes:
        path: as given (`checked_repo` stores it absolute).
        branch: the base branch (`#<branch>`), else None: the clone's HEAD.
    """

    path: Path
    branch: str | None = None

    @property
    def text(self) -> str:
        """What is stored with the task."""
        return str(self.path) + (f"#{self.branch}" if self.branch else "")


@dataclass(frozen=True)
class RemoteRepo:
    """A repository that lives elsewhere; builds start from a fetched mirror of it.

    Attributes:
        url: what git fetches: `https://host/owner/name.git`, `git@host:owner/name.git`.
        name: `owner/name` (the last two parts of its path, without `.git`), for
            people and for the mirror's folder name.
        text: what is stored with the task: `owner/name` as given (so it follows
            the configured host), else the URL; with `#<branch>` when one is named.
        branch: the base branch, else None: the remote's default branch.
    """

    url: str
    name: str
    text: str
    branch: str | None = None


RepoSpec = LocalRepo | RemoteRepo


def _shown(text: str) -> str:
    return repr(text[:80] + ("…" if len(text) > 80 else ""))


def _refuse(text: str, why: str) -> InvalidRepoError:
    return InvalidRepoError(f"repository {_shown(text)}: {why}")


def _name_of(segments: list[str]) -> str:
    return "/".join(segments[-2:]).removesuffix(".git")


def _segments(text: str, path: str) -> list[str]:
    parts = path.strip("/").split("/")
    if len(parts) < 2 or not all(_SEGMENT.match(part) for part in parts):
        raise _refuse(
            text,
            "its path must be owner/name (letters, digits, `.`, `_`, `-`); give " + ACCEPTED,
        )
    return parts


def _http(text: str, scheme: str) -> RemoteRepo:
    parts = urlsplit(text)
    if "@" in parts.netloc:
        # Never repeat such a URL: the part before `@` may be a password.
        raise InvalidRepoError(
            "the repository URL carries a user name or password: remove it; a private "
            "GitHub repository is read with AGENT_TEAM_GITHUB_TOKEN, sent as a header"
        )
    if parts.query or parts.fragment or "?" in text or "#" in text:
        raise _refuse(text, "a repository URL takes no query or fragment; give " + ACCEPTED)
    if not _NETLOC.match(parts.netloc):
        raise _refuse(text, "the host is not a host name[:port]; give " + ACCEPTED)
    segments = _segments(text, parts.path)
    url = f"{scheme}://{parts.netloc.lower()}/{'/'.join(segments)}"
    return RemoteRepo(url=url, name=_name_of(segments), text=url)


def _scp(text: str, user: str, host: str, path: str) -> RemoteRepo:
    if path.startswith(("/", "~")):
        raise _refuse(text, "write the path after `:` as owner/name.git; give " + ACCEPTED)
    segments = _segments(text, path)
    url = f"{user}@{host.lower()}:{'/'.join(segments)}"
    return RemoteRepo(url=url, name=_name_of(segments), text=url)


def parse_repo(text: str, *, github_host: str = DEFAULT_GIT_HOST) -> RepoSpec:
    """Which repository `text` names; pure, no file system and no network.

    Args:
        text: what a person gave (`--repo`, the API's `repo`, an automation's).
        github_host: where `owner/name` lives (`git_host.git_host_url`), ending in `/`.

    Returns:
        A `LocalRepo` (the path as given, maybe relative) or a `RemoteRepo`.

    Raises:
        InvalidRepoError: not a form we take; the message says what to write.
    """
    value = text.strip()
    if not value:
        raise InvalidRepoError("the repository is empty; give " + ACCEPTED)
    if _CONTROL.search(value):
        raise _refuse(value, "it holds control characters; give " + ACCEPTED)
    value, sep, branch = value.rpartition("#") if "#" in value else (value, "", "")
    if sep and not _BRANCH.match(branch):
        raise _refuse(
            text.strip(),
            "after `#` comes a branch name (letters, digits, `.`, `_`, `-`, `/`), e.g. "
            "acme/widgets#develop",
        )
    spec = _parse(value, github_host)
    if not branch:
        return spec
    if isinstance(spec, LocalRepo):
        return replace(spec, branch=branch)
    return replace(spec, branch=branch, text=f"{spec.text}#{branch}")


def _parse(value: str, github_host: str) -> RepoSpec:
    """`parse_repo` of a text without its `#<branch>`."""
    lowered = value.lower()
    if lowered.startswith("file:"):
        raise _refuse(value, "file: URLs are not taken; give the folder's path itself")
    scheme = _SCHEME.match(value)
    if scheme is not None:
        name = scheme.group("scheme").lower()
        if name == "ssh" or "ssh" in name.split("+"):
            raise _refuse(value, "ssh:// URLs are not taken; write it as git@host:owner/name.git")
        if name not in ("http", "https"):
            raise _refuse(value, f"{name}:// URLs are not taken; give " + ACCEPTED)
        return _http(value, name)
    if _OWNER_NAME.match(value):
        name = value.removesuffix(".git")
        url = f"{github_host.rstrip('/')}/{name}.git"
        return RemoteRepo(url=url, name=name, text=name)
    scp = _SCP.match(value)
    if scp is not None and "/" not in value.split(":", 1)[0]:
        return _scp(value, scp.group("user"), scp.group("host"), scp.group("path"))
    if ":" in value.split("/", 1)[0]:
        raise _refuse(
            value,
            "a `:` before the first `/` reads as host:path; write git@host:owner/name.git, "
            "or ./" + value.split("/", 1)[0] + " for a folder",
        )
    return LocalRepo(Path(value))


def checked_repo(text: str, *, cwd: Path | None = None, local_paths: bool = True) -> str:
    """`text` checked as a submit checks it, and how it is stored with the task.

    The syntax (`parse_repo`); for a path, that it is absolute (or, with
    `cwd`, resolved against it; `~` is expanded) and names a folder. No
    network: a remote is only fetched by the build.

    Args:
        text: what a person gave.
        cwd: the working folder relative paths are read against (the CLI's); None
            refuses a relative path.
        local_paths: whether a path on this machine may be named at all (the
            dashboard and its API name remotes only).

    Returns:
        The path made absolute, `owner/name`, or the URL (each with its `#<branch>`).

    Raises:
        InvalidRepoError: not a form we take, a path that is not allowed here,
            relative without `cwd`, or not a folder.
    """
    spec = parse_repo(text)
    if isinstance(spec, RemoteRepo):
        return spec.text
    if not local_paths:
        raise _refuse(
            text.strip(),
            "a path on the daemon's machine cannot be named here; give a URL or owner/name "
            "(paths are for the command line and AGENT_TEAM_REPO_PATH)",
        )
    path = spec.path.expanduser()
    if not path.is_absolute():
        if cwd is None:
            raise _refuse(text.strip(), "give an absolute path (or a URL, or owner/name)")
        path = cwd / path
    path = path.resolve()
    if not path.is_dir():
        raise _refuse(
            text.strip(),
            f"{path} is not a folder here; give the path of a clone, or " + ACCEPTED,
        )
    return LocalRepo(path, spec.branch).text
