"""What a model call costs in USD, from a built-in price table that settings can override.

Why a table in code: providers do not return prices with their replies, and
the budget cap must be checked *before* a call. Prices change; an operator
sets `AGENT_TEAM_PRICES` (e.g. `{"anthropic:claude-sonnet-4-5": [3, 15]}`)
to correct one without a release. A model with no price (the offline model,
local Ollama models, anything unknown) is capped by tokens instead
(`AGENT_TEAM_DAILY_TOKEN_CAP`).

Prices are USD per million tokens at list price (no batch or cache discounts),
as published on https://docs.anthropic.com/en/docs/about-claude/pricing and
https://platform.openai.com/docs/pricing; compare against those pages when
updating this table.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from agent_team.exceptions import ConfigError

__all__ = ["DEFAULT_PRICES", "Price", "cost_usd", "price_for"]


@dataclass(frozen=True)
class Price:
    """USD per million input and output tokens."""

    input_per_mtok: float
    output_per_mtok: float


DEFAULT_PRICES: Mapping[str, Price] = MappingProxyType(
    {
        # Anthropic. Opus 4.5 cut the Opus price; Opus 4 / 4.1 keep the old one.
        "anthropic:claude-opus-4-5": Price(5.0, 25.0),
        "anthropic:claude-opus-4-1": Price(15.0, 75.0),
        "anthropic:claude-opus-4-0": Price(15.0, 75.0),
        "anthropic:claude-opus-4": Price(15.0, 75.0),
        "anthropic:claude-sonnet-4-5": Price(3.0, 15.0),
        "anthropic:claude-sonnet-4-0": Price(3.0, 15.0),
        "anthropic:claude-sonnet-4": Price(3.0, 15.0),
        "anthropic:claude-3-7-sonnet": Price(3.0, 15.0),
        "anthropic:claude-haiku-4-5": Price(1.0, 5.0),
        "anthropic:claude-3-5-haiku": Price(0.8, 4.0),
        # OpenAI.
        "openai:gpt-5": Price(1.25, 10.0),
        "openai:gpt-5-mini": Price(0.25, 2.0),
        "openai:gpt-5-nano": Price(0.05, 0.4),
        "openai:gpt-4.1": Price(2.0, 8.0),
        "openai:gpt-4.1-mini": Price(0.4, 1.6),
        "openai:gpt-4.1-nano": Price(0.1, 0.4),
        "openai:gpt-4o": Price(2.5, 10.0),
        "openai:gpt-4o-mini": Price(0.15, 0.6),
        "openai:o3": Price(2.0, 8.0),
        "openai:o3-mini": Price(1.1, 4.4),
        "openai:o4-mini": Price(1.1, 4.4),
    }
)

# Dated snapshots and `-latest` aliases cost what their family costs:
# claude-sonnet-4-5-20250929, gpt-4o-2024-08-06, claude-3-5-haiku-latest.
_SNAPSHOT_SUFFIX = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2}|latest)$")


def _override(spec: str, overrides: Mapping[str, tuple[float, float]]) -> Price | None:
    _, _, bare = spec.partition(":")
    for key in (spec, bare):
        if key and key in overrides:
            value = overrides[key]
            try:
                price = Price(float(value[0]), float(value[1]))
            except (TypeError, ValueError, IndexError):
                price = Price(math.nan, math.nan)
            if not all(
                math.isfinite(p) and p >= 0 for p in (price.input_per_mtok, price.output_per_mtok)
            ):
                raise ConfigError(
                    f"AGENT_TEAM_PRICES: the price of {key!r} must be two non-negative numbers, "
                    "USD per million [input, output] tokens"
                )
            return price
    return None


def price_for(
    spec: str, overrides: Mapping[str, tuple[float, float]] | None = None
) -> Price | None:
    """The price of a model, or None when it has none (then the token cap applies).

    Lookup order: `overrides` by full spec (`anthropic:claude-sonnet-4-5`) then
    by bare model name (`claude-sonnet-4-5`); then `DEFAULT_PRICES` by spec,
    then by spec without a date or `-latest` suffix. An override can price any
    model, `offline` included (useful to test the USD cap with no network).

    Args:
        spec: the model spec as configured (`AGENT_TEAM_MODEL`).
        overrides: `Settings.prices`, USD per million (input, output) tokens.

    Returns:
        The price, or None for `offline`, Ollama models and unknown models.

    Raises:
        ConfigError: an override that is not two finite, non-negative numbers.
    """
    spec = spec.strip()
    found = _override(spec, overrides or {})
    if found is not None:
        return found
    return DEFAULT_PRICES.get(spec) or DEFAULT_PRICES.get(_SNAPSHOT_SUFFIX.sub("", spec))


def cost_usd(price: Price, input_tokens: int, output_tokens: int) -> float:
    """USD for a call's tokens at a price.

    Args:
        price: the model's price.
        input_tokens: prompt tokens.
        output_tokens: completion tokens.

    Returns:
        input_tokens * input price + output_tokens * output price, per million.
    """
    return (input_tokens * price.input_per_mtok + output_tokens * price.output_per_mtok) / 1_000_000
