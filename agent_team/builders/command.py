"""A builder that runs an operator's shell command in the worktree.

Why: it lets any coding agent or script be the builder (`aider ...`,
`make implement`, a wrapper around another CLI) without code in agent-team.
The command gets the plan as a file and a few environment variables, changes
files in the worktree, and agent-team commits whatever it changed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from agent_team.builders.base import BuildResult, BuildTask, Worktree
from agent_team.builders.proc import ProcessStopped, ProcessTimeout, run_process
from agent_team.builders.sandbox import NoSandbox, Sandbox
from agent_team.builders.worktree import SCRATCH_DIR, record_build
from agent_team.common.redact import redact, tail
from agent_team.common.stops import stopped_error
from agent_team.exceptions import BuildError

__all__ = ["PLAN_FILE_ENV", "TASK_ID_ENV", "TASK_TITLE_ENV", "CommandBuilder", "write_plan_file"]

PLAN_FILE_ENV = "AGENT_TEAM_PLAN_FILE"
TASK_ID_ENV = "AGENT_TEAM_TASK_ID"
TASK_TITLE_ENV = "AGENT_TEAM_TASK_TITLE"
_ERROR_TAIL = 2000


def write_plan_file(worktree: Path, plan_markdown: str) -> Path:
    """Write the plan to `.agent-team/plan.md` in the worktree (never committed).

    Returns:
        The file's absolute path.
    """
    plan_file = worktree.resolve() / SCRATCH_DIR / "plan.md"
    plan_file.parent.mkdir(parents=True, exist_ok=True)
    plan_file.write_text(plan_markdown, encoding="utf-8")
    return plan_file


def _env_value(text: str) -> str:
    return text.replace("\0", "")


class CommandBuilder:
    """Runs `command` with `/bin/sh -c` in the worktree and commits what changed.

    The command runs in the sandbox (`agent_team.builders.sandbox`) and sees
    its environment (without one: the daemon's, minus `AGENT_TEAM_*` settings)
    plus `AGENT_TEAM_PLAN_FILE` (the plan, at `.agent-team/plan.md`),
    `AGENT_TEAM_TASK_ID` and `AGENT_TEAM_TASK_TITLE`. Exit code 0 means the
    build worked.
    """

    name = "command"
    needs_checkout = True  # it works in a real checkout of the branch

    def __init__(self, command: str, timeout_s: float, *, sandbox: Sandbox | None = None) -> None:
        """Keep the command line, its deadline and its sandbox.

        Args:
            command: the shell command line (`AGENT_TEAM_BUILD_COMMAND`).
            timeout_s: seconds before it is killed (`AGENT_TEAM_BUILD_TIMEOUT_S`).
            sandbox: where it runs (`AGENT_TEAM_SANDBOX`); None: on the host.
        """
        self.command = command
        self.timeout_s = timeout_s
        self.sandbox: Sandbox = sandbox or NoSandbox()

    def run(self, task: BuildTask, plan_markdown: str, worktree: Worktree) -> BuildResult:
        """Run the command and record what it changed.

        Args:
            task: the task.
            plan_markdown: the approved plan.
            worktree: the task's worktree (its folder is the command's working folder).

        Returns:
            The recorded build; `output` is the redacted tail of stdout and stderr.

        Raises:
            BuildError: the command failed, could not start, or timed out (it is
                then killed together with every process it started).
        """
        plan_file = write_plan_file(worktree.path, plan_markdown)
        env = {
            PLAN_FILE_ENV: str(plan_file),
            TASK_ID_ENV: _env_value(task.task_id),
            TASK_TITLE_ENV: _env_value(task.title),
        }
        try:
            with self.sandbox.enter(worktree, builder=self.name, env=env) as jail:
                done = run_process(
                    jail.argv(["/bin/sh", "-c", self.command]),
                    cwd=worktree.path,
                    env=jail.env,
                    timeout_s=self.timeout_s,
                    merge_stderr=True,
                    on_output=worktree.output,
                    tag=task.task_id,
                    on_stop=jail.on_stop,
                )
        except ProcessStopped as exc:
            raise stopped_error(exc.reason, "build command") from None
        except ProcessTimeout as exc:
            raise BuildError(
                f"the build command timed out after {self.timeout_s:g} s and was stopped with "
                "every process it started; raise AGENT_TEAM_BUILD_TIMEOUT_S or make it finish "
                f"sooner. Output tail: {redact(tail(exc.stdout, _ERROR_TAIL))}"
            ) from None
        except OSError as exc:
            raise BuildError(
                f"could not start the build command: {exc}; check AGENT_TEAM_BUILD_COMMAND"
            ) from exc
        finally:
            shutil.rmtree(plan_file.parent, ignore_errors=True)
        output = redact(tail(done.stdout))
        if done.returncode != 0:
            how = (
                f"was killed by signal {-done.returncode}"
                if done.returncode < 0
                else f"exited with code {done.returncode}"
            )
            raise BuildError(
                f"the build command {how}; fix what its output shows. "
                f"Output tail: {redact(tail(done.stdout, _ERROR_TAIL))}"
            )
        return record_build(
            task,
            worktree,
            plan_markdown,
            builder=self.name,
            summary="Ran the build command; it exited with code 0.",
            output=output,
        )
