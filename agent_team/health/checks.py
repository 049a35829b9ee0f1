"""What a doctor check is: a function of the settings that says what is wrong and the fix.

It lives below the integrations so each of them can return its own checks
(`Integration.doctor_checks`) without importing `service.doctor`, which runs
them all and so imports every integration.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agent_team.config import Settings

__all__ = ["CheckFn", "CheckResult"]


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str
    fix: str = ""


CheckFn = Callable[[Settings], CheckResult]
