"""Resource limits of one sandboxed build: rlimits always, a cgroup where the host gives one.

Why both: rlimits (`prlimit`) need nothing from the host, but the kernel does
not apply the process-count limit to root, and the address-space limit is a
poor stand-in for memory. A cgroup counts every process and every byte of the
build's tree, root or not, but only where the daemon may make one: as root on
a cgroup v1 host, or on cgroup v2 in a subtree delegated to it (systemd's
`Delegate=yes`). Where neither works the rlimits are all there is; `doctor`
and the start-up line say which applies (`Limits.describe`).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CgroupJail", "Limits", "cgroup_support", "open_cgroup", "sweep_cgroups"]

log = logging.getLogger(__name__)

_MIB = 1024 * 1024
_REMOVE_WAIT_S = 5.0
_REMOVE_PAUSE_S = 0.01
_CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class Limits:
    """What one build may use (`AGENT_TEAM_SANDBOX_MAX_*`)."""

    max_procs: int = 512
    max_open_files: int = 4096
    max_memory_mb: int = 8192
    max_address_space_mb: int = 32768
    max_cpu_s: int = 7200

    def prlimit_argv(self) -> list[str]:
        """`prlimit` in front of the sandbox: the rlimits every process of the build inherits."""
        prlimit = shutil.which("prlimit") or "prlimit"
        return [
            prlimit,
            f"--nproc={self.max_procs}",
            f"--nofile={self.max_open_files}",
            f"--as={self.max_address_space_mb * _MIB}",
            f"--cpu={self.max_cpu_s}",
            "--",
        ]


def _own_paths() -> dict[str, str]:
    """Controller (or `""` for cgroup v2) -> this process's cgroup path, from /proc/self/cgroup."""
    paths: dict[str, str] = {}
    try:
        text = Path("/proc/self/cgroup").read_text(encoding="utf-8")
    except OSError:
        return paths
    for line in text.splitlines():
        _, controllers, path = [*line.split(":", 2), "", ""][:3]
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def _v1_dir(controller: str, own: dict[str, str]) -> Path | None:
    base = _CGROUP_ROOT / controller
    if controller not in own or not (base / "cgroup.procs").is_file():
        return None
    here = base / own[controller].lstrip("/")
    return here if os.access(here, os.W_OK) else None


def _v2_dir(own: dict[str, str]) -> Path | None:
    for base in (_CGROUP_ROOT, _CGROUP_ROOT / "unified"):
        if (base / "cgroup.controllers").is_file() and "" in own:
            here = base / own[""].lstrip("/")
            if os.access(here, os.W_OK) and (here / "cgroup.subtree_control").is_file():
                return here
    return None


def _write(path: Path, text: str) -> bool:
    try:
        path.write_text(text, encoding="ascii")
    except OSError:
        return False
    return True


@dataclass
class CgroupJail:
    """The cgroups one build runs in; `argv()` puts the build into them before it starts."""

    dirs: list[Path]
    controllers: tuple[str, ...]

    def argv(self) -> list[str]:
        """A shell that moves itself into every cgroup and then execs the rest of the command."""
        script = (
            'for d in "$@"; do [ "$d" = -- ] && break; '
            'echo $$ > "$d/cgroup.procs" || exit 126; shift; done; shift; exec "$@"'
        )
        return ["/bin/sh", "-c", script, "sh", *(str(d) for d in self.dirs), "--"]

    def close(self) -> None:
        """Kill whatever is left in the cgroups and remove them."""
        for folder in self.dirs:
            if not _remove_cgroup(folder, wait_s=_REMOVE_WAIT_S):
                log.warning("sandbox: could not remove the cgroup %s", folder)


def _remove_cgroup(folder: Path, *, wait_s: float) -> bool:
    """Kill a cgroup's processes and remove it; False if it is still busy after `wait_s`.

    A killed process leaves its cgroup only once it has fully exited, a moment
    after the kill: the removal is tried again, with short pauses, until then.
    """
    deadline = time.monotonic() + wait_s
    while True:
        try:
            pids = [int(p) for p in (folder / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            pids = []
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            folder.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:  # busy: killed processes are still exiting
            if time.monotonic() >= deadline:
                return False
            time.sleep(_REMOVE_PAUSE_S)


def sweep_cgroups() -> list[Path]:
    """Remove empty build cgroups a killed daemon left (`agent-team-*` beside ours).

    Only empty ones: a cgroup with processes may be another daemon's build on
    this host.
    """
    removed: list[Path] = []
    own = _own_paths()
    parents = [d for d in (_v2_dir(own), *(_v1_dir(c, own) for c in ("pids", "memory"))) if d]
    for parent in parents:
        for folder in parent.glob("agent-team-*"):
            try:
                empty = not (folder / "cgroup.procs").read_text().split()
            except OSError:
                continue
            if empty and _remove_cgroup(folder, wait_s=0):
                removed.append(folder)
    return removed


def open_cgroup(name: str, limits: Limits) -> CgroupJail | None:
    """Cgroups named `name` with the process and memory limits; None where the host has none."""
    own = _own_paths()
    made: list[Path] = []
    controllers: list[str] = []
    v2 = _v2_dir(own)
    if v2 is not None:
        _write(v2 / "cgroup.subtree_control", "+pids +memory")
        child = v2 / name
        try:
            child.mkdir(exist_ok=True)
        except OSError:
            child = None  # type: ignore[assignment]
        if child is not None:
            offered = (child / "cgroup.controllers").read_text().split() if child.exists() else []
            if "pids" in offered and _write(child / "pids.max", str(limits.max_procs)):
                controllers.append("pids")
            if "memory" in offered and _write(
                child / "memory.max", str(limits.max_memory_mb * _MIB)
            ):
                _write(child / "memory.swap.max", "0")
                controllers.append("memory")
            if controllers:
                made.append(child)
            else:
                child.rmdir()
    if not made:  # no v2 controllers of ours (a hybrid host): the v1 hierarchies, if writable
        for controller, limit_file, value in (
            ("pids", "pids.max", str(limits.max_procs)),
            ("memory", "memory.limit_in_bytes", str(limits.max_memory_mb * _MIB)),
        ):
            parent = _v1_dir(controller, own)
            if parent is None:
                continue
            child = parent / name
            try:
                child.mkdir(exist_ok=True)
            except OSError:
                continue
            if _write(child / limit_file, value):
                made.append(child)
                controllers.append(controller)
            else:
                child.rmdir()
    if not made:
        return None
    return CgroupJail(made, tuple(controllers))


def cgroup_support() -> tuple[str, ...]:
    """Which controllers a build's cgroup would get here (`()`: rlimits only)."""
    probe = open_cgroup(f"agent-team-probe-{os.getpid()}", Limits())
    if probe is None:
        return ()
    probe.close()
    return probe.controllers
