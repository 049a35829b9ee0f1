"""Automation requests from the CLI and the dashboard: validated, stored, audited.

The actor's role is checked first (owners create and change automations,
maintainers run one now; `requests.roles`). Every field is checked before
anything is written, and a bad one raises `InvalidAutomationError` naming it
(the CLI exits 2, the API answers 422); each change is one transaction that
also appends its audit row.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from croniter import CroniterError

from agent_team import db
from agent_team.automations.runner import AutomationRunner, schedule_of
from agent_team.automations.schedule import (
    Schedule,
    parse_cron,
    parse_every,
    parse_moment,
    parse_timezone,
)
from agent_team.common.repo_spec import checked_repo
from agent_team.exceptions import (
    InvalidAutomationError,
    InvalidRepoError,
    LedgerIntegrityError,
    TaskTooLargeError,
    UnknownAutomationError,
)
from agent_team.requests.actors import Actor
from agent_team.requests.limits import check_task_size
from agent_team.requests.roles import authorize
from agent_team.task_model import AutomationStatus, OverlapPolicy, ScheduleKind, TaskKind

__all__ = [
    "STATUS_VERBS",
    "AutomationRequest",
    "change_status",
    "create",
    "describe",
    "find",
    "run_now",
    "update",
]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._-]{0,79}$")


@dataclass(frozen=True)
class AutomationRequest:
    """What a person gives for a new automation (or the fields they change), as text."""

    name: str | None = None
    title: str | None = None
    body: str | None = None
    kind: str | None = None
    repo: str | None = None
    every: str | None = None
    cron: str | None = None
    timezone: str | None = None
    first_run_at: str | None = None
    once: bool = False
    overlap: str | None = None

    def schedule_given(self) -> bool:
        return bool(self.every or self.cron or self.once or self.first_run_at or self.timezone)


def _text(field: str, value: str | None, *, required: bool) -> str | None:
    if value is None:
        if required:
            raise InvalidAutomationError(field, "is required")
        return None
    if not value.strip():
        raise InvalidAutomationError(field, "must not be empty")
    return value


def _name(value: str | None, *, required: bool) -> str | None:
    name = _text("name", value, required=required)
    if name is not None and not _NAME.match(name):
        raise InvalidAutomationError(
            "name",
            f"{name[:40]!r} is not a name: 1-80 letters, digits, spaces, '.', '_' or '-', "
            "starting with a letter or digit",
        )
    return name


def _member(field: str, value: str, allowed: type[Any]) -> str:
    choices = [member.value for member in allowed]
    if value not in choices:
        raise InvalidAutomationError(field, f"{value[:40]!r} is not one of: {', '.join(choices)}")
    return value


def _schedule(request: AutomationRequest, now: datetime, base: Schedule | None) -> Schedule:
    """The schedule the request describes, on top of `base` (an update) if given."""
    given = [flag for flag, on in (("--every", request.every), ("--cron", request.cron)) if on]
    if request.once:
        given.append("--once")
    if len(given) > 1:
        raise InvalidAutomationError(
            "schedule", f"give one of --every, --cron, --once, not {given}"
        )
    zone_name = request.timezone or (base.timezone if base else "UTC")
    zone = parse_timezone(zone_name)
    first = parse_moment(request.first_run_at, zone) if request.first_run_at else None
    if request.once:
        if first is None:
            raise InvalidAutomationError("first_run_at", "a one-off (--once) needs --first-run-at")
        return Schedule(ScheduleKind.ONCE, first, timezone=zone_name)
    if request.every:
        every = parse_every(request.every)
        # A new automation's grid starts now (due at once); a changed one's one interval on.
        start = first or (now if base is None else now + every)
        return Schedule(ScheduleKind.EVERY, start, every=every, timezone=zone_name)
    if request.cron:
        return Schedule(
            ScheduleKind.CRON, first or now, cron=parse_cron(request.cron), timezone=zone_name
        )
    if base is None:
        raise InvalidAutomationError("schedule", "give --every, --cron or --once")
    return Schedule(  # the same kind of schedule, with a new time zone or first run
        base.kind,
        first or base.first_run_at,
        every=base.every,
        cron=base.cron,
        timezone=zone_name,
    )


def _next_run(
    schedule: Schedule, now: datetime, *, catch_up: bool, after: datetime | None = None
) -> datetime | None:
    """The due rule: the slot stored as `next_run_at`, which the runner claims once it has come.

    With `catch_up` (a new automation; a change that names its first run) the schedule's
    first slot, even one that has passed: it is due at once, and its one run counts the
    slots missed since (`Schedule.due`), never a slot at or before `after` (the last slot
    the automation ran). Without (a schedule changed without a first run, a resume) the
    first slot from now on: the time before is not made up.
    """
    first = schedule.first_slot()
    if catch_up:
        if after is not None and first is not None and first <= after:
            return schedule.next_after(after)
        return first
    if first is not None and first >= now:
        return first
    return schedule.next_after(now)


def _schedule_columns(
    schedule: Schedule, now: datetime, *, catch_up: bool, after: datetime | None = None
) -> dict[str, Any]:
    try:
        following = _next_run(schedule, now, catch_up=catch_up, after=after)
    except (CroniterError, OverflowError):  # no slot within the calendar's range
        raise InvalidAutomationError(
            "schedule", f"{describe(schedule)} has no next run from now"
        ) from None
    return {
        "schedule_kind": schedule.kind.value,
        "every_s": int(schedule.every.total_seconds()) if schedule.every else None,
        "cron": schedule.cron,
        "timezone": schedule.timezone,
        "first_run_at": db.to_iso(schedule.first_run_at),
        "next_run_at": db.to_iso(following) if following else None,
    }


def _task_fields(title: str | None, body: str | None) -> None:
    try:
        check_task_size(title or "x", body or "")
    except TaskTooLargeError as exc:
        raise InvalidAutomationError("title" if "title" in str(exc) else "body", str(exc)) from None


def _checked_kind(kind: str, *, confluence_enabled: bool) -> str:
    _member("kind", kind, TaskKind)
    if kind == TaskKind.CONFLUENCE and not confluence_enabled:
        raise InvalidAutomationError(
            "kind", "confluence automations need the documentation lane, which is off"
        )
    return kind


def _checked_repo(repo: str | None) -> str | None:
    """A repository its runs' tasks are submitted with: every form a task takes.

    Checked as a submit checks it (`common.repo_spec.checked_repo`: an absolute
    path to a folder that is there, a URL, `owner/name`), so a bad one is
    refused now rather than at each run.
    """
    if repo is None:
        return None
    try:
        return checked_repo(repo)
    except InvalidRepoError as exc:
        raise InvalidAutomationError("repo", str(exc)) from None


def find(reader: db.Reader, key: str) -> db.Automation:
    """By id or name. Raises UnknownAutomationError."""
    found = db.get_automation(reader, key)
    if found is None:
        raise UnknownAutomationError(
            f"no automation {key[:80]!r}; list them with `agent-team automation list`"
        )
    return found


def _name_taken(name: str) -> InvalidAutomationError:
    return InvalidAutomationError(
        "name", f"an automation named {name!r} exists already (cancel it, or pick another name)"
    )


def _name_free(reader: db.Reader, name: str) -> None:
    existing = db.get_automation(reader, name)
    if existing is not None and existing.status != AutomationStatus.CANCELLED:
        raise _name_taken(name)


def create(
    ledger: db.Ledger,
    request: AutomationRequest,
    *,
    actor: Actor,
    now: datetime,
    confluence_enabled: bool = False,
) -> db.Automation:
    """Validate and store a new automation, due from its first slot (`_next_run`).

    Without a first run it is due at once (`--every`, on a grid from now) or at its
    first cron slot from now (`--cron`: a cron line names its times); a first run
    that has passed is due at once, one run counting the slots missed since.
    """
    authorize(ledger, actor, "automation:change", (request.name or "automation")[:80])
    name = _name(request.name, required=True)
    title = _text("title", request.title, required=True)
    body = _text("body", request.body, required=True)
    _task_fields(title, body)
    kind = _checked_kind(request.kind or TaskKind.CODE.value, confluence_enabled=confluence_enabled)
    overlap = _member("overlap", request.overlap or OverlapPolicy.SKIP.value, OverlapPolicy)
    schedule = _schedule(request, now, None)
    assert name is not None
    _name_free(ledger, name)
    automation_id = f"a{uuid.uuid4().hex[:10]}"
    values = {
        "automation_id": automation_id,
        "name": name,
        "title": title,
        "body": body,
        "kind": kind,
        "repo": _checked_repo(request.repo),
        "overlap": overlap,
        "created_by": f"{actor.via}:{actor.name}",
        **_schedule_columns(schedule, now, catch_up=True),
    }
    try:
        return db.create_automation(
            ledger,
            values=values,
            audit=actor.entry(
                "automation.create", automation_id, {"name": name, "schedule": describe(schedule)}
            ),
        )
    except LedgerIntegrityError:  # a concurrent create took the name first
        raise _name_taken(name) from None


def update(
    ledger: db.Ledger,
    key: str,
    request: AutomationRequest,
    *,
    actor: Actor,
    now: datetime,
    confluence_enabled: bool = False,
) -> db.Automation:
    """Change the fields given; a new schedule starts from now (no catch-up), unless the
    change names its first run: then the due rule of `create` holds, past the last slot run."""
    authorize(ledger, actor, "automation:change", key)
    current = find(ledger, key)
    if current.status == AutomationStatus.CANCELLED:
        raise InvalidAutomationError("status", f"automation {current.name} is cancelled")
    changes: dict[str, Any] = {}
    if request.name is not None and request.name != current.name:
        changes["name"] = _name(request.name, required=True)
    for field in ("title", "body"):
        value = getattr(request, field)
        if value is not None:
            changes[field] = _text(field, value, required=True)
    _task_fields(changes.get("title", current.title), changes.get("body", current.body))
    if request.kind is not None:
        changes["kind"] = _checked_kind(request.kind, confluence_enabled=confluence_enabled)
    if request.repo is not None:
        changes["repo"] = _checked_repo(request.repo) if request.repo else None
    if request.overlap is not None:
        changes["overlap"] = _member("overlap", request.overlap, OverlapPolicy)
    if request.schedule_given():
        schedule = _schedule(request, now, schedule_of(current))
        last = db.from_iso(current.last_slot_at) if current.last_slot_at else None
        catch_up = bool(request.first_run_at)  # as `_schedule` reads it
        changes.update(_schedule_columns(schedule, now, catch_up=catch_up, after=last))
    if not changes:
        raise InvalidAutomationError("fields", "nothing to change; give at least one field")
    if "name" in changes:
        _name_free(ledger, changes["name"])
    try:
        changed = db.update_automation(
            ledger,
            current.automation_id,
            changes=changes,
            expected_updated_at=current.updated_at,
            audit=actor.entry(
                "automation.update",
                current.automation_id,
                {"fields": sorted(changes)},
            ),
        )
    except LedgerIntegrityError:
        raise _name_taken(str(changes.get("name"))) from None
    if not changed:
        raise InvalidAutomationError(
            "automation", f"automation {current.name} changed meanwhile; look again and retry"
        )
    return find(ledger, current.automation_id)


# verb -> (the status it leads to, the statuses it leads from)
_STATUS_CHANGES: dict[str, tuple[AutomationStatus, tuple[AutomationStatus, ...]]] = {
    "pause": (AutomationStatus.PAUSED, (AutomationStatus.ACTIVE,)),
    "resume": (AutomationStatus.ACTIVE, (AutomationStatus.PAUSED,)),
    "cancel": (AutomationStatus.CANCELLED, (AutomationStatus.ACTIVE, AutomationStatus.PAUSED)),
}
STATUS_VERBS = tuple(_STATUS_CHANGES)


def change_status(
    ledger: db.Ledger, key: str, verb: str, *, actor: Actor, now: datetime
) -> db.Automation:
    """`pause`, `resume` (from its next slot after now: the pause is not made up; a one-off
    that has not had its slot is due at once) or `cancel`."""
    to, from_statuses = _STATUS_CHANGES[verb]
    authorize(ledger, actor, "automation:change", key)
    current = find(ledger, key)
    next_run = None
    if to is AutomationStatus.ACTIVE:
        schedule = schedule_of(current)
        # A one-off whose slot passed while it was paused still has that one run to make.
        pending_once = schedule.kind is ScheduleKind.ONCE and current.last_slot_at is None
        following = _next_run(schedule, now, catch_up=pending_once)
        next_run = db.to_iso(following) if following else None
    if not db.set_automation_status(
        ledger,
        current.automation_id,
        status=to.value,
        from_statuses=tuple(status.value for status in from_statuses),
        next_run_at=next_run,
        audit=actor.entry(f"automation.{verb}", current.automation_id, {"from": current.status}),
    ):
        raise InvalidAutomationError(
            "status",
            f"automation {current.name} is {current.status}; "
            f"only {' or '.join(s.value for s in from_statuses)} ones can be {to.value}",
        )
    return find(ledger, current.automation_id)


def run_now(
    ledger: db.Ledger, key: str, *, runner: AutomationRunner, actor: Actor
) -> db.AutomationRun:
    """One run outside the schedule (an active or paused automation), behind the same
    budget gate and overlap policy as a scheduled one."""
    authorize(ledger, actor, "automation:run", key)
    current = find(ledger, key)
    if current.status == AutomationStatus.CANCELLED:
        raise InvalidAutomationError("status", f"automation {current.name} is cancelled")
    return runner.run_now(current, audit=actor.entry("automation.run_now", current.automation_id))


def describe(schedule: Schedule) -> str:
    """`every 1h`, `cron '0 9 * * MON' Europe/Berlin`, `once at 2026-12-07T08:00:00Z`."""
    if schedule.kind is ScheduleKind.EVERY and schedule.every is not None:
        return f"every {_span(schedule.every)}"
    if schedule.kind is ScheduleKind.CRON:
        return f"cron '{schedule.cron}' {schedule.timezone}"
    return f"once at {db.to_iso(schedule.first_run_at)}"


def _span(every: timedelta) -> str:
    seconds = int(every.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
