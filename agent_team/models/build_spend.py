"""What a priced build may still spend today, and what its streamed tokens cost.

The claude-code builder follows its own cost while it runs (`SpendWatch`):
this reads what is left of today's USD cap from the budget ledger and prices
a Claude model's tokens from the same table as every model call
(`models.pricing`, `AGENT_TEAM_PRICES`), cache reads at a tenth of the input
price and cache writes at 1.25 times it, as Anthropic bills them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path

from agent_team import db
from agent_team.builders.base import SpendWatch
from agent_team.models.pricing import price_for
from agent_team.task_model import BillingMode

__all__ = ["build_spend_watch"]

_CACHE_READ = 0.1
_CACHE_WRITE = 1.25


def build_spend_watch(
    ledger: db.Ledger,
    *,
    billing_mode: str,
    daily_budget_usd: float,
    prices: Mapping[str, tuple[float, float]] | None,
    clock: Callable[[], datetime],
    outbox: Path | None = None,
) -> SpendWatch:
    """The `SpendWatch` of a build under these settings.

    In subscription billing no USD cap applies (`remaining_usd` is None): the
    stream is still priced, for the record, but nothing is stopped by it. Spend
    the database refused and the outbox holds (`outbox`, else the default
    path) counts as spent.
    """

    def remaining_usd() -> float | None:
        if billing_mode != BillingMode.API.value:
            return None
        day = db.day_bucket(clock())
        stranded = db.outbox_spend(
            outbox or db.default_outbox_path(ledger), day=day, billing_mode=billing_mode
        )
        spent = db.spent(ledger, day=day, billing_mode=billing_mode) + stranded.usd
        return max(0.0, daily_budget_usd - spent)

    def price_usd(model: str, i: int, o: int, cache_read: int, cache_write: int) -> float | None:
        price = price_for(f"anthropic:{model}", prices)
        if price is None:
            return None
        inputs = i + cache_read * _CACHE_READ + cache_write * _CACHE_WRITE
        return (inputs * price.input_per_mtok + o * price.output_per_mtok) / 1_000_000

    return SpendWatch(remaining_usd=remaining_usd, price_usd=price_usd)
