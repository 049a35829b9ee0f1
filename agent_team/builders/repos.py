"""Which repository a task builds in, made ready: a local clone, the default one, or a mirror.

- A local path (the task's, else `AGENT_TEAM_REPO_PATH`) is checked once per
  process (a git folder with a first commit); a new task branch starts from
  its HEAD.
- No repository named: `state_dir/repos/default`, created with an empty first
  commit.
- A remote (`repo_spec.RemoteRepo`: a URL, or `owner/name` on the GitHub
  host) is built from a bare mirror of it, one per remote:
  `state_dir/mirrors/<owner>-<name>-<hash>.git`. Before a new task branch is
  made, the mirror fetches the remote's HEAD (its default branch) into
  `refs/agent-team/remote-head`, and the branch starts there: a push to the
  remote between two tasks is in the second one's build. A task branch that
  exists already is the build record (`worktree.find_build`) and is kept as
  it is, so nothing is fetched for it (a retry after the remote went away
  still finds its recorded build). Worktrees of a mirror are registered in
  the mirror itself (a bare repository can host worktrees), build records
  without a checkout are written into its object store
  (`agent_team.builders.plumbing`), and the draft-PR publisher pushes from it.

A fetch runs under the repository's lock (`gitcmd.registry_lock`, a file
lock keyed by the mirror's folder), so one fetch of a remote runs at a time
across threads and processes, never beside a `worktree add`, prune or gc of
the same mirror. A fetch that fails (the remote is gone, access is refused)
parks the task: `RepoUnavailableError` with git's words, redacted.

Why the fetch does not trust the mirror's config: a builder works in a
worktree that shares it, and could plant settings that run a command or send
the fetch elsewhere (`credential.helper`, `core.sshCommand`,
`url.*.insteadOf` to an `ext::` transport). So the fetch names the URL from
the task (not a remote of the config), sets those settings back with `-c`,
runs no hooks, and hands the token only as a header scoped to the GitHub
host (`git_host.GitHost`): never in argv, a URL, the config or a message.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from agent_team.builders.base import BuildTask
from agent_team.builders.gitcmd import file_lock, registry_lock, run_git
from agent_team.builders.proc import inherited_env
from agent_team.common.git_host import GitHost
from agent_team.common.redact import redact, tail
from agent_team.common.repo_spec import LocalRepo, RemoteRepo, RepoSpec, parse_repo
from agent_team.exceptions import BuildError, InvalidRepoError, RepoUnavailableError

__all__ = [
    "FETCH_TIMEOUT_S",
    "REMOTE_HEAD",
    "GitRepo",
    "known_repo",
    "mirror_path",
    "ref_exists",
    "repo_lock",
    "resolve_repo",
    "spec_of",
]

# Where a mirror keeps the remote's HEAD as last fetched: new task branches start there.
REMOTE_HEAD = "refs/agent-team/remote-head"
# ... and each base branch a task names (`owner/name#develop`), as fetched.
REMOTE_BASES = "refs/agent-team/remote-bases/"
# A first fetch of a large repository takes minutes; later ones bring only what is new.
FETCH_TIMEOUT_S = 1800.0
# A fixed date makes the generated default repository's first commit the same everywhere.
_INITIAL_DATE = "2000-01-01T00:00:00+0000"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
# Settings a fetch sets back, whatever the mirror's config (which builders can write) says.
_FETCH_CONFIG = (
    "credential.helper=",  # empty: no helper runs
    "core.sshCommand=ssh",  # GIT_SSH_COMMAND in the daemon's environment still wins
    "core.askPass=",
    "protocol.allow=never",
    "protocol.https.allow=always",
    "protocol.http.allow=always",
    "protocol.ssh.allow=always",
    "protocol.ext.allow=never",
    "protocol.fd.allow=never",
    "protocol.file.allow=never",
    "protocol.git.allow=never",
    "http.sslVerify=true",
    "fetch.recurseSubmodules=false",
)
# What a fetch needs of the daemon's environment: ssh's keys and agent, proxies, CAs.
_NETWORK_VARS = frozenset(
    {
        "HOME",
        "SSH_AUTH_SOCK",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_SSL_CAINFO",
        "GIT_SSL_CAPATH",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "all_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "ALL_PROXY",
    }
)


@dataclass(frozen=True)
class GitRepo:
    """A checked repository, ready to make task branches in.

    Attributes:
        path: the folder git runs in: a clone's top folder, or a bare mirror.
        common_dir: its git folder, where worktrees are registered (`.git` of a
            clone; the mirror itself).
        start: where a new task branch starts: `HEAD`, or a mirror's `REMOTE_HEAD`.
    """

    path: Path
    common_dir: Path
    start: str = "HEAD"


# Repositories this process has checked (a git folder, a first commit), by resolved path.
_KNOWN_REPOS: dict[Path, GitRepo] = {}


def known_repo(path: Path) -> GitRepo | None:
    """The repository at `path` if this process checked it and it is still there."""
    repo = _KNOWN_REPOS.get(path)
    if repo is not None and repo.path.is_dir() and (repo.common_dir / "HEAD").is_file():
        return repo
    return None


@contextmanager
def repo_lock(state_dir: Path, repo: GitRepo) -> Iterator[None]:
    """Hold `repo`'s lock: no other add, prune, gc or fetch of it runs meanwhile.

    Keyed by the repository's git folder, where the worktree registry lives.
    """
    with registry_lock(state_dir, repo.common_dir):
        yield


def spec_of(task: BuildTask, *, github_host: str) -> RepoSpec | None:
    """What the task names as its repository, parsed; None when it names none.

    Raises:
        BuildError: the stored text is no form we take (stored before it was checked).
    """
    if task.repo is None:
        return None
    if isinstance(task.repo, Path):
        return LocalRepo(task.repo)
    try:
        return parse_repo(task.repo, github_host=github_host)
    except InvalidRepoError as exc:
        raise BuildError(f"{exc}; submit the task again with a repository we take") from None


def resolve_repo(
    task: BuildTask,
    *,
    branch: str,
    repo_path: Path | None,
    state_dir: Path,
    git_host: GitHost,
) -> GitRepo:
    """The repository `task` builds in, ready for its branch `branch`.

    `task.repo`, else `repo_path`, else the default repository under
    `state_dir` (created if missing). A remote is fetched into its mirror
    first, unless `branch` exists there already (see the module's docstring).

    Args:
        task: the task.
        branch: its branch (`agent-team/<key>`).
        repo_path: `AGENT_TEAM_REPO_PATH`, if set.
        state_dir: the state folder, resolved.
        git_host: the GitHub host (`owner/name` lives there) and its token.

    Raises:
        BuildError: a local repository is missing, not a git repository or has no commits.
        RepoUnavailableError: a remote could not be fetched.
        BuilderUnavailableError: git is not installed.
    """
    spec = spec_of(task, github_host=git_host.url)
    source = "the task's repository"
    if spec is None and repo_path is not None:
        spec, source = LocalRepo(repo_path), "AGENT_TEAM_REPO_PATH"
    if spec is None:
        return _default_repo(state_dir)
    if isinstance(spec, RemoteRepo):
        return _mirror(spec, branch=branch, state_dir=state_dir, git_host=git_host)
    local = _local(spec.path, source)
    if spec.branch is None:
        return local
    if not ref_exists(local.path, f"refs/heads/{spec.branch}"):
        raise BuildError(
            f"{source} {local.path} has no branch {spec.branch!r} to start from; create it "
            "or name another base branch"
        )
    return replace(local, start=f"refs/heads/{spec.branch}")


# --- local repositories ------------------------------------------------------------------------


def _common_dir(path: Path) -> Path | None:
    """The git folder of the repository whose top folder is `path`, or `None` if it is none."""
    # The ceiling stops git from walking up: a plain folder inside some other
    # checkout must not count as a repository.
    done = run_git(
        path,
        "rev-parse",
        "--path-format=absolute",
        "--git-common-dir",
        check=False,
        extra_env={"GIT_CEILING_DIRECTORIES": str(path.parent)},
    )
    return Path(done.stdout.strip()).resolve() if done.returncode == 0 else None


def _has_commit(repo: Path) -> bool:
    return (
        run_git(repo, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False).returncode
        == 0
    )


def ref_exists(repo: Path, ref: str) -> bool:
    """Whether `ref` names an object in `repo` (one git process)."""
    return run_git(repo, "rev-parse", "--verify", "--quiet", ref, check=False).returncode == 0


def _default_repo(state_dir: Path) -> GitRepo:
    path = state_dir / "repos" / "default"
    known = known_repo(path)
    if known is not None:
        return known
    with file_lock(state_dir / "locks" / "repos" / "default.lock"):
        path.mkdir(parents=True, exist_ok=True)
        common_dir = _common_dir(path)
        if common_dir is None:
            run_git(path, "init", "-q", "-b", "main")
            common_dir = path / ".git"
        if not _has_commit(path):
            run_git(
                path,
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "agent-team: start of the default repository",
                extra_env={"GIT_AUTHOR_DATE": _INITIAL_DATE, "GIT_COMMITTER_DATE": _INITIAL_DATE},
            )
    repo = _KNOWN_REPOS[path] = GitRepo(path, common_dir)
    return repo


def _local(given: Path, source: str) -> GitRepo:
    path = given.expanduser().resolve()
    known = known_repo(path)
    if known is not None:
        return known
    if not path.is_dir():
        raise BuildError(f"{source} {path} does not exist; point it at a git repository")
    common_dir = _common_dir(path)
    if common_dir is None:
        raise BuildError(
            f"{source} {path} is not a git repository (no .git there); run `git init` in it "
            "or point it at the top folder of a clone"
        )
    if not _has_commit(path):
        raise BuildError(
            f"{source} {path} has no commits yet; make a first commit so task branches "
            "can start from HEAD"
        )
    repo = _KNOWN_REPOS[path] = GitRepo(path, common_dir)
    return repo


# --- mirrors of remote repositories ------------------------------------------------------------


def mirror_path(state_dir: Path, spec: RemoteRepo) -> Path:
    """Where `spec`'s mirror lives: `state_dir/mirrors/<owner>-<name>-<hash>.git`.

    The hash (of the URL) tells apart remotes of the same name on other hosts.
    """
    safe = _UNSAFE.sub("-", spec.name.replace("/", "-")).strip("-.")[:60] or "repo"
    digest = hashlib.sha256(spec.url.encode("utf-8")).hexdigest()[:10]
    return state_dir.expanduser().resolve() / "mirrors" / f"{safe}-{digest}.git"


def remote_ref(base: str | None) -> str:
    """Where a mirror keeps the head of `base` (None: the remote's default branch) as fetched.

    One ref per base branch, so tasks of one repository on different bases do
    not move each other's start between the fetch and the new branch.
    """
    return REMOTE_HEAD if base is None else f"{REMOTE_BASES}{base}"


def _mirror(spec: RemoteRepo, *, branch: str, state_dir: Path, git_host: GitHost) -> GitRepo:
    path = mirror_path(state_dir, spec)
    _KNOWN_REPOS[path] = GitRepo(path, path, start=REMOTE_HEAD)
    repo = GitRepo(path, path, start=remote_ref(spec.branch))
    if (path / "HEAD").is_file() and ref_exists(path, f"refs/heads/{branch}"):
        return repo  # the branch is the build record: kept as it is, nothing to fetch
    with registry_lock(state_dir, path):
        if not (path / "HEAD").is_file():
            _init_mirror(path, spec)
        _fetch(path, spec, git_host)
    return repo


def _init_mirror(path: Path, spec: RemoteRepo) -> None:
    """A new bare mirror at `path`, made beside it and moved in (hold the repository lock)."""
    if path.exists():  # no HEAD: a folder that is not a repository of ours
        shutil.rmtree(path)
    fresh = path.with_name(path.name + ".new")
    shutil.rmtree(fresh, ignore_errors=True)
    fresh.parent.mkdir(parents=True, exist_ok=True)
    # No template: no sample hooks, nothing but what git needs.
    run_git(fresh.parent, "init", "-q", "--bare", "--template=", str(fresh))
    # For people who look at it; our fetch names the URL itself.
    run_git(fresh, "config", "remote.origin.url", spec.url)
    os.rename(fresh, path)


def _network_env(git_host: GitHost, url: str) -> dict[str, str]:
    env = {key: value for key, value in inherited_env().items() if key in _NETWORK_VARS}
    return env | git_host.env_for(url)


def _fetch(path: Path, spec: RemoteRepo, git_host: GitHost) -> None:
    """Fetch the remote's HEAD (or the base branch) into `remote_ref` (hold the repository lock)."""
    try:
        done = run_git(
            path,
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--no-recurse-submodules",
            spec.url,
            f"+{'HEAD' if spec.branch is None else 'refs/heads/' + spec.branch}:"
            f"{remote_ref(spec.branch)}",
            check=False,
            extra_env=_network_env(git_host, spec.url),
            config=_FETCH_CONFIG,
            timeout_s=FETCH_TIMEOUT_S,
        )
    except BuildError as exc:  # it timed out
        raise RepoUnavailableError(
            f"could not fetch {spec.text}: {redact(str(exc), git_host.secrets())}"
        ) from None
    if done.returncode == 0:
        return
    said = redact(tail((done.stderr or done.stdout).strip(), 1000), git_host.secrets())
    raise RepoUnavailableError(
        f"could not fetch {spec.text} (git exit {done.returncode}: {' '.join(said.split())}); "
        "check that the repository exists and that this daemon may read it "
        "(AGENT_TEAM_GITHUB_TOKEN on the GitHub host, the daemon's ssh key for git@ URLs)"
    )
