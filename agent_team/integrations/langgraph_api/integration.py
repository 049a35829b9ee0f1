"""The LangGraph API wired into the daemon: its routes under `/langgraph` and its observer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount

from agent_team import db
from agent_team.config import Settings
from agent_team.integrations.langgraph_api.cors import Cors
from agent_team.integrations.langgraph_api.follow import TaskChanges
from agent_team.integrations.langgraph_api.routes import LangGraphApi, routes
from agent_team.requests.access import DashboardTokens

if TYPE_CHECKING:
    from agent_team.coordinator import Coordinator, TaskObserver
    from agent_team.health.checks import CheckFn
    from agent_team.health.loops import Loop
    from agent_team.health.status import Health

__all__ = ["PREFIX", "LangGraphApiIntegration", "LangGraphApiSettings"]

PREFIX = "/langgraph"


@dataclass(frozen=True)
class LangGraphApiSettings:
    enabled: bool
    origins: tuple[str, ...]

    @classmethod
    def from_settings(cls, settings: Settings) -> LangGraphApiSettings:
        return cls(enabled=settings.langgraph_api, origins=tuple(settings.langgraph_api_origins))


async def _http_error(request: Request, exc: Exception) -> Response:
    """404 and 405 in the server's shape, which the SDKs show as the error's message."""
    status = exc.status_code if isinstance(exc, HTTPException) else 404
    return JSONResponse({"detail": "Not Found" if status == 404 else "Method Not Allowed"}, status)


@dataclass
class LangGraphApiIntegration:
    name: ClassVar[str] = "langgraph_api"

    settings: LangGraphApiSettings
    api: LangGraphApi
    changes: TaskChanges = field(default_factory=TaskChanges)

    @classmethod
    def enabled(cls, settings: Settings) -> bool:
        return settings.langgraph_api

    @classmethod
    def doctor_checks(cls) -> Sequence[CheckFn]:
        from agent_team.integrations.langgraph_api.doctor import check_langgraph_api

        return (check_langgraph_api,)

    @classmethod
    def create(cls, settings: Settings, coordinator: Coordinator) -> LangGraphApiIntegration:
        changes = TaskChanges()
        # People's keys from the ledger count as x-api-key, as they do on the dashboard.
        tokens = DashboardTokens(
            settings,
            keys=coordinator.ledger.snapshot,
            touch=lambda key_id: db.touch_key(coordinator.ledger, key_id, coordinator.clock()),
        )
        api = LangGraphApi(coordinator, tokens, changes)
        return cls(LangGraphApiSettings.from_settings(settings), api, changes)

    def app(self) -> Starlette:
        return Starlette(
            routes=routes(self.api),
            middleware=[Middleware(Cors, origins=self.settings.origins)],
            exception_handlers={404: _http_error, 405: _http_error},
        )

    def routes(self) -> Sequence[BaseRoute]:
        return [Mount(PREFIX, app=self.app())]

    def loops(self, health: Health) -> Sequence[Loop]:
        return ()

    def observers(self) -> Sequence[TaskObserver]:
        return (self.changes.observe,)

    def facts(self) -> Mapping[str, Any]:
        return {"langgraph_api": PREFIX, "langgraph_api_origins": list(self.settings.origins)}

    def close(self) -> None:
        return None
