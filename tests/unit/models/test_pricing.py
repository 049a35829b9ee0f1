"""The price table, overrides, and cost arithmetic."""

from __future__ import annotations

import math

import pytest

from agent_team.exceptions import ConfigError
from agent_team.models.pricing import DEFAULT_PRICES, Price, cost_usd, price_for


@pytest.mark.parametrize(
    ("spec", "price"),
    [
        ("anthropic:claude-sonnet-4-5", Price(3.0, 15.0)),
        ("anthropic:claude-opus-4-1", Price(15.0, 75.0)),
        ("anthropic:claude-opus-4-5", Price(5.0, 25.0)),
        ("anthropic:claude-haiku-4-5", Price(1.0, 5.0)),
        ("openai:gpt-4o", Price(2.5, 10.0)),
        ("openai:gpt-4o-mini", Price(0.15, 0.6)),
        ("openai:gpt-4.1", Price(2.0, 8.0)),
        ("openai:o3", Price(2.0, 8.0)),
    ],
)
def test_default_prices(spec: str, price: Price) -> None:
    assert price_for(spec) == price


def test_every_default_key_is_provider_qualified() -> None:
    assert all(key.split(":")[0] in {"anthropic", "openai"} for key in DEFAULT_PRICES)
    assert all(
        p.input_per_mtok > 0 and p.output_per_mtok > p.input_per_mtok
        for p in DEFAULT_PRICES.values()
    )


@pytest.mark.parametrize(
    ("spec", "family"),
    [
        ("anthropic:claude-sonnet-4-5-20250929", "anthropic:claude-sonnet-4-5"),
        ("anthropic:claude-3-5-haiku-latest", "anthropic:claude-3-5-haiku"),
        ("openai:gpt-4o-2024-08-06", "openai:gpt-4o"),
    ],
)
def test_snapshots_cost_what_their_family_costs(spec: str, family: str) -> None:
    assert price_for(spec) == DEFAULT_PRICES[family]


@pytest.mark.parametrize(
    "spec", ["offline", "ollama:llama3.1", "anthropic:claude-unknown-9", "openai:gpt-4o-mini-tts-x"]
)
def test_unpriced_models(spec: str) -> None:
    assert price_for(spec) is None
    assert price_for(spec, {}) is None


def test_override_by_spec_wins_over_the_table() -> None:
    overrides = {"anthropic:claude-sonnet-4-5": (1.0, 2.0)}
    assert price_for("anthropic:claude-sonnet-4-5", overrides) == Price(1.0, 2.0)
    assert price_for("anthropic:claude-opus-4-1", overrides) == Price(15.0, 75.0)


def test_override_by_bare_model_name() -> None:
    assert price_for("ollama:llama3.1", {"llama3.1": (0.0, 0.5)}) == Price(0.0, 0.5)


def test_override_can_price_the_offline_model() -> None:
    assert price_for("offline", {"offline": (1000, 2000)}) == Price(1000.0, 2000.0)


@pytest.mark.parametrize("bad", [(-1.0, 1.0), (1.0, math.inf), (math.nan, 1.0), ("x", 1.0), (1.0,)])
def test_bad_override_is_a_config_error(bad: tuple[float, float]) -> None:
    with pytest.raises(ConfigError, match="AGENT_TEAM_PRICES"):
        price_for("openai:gpt-4o", {"openai:gpt-4o": bad})


def test_cost_usd() -> None:
    assert cost_usd(Price(3.0, 15.0), 1_000_000, 0) == pytest.approx(3.0)
    assert cost_usd(Price(3.0, 15.0), 1000, 500) == pytest.approx(0.0105)
    assert cost_usd(Price(3.0, 15.0), 0, 0) == 0.0
