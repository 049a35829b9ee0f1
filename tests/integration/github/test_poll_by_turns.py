"""Two processes on one ledger: one polls GitHub and runs the timers; the other takes over
when the first stops."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from agent_team.health.status import Health
from agent_team.integrations.github.integration import GitHubIntegration
from agent_team.service.wiring import Runtime, build_runtime
from tests.integration.github.conftest import World, make_settings
from tests.waiting import wait_for


class Process:
    """A runtime with its GitHub poller and worker loop on threads, as a daemon runs them."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.health = Health()
        self.stop = threading.Event()
        (github,) = [i for i in runtime.integrations if isinstance(i, GitHubIntegration)]
        self.github = github
        self.timer_passes = 0
        coordinator = runtime.coordinator
        check = coordinator.sweeper.check_deadlines

        def counted() -> int:
            self.timer_passes += 1
            return check()

        coordinator.sweeper.check_deadlines = counted  # type: ignore[method-assign]
        (poller,) = github.loops(self.health)
        self.threads = [
            threading.Thread(target=poller.run, args=(self.stop, True), daemon=True),
            threading.Thread(
                target=coordinator.serve,
                args=(self.stop,),
                kwargs={"poll_s": 0.05, "timers_s": 0.05, "sweep": False},
                daemon=True,
            ),
        ]
        for thread in self.threads:
            thread.start()

    @property
    def polls(self) -> int:
        return self.github.totals.polls

    def close(self) -> None:
        """A clean stop: the loops end, the coordinator closes and hands its loops over."""
        if self.stop.is_set():
            return
        self.stop.set()
        self.runtime.coordinator.wake.set()
        for thread in self.threads:
            thread.join(timeout=10)
        self.runtime.close()


@pytest.fixture
def start(tmp_path: Path, world: World) -> Iterator[Callable[[], Process]]:
    stack = ExitStack()

    def make() -> Process:
        settings = make_settings(tmp_path, world.fake, github_poll_s=5)
        process = Process(build_runtime(settings, only={GitHubIntegration.name}))
        stack.callback(process.close)
        return process

    with stack:
        yield make


def test_one_of_two_processes_polls_and_runs_the_timers_the_other_takes_over_on_stop(
    start: Callable[[], Process], world: World
) -> None:
    first = start()
    wait_for(
        lambda: first.polls >= 1 and first.timer_passes >= 3, "the first to poll", timeout_s=20
    )
    second = start()
    wait_for(
        lambda: second.health.facts().get("github_last_poll") is not None,
        "the second to look",
        timeout_s=20,
    )
    timer_passes = first.timer_passes
    wait_for(lambda: first.timer_passes >= timer_passes + 5, "the first to go on", timeout_s=20)
    assert second.polls == 0 and second.timer_passes == 0
    last: Any = second.health.facts()["github_last_poll"]
    assert last["polled_by"] == "another instance"
    assert first.runtime.coordinator.loops_held() == ["github-poller", "timers"]
    assert second.runtime.coordinator.loops_held() == []

    requests = len(world.fake.requests)
    first.close()
    wait_for(lambda: second.timer_passes >= 1, "the second to run the timers", timeout_s=20)
    assert second.runtime.coordinator.loops_held()[-1:] == ["timers"]
    # The poller looks again after its interval (5 s) and then finds the loop free.
    wait_for(lambda: second.polls >= 1, "the second to poll", timeout_s=15)
    assert len(world.fake.requests) > requests
    assert second.runtime.coordinator.loops_held() == ["github-poller", "timers"]
