"""The task page's pull request card: the PR, then what happened on it round by round.

Why a module of its own: the timeline comes built from the task report
(`reports.pull_request`, as `agent-team show` and `/api/task` get it); this only
turns it into the few strings and links the template prints, keeping the
page handler a list of sections (as `plan_view` does for the plan card).

Much of the text is written on GitHub by whoever can comment (review bodies,
logins), so it is attacker text: returned as plain strings after `clean`, for
the autoescaping templates, never as markup. Links are http(s) only (the
report keeps no other), and a kind reaches a CSS class only when it is a
plain word.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent_team.common.timefmt import span
from agent_team.reports.pull_request import PullRequestTimeline, short_sha

__all__ = ["PrEntryRow", "PrRoundView", "pull_request_context"]

_CLASS_WORD = re.compile(r"[a-z][a-z0-9_]{0,40}")


@dataclass(frozen=True, slots=True)
class PrEntryRow:
    source: str  # pr | event | question
    kind: str
    kind_class: str  # the kind when it is a plain word, else `other`
    at: object | None  # a `pages.Stamp`
    summary: str
    body: str
    url: str | None
    head: str  # the short commit it names, if any


@dataclass(frozen=True, slots=True)
class PrRoundView:
    number: int
    title: str
    entries: tuple[PrEntryRow, ...]


def pull_request_context(
    pull: PullRequestTimeline | None,
    *,
    clean: Callable[[str | None], str],
    when: Callable[[str | None], object | None],
) -> dict[str, Any] | None:
    """The card's values, or None when the task opened no pull request.

    Args:
        pull: the report's timeline.
        clean: the page's redaction of shown text.
        when: a ledger timestamp as the page shows it (`pages.stamp` at the page's `now`).
    """
    if pull is None:
        return None
    timeline = tuple(
        PrRoundView(
            number=part.number,
            title=part.title,
            entries=tuple(
                PrEntryRow(
                    source=entry.source,
                    kind=clean(entry.kind),
                    kind_class=entry.kind if _CLASS_WORD.fullmatch(entry.kind) else "other",
                    at=when(entry.at),
                    summary=clean(entry.summary),
                    body=clean(entry.body),
                    url=clean(entry.url) or None if entry.url else None,
                    head=short_sha(entry.head_sha),
                )
                for entry in part.entries
            ),
        )
        for part in pull.timeline
    )
    return {
        "name": clean(f"{pull.repo}#{pull.number}"),
        "url": clean(pull.url) or None if pull.url else None,
        "state": pull.state,
        "rounds": pull.rounds,
        "hands_off": pull.hands_off,
        "head": short_sha(pull.head_sha),
        "opened": when(pull.opened_at),
        "ready": when(pull.ready_at),
        "merged": when(pull.merged_at),
        "closed": when(pull.closed_at),
        "open_for": span(pull.open_for_s),
        "is_open": pull.state == "open",
        "timeline": timeline,
    }
