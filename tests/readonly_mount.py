"""Run a command with one folder mounted read-only, for that command alone.

Tests run as root, and root ignores file modes, so `chmod` cannot make a
folder unwritable. A read-only bind mount can: inside a private mount
namespace (`unshare --mount`, with a user namespace when not root) the folder
is bound onto itself and remounted read-only, so every write under it fails
with EROFS for the command, and the mount disappears with the namespace
(nothing to clean up, nothing seen by other processes).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

__all__ = ["read_only_prefix"]

# $1 is the folder; the rest is the command. `mount -o remount,ro,bind` makes only this
# bind read-only, not the file system under it.
_SCRIPT = 'set -e; mount --bind "$1" "$1"; mount -o remount,ro,bind "$1" "$1"; shift; exec "$@"'


def read_only_prefix(probe_dir: Path) -> list[str] | None:
    """The argv prefix that runs a command with a folder read-only, or None if impossible here.

    Append the folder, then the command: `[*prefix, str(folder), "agent-team", ...]`.
    The probe checks that a write under `probe_dir` really fails inside.
    """
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    probe_dir.mkdir(parents=True, exist_ok=True)
    for flags in (["--mount"], ["--user", "--map-root-user", "--mount"]):
        prefix = [unshare, *flags, "--propagation", "private", "sh", "-c", _SCRIPT, "sh"]
        try:
            result = subprocess.run(
                [*prefix, str(probe_dir), "sh", "-c", 'touch "$0/probe"', str(probe_dir)],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if result.returncode != 0 and "Read-only file system" in result.stderr:
            if not (probe_dir / "probe").exists():
                return prefix
    return None
