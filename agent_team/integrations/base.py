"""The one shape every integration has, so the daemon and the doctor treat them alike.

An integration class says from the settings alone whether it is on and which
doctor checks it brings (the doctor runs those without building anything).
An instance is built against the process's coordinator by
`integrations.registry.build_integrations` and hands the daemon what it
plugs in: HTTP routes, supervised loops, coordinator observers and health
facts. `close()` releases what the instance opened itself; the daemon calls
it after the last run, in the reverse order of building.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar, Protocol

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from agent_team.config import Settings
    from agent_team.coordinator import TaskObserver
    from agent_team.health.checks import CheckFn
    from agent_team.health.loops import Loop
    from agent_team.health.status import Health

__all__ = ["Integration"]


class Integration(Protocol):
    """An outside service wired into one process (the daemon or `agent-team tick`)."""

    name: ClassVar[str]

    @classmethod
    def enabled(cls, settings: Settings) -> bool:
        """Whether these settings turn the integration on; off, it is never built."""
        ...

    @classmethod
    def doctor_checks(cls) -> Sequence[CheckFn]:
        """`agent-team doctor`'s checks; each reports "off" itself when it is not enabled."""
        ...

    @property
    def settings(self) -> object:
        """Its settings group: a frozen view of just its own `Settings` fields."""
        ...

    def routes(self) -> Sequence[BaseRoute]:
        """HTTP routes for the daemon's server."""
        ...

    def loops(self, health: Health) -> Sequence[Loop]:
        """Supervised loops; each beats `health` under its loop's name."""
        ...

    def observers(self) -> Sequence[TaskObserver]:
        """Callbacks the coordinator tells about task events (idempotent, never raising)."""
        ...

    def facts(self) -> Mapping[str, object]:
        """Health facts known once it is built (how it is connected, ...)."""
        ...

    def close(self) -> None:
        """Release what it opened itself (clients, connections); called once, at shutdown."""
        ...
