"""`agent-team doctor`: checks that say what is wrong and how to fix it.

The core checks register here with `@check`; each integration lists its own
(`Integration.doctor_checks`), collected from the integrations registry, so
the table grows with the product without touching this module's callers.
"""

from __future__ import annotations

import importlib.util
import shutil
import socket
from collections import Counter
from urllib.parse import urlsplit

from agent_team import db
from agent_team.common.hostnames import host_allowed
from agent_team.common.invocation import command
from agent_team.config import Settings
from agent_team.db.url import redact_url
from agent_team.exceptions import (
    AgentTeamError,
    ConfigError,
    LedgerNotReadyError,
    SchemaTooNewError,
)
from agent_team.health.checks import CheckFn, CheckResult, ledger_people
from agent_team.integrations.registry import integration_types
from agent_team.models.lineup import lineup, shown_url
from agent_team.models.registry import PROVIDERS, parse_model_spec
from agent_team.requests.access import DashboardTokens
from agent_team.service.probe import RunningDaemon, probe_daemon
from agent_team.service.wiring import sandbox_from_settings
from agent_team.task_model import Role

__all__ = ["CHECKS", "CheckFn", "CheckResult", "check", "run_checks"]


CHECKS: list[CheckFn] = []
PEOPLE_IMPORT = "agent-team people import --role ROLE, then remove the setting"


def check(fn: CheckFn) -> CheckFn:
    """Register a core doctor check (an integration lists its own in `doctor_checks`)."""
    CHECKS.append(fn)
    return fn


def _integration_checks() -> list[CheckFn]:
    return [fn for kind in integration_types() for fn in kind.doctor_checks()]


def run_checks(settings: Settings) -> list[CheckResult]:
    """Run every check; a check that raises is reported as failed, never as a traceback."""
    results = []
    for fn in [*CHECKS, *_integration_checks()]:
        try:
            results.append(fn(settings))
        except Exception as exc:
            name = fn.__name__.removeprefix("check_").replace("_", " ")
            results.append(CheckResult(name, False, f"the check itself failed: {exc}"))
    return results


@check
def check_config(settings: Settings) -> CheckResult:
    target = settings.ledger_target
    ledger = redact_url(target) if isinstance(target, str) else str(target)
    return CheckResult("config", True, f"ledger {ledger}, model {settings.model}")


@check
def check_ledger(settings: Settings) -> CheckResult:
    target = settings.ledger_target
    if isinstance(target, str):
        return _check_database(target)
    path = settings.db_path
    folder = db.folder_problem(path.parent)
    if not path.exists():
        if folder is not None:
            return CheckResult(
                "ledger",
                False,
                f"{path} does not exist yet and its folder is {folder}, so nothing can create it",
                "make the folder writable, or point --db / AGENT_TEAM_DB_PATH elsewhere",
            )
        return CheckResult(
            "ledger", True, f"{path} does not exist yet; the daemon creates it on start"
        )
    try:
        db.assert_ready(path)
    except SchemaTooNewError as exc:
        return CheckResult("ledger", False, str(exc), "upgrade agent-team")
    except LedgerNotReadyError as exc:
        return CheckResult("ledger", False, str(exc), f"{command()} migrate --db {path}")
    except AgentTeamError as exc:  # the message says what to do (a folder, a lock, damage)
        return CheckResult("ledger", False, str(exc))
    damage = db.integrity_problem(path)
    if damage is not None:
        return CheckResult(
            "ledger",
            False,
            f"{path} is damaged (PRAGMA quick_check: {damage})",
            "stop the daemon, keep the file aside, restore the newest backup (`agent-team backup`)",
        )
    if folder is not None:  # readable now, but no daemon could write it
        try:
            db.ensure_writable_folder(path)
        except AgentTeamError as exc:
            return CheckResult("ledger", False, str(exc))
    return CheckResult("ledger", True, f"{path} at schema version {db.SCHEMA_VERSION}")


def _check_database(url: str) -> CheckResult:
    """The PostgreSQL ledger: reachable, its server, the schema, the checkpoint tables, and
    whether the server has the connections one more daemon needs."""
    try:
        facts = db.postgres_facts(url)
    except AgentTeamError as exc:  # the message names the variable and hides the password
        return CheckResult(
            "ledger", False, str(exc), "check AGENT_TEAM_DATABASE_URL and that the server runs"
        )
    where = f"PostgreSQL {facts.server_version} at {facts.location}"
    if facts.schema_version > db.SCHEMA_VERSION:
        return CheckResult(
            "ledger",
            False,
            f"{where} is at schema version {facts.schema_version}, newer than this "
            f"agent-team ({db.SCHEMA_VERSION})",
            "upgrade agent-team",
        )
    if facts.schema_version == 0:
        schema = "empty; the daemon creates the tables on start"
    elif facts.schema_version < db.SCHEMA_VERSION:
        schema = (
            f"at schema version {facts.schema_version}; the daemon migrates it to "
            f"{db.SCHEMA_VERSION} on start"
        )
    else:
        schema = f"at schema version {facts.schema_version}"
    checkpoints = (
        "checkpoint tables ready"
        if facts.checkpoints_ready
        else "checkpoint tables set up on the daemon's start"
    )
    connections = (
        f"{facts.connections_used} of {facts.max_connections} connections in use "
        f"({facts.reserved_connections} reserved); a daemon holds up to "
        f"{db.CONNECTIONS_PER_DAEMON}"
    )
    detail = f"{where}: {schema}; {checkpoints}; {connections}"
    if facts.connections_free < db.CONNECTIONS_PER_DAEMON:
        return CheckResult(
            "ledger",
            False,
            detail,
            "raise max_connections on the server, or run fewer daemons on it",
        )
    return CheckResult("ledger", True, detail)


@check
def check_dashboard_port(settings: Settings) -> CheckResult:
    host, port = settings.dashboard_host, settings.dashboard_port
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            running = probe_daemon(host, port, settings.db_path)
            if running is not None:
                return _running_daemon(running, host, port)
            return CheckResult(
                "dashboard port",
                False,
                f"{host}:{port} is not free ({exc.strerror})",
                "stop what uses it (a running daemon?) or set AGENT_TEAM_DASHBOARD_PORT",
            )
    elsewhere = _daemon_elsewhere(settings, port)
    if elsewhere is not None:
        return elsewhere
    try:
        writes = DashboardTokens(settings).describe()
    except ConfigError as exc:
        return CheckResult("dashboard tokens", False, str(exc), "fix the named setting or file")
    if settings.github_sign_in:
        writes += f"; Sign in with GitHub is on ({settings.github_oauth_url})"
    return CheckResult("dashboard port", True, f"{host}:{port} is free; {writes}")


@check
def check_people(settings: Settings) -> CheckResult:
    """Who may act: roles apply once a person exists; tokens outside the ledger are leaving."""
    people = ledger_people(settings)
    try:
        tokens = DashboardTokens(settings)
        warning = tokens.legacy_warning()
        if people and tokens.demo_file is not None:
            demo = f"the demo token in {tokens.demo_file} may no longer change anything"
            warning = f"{warning}; {demo}" if warning else demo
    except ConfigError:
        warning = None  # the dashboard check names the broken setting
    if people is None:
        summary = "the ledger is not ready, so its people are not read"
    elif not people:
        summary = "nobody is set up: roles are off and every dashboard token may do everything"
    else:
        roles = Counter(p.role for p in people)
        summary = f"{len(people)} people: " + ", ".join(
            f"{roles[r.value]} {r.value}" for r in reversed(Role) if roles[r.value]
        )
    if warning is not None:
        return CheckResult("people", True, f"{summary}; {warning}", PEOPLE_IMPORT, warn=True)
    if people and not any(p.role == Role.OWNER.value for p in people):
        return CheckResult(
            "people",
            True,
            f"{summary}; nobody is an owner, so nobody may manage people through a key",
            "agent-team people set-role NAME owner",
            warn=True,
        )
    fix = "agent-team people add NAME --role owner" if people == [] else ""
    return CheckResult("people", True, summary, fix)


def _daemon_elsewhere(settings: Settings, port: int) -> CheckResult | None:
    """The daemon on this ledger serving on another port than this shell's settings say
    (its lock file names its address): "the port is free" would mislead."""
    if isinstance(settings.ledger_target, str):
        return None  # PostgreSQL: several daemons share a ledger by design
    holder = db.daemon_holder(settings.db_path)
    if holder is None or holder.url is None:
        return None
    try:
        where = urlsplit(holder.url)
        other_host, other_port = where.hostname or "127.0.0.1", where.port
    except ValueError:
        return None
    if other_port is None or other_port == port:
        return None
    running = probe_daemon(other_host, other_port, settings.db_path)
    if running is None:
        return CheckResult(
            "dashboard port",
            False,
            f"a daemon runs on this ledger ({holder.describe()}) but does not answer there",
            "see the daemon's log; a second daemon on this ledger would be refused",
        )
    found = _running_daemon(running, other_host, other_port)
    note = f"; this shell's port {port} is free, but a second daemon on this ledger is refused"
    return CheckResult(found.name, found.ok, found.detail + note, found.fix)


def _running_daemon(running: RunningDaemon, host: str, port: int) -> CheckResult:
    """The port is taken by an agent-team daemon: ours is running, another one is in the way."""
    if not running.on_this_ledger:
        return CheckResult(
            "dashboard port",
            False,
            f"{host}:{port} is in use by another agent-team daemon (not the one on this ledger)",
            "stop that daemon, or set AGENT_TEAM_DASHBOARD_PORT for this one",
        )
    who = running.holder.describe() if running.holder else running.url
    writes = {True: "writes enabled", False: "writes disabled (it has no token)", None: ""}
    detail = f"{host}:{port} is in use by the agent-team daemon running on this ledger ({who})"
    if running.reasons:
        return CheckResult(
            "dashboard port",
            False,
            f"{detail}, but it is not ready: {'; '.join(running.reasons)}",
            f"see {running.url}readyz and the daemon's log",
        )
    if not running.healthy:
        return CheckResult(
            "dashboard port",
            False,
            f"{detail}, but it reports a problem",
            f"see {running.url}healthz and the daemon's log",
        )
    recovered = (
        f"; it recovered from a refused write ({running.last_write_failure})"
        if running.last_write_failure
        else ""
    )
    return CheckResult(
        "dashboard port", True, f"{detail}; {writes[running.writes]}".rstrip("; ") + recovered
    )


@check
def check_builder(settings: Settings) -> CheckResult:
    if settings.builder == "offline":
        return CheckResult("builder", True, "offline (writes the plan and commits it)")
    if settings.builder == "command":
        if not settings.build_command:
            return CheckResult(
                "builder",
                False,
                "AGENT_TEAM_BUILDER=command but no command is set",
                "set AGENT_TEAM_BUILD_COMMAND",
            )
        return CheckResult("builder", True, f"command: {settings.build_command}")
    found = shutil.which(settings.claude_bin)
    if found is None:
        return CheckResult(
            "builder",
            False,
            f"claude-code: {settings.claude_bin!r} is not on PATH",
            "install Claude Code, set AGENT_TEAM_CLAUDE_BIN, or use AGENT_TEAM_BUILDER=offline",
        )
    if shutil.which("git") is None:
        return CheckResult("builder", False, "git is not installed", "install git")
    return CheckResult("builder", True, f"claude-code at {found}")


@check
def check_sandbox(settings: Settings) -> CheckResult:
    state_dir = settings.state_folder()
    try:
        sandbox = sandbox_from_settings(settings, state_dir)
    except ConfigError as exc:
        return CheckResult(
            "sandbox", False, str(exc), "install bubblewrap or set AGENT_TEAM_SANDBOX"
        )
    if (
        settings.builder == "claude-code"
        and sandbox.name != "none"
        and not host_allowed("api.anthropic.com", settings.sandbox_allow_hosts)
    ):
        return CheckResult(
            "sandbox",
            False,
            f"{sandbox.describe()}; Claude Code cannot reach api.anthropic.com from it",
            "add api.anthropic.com to AGENT_TEAM_SANDBOX_ALLOW_HOSTS",
        )
    return CheckResult("sandbox", True, sandbox.describe())


@check
def check_budget_outbox(settings: Settings) -> CheckResult:
    # Where the daemon keeps it: its ledger's side-file folder, PostgreSQL's too.
    path = settings.ledger_outbox or settings.db_path.parent / db.OUTBOX_FILENAME
    waiting = db.outbox_spend(path).rows
    if waiting:
        return CheckResult(
            "budget outbox",
            False,
            f"{waiting} spend row(s) the database refused wait in {path} (the cap counts them)",
            f"{command()} ledger replay writes them back; a running daemon does it every 5 minutes",
        )
    return CheckResult("budget outbox", True, f"empty ({path})")


@check
def check_budget(settings: Settings) -> CheckResult:
    if settings.daily_budget_usd <= 0 and settings.daily_token_cap <= 0:
        return CheckResult(
            "budget cap",
            False,
            "both daily caps are 0: every model call is refused",
            "set AGENT_TEAM_DAILY_BUDGET_USD or AGENT_TEAM_DAILY_TOKEN_CAP",
        )
    return CheckResult(
        "budget cap",
        True,
        f"${settings.daily_budget_usd:g}/day ({settings.billing_mode}), "
        f"{settings.daily_token_cap:,} tokens/day for unpriced models",
    )


@check
def check_model(settings: Settings) -> CheckResult:
    """Every model a call may use (each stage's, then the fallbacks), each one's extra, and
    each provider's endpoint, shown without credentials."""
    chosen = lineup(settings)
    missing = []
    for spec in chosen.specs():
        provider = PROVIDERS.get(parse_model_spec(spec).provider)
        if provider is not None and importlib.util.find_spec(provider.module) is None:
            missing.append((spec, provider))
    stages = ", ".join(f"{stage} {spec}" for stage, spec in chosen.stages.items())
    detail = stages + "; fallbacks " + (", ".join(chosen.fallbacks) or "none")
    endpoints = [f"{name} at {shown_url(settings, name)}" for name in chosen.providers()]
    if endpoints:
        detail += "; " + ", ".join(endpoints)
    if missing:
        names = ", ".join(f"{spec} needs the {p.module} package" for spec, p in missing)
        extras = ",".join(dict.fromkeys(p.extra for _, p in missing))
        return CheckResult(
            "model", False, f"{detail}; {names}", f"pip install 'agent-team[{extras}]'"
        )
    timing = (
        f"; {settings.model_timeout_s:g} s a request, {settings.model_retries} retries"
        if endpoints
        else " (built in, no network)"
    )
    return CheckResult("model", True, detail + timing)
