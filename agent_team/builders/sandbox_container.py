"""A container as a build's sandbox: podman or docker, for hosts that would rather run one.

The same promises as the bubblewrap sandbox (`agent_team.builders.sandbox`),
kept by the runtime's own flags: no network (`--network none`), a read-only
root (`--read-only`), `--cap-drop ALL`, no new privileges, process, memory,
open-file and CPU limits, only the task's worktree (and its git admin folder;
the repository's git folder read-only, the builder's home) mounted, each at
its own path, and the environment allow-list: variables are passed by name
(`--env NAME`), so their values never appear in an argument list. The
image (`AGENT_TEAM_SANDBOX_IMAGE`) brings the tools; with
`AGENT_TEAM_SANDBOX_ALLOW_HOSTS` it needs `python3` too, for the bridge to the
egress proxy.

Containers are named by task (`agent-team-<key>-<random>`) and labelled with
the state folder they belong to; each is removed when its build ends, however
it ends (a cancel or a timeout kills the runtime's client, then `rm -f`
stops the container), and the daemon removes its leftovers when it starts
(`sweep`), e.g. after a `kill -9`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

from agent_team.builders import sandbox_bridge
from agent_team.builders.base import Worktree
from agent_team.builders.egress import EgressProxy
from agent_team.builders.proc import allowed_env
from agent_team.builders.sandbox import (
    PROXY_PORT,
    Jail,
    SandboxPolicy,
    build_folders,
    child_env,
    git_mounts,
    private_index,
)

__all__ = ["ContainerSandbox"]

log = logging.getLogger(__name__)

_LABEL = "agent-team.state"
_INSIDE_RUN = "/run/agent-team"
# What the runtime's own client needs from the daemon's environment to reach its engine.
_RUNTIME_ENV = (
    "HOME",
    "XDG_RUNTIME_DIR",
    "DOCKER_HOST",
    "DOCKER_CONFIG",
    "DOCKER_CONTEXT",
    "DOCKER_CERT_PATH",
    "DOCKER_TLS_VERIFY",
    "CONTAINER_HOST",
    "CONTAINERS_CONF",
    "CONTAINERS_STORAGE_CONF",
    "CONTAINER_CONNECTION",
)
_RUNTIME_TIMEOUT_S = 60.0


class ContainerSandbox:
    """`podman run` or `docker run` with the sandbox's flags, one container per build."""

    def __init__(self, policy: SandboxPolicy, *, kind: str, runtime: str, image: str) -> None:
        self.policy = policy
        self.name = kind
        self.runtime = runtime
        self.image = image
        state = policy.state_dir.expanduser().resolve()
        self.label = hashlib.sha256(str(state).encode("utf-8")).hexdigest()[:16]

    def describe(self) -> str:
        limits = self.policy.limits
        network = (
            f"egress only to {', '.join(self.policy.allow_hosts)}"
            if self.policy.allow_hosts
            else "no network"
        )
        return (
            f"{self.name} ({self.runtime}, image {self.image}): {network}; at most "
            f"{limits.max_procs} processes, {limits.max_memory_mb} MiB, {limits.max_cpu_s} s CPU"
        )

    def _runtime_env(self) -> dict[str, str]:
        return allowed_env(_RUNTIME_ENV, ("LC_",), ("PATH",))

    def engine_problem(self) -> str | None:
        """None when the runtime answers (`<runtime> version`), else what it said."""
        try:
            done = self._run("version")
        except (OSError, subprocess.TimeoutExpired) as exc:
            return str(exc)
        if done.returncode == 0:
            return None
        said = (done.stderr or done.stdout).strip().splitlines()
        return said[-1] if said else f"exit {done.returncode}"

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.runtime, *args],
            env=self._runtime_env(),
            capture_output=True,
            text=True,
            timeout=_RUNTIME_TIMEOUT_S,
            check=False,
        )

    def remove(self, name: str) -> None:
        """Stop and remove one container (a no-op when it is gone already)."""
        try:
            done = self._run("rm", "-f", name)
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("sandbox: could not remove container %s: %s", name, exc)
            return
        if done.returncode != 0 and "no such container" not in done.stderr.lower():
            log.warning("sandbox: could not remove container %s: %s", name, done.stderr.strip())

    def sweep(self) -> list[str]:
        """Remove the containers a previous run of this daemon left behind; returns their names."""
        try:
            listed = self._run(
                "ps", "-a", "--filter", f"label={_LABEL}={self.label}", "--format", "{{.Names}}"
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("sandbox: could not list leftover containers: %s", exc)
            return []
        names = [line.strip() for line in listed.stdout.splitlines() if line.strip()]
        for name in names:
            self.remove(name)
        if names:
            log.info("sandbox: removed %d leftover container(s): %s", len(names), ", ".join(names))
        return names

    def _flags(self, worktree: Worktree, home: Path, name: str, env_names: list[str]) -> list[str]:
        limits = self.policy.limits
        flags = [
            "run",
            "--rm",
            "--name",
            name,
            "--label",
            f"{_LABEL}={self.label}",
            "--network",
            "none",
            "--read-only",
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "--pids-limit",
            str(limits.max_procs),
            "--memory",
            f"{limits.max_memory_mb}m",
            "--ulimit",
            f"nofile={limits.max_open_files}:{limits.max_open_files}",
            "--ulimit",
            f"cpu={limits.max_cpu_s}:{limits.max_cpu_s}",
            "--tmpfs",
            "/tmp",
            "--user",
            f"{os.getuid()}:{os.getgid()}",
            "--workdir",
            str(worktree.path),
            "--volume",
            f"{worktree.path}:{worktree.path}:rw",
            "--volume",
            f"{home}:{home}:rw",
        ]
        for source in git_mounts(worktree.path):
            flags += ["--volume", f"{source}:{source}:ro"]
        for variable in env_names:
            flags += ["--env", variable]  # by name: its value comes from our environment
        return flags

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
        name = f"agent-team-{run.name}"
        with ExitStack() as stack:
            stack.callback(shutil.rmtree, run, True)
            stack.callback(self.remove, name)  # after a cancel or a timeout: the container too
            inside = child_env(self.policy, home=home, keys=keys, drop=drop, env=env)
            proxy: EgressProxy | None = None
            # The build's own folder: its git index copy and, with hosts allowed, the proxy.
            extra = ["--volume", f"{run}:{_INSIDE_RUN}:rw"]
            inline = [f"HOME={home}"]
            if private_index(worktree.path, run) is not None:
                inline.append(f"GIT_INDEX_FILE={_INSIDE_RUN}/git-index")
            if self.policy.allow_hosts:
                proxy = EgressProxy(self.policy.allow_hosts, worktree.output)
                stack.callback(proxy.close)
                bridge = Path(sandbox_bridge.__file__).resolve()
                extra += [
                    "--volume",
                    f"{proxy.socket_path}:{_INSIDE_RUN}/proxy.sock",
                    "--volume",
                    f"{bridge}:{_INSIDE_RUN}/bridge.py:ro",
                ]
            # Values of the daemon's variables reach the container by name, from the
            # runtime's environment; the private home is ours to name, so it goes inline.
            by_name = sorted(k for k in inside if k != "HOME")
            flags = self._flags(worktree, home, name, by_name) + extra
            for item in inline:
                flags += ["--env", item]
            flags.append(self.image)
            if proxy is not None:
                flags += [
                    "python3",
                    "-I",
                    "-S",
                    f"{_INSIDE_RUN}/bridge.py",
                    f"{_INSIDE_RUN}/proxy.sock",
                    str(PROXY_PORT),
                ]
            runtime_env = self._runtime_env() | {k: inside[k] for k in by_name}
            yield Jail(
                prefix=[self.runtime, *flags],
                env=runtime_env,
                on_stop=lambda: self.remove(name),
            )
