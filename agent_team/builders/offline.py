"""The default builder: writes the approved plan into the repository.

Why it exists: the whole pipeline, crash recovery included, must run with no
network and no coding agent installed. It produces a real, deterministic
commit, so every step after the build (reuse after a crash, the docs node,
reviews) is exercised exactly as with a real builder.

Its work is one file it can name up front, so it needs no checkout
(`needs_checkout = False`): `run_build` records `files()` on the task branch
with git plumbing (`agent_team.builders.plumbing`), which costs a fraction of
a worktree. `run()` writes the same file into a worktree it is given.
"""

from __future__ import annotations

import re
from pathlib import Path

from agent_team.builders.base import BuildFiles, BuildResult, BuildTask, Worktree, plan_hash
from agent_team.builders.worktree import record_build, task_key

__all__ = ["OfflineBuilder", "plan_document_path", "under_title"]

_HEADING = re.compile(r"^(#{1,5})(?=\s)")
_FENCE = re.compile(r"^\s*(```|~~~)")


def under_title(markdown: str) -> str:
    """The plan with each heading one level down, to sit under the document's own title.

    A plan starts with `# Plan`; under the document's `# Plan: <title>` that
    made two top-level headings. Lines inside code fences are left alone.
    """
    lines = []
    fenced = False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        lines.append(line if fenced else _HEADING.sub(r"#\1", line))
    return "\n".join(lines)


def plan_document_path(task: BuildTask) -> Path:
    """Where the offline builder writes a task's plan, relative to the worktree."""
    return Path("docs") / "agent-team" / f"{task_key(task.task_id)}.md"


class OfflineBuilder:
    """Writes `docs/agent-team/<key>.md` (the plan under a header) and commits it."""

    name = "offline"
    needs_checkout = False

    def files(self, task: BuildTask, plan_markdown: str) -> BuildFiles:
        """The plan document, and what to say about it.

        Args:
            task: the task.
            plan_markdown: the approved plan.

        Returns:
            One file, `docs/agent-team/<key>.md`.
        """
        relative = plan_document_path(task).as_posix()
        title = " ".join(task.title.split()) or task.task_id
        # No timestamps: the same plan gives the same file, byte for byte.
        document = (
            f"# Plan: {title}\n\n"
            f"Task `{' '.join(task.task_id.split())}`, plan `{plan_hash(plan_markdown)}`, "
            "written by the agent-team offline builder.\n\n"
            f"{under_title(plan_markdown.replace(chr(13) + chr(10), chr(10)).strip())}\n"
        )
        return BuildFiles(
            files={relative: document},
            summary=f"Wrote the approved plan to {relative} (offline builder: "
            "no code was changed).",
            output=f"wrote {relative}",
        )

    def run(self, task: BuildTask, plan_markdown: str, worktree: Worktree) -> BuildResult:
        """Write the plan document into `worktree` and record it as the build.

        Args:
            task: the task.
            plan_markdown: the approved plan.
            worktree: the task's worktree.

        Returns:
            The recorded build.
        """
        work = self.files(task, plan_markdown)
        for relative, text in work.files.items():
            target = worktree.path / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        return record_build(
            task,
            worktree,
            plan_markdown,
            builder=self.name,
            summary=work.summary,
            output=work.output,
        )
