"""Loopback model providers (tests/fakes/model_providers.py), one per test that asks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes import model_providers as mp


@pytest.fixture
def fake_anthropic() -> Iterator[mp.FakeModelServer]:
    with mp.fake_anthropic() as server:
        yield server


@pytest.fixture
def fake_openai() -> Iterator[mp.FakeModelServer]:
    with mp.fake_openai() as server:
        yield server


@pytest.fixture
def fake_ollama() -> Iterator[mp.FakeModelServer]:
    with mp.fake_ollama() as server:
        yield server
