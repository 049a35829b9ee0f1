"""The sandbox a builder's process runs in: what the coding agent can reach, and what not.

Why: the coding agent runs code it wrote itself, from a plan a model wrote,
on the team's server. Outside a sandbox it runs as the daemon's user, with
every other task's worktree, the ledger, the state folder, the daemon's home
and environment and the network in reach. Inside one (docs/architecture.md §4
"the sandbox", README "Sandbox"):

- its own user, PID, IPC, UTS and network namespaces; it dies with the daemon;
- the root file system read-only; writable only the task's worktree (its
  `.git` and the repository's git folder stay read-only: `git_mounts`), a
  private temporary folder and the builder's own home under the state folder
  (`state_dir/sandbox/home/<builder>`: its config and caches, e.g. Claude
  Code's login); the state folder (other worktrees, mirrors), the ledger's
  folder, the daemon's home and `/run` (the host's sockets) are hidden;
- the environment built from an allow-list (`PATH`, locale, a private `HOME`
  and `TMPDIR`, the builder's own key variables, `AGENT_TEAM_SANDBOX_ENV`):
  no GitHub, Slack, Confluence or database secret enters;
- no network, unless `AGENT_TEAM_SANDBOX_ALLOW_HOSTS` lists hosts: then only
  through `agent_team.builders.egress`, which lets those through and writes
  every refusal on the build's output;
- rlimits on processes, open files, address space and CPU time, and a cgroup
  for processes and memory where the host gives one
  (`agent_team.builders.sandbox_limits`).

`AGENT_TEAM_SANDBOX=auto` (the default) takes bubblewrap where it can run;
`none` is an explicit choice; a container runtime is another
(`agent_team.builders.sandbox_container`). For a builder that runs a
process, a sandbox that cannot run stops the daemon's start
(`agent_team.builders.sandbox_choice.make_sandbox`); it never falls back to
none silently. The offline builder runs no process and needs none.

A builder asks for its jail with `Sandbox.enter(...)` and runs
`jail.argv(command)` with `jail.env` (`agent_team.builders.proc.run_process`).
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from agent_team.builders import sandbox_bridge
from agent_team.builders.base import Worktree
from agent_team.builders.egress import EgressProxy
from agent_team.builders.proc import allowed_env, inherited_env
from agent_team.builders.sandbox_limits import Limits, cgroup_support, open_cgroup, sweep_cgroups
from agent_team.builders.worktree import _admin_dir

__all__ = [
    "PROXY_PORT",
    "Bubblewrap",
    "Jail",
    "NoSandbox",
    "Sandbox",
    "SandboxPolicy",
    "build_folders",
    "child_env",
    "git_mounts",
]
# The loopback port the bridge listens on inside the sandbox (its own network namespace).
PROXY_PORT = 3128
_INSIDE_RUN = Path("/run/agent-team")
# Variables every sandboxed build gets from the daemon's environment when set.
_BASE_ENV = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM", "SOURCE_DATE_EPOCH")
_BASE_PREFIXES = ("LC_",)
_PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy")


@dataclass(frozen=True)
class SandboxPolicy:
    """What every sandbox of this process allows, from the settings.

    Attributes:
        state_dir: the state folder (hidden, but for the task's worktree and the builder's home).
        hide: more folders to hide (the ledger's folder, the daemon's home); what the
            build needs inside them (its worktree, the repository's git folder) is bound
            back.
        allow_hosts: hosts the egress proxy lets through (`AGENT_TEAM_SANDBOX_ALLOW_HOSTS`).
        hide_files: single files to hide (the `.env` the daemon's settings came from).
        env_names: more variables to hand in (`AGENT_TEAM_SANDBOX_ENV`).
        limits: the resource limits.
    """

    state_dir: Path
    hide: tuple[Path, ...] = ()
    hide_files: tuple[Path, ...] = ()
    allow_hosts: tuple[str, ...] = ()
    env_names: tuple[str, ...] = ()
    limits: Limits = field(default_factory=Limits)


@dataclass
class Jail:
    """Where one build runs: the command prefix and the complete environment.

    Attributes:
        prefix: what goes before the builder's own argv (empty without a sandbox).
        env: the child's whole environment.
        on_stop: what a stop must do besides killing the process group (pass it to
            `run_process`): a container outlives its runtime's client.
    """

    prefix: list[str]
    env: dict[str, str]
    on_stop: Callable[[], None] | None = None

    def argv(self, command: Sequence[str]) -> list[str]:
        return [*self.prefix, *command]


class Sandbox(Protocol):
    """A kind of sandbox (`none`, `bwrap`)."""

    name: str

    def describe(self) -> str:
        """One line for the start-up log, `doctor` and `/healthz`."""
        ...

    def sweep(self) -> list[str]:
        """Remove what builds of an earlier run of the daemon left behind (containers)."""
        ...

    def enter(
        self,
        worktree: Worktree,
        *,
        builder: str,
        env: Mapping[str, str],
        keys: Sequence[str] = (),
        drop: Sequence[str] = (),
        binaries: Sequence[str] = (),
    ) -> AbstractContextManager[Jail]:
        """A jail for one run of `builder` in `worktree` (a context manager).

        Args:
            worktree: the task's worktree; the only project folder the build may write.
            builder: the builder's name (its private home is kept per builder).
            env: variables the builder sets itself (the plan file, the task id).
            keys: the builder's own key variables, handed in from the daemon's
                environment when set (`ANTHROPIC_API_KEY` for claude-code).
            drop: variables never to hand in (an API key in subscription billing).
            binaries: programs the builder runs, made visible if they live in a
                hidden folder (a CLI installed in the daemon's home).
        """
        ...


class NoSandbox:
    """`AGENT_TEAM_SANDBOX=none`: the build runs on the host, as before sandboxes."""

    name = "none"

    def describe(self) -> str:
        return "none (builds run on the host as the daemon's user; AGENT_TEAM_SANDBOX=none)"

    def sweep(self) -> list[str]:
        return []  # nothing outlives a build: its process group is killed with it

    @contextmanager
    def enter(
        self,
        worktree: Worktree,
        *,
        builder: str,
        env: Mapping[str, str],
        keys: Sequence[str] = (),
        drop: Sequence[str] = (),
        binaries: Sequence[str] = (),
    ) -> Iterator[Jail]:
        host_env = {k: v for k, v in inherited_env().items() if k not in drop}
        yield Jail(prefix=[], env=host_env | dict(env))


def child_env(
    policy: SandboxPolicy,
    *,
    home: Path,
    keys: Sequence[str],
    drop: Sequence[str],
    env: Mapping[str, str],
) -> dict[str, str]:
    """A sandboxed build's whole environment: the allow-list, a private home, the builder's own.

    From the daemon's environment only `PATH`, the locale, the builder's `keys`
    and `AGENT_TEAM_SANDBOX_ENV` (less `drop`); with hosts allowed, the proxy
    variables pointing at the bridge.
    """
    names = [n for n in (*keys, *policy.env_names) if n not in drop]
    inside = allowed_env(_BASE_ENV, _BASE_PREFIXES, names)
    inside |= {"HOME": str(home), "TMPDIR": "/tmp", "USER": "agent-team"}
    if policy.allow_hosts:
        inside |= dict.fromkeys(_PROXY_VARS, f"http://127.0.0.1:{PROXY_PORT}")
        inside |= {"NO_PROXY": "", "no_proxy": ""}
    return inside | dict(env)


def build_folders(policy: SandboxPolicy, worktree: Worktree, builder: str) -> tuple[Path, Path]:
    """The builder's home (kept) and this build's own folder (new; the caller removes it)."""
    state = policy.state_dir.expanduser().resolve()
    home = state / "sandbox" / "home" / builder
    home.mkdir(parents=True, exist_ok=True)
    run = state / "sandbox" / "run" / f"{worktree.key[:40]}-{uuid.uuid4().hex[:8]}"
    run.mkdir(parents=True)
    return home, run


def git_mounts(worktree: Path) -> list[Path]:
    """What the worktree's git reads besides the worktree, all of it to mount read-only.

    The repository's git folder (objects, refs, config, hooks), the worktree's
    own admin folder (`.git/worktrees/<id>`: its HEAD, `commondir`, `gitdir`)
    and the worktree's `.git` file, in that order (the file goes over the
    worktree's own writable mount). Why all read-only: after the build the
    daemon runs git on the host in this worktree, and git trusts these files;
    a build that could point `.git` elsewhere, or write `HEAD` or a
    `config.worktree`, could make that git run its code (`core.fsmonitor`) or
    move another branch. The build's git writes its index to a private copy
    instead (`GIT_INDEX_FILE`, `private_index`).
    """
    admin = _admin_dir(worktree)
    if admin is None:
        return []
    common = _common_of(admin)
    return [*([common] if common is not None else []), admin, worktree / ".git"]


def private_index(worktree: Path, folder: Path) -> Path | None:
    """A copy of the worktree's index in `folder`, for the build's git (`GIT_INDEX_FILE`)."""
    admin = _admin_dir(worktree)
    if admin is None or not (admin / "index").is_file():
        return None
    copy = folder / "git-index"
    shutil.copyfile(admin / "index", copy)
    return copy


def _visible_parent(path: Path) -> Path:
    """The folder to bind so `path` and what sits beside it (a package's files) are visible."""
    return path.parent if path.is_file() else path


class Bubblewrap:
    """`bwrap`: namespaces, a read-only root, and binds for what the build may see."""

    name = "bwrap"

    def __init__(self, policy: SandboxPolicy, *, bwrap: str) -> None:
        self.policy = policy
        self.bwrap = bwrap
        self.cgroups = cgroup_support()

    def describe(self) -> str:
        limits = self.policy.limits
        network = (
            f"egress only to {', '.join(self.policy.allow_hosts)}"
            if self.policy.allow_hosts
            else "no network"
        )
        cgroup = (
            f"cgroup: {'+'.join(self.cgroups)}"
            if self.cgroups
            else "no cgroup (rlimits only: the process limit does not bind root)"
        )
        root = (
            "; the daemon runs as root, so a build can read what root can (run it as its "
            "own user, deploy/agent-team.service)"
            if os.geteuid() == 0
            else ""
        )
        return (
            f"bwrap ({self.bwrap}): {network}; at most {limits.max_procs} processes, "
            f"{limits.max_memory_mb} MiB, {limits.max_cpu_s} s CPU; {cgroup}{root}"
        )

    def sweep(self) -> list[str]:
        """A sandbox dies with its build (`--die-with-parent`); a killed daemon's cgroups stay."""
        return [str(folder) for folder in sweep_cgroups()]

    def _hidden(self) -> list[Path]:
        state = self.policy.state_dir.expanduser().resolve()
        hidden = [state, *(p.expanduser().resolve() for p in self.policy.hide)]
        # An outer folder hides an inner one anyway; one that is not there hides nothing
        # (and could not be a mount point on the read-only root).
        return sorted(
            {
                p
                for p in hidden
                if p != Path("/") and p.is_dir() and not any(o in p.parents for o in hidden)
            }
        )

    def _binds(self, worktree: Worktree, home: Path, binaries: Sequence[str]) -> list[str]:
        args: list[str] = []
        hidden = self._hidden()
        for folder in hidden:
            args += ["--tmpfs", str(folder)]
        for file in self.policy.hide_files:
            if file.is_file():
                args += ["--ro-bind", os.devnull, str(file.resolve())]

        # The host's /tmp is replaced by the build's own: what the build must run from
        # under it (a virtual environment, a CLI) is bound back like what a tmpfs hides.
        host_tmp = Path("/tmp").resolve()

        def under_hidden(path: Path) -> bool:
            return host_tmp in path.parents or any(path == h or h in path.parents for h in hidden)

        def safe_to_bind(folder: Path) -> bool:
            # Never /tmp itself, and never a folder that holds a hidden one: binding it
            # would show again what the tmpfs hid.
            return folder != host_tmp and not any(folder in h.parents for h in hidden)

        for binary in binaries:
            for path in {Path(binary), Path(binary).resolve()}:
                if not under_hidden(path):
                    continue
                folder = _visible_parent(path)
                shown = folder if safe_to_bind(folder) else path  # else the program alone
                args += ["--ro-bind", str(shown), str(shown)]
        for prefix in {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()}:
            if under_hidden(prefix) and safe_to_bind(prefix):
                args += ["--ro-bind", str(prefix), str(prefix)]
        args += ["--bind", str(worktree.path), str(worktree.path)]
        for path in git_mounts(worktree.path):  # after the worktree: its `.git` goes over it
            args += ["--ro-bind", str(path), str(path)]
        args += ["--bind", str(home), str(home)]
        return args

    @contextmanager
    def enter(
        self,
        worktree: Worktree,
        *,
        builder: str,
        env: Mapping[str, str],
        keys: Sequence[str] = (),
        drop: Sequence[str] = (),
        binaries: Sequence[str] = (),
    ) -> Iterator[Jail]:
        home, run = build_folders(self.policy, worktree, builder)
        scratch = run / "tmp"
        scratch.mkdir()
        with ExitStack() as stack:
            stack.callback(shutil.rmtree, run, True)
            inside = child_env(self.policy, home=home, keys=keys, drop=drop, env=env)
            if private_index(worktree.path, scratch) is not None:
                inside["GIT_INDEX_FILE"] = "/tmp/git-index"  # scratch is the sandbox's /tmp
            prefix: list[str] = []
            cgroup = open_cgroup(f"agent-team-{worktree.key}-{run.name[-8:]}", self.policy.limits)
            if cgroup is not None:
                stack.callback(cgroup.close)
                prefix += cgroup.argv()
            prefix += self.policy.limits.prlimit_argv()
            prefix += [
                self.bwrap,
                "--unshare-user",
                "--unshare-pid",
                "--unshare-ipc",
                "--unshare-uts",
                "--unshare-net",
                "--unshare-cgroup-try",
                "--die-with-parent",
                "--new-session",
                "--hostname",
                "agent-team-sandbox",
                "--ro-bind",
                "/",
                "/",
                "--dev",
                "/dev",
                "--proc",
                "/proc",
                "--tmpfs",
                "/run",
                "--bind",
                str(scratch),
                "/tmp",
            ]
            prefix += self._binds(worktree, home, binaries)
            proxy: EgressProxy | None = None
            if self.policy.allow_hosts:
                proxy = EgressProxy(self.policy.allow_hosts, worktree.output)
                stack.callback(proxy.close)
                bridge = Path(sandbox_bridge.__file__).resolve()
                prefix += [
                    "--ro-bind",
                    str(proxy.socket_path),
                    str(_INSIDE_RUN / "proxy.sock"),
                    "--ro-bind",
                    str(bridge),
                    str(_INSIDE_RUN / "bridge.py"),
                ]
            prefix += ["--chdir", str(worktree.path), "--cap-drop", "ALL", "--"]
            if proxy is not None:
                prefix += [
                    sys.executable,
                    "-I",
                    "-S",
                    str(_INSIDE_RUN / "bridge.py"),
                    str(_INSIDE_RUN / "proxy.sock"),
                    str(PROXY_PORT),
                ]
            yield Jail(prefix=prefix, env=inside)


def _common_of(admin: Path) -> Path | None:
    try:
        text = (admin / "commondir").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return (admin / text).resolve()
