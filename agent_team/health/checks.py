"""What a doctor check is: a function of the settings that says what is wrong and the fix.

It lives below the integrations so each of them can return its own checks
(`Integration.doctor_checks`) without importing `service.doctor`, which runs
them all and so imports every integration.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agent_team import db
from agent_team.config import Settings
from agent_team.exceptions import AgentTeamError

__all__ = ["CheckFn", "CheckResult", "ledger_people"]


@dataclass(frozen=True)
class CheckResult:
    """`warn`: passes (doctor exits 0) but the operator should act on `fix` soon."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    warn: bool = False


CheckFn = Callable[[Settings], CheckResult]


def ledger_people(settings: Settings) -> list[db.Person] | None:
    """The team's people, for checks that depend on them; None when no ready ledger is there
    (the ledger check says why)."""
    target = settings.ledger_target
    try:
        db.assert_ready(target)
        with db.open_ledger(target, readonly=True) as ledger:
            return db.list_people(ledger)
    except AgentTeamError:
        return None
