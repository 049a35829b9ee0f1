"""Times as people read them, the same on the dashboard and in the CLI.

A ledger timestamp is ISO 8601 UTC; a person wants "in 2d 23h (Fri 14:00
UTC)". One module, so the page's countdowns and the CLI's columns never
disagree about what a deadline means.
"""

from __future__ import annotations

from datetime import datetime

__all__ = ["deadline_text", "relative", "span"]


def span(seconds: float) -> str:
    """A duration as people read it: `850 ms`, `12.4 s`, `3m 05s`, `2h 10m`, `3d 4h`."""
    s = max(0.0, seconds)
    if s < 1:
        return f"{round(s * 1000)} ms"
    if s < 60:
        return f"{s:.1f} s"
    whole = int(s)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s"


def relative(moment: datetime, now: datetime) -> str:
    """`in 2d 23h`, `5m 02s ago`, or `just now`."""
    delta = (moment - now).total_seconds()
    if delta > 0:
        return f"in {span(delta)}"
    return f"{span(-delta)} ago" if delta <= -1 else "just now"


def deadline_text(moment: datetime | None, now: datetime) -> str:
    """A deadline for a table cell: `in 2d 23h (Fri 14:00 UTC)`; empty when there is none."""
    if moment is None:
        return ""
    return f"{relative(moment, now)} ({moment:%a %H:%M} UTC)"
