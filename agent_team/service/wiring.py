"""The composition root: every long-lived object of a process, built from `Settings` in one place.

Dependency order: the ledger, the transport (sharing the ledger), the model
caller, the builder and the Confluence lane, the graph on the ledger's
checkpointer, the coordinator, then the integrations built against it (the
GitHub one binds its draft-PR publisher to the graph's publish hook). Everything is
closed in the reverse order by one `ExitStack`, so the ledger closes last,
after the last run that could write to it. The daemon, `agent-team tick`
and the tests all build through here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Container
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path

import httpx

from agent_team import db
from agent_team.builders.cleanup import FinishedWorktrees
from agent_team.builders.registry import is_priced, make_builder, run_build
from agent_team.builders.sandbox import Sandbox, SandboxPolicy
from agent_team.builders.sandbox_choice import make_sandbox
from agent_team.builders.sandbox_limits import Limits
from agent_team.common.git_host import GitHost
from agent_team.common.testhooks import Hooks
from agent_team.config import Settings, load_hooks
from agent_team.coordinator import Coordinator
from agent_team.graph import DURABLE_CHANNELS, build_graph
from agent_team.integrations.base import Integration
from agent_team.integrations.confluence.lane import lane_from_settings
from agent_team.integrations.confluence.settings import ConfluenceSettings
from agent_team.integrations.github.integration import publishes
from agent_team.integrations.github.settings import GitHubSettings
from agent_team.models.build_spend import build_spend_watch
from agent_team.models.caller import ModelCaller
from agent_team.models.lineup import chat_models, retry_policy
from agent_team.nodes.common import GraphDeps
from agent_team.nodes.pr_desk import PullRequestHook
from agent_team.nodes.publish import Publish, PublishHook
from agent_team.requests.task_requests import default_deadlines
from agent_team.transports.base import Transport
from agent_team.transports.local import LocalTransport

__all__ = [
    "Runtime",
    "build_coordinator",
    "build_runtime",
    "git_host_of",
    "open_ready_ledger",
    "sandbox_from_settings",
]

log = logging.getLogger(__name__)


def open_ready_ledger(settings: Settings) -> db.Ledger:
    """Create or upgrade the ledger, check it has what the app needs, and open it."""
    target = settings.ledger_target
    db.init_db(target)
    db.assert_ready(target)
    return db.open_ledger(target, files_dir=settings.db_path.parent)


def git_host_of(settings: Settings) -> GitHost:
    """Where `owner/name` repositories live (the GitHub API's git host), with the token."""
    token = settings.github_token.get_secret_value() if settings.github_token else None
    return GitHost.of(settings.github_api_url, token)


def _close_quietly(close: Callable[[], None], what: str) -> None:
    try:
        close()
    except Exception:  # one part failing to close must not keep the others open
        log.exception("closing %s failed", what)


def sandbox_from_settings(settings: Settings, state_dir: Path) -> Sandbox:
    """The sandbox builds run in (`AGENT_TEAM_SANDBOX*`), checked to run here.

    Hidden besides the state folder: the SQLite ledger's folder, the daemon's
    home and `/etc/agent-team` (where deploy/ keeps the secrets file); the
    build's worktree and git folder are bound back.

    Raises:
        ConfigError: the sandbox cannot run here and the builder needs one.
    """
    hide = [Path.home(), Path("/etc/agent-team")]  # the unit's EnvironmentFile folder
    if not isinstance(settings.ledger_target, str):
        hide.append(settings.db_path.expanduser().resolve().parent)
    policy = SandboxPolicy(
        state_dir=state_dir,
        hide=tuple(hide),
        hide_files=(Path.cwd() / ".env",),  # where the daemon's settings may have come from
        allow_hosts=tuple(settings.sandbox_allow_hosts),
        env_names=tuple(settings.sandbox_env),
        limits=Limits(
            max_procs=settings.sandbox_max_procs,
            max_open_files=settings.sandbox_max_open_files,
            max_memory_mb=settings.sandbox_max_memory_mb,
            max_address_space_mb=settings.sandbox_max_address_space_mb,
            max_cpu_s=settings.sandbox_max_cpu_s,
        ),
    )
    return make_sandbox(
        settings.sandbox,
        policy,
        runs_processes=settings.builder != "offline",
        image=settings.sandbox_image,
    )


def build_coordinator(
    settings: Settings,
    *,
    ledger: db.Ledger | None = None,
    transport: Transport | None = None,
    clock: Callable[[], datetime] | None = None,
    publish: Publish | None = None,
    hooks: Hooks | None = None,
) -> Coordinator:
    """The coordinator and the graph it runs; it closes what was opened here for it.

    Args:
        ledger: the process's ledger (opened here, and closed with the coordinator, if None).
        transport: how questions reach people (the local one if None).
        clock: the time source of every deadline and record (the hooks' clock if None).
        publish: what the `publish` node after `build` calls (tests); None: a hook the
            GitHub integration binds when the settings publish builds, else no node.
        hooks: the test hooks (read from the environment if None; unset in production).
    """
    resources = ExitStack()
    try:
        if ledger is None:
            ledger = open_ready_ledger(settings)
            resources.callback(ledger.close)
        hooks = hooks if hooks is not None else load_hooks()
        now = clock or hooks.clock()
        default_chat, stage_chats, fallback_chats = chat_models(settings)
        caller = ModelCaller(
            ledger=ledger,
            chat=default_chat,
            model=settings.model,
            stage_models=stage_chats,
            fallbacks=fallback_chats,
            retry=retry_policy(settings),
            billing_mode=settings.billing_mode,
            daily_budget_usd=settings.daily_budget_usd,
            daily_token_cap=settings.daily_token_cap,
            prices=settings.prices,
            outbox=settings.ledger_outbox,
            clock=now,
        )
        state_dir = settings.state_folder()
        sandbox = sandbox_from_settings(settings, state_dir)
        builder = make_builder(
            settings.builder,
            build_command=settings.build_command,
            build_timeout_s=settings.build_timeout_s,
            claude_bin=settings.claude_bin,
            billing_mode=settings.billing_mode,
            sandbox=sandbox,
            claude_max_turns=settings.claude_max_turns,
            spend=build_spend_watch(
                ledger,
                billing_mode=settings.billing_mode,
                daily_budget_usd=settings.daily_budget_usd,
                prices=settings.prices,
                clock=now,
                outbox=settings.ledger_outbox,
            ),
        )
        lane = lane_from_settings(ConfluenceSettings.from_settings(settings))
        if lane is not None:
            resources.callback(lane.close)
        if publish is None and publishes(GitHubSettings.from_settings(settings)):
            publish = PublishHook()
        # The PR is a gate (issue #29): the GitHub integration binds its desk to this hook.
        pulls = (
            PullRequestHook()
            if publish is not None and settings.github_pr_gate and settings.github_repos
            else None
        )
        chosen = transport or LocalTransport()
        deps = GraphDeps(
            ledger=ledger,
            caller=caller,
            build=partial(
                run_build,
                builder,
                repo_path=settings.repo_path,
                state_dir=state_dir,
                git_host=git_host_of(settings),
            ),
            build_priced=is_priced(builder),
            clock=now,
            transport=chosen.name,
            billing_mode=settings.billing_mode,
            max_clarify_rounds=settings.max_clarify_rounds,
            deadlines=default_deadlines(settings),
            crash_at=hooks.crash_at,
            outbox=settings.ledger_outbox,
            confluence=lane,
            publish=publish,
            pulls=pulls,
            pr_rounds=settings.github_pr_rounds,
            ci_fixes=settings.github_ci_fixes,
            sandbox=sandbox,
        )
        checkpointer = ledger.checkpointer(flush_only=DURABLE_CHANNELS)
        graph = build_graph(deps, checkpointer)
        coordinator = Coordinator(
            settings,
            ledger=ledger,
            checkpointer=checkpointer,
            graph=graph,
            deps=deps,
            transport=chosen,
            clock=now,
            resources=resources,
        )
        # A task that ended needs no worktree: its build is a commit on its branch.
        coordinator.observers.append(FinishedWorktrees(state_dir))
        return coordinator
    except BaseException:
        resources.close()
        raise


@dataclass
class Runtime:
    """One process's objects, closed together in the reverse order of building."""

    settings: Settings
    ledger: db.Ledger
    coordinator: Coordinator
    integrations: list[Integration] = field(default_factory=list)
    _stack: ExitStack = field(default_factory=ExitStack, repr=False)

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def build_runtime(
    settings: Settings,
    *,
    transport: Transport | None = None,
    github_transport: httpx.BaseTransport | None = None,
    only: Container[str] | None = None,
) -> Runtime:
    """Build the whole process from its settings: ledger, coordinator and integrations.

    Args:
        transport: a transport of the caller's (tests), instead of the configured one.
        github_transport: an httpx transport for the GitHub clients (tests).
        only: the integrations to build by name (None: every enabled one).

    Raises:
        ConfigError: an integration cannot start (Slack refused the bot token, ...);
            whatever was built before it is closed first.
    """
    from agent_team.integrations.registry import build_integrations
    from agent_team.service.transport_choice import make_transport

    stack = ExitStack()
    try:
        ledger = open_ready_ledger(settings)
        stack.callback(ledger.close)
        chosen = transport or make_transport(settings, ledger=ledger)
        close_transport = getattr(chosen, "close", None)
        if callable(close_transport):
            stack.callback(_close_quietly, close_transport, "the transport")
        coordinator = build_coordinator(settings, ledger=ledger, transport=chosen)
        stack.callback(coordinator.close)
        runtime = Runtime(settings, ledger, coordinator, _stack=stack)
        for integration in build_integrations(
            settings, coordinator, github_transport=github_transport, only=only
        ):
            stack.callback(_close_quietly, integration.close, f"the {integration.name} integration")
            coordinator.observers.extend(integration.observers())
            runtime.integrations.append(integration)
        return runtime
    except BaseException:
        stack.close()
        raise
