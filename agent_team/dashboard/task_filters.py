"""The task list's query parameters, read once for `GET /api/tasks` and the overview page.

Why one place: the page's filter form and the API take the same names
(`status`, `kind`, `source`, `q`, `limit`, `offset`), so a filtered page's
URL and the API call behind it mean the same thing and refuse the same bad
values with the same words. A refusal is a `BadParameter`; the API answers
it with a JSON 400, the page with a 400 page.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum
from urllib.parse import urlencode

from agent_team import db
from agent_team.task_model import TaskKind, TaskStatus

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "MAX_TEXT_CHARS",
    "BadParameter",
    "TaskFilter",
    "choice",
    "integer",
    "list_filtered",
    "parse_task_filter",
]

MAX_LIMIT = 500
DEFAULT_LIMIT = 50
# A title is at most 300 characters (the submit form's limit); a search or a source longer
# than that can match nothing and is refused instead.
MAX_TEXT_CHARS = 300


class BadParameter(ValueError):
    """A query parameter that cannot be used; `message` says what would be accepted."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message


def choice(params: Mapping[str, str], name: str, allowed: type[StrEnum]) -> str | None:
    """An optional parameter that must be one of an enum's values (blank: not given)."""
    value = params.get(name, "").strip()
    if not value:
        return None
    choices = [member.value for member in allowed]
    if value not in choices:
        raise BadParameter(name, f"{value[:40]!r} is not one of: {', '.join(choices)}")
    return value


# No parameter of ours counts past this; SQLite's integers stop at 2**63 - 1, and a bigger
# one failed inside the driver (a 500) before it was bounded here.
MAX_INTEGER = 1_000_000_000


def integer(params: Mapping[str, str], name: str, default: int, low: int, high: int | None) -> int:
    """An optional whole number in `[low, high]` (blank: `default`); `high` None means
    `MAX_INTEGER`."""
    raw = params.get(name, "").strip()
    if not raw:
        return default
    high = MAX_INTEGER if high is None else high
    try:
        value = int(raw) if len(raw) <= 20 else None
    except ValueError:
        value = None
    if value is None:
        raise BadParameter(name, f"{raw[:40]!r} is not a whole number") from None
    if value < low or value > high:
        raise BadParameter(name, f"{value} is out of range; use between {low} and {high}")
    return value


def _text(params: Mapping[str, str], name: str) -> str | None:
    value = params.get(name, "").strip()
    if not value:
        return None
    if len(value) > MAX_TEXT_CHARS:
        raise BadParameter(name, f"is longer than {MAX_TEXT_CHARS} characters")
    if not value.isprintable():
        raise BadParameter(name, "must be printable text on one line")
    return value


@dataclass(frozen=True, slots=True)
class TaskFilter:
    """Which tasks to list: every field None means all of them."""

    status: str | None = None
    kind: str | None = None
    source: str | None = None
    q: str | None = None
    limit: int = DEFAULT_LIMIT
    offset: int = 0

    @property
    def narrowed(self) -> bool:
        """Whether any filter (not only paging) is set."""
        return any(value is not None for value in (self.status, self.kind, self.source, self.q))

    def query(self, **changes: object) -> str:
        """This filter as a URL query (`status=done&offset=50`), with `changes` applied.

        Defaults are left out, so the plain list is the plain URL.
        """
        values = {**asdict(self), **changes}
        defaults = asdict(TaskFilter())
        return urlencode(
            {key: value for key, value in values.items() if value not in (None, defaults[key])}
        )


def parse_task_filter(
    params: Mapping[str, str], *, default_limit: int = DEFAULT_LIMIT
) -> TaskFilter:
    """Read the task list's parameters; blank ones count as not given.

    Raises:
        BadParameter: a value that is not allowed, naming the parameter.
    """
    return TaskFilter(
        status=choice(params, "status", TaskStatus),
        kind=choice(params, "kind", TaskKind),
        source=_text(params, "source"),
        q=_text(params, "q"),
        limit=integer(params, "limit", default_limit, 1, MAX_LIMIT),
        offset=integer(params, "offset", 0, 0, None),
    )


def list_filtered(view: db.Reader, wanted: TaskFilter) -> tuple[list[db.Task], int]:
    """One page of the tasks `wanted` selects, newest first, and how many it selects in all."""
    rows = db.list_tasks(
        view,
        status=wanted.status,
        kind=wanted.kind,
        source=wanted.source,
        title_contains=wanted.q,
        limit=wanted.limit,
        offset=wanted.offset,
    )
    total = db.count_tasks(
        view,
        status=wanted.status,
        kind=wanted.kind,
        source=wanted.source,
        title_contains=wanted.q,
    )
    return rows, total
