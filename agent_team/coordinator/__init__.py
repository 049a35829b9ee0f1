"""One checkpointed graph per task, and the gate protocol around it (docs/architecture.md §3, §4).

`Coordinator` is the facade requests go to; `GraphRunner` runs graphs,
`Worker` claims commands and runs them on a pool, `Sweeper` recovers after
a crash and runs the timers. `agent_team.service.wiring` builds them from the settings.
"""

from __future__ import annotations

from agent_team.coordinator.facade import Coordinator, TickReport
from agent_team.coordinator.runner import GraphRunner, TaskObserver, thread_config
from agent_team.coordinator.sweeper import EVENT_RETENTION, Sweeper, SweepReport
from agent_team.coordinator.worker import Worker

__all__ = [
    "EVENT_RETENTION",
    "Coordinator",
    "GraphRunner",
    "SweepReport",
    "Sweeper",
    "TaskObserver",
    "TickReport",
    "Worker",
    "thread_config",
]
