"""The sandbox a builder's process runs in: what the coding agent can reach, and what not.

Why: the coding agent runs code it wrote itself, from a plan a model wrote,
on the team's server. Outside a sandbox it runs as the daemon's user, with
every other task's worktree, the ledger, the state folder, the daemon's home
and environment and the network in reach. Inside one (docs/architecture.md §4
"the sandbox", README "Sandbox"):

- its own user, PID, IPC, UTS and network namespaces; it dies with the daemon;
- the root file system read-only; writable only the task's worktree, a private
  temporary folder and the builder's own home under the state folder
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
`none` is an explicit choice. For a builder that runs a process, a sandbox
that cannot run stops the daemon's start (`require_sandbox`); it never falls
back to none silently. The offline builder runs no process and needs none.

A builder asks for its jail with `Sandbox.enter(...)` and runs
`jail.argv(command)` with `jail.env` (`agent_team.builders.proc.run_process`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from agent_team.builders import sandbox_bridge
from agent_team.builders.base import Worktree
from agent_team.builders.egress import EgressProxy
from agent_team.builders.proc import allowed_env, inherited_env
from agent_team.builders.sandbox_limits import Limits, cgroup_support, open_cgroup
from agent_team.exceptions import ConfigError

__all__ = [
    "SANDBOX_NAMES",
    "Bubblewrap",
    "Jail",
    "NoSandbox",
    "Sandbox",
    "SandboxPolicy",
    "make_sandbox",
]

SANDBOX_NAMES = ("auto", "bwrap", "none")
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
        env_names: more variables to hand in (`AGENT_TEAM_SANDBOX_ENV`).
        limits: the resource limits.
    """

    state_dir: Path
    hide: tuple[Path, ...] = ()
    allow_hosts: tuple[str, ...] = ()
    env_names: tuple[str, ...] = ()
    limits: Limits = field(default_factory=Limits)


@dataclass
class Jail:
    """Where one build runs: the command prefix and the complete environment.

    Attributes:
        prefix: what goes before the builder's own argv (empty without a sandbox).
        env: the child's whole environment.
        home: the builder's private home, or None without a sandbox.
        proxy: the egress proxy of this build, if hosts are allowed.
    """

    prefix: list[str]
    env: dict[str, str]
    home: Path | None = None
    proxy: EgressProxy | None = None

    def argv(self, command: Sequence[str]) -> list[str]:
        return [*self.prefix, *command]


class Sandbox(Protocol):
    """A kind of sandbox (`none`, `bwrap`)."""

    name: str

    def describe(self) -> str:
        """One line for the start-up log, `doctor` and `/healthz`."""
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
        child_env = {k: v for k, v in inherited_env().items() if k not in drop}
        yield Jail(prefix=[], env=child_env | dict(env))


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

        def under_hidden(path: Path) -> bool:
            return any(path == h or h in path.parents for h in hidden)

        # The worktree's git: its own admin folder is writable (index, HEAD), the rest of
        # the repository's git folder is read-only (objects, refs, config, hooks).
        admin = _git_admin(worktree.path)
        if admin is not None:
            common = _common_of(admin)
            if common is not None:
                args += ["--ro-bind", str(common), str(common)]
            args += ["--bind", str(admin), str(admin)]
        for binary in binaries:
            for path in {Path(binary), Path(binary).resolve()}:
                folder = _visible_parent(path)
                if under_hidden(folder):
                    args += ["--ro-bind", str(folder), str(folder)]
        for prefix in {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()}:
            if under_hidden(prefix):
                args += ["--ro-bind", str(prefix), str(prefix)]
        args += ["--bind", str(worktree.path), str(worktree.path)]
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
        state = self.policy.state_dir.expanduser().resolve()
        home = state / "sandbox" / "home" / builder
        home.mkdir(parents=True, exist_ok=True)
        run = state / "sandbox" / "run" / f"{worktree.key}-{uuid.uuid4().hex[:8]}"
        scratch = run / "tmp"
        scratch.mkdir(parents=True)
        with ExitStack() as stack:
            stack.callback(shutil.rmtree, run, True)
            names = [*keys, *self.policy.env_names]
            child_env = allowed_env(_BASE_ENV, _BASE_PREFIXES, [n for n in names if n not in drop])
            child_env |= {"HOME": str(home), "TMPDIR": "/tmp", "USER": "agent-team"}
            child_env |= dict(env)
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
                proxy = EgressProxy(run / "proxy.sock", self.policy.allow_hosts, worktree.output)
                stack.callback(proxy.close)
                bridge = Path(sandbox_bridge.__file__).resolve()
                prefix += [
                    "--ro-bind",
                    str(run / "proxy.sock"),
                    str(_INSIDE_RUN / "proxy.sock"),
                    "--ro-bind",
                    str(bridge),
                    str(_INSIDE_RUN / "bridge.py"),
                ]
                url = f"http://127.0.0.1:{PROXY_PORT}"
                child_env |= dict.fromkeys(_PROXY_VARS, url)
                child_env |= {"NO_PROXY": "", "no_proxy": ""}
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
            yield Jail(prefix=prefix, env=child_env, home=home, proxy=proxy)


def _git_admin(worktree: Path) -> Path | None:
    """The worktree's own git folder (`.git/worktrees/<id>`), from its `.git` file."""
    try:
        text = (worktree / ".git").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("gitdir: "):
        return None
    return (worktree / text.removeprefix("gitdir: ").strip()).resolve()


def _common_of(admin: Path) -> Path | None:
    try:
        text = (admin / "commondir").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return (admin / text).resolve()


def _bwrap_runs(bwrap: str) -> str | None:
    """None when `bwrap` can make its namespaces here, else what it said."""
    try:
        done = subprocess.run(
            [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"],
            capture_output=True,
            text=True,
            timeout=30,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if done.returncode == 0 else (done.stderr.strip() or f"exit {done.returncode}")


def make_sandbox(name: str, policy: SandboxPolicy, *, runs_processes: bool) -> Sandbox:
    """The sandbox the settings ask for, checked to run here.

    Args:
        name: `auto`, `bwrap` or `none` (`AGENT_TEAM_SANDBOX`).
        policy: what it allows.
        runs_processes: whether the builder runs an agent or a command; the
            offline builder does not, and gets `none` from `auto` without a check.

    Raises:
        ConfigError: an unknown name, or a sandbox that cannot run here while
            the builder needs one; one line naming the package or the setting.
    """
    if name not in SANDBOX_NAMES:
        raise ConfigError(
            f"AGENT_TEAM_SANDBOX: unknown sandbox {name!r}; choose one of "
            f"{', '.join(SANDBOX_NAMES)}"
        )
    if name == "none" or (name == "auto" and not runs_processes):
        return NoSandbox()
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise ConfigError(
            "AGENT_TEAM_SANDBOX: bubblewrap (`bwrap`) is not installed, so builds cannot run "
            "in a sandbox; install it (apt install bubblewrap) or choose "
            "AGENT_TEAM_SANDBOX=none to run builds unsandboxed"
        )
    problem = _bwrap_runs(bwrap)
    if problem is not None:
        raise ConfigError(
            f"AGENT_TEAM_SANDBOX: bubblewrap cannot make its namespaces here ({problem}); "
            "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1) "
            "or choose AGENT_TEAM_SANDBOX=none"
        )
    return Bubblewrap(policy, bwrap=bwrap)
