"""The daemon freezes its start-up heap: full collections skip it, later garbage is still freed."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from agent_team.service.daemon import freeze_startup_heap


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # the rest of the test session collects as before


def test_start_up_objects_are_frozen_and_later_cycles_are_still_collected(unfrozen: None) -> None:
    freeze_startup_heap()
    assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() >= len(gc.get_objects()), "most of the heap is out of reach"

    later, partner = _Node(), _Node()
    later.other, partner.other = partner, later  # a cycle only the cyclic GC can free
    gone = weakref.ref(later)
    del later, partner
    gc.collect()
    assert gone() is None, "objects made after start-up are collected as before"
