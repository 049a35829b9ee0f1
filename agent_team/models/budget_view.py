"""Today's spend against its cap, read the way the model caller checks it.

The caller refuses a call when today's USD (priced models in `api` billing)
or today's tokens (unpriced models, or `subscription` billing) plus the
call's estimate would pass the cap. Automations check the same figure before
they create a task (no task is started on a day whose cap is already
reached), and the triage inbox shows how near the cap the day is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from agent_team import db
from agent_team.exceptions import ConfigError
from agent_team.models.pricing import Price, price_for
from agent_team.task_model import BillingMode

if TYPE_CHECKING:
    from agent_team.config import Settings

__all__ = ["BudgetToday", "budget_today", "capped_in_usd", "settings_budget"]


def capped_in_usd(price: Price | None, billing_mode: str) -> bool:
    """Whether the USD cap applies (else the token cap)."""
    return price is not None and billing_mode == BillingMode.API.value


@dataclass(frozen=True)
class BudgetToday:
    day: str  # UTC
    billing_mode: str
    unit: str  # `usd` or `tokens`
    used: float
    cap: float
    priced: bool = True  # whether the model has a price (tokens without one: "no price known")

    @property
    def fraction(self) -> float:
        """Used over cap (1.0 and more: reached); a cap of 0 is always reached."""
        return self.used / self.cap if self.cap > 0 else 1.0

    @property
    def reached(self) -> bool:
        return self.used >= self.cap

    def describe(self) -> str:
        if self.unit == "usd":
            amount = f"${self.used:.2f} of ${self.cap:.2f}"
        else:
            amount = f"{int(self.used):,} of {int(self.cap):,} tokens"
        return f"{amount} spent on {self.day} (UTC, {self.billing_mode} billing)"


def budget_today(
    reader: db.Reader,
    *,
    model: str,
    billing_mode: str,
    daily_budget_usd: float,
    daily_token_cap: int,
    prices: Mapping[str, tuple[float, float]] | None,
    now: datetime,
) -> BudgetToday:
    """Today's spend against the cap that applies to `model` in `billing_mode`."""
    day = db.day_bucket(now)
    try:
        price = price_for(model, prices)
    except ConfigError:  # a bad price override (the daemon refuses to start with one)
        price = None
    if capped_in_usd(price, billing_mode):
        used = db.spent(reader, day=day, billing_mode=billing_mode)
        return BudgetToday(day, billing_mode, "usd", used, daily_budget_usd)
    tokens = db.tokens_spent(reader, day=day, billing_mode=billing_mode)
    return BudgetToday(
        day, billing_mode, "tokens", float(tokens), float(daily_token_cap), price is not None
    )


def settings_budget(reader: db.Reader, settings: Settings, now: datetime) -> BudgetToday:
    """`budget_today` for the configured model, billing mode and caps."""
    return budget_today(
        reader,
        model=settings.model,
        billing_mode=settings.billing_mode,
        daily_budget_usd=settings.daily_budget_usd,
        daily_token_cap=settings.daily_token_cap,
        prices=settings.prices,
        now=now,
    )
