"""Readiness: can this daemon do its work now? What `/readyz` answers, beside `/healthz`.

`/healthz` is liveness: the process serves HTTP (systemd's watchdog and a
supervisor that restarts a hung process follow it). Readiness is what a
monitor or a load balancer wants: the ledger can be read at the schema this
build expects, its last write did not fail (a full disk or a read-only mount
leaves reads working), and every daemon loop runs. Each reason is one line
that says what to look at.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from agent_team import db
from agent_team.health.status import Health

__all__ = ["Readiness", "readiness"]


@dataclass(frozen=True)
class Readiness:
    ready: bool
    reasons: list[str] = field(default_factory=list)
    last_write_failure: dict[str, str] | None = None  # {"at": ISO-8601, "error": ...}


def readiness(
    *,
    schema_version: int | None,
    read_error: str | None,
    write_health: db.WriteHealth | None,
    health: Health,
) -> Readiness:
    """Put the facts together; `write_health` is None where nothing writes (no daemon)."""
    reasons: list[str] = []
    if read_error is not None:
        reasons.append(f"the ledger cannot be read: {read_error}")
    elif schema_version != db.SCHEMA_VERSION:
        reasons.append(
            f"the ledger is at schema version {schema_version}, this build needs "
            f"{db.SCHEMA_VERSION}; run `agent-team migrate`"
        )
    last: dict[str, str] | None = None
    if write_health is not None:
        failure = write_health.last_failure
        if failure is not None:
            at = datetime.fromtimestamp(failure.at, UTC).isoformat(timespec="seconds")
            last = {"at": at, "error": failure.error}
        if write_health.failing() is not None:
            reasons.append(
                f"the ledger refused the last write ({last['error'] if last else ''}) at "
                f"{last['at'] if last else '?'} and none has succeeded since; check the disk "
                "and the file's mount"
            )
    for status in health.loops():
        if not status.alive:
            why = f": {status.last_error}" if status.last_error else ""
            reasons.append(f"the {status.name} loop is not running{why}")
    return Readiness(ready=not reasons, reasons=reasons, last_write_failure=last)
