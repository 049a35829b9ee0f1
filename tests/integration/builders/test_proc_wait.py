"""`run_process` waits for the child itself, not only for its pipes to close."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_team.builders.proc import ProcessTimeout, inherited_env, run_process


def test_a_child_that_closed_its_pipes_is_still_waited_for(tmp_path: Path) -> None:
    done = run_process(
        "exec >&- 2>&-; sleep 0.3; exit 3",
        cwd=tmp_path,
        env=inherited_env(),
        timeout_s=30,
        shell=True,
    )
    assert done.returncode == 3


def test_a_child_that_closed_its_pipes_and_outlives_the_deadline_is_killed(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "pid"
    with pytest.raises(ProcessTimeout):
        run_process(
            f"echo $$ > {marker}; exec >&- 2>&-; sleep 30",
            cwd=tmp_path,
            env=inherited_env(),
            timeout_s=0.5,
            shell=True,
        )
    pid = int(marker.read_text())
    with pytest.raises(ProcessLookupError):  # reaped, not a zombie left behind
        os.kill(pid, 0)


def test_a_quick_child_gives_its_output_and_exit_code(tmp_path: Path) -> None:
    done = run_process(
        ["sh", "-c", "echo out; echo err >&2; exit 0"],
        cwd=tmp_path,
        env=inherited_env(),
        timeout_s=30,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "out\n", "err\n")
