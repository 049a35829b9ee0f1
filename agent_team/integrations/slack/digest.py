"""The daily Slack digest of the triage inbox (`AGENT_TEAM_SLACK_DIGEST_AT`).

Once the configured local time has come each day, one message lists what
needs a person (`triage`), oldest first, with links to the dashboard. It is
posted once per day even with several daemons or restarts: the day's post is
claimed as a side effect (`slack:digest:<local date>`) before it is sent and
marked done after, so a second daemon or a restarted one finds the claim. A
claim left pending for `STALE_AFTER` (its daemon died before posting) is
taken over, so a crash costs a late digest, not a lost one; a daemon that dies
after Slack took the message but before it recorded that makes the digest go
out twice (at least once, not exactly once: Slack has no idempotency key for
`chat.postMessage`). `STALE_AFTER` is far longer than a post takes with its
retries, so a slow post is not mistaken for a dead one. The loop runs on one
daemon at a time (its own loop lease), which keeps take-overs rare.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from agent_team import db
from agent_team.common.redact import redact
from agent_team.integrations.slack.blocks import escape
from agent_team.reports.triage import TriageItem

__all__ = ["MAX_ITEMS", "STALE_AFTER", "DailyTime", "Digest", "digest_text"]

log = logging.getLogger(__name__)

MAX_ITEMS = 20
STALE_AFTER = timedelta(minutes=10)
KIND = "slack.digest"
NO_TASK = "-"  # side effects are keyed by task; the digest belongs to none


@dataclass(frozen=True)
class DailyTime:
    at: time
    zone: ZoneInfo

    @classmethod
    def parse(cls, text: str) -> DailyTime:
        """From the validated setting: `HH:MM Area/City`."""
        clock, zone = text.split(" ", 1)
        hours, minutes = clock.split(":")
        return cls(time(int(hours), int(minutes)), ZoneInfo(zone))

    def due_day(self, now: datetime) -> str | None:
        """The local date whose digest is due at `now`, or None before today's time."""
        local = now.astimezone(self.zone)
        return local.date().isoformat() if local.time() >= self.at else None


def digest_text(items: list[TriageItem], day: str, dashboard_url: str | None) -> str:
    """The message: a count, then one line per item (oldest first), then a link."""
    if not items:
        lines = [f"*agent-team, {day}*: nothing needs a person today."]
    else:
        lines = [f"*agent-team, {day}*: {len(items)} thing(s) need a person, oldest first:"]
        for item in items[:MAX_ITEMS]:
            title = escape(item.title)
            if dashboard_url and item.task_id:
                title = f"<{dashboard_url.rstrip('/')}/task/{item.task_id}|{title}>"
            fix = f" — `{escape(item.fix)}`" if item.fix else ""
            lines.append(f"• [{item.kind}] {title}: {escape(item.detail)}{fix}")
        if len(items) > MAX_ITEMS:
            lines.append(f"… and {len(items) - MAX_ITEMS} more")
    if dashboard_url:
        lines.append(f"<{dashboard_url.rstrip('/')}/inbox|Open the inbox>")
    return "\n".join(lines)


class Digest:
    """One process's poster of the daily digest."""

    def __init__(
        self,
        ledger: db.Ledger,
        *,
        when: DailyTime,
        items: Callable[[datetime], list[TriageItem]],
        post: Callable[[str], str],
        clock: Callable[[], datetime],
        dashboard_url: str | None,
    ) -> None:
        self.ledger = ledger
        self.when = when
        self.items = items
        self.post = post
        self.clock = clock
        self.dashboard_url = dashboard_url

    def maybe_post(self) -> bool:
        """Post today's digest if it is due and nobody has; True if this call posted it."""
        now = self.clock()
        day = self.when.due_day(now)
        if day is None:
            return False
        effect_id = f"slack:digest:{day}"
        if not db.claim_effect(
            self.ledger,
            effect_id=effect_id,
            task_id=NO_TASK,
            kind=KIND,
            now=now,
            stale_after=STALE_AFTER,
        ):
            return False
        try:
            ref = self.post(digest_text(self.items(now), day, self.dashboard_url))
        except Exception as exc:  # the claim goes stale and the next pass (or daemon) retries
            log.warning("slack digest for %s not posted: %s", day, redact(str(exc)))
            return False
        db.finish_effect(self.ledger, effect_id=effect_id, result_ref=ref)
        log.info("slack digest for %s posted (%s)", day, ref)
        return True
