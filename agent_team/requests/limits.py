"""What one task may hold, the same for every way a task comes in.

The CLI, the dashboard API, GitHub intake and automations all submit through
`inbox.submit_task`, which enforces these; each entry point only chooses how
to say no. The body limit is GitHub's own issue-body limit, so an issue never
needs cutting unless GitHub itself allows more.
"""

from __future__ import annotations

from agent_team.exceptions import TaskTooLargeError

__all__ = [
    "MAX_BODY_CHARS",
    "MAX_NOTE_CHARS",
    "MAX_TITLE_CHARS",
    "PAGE_BODY_CHARS",
    "check_task_size",
]

MAX_TITLE_CHARS = 300
MAX_BODY_CHARS = 65_536
MAX_NOTE_CHARS = 4000  # a note a person leaves on a task
# A ledger written before the limit may hold more; the task page shows this much.
PAGE_BODY_CHARS = MAX_BODY_CHARS


def check_task_size(title: str, body: str) -> None:
    """Raise TaskTooLargeError naming the field and both numbers, before anything is stored."""
    if len(title) > MAX_TITLE_CHARS:
        raise TaskTooLargeError(
            "title",
            f"the task's title is {len(title):,} characters; at most {MAX_TITLE_CHARS:,} "
            "are allowed (nothing was stored)",
        )
    if len(body) > MAX_BODY_CHARS:
        raise TaskTooLargeError(
            "body",
            f"the task's body is {len(body):,} characters; at most {MAX_BODY_CHARS:,} "
            "are allowed (nothing was stored; link to longer material instead)",
        )
