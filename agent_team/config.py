"""Settings: the only module that reads the environment.

Sources, strongest first: explicit overrides (CLI flags), `AGENT_TEAM_*`
environment variables, a `.env` file in the working folder, a TOML file given
with `--config`, then the defaults below. A bad value is reported as one line
naming the variable and what is allowed, never with the value itself (it may
be a secret).
"""

from __future__ import annotations

import difflib
import logging
import os
import re
import threading
import tomllib
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from agent_team.common.hostnames import parse_allow_hosts
from agent_team.common.model_spec import split_model_spec
from agent_team.common.testhooks import Hooks
from agent_team.common.timefmt import parse_daily_time, parse_duration
from agent_team.db.url import is_postgres_url, parse_target
from agent_team.exceptions import ConfigError
from agent_team.task_model import Role

__all__ = [
    "ENV_ONLY_SECRETS",
    "ENV_PREFIX",
    "MODEL_STAGES",
    "Settings",
    "SystemdEnv",
    "load_hooks",
    "load_settings",
    "load_systemd_env",
    "parse_named_tokens",
]

ENV_PREFIX = "AGENT_TEAM_"
# Secrets a `--config` TOML file may not hold: only the environment (or `.env`) sets them.
ENV_ONLY_SECRETS = ("github_oauth_client_secret",)

# A comma-separated list in the environment (`a,b,c`), a real list in TOML.
CommaList = Annotated[list[str], NoDecode]
# The stages with a model of their own (`[models]`); `docs` is the Confluence draft.
MODEL_STAGES = ("clarify", "plan", "docs")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# GitHub: owners are letters, digits and hyphens; repositories may hold dots but are never
# `.` or `..`.
_REPO_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*/(?!\.\.?$)[A-Za-z0-9_.-]+$")
_SLACK_USER = re.compile(r"^[UW][A-Z0-9]{2,}$")
_HOST_NAME = re.compile(r"^(\*\.)?[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$|^\[[0-9A-Fa-f:.]+\]$")
_ORIGIN = re.compile(r"^https?://([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?/?$")
DEFAULT_MERMAID_MACROS = ("mermaid", "mermaid-cloud", "mermaid-macro", "mermaid-diagram")


def _split_commas(value: Any) -> Any:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


MAX_TOKEN_NAME_CHARS = 100
# Token names end up in `answered_via` (`dashboard:<name>`) and on every page: one line.
_TOKEN_NAME = re.compile(r"^\w[\w.@' -]*$")


def parse_named_tokens(text: str, *, unit: str) -> list[tuple[str, str]]:
    """`name:token` entries (commas in a setting, lines in a file) as (name, token) pairs.

    Args:
        text: the setting's value, or the file's text.
        unit: "entry" (comma-separated) or "line" (one a line, `#` comments and blank
            lines skipped); errors count in this unit.

    Raises:
        ValueError: an entry is malformed; the message names it by number, never by content.
    """
    if unit == "line":
        raw = [
            (number, line.strip())
            for number, line in enumerate(text.splitlines(), start=1)
            if line.strip() and not line.strip().startswith("#")
        ]
    else:
        raw = [(number, part.strip()) for number, part in enumerate(text.split(","), start=1)]
    plural = "lines" if unit == "line" else "entries"
    pairs: list[tuple[str, str]] = []
    names: dict[str, int] = {}
    tokens: dict[str, int] = {}
    for number, entry in raw:
        where = f"{unit} {number}"
        if not entry:
            raise ValueError(f"{where} is empty; use name:token,name:token")
        name, sep, token = entry.partition(":")
        name, token = name.strip(), token.strip()
        if not sep:
            raise ValueError(f"{where} has no ':' between the name and the token; use name:token")
        if not name:
            raise ValueError(f"{where} has no name before ':'; use name:token")
        if not token:
            raise ValueError(f"{where} has an empty token; use name:token")
        if len(name) > MAX_TOKEN_NAME_CHARS or not _TOKEN_NAME.match(name):
            raise ValueError(
                f"{where}: the name must be letters, digits, spaces or . _ @ ' - "
                f"(at most {MAX_TOKEN_NAME_CHARS})"
            )
        if any(ch.isspace() for ch in token) or not token.isprintable():
            raise ValueError(f"{where}: the token must be one word of printable characters")
        if name in names:
            raise ValueError(f"{plural} {names[name]} and {number} have the same name")
        if token in tokens:
            raise ValueError(f"{plural} {tokens[token]} and {number} have the same token")
        names[name] = number
        tokens[token] = number
        pairs.append((name, token))
    return pairs


class Settings(BaseSettings):
    """Everything an operator can set. Field `x` is `AGENT_TEAM_X` or `x` in the TOML file."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_file=".env",
        env_file_encoding="utf-8",
        extra="forbid",
        env_ignore_empty=True,
        validate_default=True,
        populate_by_name=True,  # the fields with a provider's variable as an alias
    )

    db_path: Path = Field(
        default=Path("agent-team.db"),
        description="The SQLite file holding the ledger and the LangGraph checkpoints.",
    )
    database_url: SecretStr | None = Field(
        default=None,
        description="Where the ledger is: a path or sqlite:///path (the SQLite file, as "
        "AGENT_TEAM_DB_PATH), or postgresql://user@host/db (needs the [postgres] extra).",
    )
    ledger_outbox: Path | None = Field(
        default=None,
        description="Where budget rows go when the ledger refuses them "
        "(default: budget_ledger_failures.jsonl beside the database).",
    )
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["text", "json"] = Field(
        default="text",
        description="`text`: one line a record, control characters escaped; `json`: one JSON "
        "object a line (time, level, logger, message, exception).",
    )

    # Models and budget
    model: str = Field(
        default="offline",
        description="`offline`, `anthropic:<model>`, `openai:<model>` or `ollama:<model>`.",
    )
    billing_mode: Literal["api", "subscription"] = "api"
    daily_budget_usd: float = Field(default=20.0, ge=0, description="Cap per UTC day and mode.")
    daily_token_cap: int = Field(
        default=5_000_000, ge=0, description="Cap per UTC day for models with no price."
    )
    prices: dict[str, tuple[float, float]] = Field(
        default_factory=dict,
        description="USD per million (input, output) tokens per model; overrides the defaults.",
    )
    # A model per stage (`[models]` in the TOML file: clarify, plan, docs); unset: `model`.
    model_clarify: str | None = Field(default=None, description="The clarify stage's model.")
    model_plan: str | None = Field(default=None, description="The plan stage's model.")
    model_docs: str | None = Field(
        default=None, description="The docs lane's model (the Confluence draft)."
    )
    model_fallbacks: CommaList = Field(
        default_factory=list,
        description="Models tried in turn, once each, when a call's model keeps failing with "
        "an error worth retrying (429, 5xx, a timeout, an unknown model), e.g. "
        "`openai:gpt-5-mini,ollama:llama3.1`.",
    )
    model_timeout_s: float = Field(
        default=300.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="Longest one model request may take.",
    )
    model_retries: int = Field(
        default=2,
        ge=0,
        le=10,
        description="Retries of a call on one model after an error worth retrying.",
    )
    model_backoff_s: float = Field(
        default=1.0,
        ge=0,
        le=600,
        allow_inf_nan=False,
        description="The first pause before a retry; it doubles (with jitter) up to 30 s, "
        "unless the provider's retry-after asks for longer.",
    )
    model_retry_window_s: float = Field(
        default=120.0,
        ge=0,
        le=3600,
        allow_inf_nan=False,
        description="How long a call keeps retrying, its attempts and pauses counted (every "
        "model); past it each model left is asked once, then the task parks.",
    )
    model_resume_pauses: CommaList = Field(
        default_factory=lambda: ["1m", "5m", "15m", "1h"],
        description="How long a task parked `model_unavailable` waits before it continues by "
        "itself, park after park; the last pause repeats.",
    )
    # Each provider's endpoint: ours, else the provider's own variable (which its client reads).
    anthropic_base_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices(
            "AGENT_TEAM_ANTHROPIC_BASE_URL", "anthropic_base_url", "ANTHROPIC_BASE_URL"
        ),
        description="Anthropic's API address, e.g. a gateway (also read from "
        "ANTHROPIC_BASE_URL; default https://api.anthropic.com).",
    )
    openai_base_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices(
            "AGENT_TEAM_OPENAI_BASE_URL", "openai_base_url", "OPENAI_BASE_URL"
        ),
        description="OpenAI's API address with its /v1, e.g. a gateway or a compatible "
        "server (also read from OPENAI_BASE_URL; default https://api.openai.com/v1).",
    )
    ollama_base_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices(
            "AGENT_TEAM_OLLAMA_BASE_URL", "ollama_base_url", "OLLAMA_HOST"
        ),
        description="The Ollama server (also read from OLLAMA_HOST; default "
        "http://127.0.0.1:11434).",
    )

    # Pipeline
    workers: int = Field(default=2, ge=1, le=64, description="Graph runs at once.")
    max_clarify_rounds: int = Field(default=2, ge=0, le=10)
    clarify_deadline_h: float = Field(default=24.0, gt=0)
    plan_deadline_h: float = Field(default=72.0, gt=0)
    confluence_deadline_h: float = Field(default=72.0, gt=0)

    # Builders
    builder: Literal["offline", "command", "claude-code"] = "offline"
    repo_path: Path | None = Field(
        default=None, description="The repository tasks build in when a task names none."
    )
    state_dir: Path | None = Field(
        default=None,
        description="Worktrees and generated repositories (default: `state` beside the database).",
    )
    build_command: str | None = Field(
        default=None, description="Shell command the `command` builder runs in the worktree."
    )
    build_timeout_s: float = Field(default=1800.0, gt=0)
    claude_bin: str = Field(default="claude", description="The Claude Code CLI binary.")
    claude_max_turns: int = Field(
        default=50, ge=1, description="Claude Code's --max-turns: agent turns per build."
    )
    task_timeout: timedelta = Field(
        default=timedelta(0),
        description="Longest one run of a task may work between gates (its model calls and "
        "build), e.g. 45m or 2h; past it the running build is stopped and the task fails. "
        "0: no limit beyond AGENT_TEAM_BUILD_TIMEOUT_S.",
    )

    # The sandbox builds run in (docs/architecture.md §4, README "Sandbox")
    sandbox: Literal["auto", "bwrap", "podman", "docker", "none"] = Field(
        default="auto",
        description="Where a builder's process runs: `bwrap` (bubblewrap), `podman` or "
        "`docker` (a container of AGENT_TEAM_SANDBOX_IMAGE), `none` (on the host), or `auto`: "
        "bwrap for a builder that runs a process, none for the offline one.",
    )
    sandbox_image: str | None = Field(
        default=None,
        description="The container image builds run in with AGENT_TEAM_SANDBOX=podman|docker.",
    )
    sandbox_allow_hosts: CommaList = Field(
        default_factory=list,
        description="Hosts a sandboxed build may reach through the daemon's proxy, e.g. "
        "`api.anthropic.com,pypi.org,*.githubusercontent.com`; empty: no network.",
    )
    sandbox_env: CommaList = Field(
        default_factory=list,
        description="More environment variables handed into the sandbox by name (the "
        "builder's own key variables, e.g. ANTHROPIC_API_KEY, are handed in already).",
    )
    sandbox_max_procs: int = Field(default=512, ge=8, description="Processes per build.")
    sandbox_max_open_files: int = Field(default=4096, ge=64, description="Open files per process.")
    sandbox_max_memory_mb: int = Field(
        default=8192, ge=64, description="Memory per build (through a cgroup where there is one)."
    )
    sandbox_max_address_space_mb: int = Field(
        default=32768, ge=256, description="Address space per process (RLIMIT_AS)."
    )
    sandbox_max_cpu_s: int = Field(default=7200, ge=1, description="CPU seconds per process.")

    # Daemon and dashboard
    dashboard_host: str = Field(default="127.0.0.1", description="Bind address of the HTTP server.")
    dashboard_port: int = Field(default=8765, ge=0, le=65535, description="0 picks a free port.")
    dashboard_token: SecretStr | None = Field(
        default=None,
        description="One unnamed token for the dashboard's writes (kept for older scripts; "
        "prefer named tokens).",
    )
    dashboard_tokens: SecretStr | None = Field(
        default=None,
        description="Named dashboard tokens, `name:token,...`: answers are attributed by name.",
    )
    dashboard_tokens_file: Path | None = Field(
        default=None,
        description="A file of named dashboard tokens, one `name:token` a line (`#` comments); "
        "re-read when it changes.",
    )
    dashboard_session_key: SecretStr | None = Field(
        default=None,
        description="Signs the dashboard's sign-in cookies "
        "(default: a key generated into the state folder).",
    )
    dashboard_session_h: float = Field(
        default=12.0, gt=0, le=24 * 30, description="How long a dashboard sign-in lasts, in hours."
    )
    dashboard_url: str | None = Field(
        default=None, description="Public URL of the dashboard, for links in messages."
    )
    dashboard_reads: Literal["token", "open"] | None = Field(
        default=None,
        description="`token`: reading pages and the API needs a sign-in or a bearer token too; "
        "`open`: anyone who reaches the port reads (default: open on a loopback bind address, "
        "token otherwise). /healthz, /readyz and /metrics stay open (/metrics: see "
        "AGENT_TEAM_METRICS_AUTH).",
    )
    dashboard_hosts: CommaList = Field(
        default_factory=list,
        description="More `Host:` names the HTTP server answers to (comma-separated; `*.` "
        "prefixes allowed) beside the bind address, localhost, 127.0.0.1, [::1] and the host "
        "of AGENT_TEAM_DASHBOARD_URL; others get a 400 (DNS rebinding).",
    )
    limit_writes_per_min: int = Field(
        default=120,
        ge=0,
        le=1_000_000,
        description="State-changing HTTP requests (dashboard, JSON API, LangGraph API) one key "
        "may make a minute (one client address without a key); over it: 429 with Retry-After. "
        "0: no limit.",
    )
    limit_logins_per_min: int = Field(
        default=20,
        ge=0,
        le=1_000_000,
        description="Failed sign-ins and wrong keys one client address may send a minute; "
        "over it: 429 with Retry-After before the secret is checked. 0: no limit.",
    )
    access_log: bool = Field(
        default=True,
        description="Log one line per HTTP request (logger agent_team.access): method, path "
        "without query values, status, duration, who, client address.",
    )
    metrics_auth: Literal["auto", "token", "open"] = Field(
        default="auto",
        description="`token`: /metrics needs `Authorization: Bearer <a dashboard token>`; "
        "`open`: anyone who reaches the port; `auto`: open on a loopback bind address, "
        "token otherwise.",
    )
    stop_grace_s: float = Field(default=30.0, ge=0, description="How long a stop waits for runs.")
    checkpoint_retention: timedelta = Field(
        default=timedelta(days=7),
        description="How long a finished task keeps its LangGraph checkpoints: seconds or "
        "`30m`, `12h`, `7d`; `0` keeps them forever. The task's own record stays.",
    )
    poll_s: float = Field(default=1.0, gt=0, le=60, description="Inbox poll interval.")
    pg_notify: bool = Field(
        default=True,
        description=(
            "On PostgreSQL, wake the other daemons with LISTEN/NOTIFY when work is queued; "
            "off behind a transaction-pooling PgBouncer (LISTEN needs a session): they poll."
        ),
    )
    lease_s: float = Field(
        default=30.0,
        ge=1,
        le=3600,
        description=(
            "Execution lease of a running task (renewed every third of it); how long another "
            "instance waits before taking over a task of one that died or stalled."
        ),
    )

    # Slack transport
    transport: Literal["local", "slack"] = Field(
        default="local", description="Where questions go: `local` (CLI/dashboard) or `slack`."
    )
    slack_bot_token: SecretStr | None = Field(default=None, description="xoxb- bot token.")
    slack_signing_secret: SecretStr | None = Field(
        default=None, description="Verifies Events API requests (HTTP mode)."
    )
    slack_app_token: SecretStr | None = Field(
        default=None, description="xapp- token; when set, Socket Mode is used instead of HTTP."
    )
    slack_channel: str | None = Field(default=None, description="Channel id questions go to.")
    slack_allowed_users: CommaList = Field(
        default_factory=list,
        description="Slack user ids allowed to answer (comma-separated); empty: nobody.",
    )
    slack_escalate_to: CommaList = Field(
        default_factory=list, description="User ids mentioned when a question expires."
    )
    slack_api_url: str = Field(
        default="https://slack.com/api/", description="The Slack Web API base URL."
    )
    slack_reminders: CommaList = Field(
        default_factory=lambda: ["0.5", "0.9"],
        description="Fractions of a question's deadline at which to remind (comma-separated).",
    )
    slack_digest_at: str | None = Field(
        default=None,
        description="Post the triage inbox to the channel daily at this time: `09:00` (UTC) "
        "or `09:00 Europe/Berlin`; unset: no digest.",
    )

    # GitHub intake
    github_repos: CommaList = Field(
        default_factory=list, description="Repositories to poll, `owner/repo` comma-separated."
    )
    github_label: str = Field(default="agent-team", min_length=1)
    github_docs_label: str = Field(default="agent-team-docs", min_length=1)
    github_token: SecretStr | None = None
    github_api_url: str = Field(default="https://api.github.com")
    github_poll_s: float = Field(default=60.0, ge=5, description="Seconds between polls.")
    github_webhook_secret: SecretStr | None = None
    github_comment: bool = Field(default=False, description="Keep a status comment on the issue.")
    github_open_pr: bool = Field(default=False, description="Open a draft PR after a build.")
    github_checkouts: CommaList = Field(
        default_factory=list,
        description="Local clones tasks of a repository build in, `owner/repo=/path` "
        "comma-separated (default: AGENT_TEAM_REPO_PATH); draft PRs push the recorded build "
        "from there to the repository's URL on the GitHub host.",
    )

    # Sign in with GitHub on the dashboard (issue #30): an OAuth app's web flow
    github_oauth_client_id: str | None = Field(
        default=None,
        description="The client id of the GitHub OAuth app the dashboard signs people in with; "
        "with the secret, /login offers Sign in with GitHub.",
    )
    github_oauth_client_secret: SecretStr | None = Field(
        default=None,
        description="The OAuth app's client secret: from the environment only (a config file "
        "holding it is refused).",
    )
    github_oauth_url: str = Field(
        default="https://github.com",
        description="The GitHub web host of /login/oauth/* (GitHub Enterprise: https://HOST); "
        "the user is read from AGENT_TEAM_GITHUB_API_URL.",
    )
    github_signin_default_role: str | None = Field(
        default=None,
        description="A GitHub login no person holds: refused when unset; else a person named "
        "after the login is added with this role (viewer, contributor or maintainer).",
    )

    # After the pull request (issue #29): the PR is a gate
    github_pr_gate: bool = Field(
        default=True,
        description="Keep a task open while its draft PR is open: follow reviews and CI, "
        "end `done` when merged and `cancelled` when closed; off: a task ends when its PR opens.",
    )
    github_reviewers: CommaList = Field(
        default_factory=list,
        description="GitHub logins whose reviews and comments the agent acts on "
        "(comma-separated); others are ignored; empty: nobody's (merges and closes still end "
        "the task).",
    )
    github_handle: str = Field(
        default="@agent-team",
        pattern=r"^@[A-Za-z0-9][A-Za-z0-9-]{0,38}(\[bot\])?$",
        description="A PR comment that mentions this handle asks the agent for a follow-up.",
    )
    github_pr_rounds: int = Field(
        default=5,
        ge=0,
        le=50,
        description="Follow-up rounds a PR gets from reviews before a person is asked; "
        "0: reviews never start one by themselves.",
    )
    github_ci_watch: bool = Field(
        default=True,
        description="Follow CI on each head of a task's PR: rerun a flaky failure once per "
        "head, then ask a person (fix / ignore / take over).",
    )
    github_ci_fixes: int = Field(
        default=2,
        ge=0,
        le=10,
        description="Follow-up commits the agent may make for red CI on one head commit.",
    )
    github_ready_when_green: bool = Field(
        default=False,
        description="Mark a task's draft PR ready for review once every required check is "
        "green and no review still requests changes (the daemon never merges).",
    )
    github_pr_poll_s: float = Field(
        default=60.0, ge=5, description="Seconds between looks at each open pull request."
    )
    pr_decision_deadline_h: float = Field(
        default=72.0, gt=0, description="Hours a person has to answer a pull request decision."
    )

    # LangGraph-server-compatible API (Agent Inbox, langgraph-sdk)
    langgraph_api: bool = Field(
        default=False,
        description="Serve the threads/runs part of the LangGraph server API under /langgraph "
        "so Agent Inbox and the LangGraph SDKs can list and answer questions (`x-api-key`: a "
        "dashboard token).",
    )
    langgraph_api_origins: CommaList = Field(
        default_factory=list,
        description="Browser origins allowed to call /langgraph (CORS), comma-separated, "
        "e.g. `https://dev.agentinbox.ai,http://localhost:3000`; empty: no cross-origin calls.",
    )

    # Confluence documentation lane
    confluence_enabled: bool = False
    confluence_base_url: str | None = Field(
        default=None, description="e.g. https://example.atlassian.net/wiki"
    )
    confluence_space_id: str | None = None
    confluence_parent_id: str | None = None
    confluence_email: str | None = None
    confluence_api_token: SecretStr | None = None
    confluence_client_id: str | None = None
    confluence_client_secret: SecretStr | None = None
    confluence_token_url: str = Field(default="https://auth.atlassian.com/oauth/token")
    confluence_dry_run: bool = Field(
        default=True, description="Record the exact write instead of sending it."
    )
    confluence_mermaid_macros: CommaList = Field(
        default_factory=lambda: list(DEFAULT_MERMAID_MACROS),
        description="Extension keys of Mermaid macros (Marketplace apps differ).",
    )
    confluence_retry_cap_s: float = Field(
        default=30.0, ge=0, le=600, description="Longest wait a 429/503 `Retry-After` may ask for."
    )

    @field_validator(
        "slack_allowed_users",
        "slack_escalate_to",
        "slack_reminders",
        "github_repos",
        "github_checkouts",
        "github_reviewers",
        "confluence_mermaid_macros",
        "dashboard_hosts",
        "langgraph_api_origins",
        "sandbox_allow_hosts",
        "sandbox_env",
        "model_fallbacks",
        "model_resume_pauses",
        mode="before",
    )
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        return _split_commas(value)

    @property
    def binds_loopback(self) -> bool:
        """Whether the HTTP server listens on a loopback address only: what is open by default."""
        host = self.dashboard_host.strip().lower().strip("[]")
        return host in ("localhost", "::1") or host.startswith("127.")

    @property
    def reads_need_token(self) -> bool:
        """Whether GET requests need a sign-in (see `dashboard_reads`)."""
        if self.dashboard_reads is not None:
            return self.dashboard_reads == "token"
        return not self.binds_loopback

    @property
    def metrics_need_token(self) -> bool:
        """Whether `/metrics` needs a bearer token (see `metrics_auth`)."""
        if self.metrics_auth != "auto":
            return self.metrics_auth == "token"
        return not self.binds_loopback

    @field_validator("dashboard_hosts")
    @classmethod
    def _host_names(cls, value: list[str]) -> list[str]:
        bad = [host for host in value if not _HOST_NAME.match(host)]
        if bad:
            raise ValueError(
                "must be host names or addresses without scheme or port (example.com, "
                "*.example.com, 10.0.0.5), comma-separated"
            )
        return [host.lower() for host in value]

    @field_validator("slack_allowed_users", "slack_escalate_to")
    @classmethod
    def _slack_users(cls, value: list[str]) -> list[str]:
        bad = [user for user in value if not _SLACK_USER.match(user)]
        if bad:
            raise ValueError("must be Slack user ids like U012ABCDEF, comma-separated")
        return value

    @field_validator("slack_reminders")
    @classmethod
    def _fractions(cls, value: list[str]) -> list[str]:
        try:
            numbers = [float(part) for part in value]
        except ValueError:
            raise ValueError("must be fractions between 0 and 1, e.g. 0.5,0.9") from None
        if any(not 0 < number < 1 for number in numbers):
            raise ValueError("must be fractions between 0 and 1, e.g. 0.5,0.9")
        return [f"{number:g}" for number in sorted(set(numbers))]

    @field_validator("slack_digest_at")
    @classmethod
    def _digest_at(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        return " ".join(str(part) for part in parse_daily_time(value))

    @field_validator("github_repos")
    @classmethod
    def _repos(cls, value: list[str]) -> list[str]:
        if any(not _REPO_NAME.match(repo) for repo in value):
            raise ValueError("must be `owner/repo` names, comma-separated")
        return value

    @field_validator("sandbox_allow_hosts")
    @classmethod
    def _allow_hosts(cls, value: list[str]) -> list[str]:
        return list(parse_allow_hosts(value))

    @field_validator("sandbox_env")
    @classmethod
    def _sandbox_env(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _ENV_NAME.match(name):
                raise ValueError(f"{name[:40]!r} is not an environment variable name")
            if name.upper().startswith("AGENT_TEAM_"):
                raise ValueError(
                    f"{name} is one of agent-team's own settings; they never enter the sandbox"
                )
        return value

    @field_validator("ollama_base_url")
    @classmethod
    def _ollama_host(cls, value: str | None) -> str | None:
        # OLLAMA_HOST may be a bare `host:port`, as the ollama client takes it.
        if value is None or not value.strip():
            return None
        text = value.strip()
        return text if "://" in text else f"http://{text}"

    @field_validator("model", "model_clarify", "model_plan", "model_docs")
    @classmethod
    def _model_spec(cls, value: str | None) -> str | None:
        if value is None:
            return None
        split_model_spec(value)  # ValueError says what is wrong, never the whole value
        return value.strip()

    @field_validator("model_fallbacks")
    @classmethod
    def _fallbacks(cls, value: list[str]) -> list[str]:
        for spec in value:
            split_model_spec(spec)
        return list(dict.fromkeys(value))

    @field_validator("model_resume_pauses")
    @classmethod
    def _pauses(cls, value: list[str]) -> list[str]:
        problem = "must be durations such as 1m,5m,15m,1h (each over 0), comma-separated"
        try:
            pauses = [parse_duration(part) for part in value]
        except ValueError:
            raise ValueError(problem) from None
        if not pauses or any(pause <= timedelta(0) for pause in pauses):
            raise ValueError(problem)
        return value

    @model_validator(mode="before")
    @classmethod
    def _models_table(cls, data: Any) -> Any:
        # `[models]` in the TOML file: each stage's model; an AGENT_TEAM_MODEL_<STAGE> wins.
        if not isinstance(data, dict) or "models" not in data:
            return data
        table = data.pop("models")
        if not isinstance(table, dict):
            raise ValueError('[models] must be a table of stage = "provider:model"')
        unknown = sorted(set(table) - set(MODEL_STAGES))
        if unknown:
            raise ValueError(
                f"[models] knows the stages {', '.join(MODEL_STAGES)}; not {unknown[0][:40]!r}"
            )
        for stage, spec in table.items():
            data.setdefault(f"model_{stage}", spec)
        return data

    def model_for(self, stage: str) -> str:
        """The model spec a stage's calls use (`clarify`, `plan`, `docs`): its own, else `model`."""
        own: str | None = getattr(self, f"model_{stage}", None) if stage in MODEL_STAGES else None
        return own or self.model

    def resume_pauses(self) -> list[timedelta]:
        """`model_resume_pauses` as durations."""
        return [parse_duration(part) for part in self.model_resume_pauses]

    @field_validator("github_checkouts")
    @classmethod
    def _checkouts(cls, value: list[str]) -> list[str]:
        for entry in value:
            repo, sep, path = entry.partition("=")
            if not sep or not _REPO_NAME.match(repo.strip()) or not path.strip():
                raise ValueError("must be `owner/repo=/path/to/clone` entries, comma-separated")
        return value

    @field_validator("github_signin_default_role")
    @classmethod
    def _default_role(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        role = value.strip().lower()
        if role == Role.OWNER.value:
            raise ValueError(
                "must not be owner: a GitHub account nobody added never becomes an owner by "
                "signing in; add owners with `agent-team people add NAME --role owner`"
            )
        if role not in {r.value for r in Role}:
            raise ValueError("must be viewer, contributor or maintainer")
        return role

    @field_validator("github_oauth_url")
    @classmethod
    def _web_host(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL (GitHub Enterprise: https://HOST)")
        return value.rstrip("/")

    @field_validator(
        "slack_api_url",
        "github_api_url",
        "confluence_base_url",
        "confluence_token_url",
        "anthropic_base_url",
        "openai_base_url",
    )
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value

    @field_validator("checkpoint_retention", "task_timeout", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        # A bare number is seconds (as in TOML); text may also carry a unit (`7d`).
        problem = "must be a duration: seconds (3600) or e.g. 30m, 12h, 7d; 0 keeps them forever"
        if isinstance(value, bool):
            raise ValueError(problem)
        try:
            if isinstance(value, str):
                text = value.strip()
                try:
                    value = float(text)
                except ValueError:
                    return parse_duration(text)
            if isinstance(value, int | float) and value >= 0:
                return timedelta(seconds=value)  # NaN fails `>= 0`; inf overflows
        except (ValueError, OverflowError):
            raise ValueError(problem) from None
        if isinstance(value, timedelta) and value >= timedelta(0):
            return value
        raise ValueError(problem)

    @field_validator("langgraph_api_origins")
    @classmethod
    def _origins(cls, value: list[str]) -> list[str]:
        bad = [origin for origin in value if not _ORIGIN.match(origin)]
        if bad:
            raise ValueError(
                "must be origins: a scheme, a host and an optional port, no path "
                "(https://inbox.example.com, http://localhost:3000), comma-separated"
            )
        return [origin.rstrip("/") for origin in value]

    @field_validator("dashboard_tokens")
    @classmethod
    def _named_tokens(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            parse_named_tokens(value.get_secret_value(), unit="entry")  # ValueError names it
        return value

    def state_folder(self) -> Path:
        """Worktrees, generated repositories and the dashboard's demo token and session key."""
        return self.state_dir or self.db_path.parent / "state"

    @model_validator(mode="after")
    def _database_url(self) -> Settings:
        # Raises ConfigError naming AGENT_TEAM_DATABASE_URL (never the password) when malformed.
        if self.database_url is not None:
            target = parse_target(self.database_url.get_secret_value())
            if target.path is not None:
                self.db_path = target.path
        return self

    @model_validator(mode="after")
    def _github_sign_in(self) -> Settings:
        # Both halves of the OAuth app, or neither: half a pair would show a button that fails.
        given = {
            "AGENT_TEAM_GITHUB_OAUTH_CLIENT_ID": bool((self.github_oauth_client_id or "").strip()),
            "AGENT_TEAM_GITHUB_OAUTH_CLIENT_SECRET": bool(
                self.github_oauth_client_secret is not None
                and self.github_oauth_client_secret.get_secret_value().strip()
            ),
        }
        missing = [name for name, present in given.items() if not present]
        if len(missing) == 1:
            raise ValueError(
                f"{missing[0]} is not set, but Sign in with GitHub needs both "
                "AGENT_TEAM_GITHUB_OAUTH_CLIENT_ID and AGENT_TEAM_GITHUB_OAUTH_CLIENT_SECRET "
                "(the secret in the environment); set it, or unset the other"
            )
        if missing and self.github_signin_default_role is not None:
            raise ValueError(
                "AGENT_TEAM_GITHUB_SIGNIN_DEFAULT_ROLE needs Sign in with GitHub: set "
                "AGENT_TEAM_GITHUB_OAUTH_CLIENT_ID and AGENT_TEAM_GITHUB_OAUTH_CLIENT_SECRET too"
            )
        return self

    @property
    def github_sign_in(self) -> bool:
        """Whether the dashboard offers Sign in with GitHub (client id and secret both set)."""
        return bool((self.github_oauth_client_id or "").strip() and self.github_oauth_client_secret)

    @property
    def ledger_target(self) -> str | Path:
        """What `db.open_ledger` opens: the PostgreSQL URL if one is set, else the SQLite file."""
        if self.database_url is not None and is_postgres_url(self.database_url.get_secret_value()):
            return self.database_url.get_secret_value()
        return self.db_path

    def reminder_fractions(self) -> list[float]:
        return [float(part) for part in self.slack_reminders]

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (
            init_settings,
            env_settings,
            _OwnDotEnvSource(settings_cls),
            TomlConfigSettingsSource(settings_cls),
            file_secret_settings,
        )


class _OwnDotEnvSource(DotEnvSettingsSource):
    """`.env` lines of other tools are theirs; a misspelt `AGENT_TEAM_*` line is an error."""

    def __call__(self) -> dict[str, Any]:
        prefix = ENV_PREFIX.lower()
        return {
            key: value
            for key, value in super().__call__().items()
            if key in self.settings_cls.model_fields or key.lower().startswith(prefix)
        }


class SystemdEnv(BaseSettings):
    """What systemd tells its services through the environment (no AGENT_TEAM_ prefix)."""

    model_config = SettingsConfigDict(extra="ignore", env_ignore_empty=True)

    notify_socket: str | None = None
    watchdog_usec: int | None = None
    watchdog_pid: int | None = None
    state_directory: str | None = None

    def state_dir(self) -> Path | None:
        """The first folder of `StateDirectory=` (systemd may list several, colon-separated)."""
        return Path(self.state_directory.split(":")[0]) if self.state_directory else None


class _HookEnv(BaseSettings):
    """The test hooks' variables (see `agent_team.common.testhooks`); only the tests set them."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", env_ignore_empty=True)

    crash_at: str | None = None
    clock_offset_s: float = 0.0


def load_hooks() -> Hooks:
    """The test hooks from the environment; none are set in production.

    Raises:
        ConfigError: `AGENT_TEAM_CLOCK_OFFSET_S` is not a number.
    """
    try:
        env = _HookEnv()
    except ValidationError as exc:
        fields = ", ".join(
            ENV_PREFIX + str(e["loc"][0]).upper() for e in exc.errors(include_input=False)
        )
        raise ConfigError(f"{fields}: must be a number of seconds (a test hook)") from None
    return Hooks(crash_at=env.crash_at, clock_offset_s=env.clock_offset_s)


def load_systemd_env() -> SystemdEnv:
    try:
        return SystemdEnv()
    except ValidationError as exc:
        fields = ", ".join(str(e["loc"][0]).upper() for e in exc.errors(include_input=False))
        raise ConfigError(f"systemd variables are malformed: {fields}") from None


def _also_read(field: str) -> str | None:
    """The provider's own variable a setting is also read from (its `AliasChoices`), if any."""
    info = Settings.model_fields.get(field)
    alias = info.validation_alias if info is not None else None
    if not isinstance(alias, AliasChoices):
        return None
    theirs = (c for c in alias.choices if isinstance(c, str) and c.isupper())
    return next((c for c in theirs if not c.startswith(ENV_PREFIX)), None)


def _describe(error: dict[str, Any], config_file: Path | None) -> str:
    loc = error.get("loc")
    if not loc:  # a check across settings (e.g. the `[models]` table) names them itself
        return str(error.get("msg", "is invalid")).removeprefix("Value error, ")
    field = str(loc[0])
    own = field[len(ENV_PREFIX) :].lower()
    if field.upper().startswith(ENV_PREFIX) and _also_read(own) is not None:
        field = own  # a field with aliases is named by its first: ours
    where = (
        field.upper() if field.upper().startswith(ENV_PREFIX) else f"{ENV_PREFIX}{field.upper()}"
    )
    also = _also_read(field)
    if also is not None:
        where += f" (or {also})"
    if config_file is not None:
        stage = field.removeprefix("model_")
        key = f"`{stage}` under [models]" if stage in MODEL_STAGES else f"`{field}`"
        where += f" (or {key} in {config_file})"
    # A validator's ValueError arrives as "Value error, <our message>": pydantic's word, not ours.
    message = str(error.get("msg", "is invalid")).removeprefix("Value error, ")
    if error.get("type") == "extra_forbidden":
        message = "is not a setting agent-team knows; check the spelling"
    return f"{where}: {message}"


# AGENT_TEAM_ names that are not settings: what a build's command is given (builders/command.py),
# the test hooks, and where the browser tests copy their screenshots.
OTHER_NAMES = frozenset(
    {
        "AGENT_TEAM_PLAN_FILE",
        "AGENT_TEAM_TASK_ID",
        "AGENT_TEAM_TASK_TITLE",
        "AGENT_TEAM_CRASH_AT",
        "AGENT_TEAM_CLOCK_OFFSET_S",
        "AGENT_TEAM_SCREENSHOT_DIR",
    }
)
_warned: set[str] = set()
_warned_lock = threading.Lock()


def _known_names() -> set[str]:
    known = {ENV_PREFIX + name.upper() for name in Settings.model_fields} | set(OTHER_NAMES)
    for info in Settings.model_fields.values():
        alias = info.validation_alias
        if isinstance(alias, AliasChoices):
            known |= {c.upper() for c in alias.choices if isinstance(c, str)}
    return known


def unknown_env_names(environ: Mapping[str, str]) -> list[str]:
    """One line for each `AGENT_TEAM_*` variable no setting reads, naming the closest known one.

    A misspelt line in `.env` or the TOML file is refused; the environment is shared with
    other tools and so only warned about, but never in silence.
    """
    known = _known_names()
    lines = []
    for name in sorted(environ):
        upper = name.upper()
        if not upper.startswith(ENV_PREFIX) or upper in known:
            continue
        if upper.endswith("_API_KEY"):  # model keys are the providers' own variables
            lines.append(
                f"{name[:80]} is set but agent-team reads model keys from the provider's own "
                f"variable: {upper[len(ENV_PREFIX) :][:60]}"
            )
            continue
        close = difflib.get_close_matches(upper, known, n=1, cutoff=0.75)
        hint = (
            f"; did you mean {close[0]}?" if close else " (the README's Configuration lists them)"
        )
        lines.append(f"{name[:80]} is set but is not a setting agent-team knows{hint}")
    return lines


def _warn_unknown_env() -> None:
    for line in unknown_env_names(os.environ):
        with _warned_lock:
            if line in _warned:
                continue
            _warned.add(line)
        logging.getLogger(__name__).warning("%s", line)


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Build the settings from every source.

    Args:
        config_file: an optional TOML file (the CLI's `--config`).
        overrides: values that win over every source (e.g. the CLI's `--db`).

    Raises:
        ConfigError: a missing or unreadable config file, or an invalid value.
    """
    toml_file: Path | None = None
    if config_file is not None:
        if not config_file.is_file():
            raise ConfigError(f"config file {config_file} does not exist; check --config")
        try:
            table = tomllib.loads(config_file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"config file {config_file} is not valid TOML: {exc}") from exc
        for field in ENV_ONLY_SECRETS:
            if field in table:
                raise ConfigError(
                    f"config file {config_file}: `{field}` may not be in a config file (config "
                    f"files get copied and shared); set {ENV_PREFIX}{field.upper()} in the "
                    "daemon's environment instead"
                )
        toml_file = config_file

    class _Loaded(Settings):
        model_config = SettingsConfigDict(toml_file=toml_file)

    try:
        settings = _Loaded(**{key: value for key, value in overrides.items() if value is not None})
    except ValidationError as exc:
        problems = "; ".join(
            _describe(dict(error), config_file) for error in exc.errors(include_input=False)
        )
        raise ConfigError(f"invalid configuration: {problems}") from None
    _warn_unknown_env()
    state = load_systemd_env().state_dir()
    if state is not None and "db_path" not in settings.model_fields_set:
        # Under systemd's StateDirectory= the ledger lives there unless set explicitly.
        settings = settings.model_copy(update={"db_path": state / "agent-team.db"})
    return settings
