"""Which sandbox builds run in (`AGENT_TEAM_SANDBOX`), checked to run here before anything starts.

A sandbox that cannot run (no `bwrap`, a kernel without unprivileged user
namespaces, no container runtime or no image) stops the daemon's start with
one line naming the package to install or the setting to choose; it never
falls back to none by itself (docs/architecture.md §4, "The sandbox").
"""

from __future__ import annotations

import os
import shutil
import subprocess

from agent_team.builders.sandbox import Bubblewrap, NoSandbox, Sandbox, SandboxPolicy
from agent_team.builders.sandbox_container import ContainerSandbox
from agent_team.exceptions import ConfigError

__all__ = ["CONTAINER_RUNTIMES", "SANDBOX_NAMES", "make_sandbox"]

CONTAINER_RUNTIMES = ("podman", "docker")
SANDBOX_NAMES = ("auto", "bwrap", *CONTAINER_RUNTIMES, "none")
_PACKAGES = {"podman": "podman", "docker": "docker.io"}


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


def _container(name: str, policy: SandboxPolicy, image: str | None) -> ContainerSandbox:
    runtime = shutil.which(name)
    if runtime is None:
        raise ConfigError(
            f"AGENT_TEAM_SANDBOX={name}: `{name}` is not installed; install it "
            f"(apt install {_PACKAGES[name]}) or choose AGENT_TEAM_SANDBOX=bwrap"
        )
    if not image:
        raise ConfigError(
            f"AGENT_TEAM_SANDBOX={name} needs AGENT_TEAM_SANDBOX_IMAGE: the image builds run "
            "in (with the builder's tools, and python3 for AGENT_TEAM_SANDBOX_ALLOW_HOSTS)"
        )
    sandbox = ContainerSandbox(policy, kind=name, runtime=runtime, image=image)
    problem = sandbox.engine_problem()
    if problem is not None:
        raise ConfigError(
            f"AGENT_TEAM_SANDBOX={name}: the runtime does not answer ({problem}); start its "
            "engine or choose AGENT_TEAM_SANDBOX=bwrap"
        )
    return sandbox


def make_sandbox(
    name: str, policy: SandboxPolicy, *, runs_processes: bool, image: str | None = None
) -> Sandbox:
    """The sandbox the settings ask for, checked to run here.

    Args:
        name: `auto`, `bwrap`, `podman`, `docker` or `none` (`AGENT_TEAM_SANDBOX`).
        policy: what it allows.
        image: the container image (`AGENT_TEAM_SANDBOX_IMAGE`); only for a runtime.
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
    if image and name not in CONTAINER_RUNTIMES:
        raise ConfigError(
            f"AGENT_TEAM_SANDBOX_IMAGE is set but AGENT_TEAM_SANDBOX is {name}; an image needs "
            "a container runtime: choose AGENT_TEAM_SANDBOX=podman or docker, or unset the image"
        )
    if name == "none" or (name == "auto" and not runs_processes):
        return NoSandbox()
    if name in CONTAINER_RUNTIMES:
        return _container(name, policy, image)
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
