"""Settings: where each value comes from, and how a bad one is reported.

Every test runs in an empty `tmp_path` with every `AGENT_TEAM_*` variable of the
developer's own environment removed, so only what the test sets is seen.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from agent_team.config import ENV_PREFIX, Settings, load_settings
from agent_team.exceptions import AgentTeamError, ConfigError

SECRET = "s3cr3t-value"


@pytest.fixture(autouse=True)
def clean_env(isolated_env: Path) -> Path:
    return isolated_env


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def config_error(config_file: Path | None = None, **overrides: Any) -> str:
    """The message of the ConfigError that `load_settings` raises for these arguments."""
    with pytest.raises(ConfigError) as info:
        load_settings(config_file, **overrides)
    return str(info.value)


# --- defaults -----------------------------------------------------------------------------------


def test_defaults() -> None:
    settings = load_settings()

    assert isinstance(settings, Settings)
    assert settings.db_path == Path("agent-team.db")
    assert settings.log_level == "info"
    assert settings.ledger_outbox is None


def test_none_overrides_are_ignored_so_the_cli_can_pass_unset_flags(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The CLI always calls load_settings(..., db_path=<--db or None>).
    monkeypatch.setenv("AGENT_TEAM_DB_PATH", "from-env.db")

    assert load_settings(db_path=None).db_path == Path("from-env.db")
    assert load_settings(None, db_path=None, log_level=None).log_level == "info"


# --- each source and their order ---------------------------------------------------------------


def test_environment_sets_every_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_TEAM_DB_PATH", "/srv/at/ledger.db")
    monkeypatch.setenv("AGENT_TEAM_LEDGER_OUTBOX", "/srv/at/outbox.jsonl")
    monkeypatch.setenv("AGENT_TEAM_LOG_LEVEL", "debug")

    settings = load_settings()

    assert settings.db_path == Path("/srv/at/ledger.db")
    assert settings.ledger_outbox == Path("/srv/at/outbox.jsonl")
    assert settings.log_level == "debug"


def test_toml_file_values_are_used(tmp_path: Path) -> None:
    config = write(
        tmp_path / "agent-team.toml",
        'db_path = "data/ledger.db"\nledger_outbox = "spool/outbox.jsonl"\nlog_level = "warning"\n',
    )

    settings = load_settings(config)

    assert settings.db_path == Path("data/ledger.db")
    assert settings.ledger_outbox == Path("spool/outbox.jsonl")
    assert settings.log_level == "warning"


def test_toml_file_leaves_unset_fields_at_their_defaults(tmp_path: Path) -> None:
    config = write(tmp_path / "agent-team.toml", 'log_level = "error"\n')

    settings = load_settings(config)

    assert settings.log_level == "error"
    assert settings.db_path == Path("agent-team.db")
    assert settings.ledger_outbox is None


def test_dotenv_in_the_working_folder_is_read(tmp_path: Path) -> None:
    write(tmp_path / ".env", "AGENT_TEAM_DB_PATH=from-dotenv.db\nAGENT_TEAM_LOG_LEVEL=warning\n")

    settings = load_settings()

    assert settings.db_path == Path("from-dotenv.db")
    assert settings.log_level == "warning"


def test_dotenv_outside_the_working_folder_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / ".env", "AGENT_TEAM_LOG_LEVEL=debug\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    assert load_settings().log_level == "info"


def test_environment_wins_over_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = write(tmp_path / "c.toml", 'db_path = "from-toml.db"\nlog_level = "warning"\n')
    monkeypatch.setenv("AGENT_TEAM_DB_PATH", "from-env.db")

    settings = load_settings(config)

    assert settings.db_path == Path("from-env.db")
    assert settings.log_level == "warning"  # not set in the environment: TOML still counts


def test_environment_wins_over_dotenv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / ".env", "AGENT_TEAM_LOG_LEVEL=debug\n")
    monkeypatch.setenv("AGENT_TEAM_LOG_LEVEL", "error")

    assert load_settings().log_level == "error"


def test_dotenv_wins_over_toml(tmp_path: Path) -> None:
    write(tmp_path / ".env", "AGENT_TEAM_LOG_LEVEL=debug\n")
    config = write(tmp_path / "c.toml", 'log_level = "warning"\ndb_path = "from-toml.db"\n')

    settings = load_settings(config)

    assert settings.log_level == "debug"
    assert settings.db_path == Path("from-toml.db")


def test_explicit_override_wins_over_every_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / ".env", "AGENT_TEAM_DB_PATH=from-dotenv.db\n")
    config = write(tmp_path / "c.toml", 'db_path = "from-toml.db"\n')
    monkeypatch.setenv("AGENT_TEAM_DB_PATH", "from-env.db")

    settings = load_settings(config, db_path=Path("from-flag.db"))

    assert settings.db_path == Path("from-flag.db")


# --- bad values: one line, names the variable and the allowed values, never the value ---------


def test_invalid_env_value_names_the_variable_and_the_allowed_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AGENT_TEAM_LOG_LEVEL", SECRET)

    message = config_error()

    assert "AGENT_TEAM_LOG_LEVEL" in message
    for allowed in ("debug", "info", "warning", "error"):
        assert allowed in message
    assert SECRET not in message
    assert "\n" not in message


def test_invalid_value_error_does_not_carry_the_validation_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # pydantic's ValidationError text includes the input; chaining it would print the
    # value in any traceback or `log.exception` that shows the ConfigError.
    monkeypatch.setenv("AGENT_TEAM_LOG_LEVEL", SECRET)

    with pytest.raises(ConfigError) as info:
        load_settings()

    assert isinstance(info.value, AgentTeamError)
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__
    assert SECRET not in repr(info.value.args)


def test_our_own_check_reads_as_our_message_without_pydantics_prefix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # #31 (14): "AGENT_TEAM_MODEL: Value error, has no provider prefix ..." leaked pydantic.
    monkeypatch.setenv("AGENT_TEAM_MODEL", "bogus")

    message = config_error()

    assert message.startswith("invalid configuration: AGENT_TEAM_MODEL: has no provider prefix")
    assert "Value error" not in message


def test_invalid_value_in_toml_names_the_key_and_the_file(tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", f'log_level = "{SECRET}"\n')

    message = config_error(config)

    assert "AGENT_TEAM_LOG_LEVEL" in message
    assert "`log_level`" in message
    assert str(config) in message
    assert SECRET not in message


def test_invalid_value_in_dotenv_is_reported_without_the_value(tmp_path: Path) -> None:
    write(tmp_path / ".env", f"AGENT_TEAM_LOG_LEVEL={SECRET}\n")

    message = config_error()

    assert "AGENT_TEAM_LOG_LEVEL" in message
    assert SECRET not in message


def test_invalid_override_is_a_config_error() -> None:
    message = config_error(log_level=SECRET)

    assert "AGENT_TEAM_LOG_LEVEL" in message
    assert SECRET not in message


def test_every_invalid_value_is_reported_at_once(tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", f'log_level = "{SECRET}"\nledger_outbox = 5\n')

    message = config_error(config)

    assert "AGENT_TEAM_LOG_LEVEL" in message
    assert "AGENT_TEAM_LEDGER_OUTBOX" in message
    assert SECRET not in message


def test_unknown_toml_key_is_named(tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", f'db_path = "x.db"\nlog_levle = "{SECRET}"\n')

    message = config_error(config)

    assert "log_levle" in message
    assert "check the spelling" in message
    assert str(config) in message
    assert SECRET not in message


# --- the config file itself ---------------------------------------------------------------------


def test_missing_config_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.toml"

    message = config_error(missing)

    assert str(missing) in message
    assert "does not exist" in message
    assert "--config" in message


def test_malformed_toml(tmp_path: Path) -> None:
    config = write(tmp_path / "c.toml", f'db_path = "{SECRET}\n')  # unterminated string

    message = config_error(config)

    assert str(config) in message
    assert "not valid TOML" in message
    assert "line 1" in message
    assert SECRET not in message


def test_config_file_that_is_not_utf8(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_bytes(b'log_level = "\xff\xfe"\n')

    message = config_error(config)

    assert str(config) in message
    assert "not valid TOML" in message


# --- known bugs (see the comment on each) ------------------------------------------------------


def test_dotenv_lines_for_other_tools_are_ignored(tmp_path: Path) -> None:
    # Regression: with `extra="forbid"`, pydantic-settings turns every
    # `.env` line without the AGENT_TEAM_ prefix into an "extra" field, so a `.env`
    # shared with another tool (API keys, SLACK_BOT_TOKEN, ...) makes every command
    # fail with "AGENT_TEAM_OTHER_TOOL_TOKEN: is not a setting agent-team knows",
    # naming a variable that does not exist. The process environment's other
    # variables are ignored; `.env` lines should be too.
    write(
        tmp_path / ".env",
        f"OTHER_TOOL_TOKEN={SECRET}\nAGENT_TEAM_LOG_LEVEL=debug\n",
    )

    assert load_settings().log_level == "debug"


def test_misspelt_variable_in_dotenv_is_named_as_written(tmp_path: Path) -> None:
    # Regression: an unknown AGENT_TEAM_* line in `.env`
    # arrives with its prefix still on (loc "agent_team_log_levl"), and `_describe`
    # adds the prefix again: "AGENT_TEAM_AGENT_TEAM_LOG_LEVL: is not a setting ...".
    write(tmp_path / ".env", f"AGENT_TEAM_LOG_LEVL={SECRET}\n")

    message = config_error()

    assert "AGENT_TEAM_LOG_LEVL" in message
    assert "AGENT_TEAM_AGENT_TEAM_" not in message
    assert SECRET not in message


@pytest.mark.parametrize("name", ["AGENT_TEAM_DB_PATH", "AGENT_TEAM_LEDGER_OUTBOX"])
def test_empty_path_variable_is_not_the_working_folder(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # Regression: `AGENT_TEAM_DB_PATH=` (e.g. `${DB_PATH}` unset in a
    # compose file) becomes Path("."), the working folder, and `agent-team migrate`
    # then dies with a sqlite3 traceback ("unable to open database file"); an empty
    # AGENT_TEAM_LEDGER_OUTBOX makes `ledger replay` crash in Path.with_name.
    # Expected: empty means unset (default) or a ConfigError naming the variable.
    monkeypatch.setenv(name, "")

    try:
        settings = load_settings()
    except ConfigError as exc:
        assert name in str(exc)
        return
    assert settings.db_path == Path("agent-team.db")
    assert settings.ledger_outbox is None


# --- integration settings (Slack, GitHub, Confluence) ------------------------------------


def test_comma_separated_lists_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(f"{ENV_PREFIX}SLACK_ALLOWED_USERS", " U012ABCDEF ,W0ZZZ9,")
    monkeypatch.setenv(f"{ENV_PREFIX}GITHUB_REPOS", "acme/api,acme/web.site")
    monkeypatch.setenv(f"{ENV_PREFIX}SLACK_REMINDERS", "0.9,0.25,0.9")
    settings = load_settings()
    assert settings.slack_allowed_users == ["U012ABCDEF", "W0ZZZ9"]
    assert settings.github_repos == ["acme/api", "acme/web.site"]
    assert settings.reminder_fractions() == [0.25, 0.9]


def test_lists_from_toml_are_real_lists(tmp_path: Path) -> None:
    config = tmp_path / "agent-team.toml"
    config.write_text('github_repos = ["acme/api"]\nslack_escalate_to = ["U0LEAD1"]\n')
    settings = load_settings(config)
    assert settings.github_repos == ["acme/api"] and settings.slack_escalate_to == ["U0LEAD1"]


def test_integration_defaults_are_off_and_safe() -> None:
    settings = load_settings()
    assert settings.transport == "local" and settings.slack_allowed_users == []
    assert settings.github_repos == [] and not settings.github_comment
    assert not settings.github_open_pr
    assert not settings.confluence_enabled and settings.confluence_dry_run
    assert settings.reminder_fractions() == [0.5, 0.9]
    assert "mermaid" in settings.confluence_mermaid_macros


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("GITHUB_REPOS", "acme", "owner/repo"),
        ("GITHUB_REPOS", "acme/api,../etc", "owner/repo"),
        ("SLACK_ALLOWED_USERS", "alice", "Slack user ids"),
        ("SLACK_REMINDERS", "0.5,1.5", "fractions between 0 and 1"),
        ("SLACK_REMINDERS", "half", "fractions between 0 and 1"),
        ("SLACK_API_URL", "slack.com/api", "http"),
        ("GITHUB_POLL_S", "1", "greater than or equal to 5"),
        ("TRANSPORT", "email", "local"),
    ],
)
def test_bad_integration_values_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, says: str
) -> None:
    monkeypatch.setenv(f"{ENV_PREFIX}{variable}", value)
    with pytest.raises(ConfigError) as error:
        load_settings()
    message = str(error.value)
    assert f"{ENV_PREFIX}{variable}" in message and says in message
    if len(value) > 4:
        assert value not in message, "the value may be a secret"


def test_secrets_are_not_shown_by_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(f"{ENV_PREFIX}SLACK_BOT_TOKEN", "xoxb-very-secret")
    monkeypatch.setenv(f"{ENV_PREFIX}GITHUB_TOKEN", "ghp_very_secret")
    monkeypatch.setenv(f"{ENV_PREFIX}CONFLUENCE_API_TOKEN", "atl-very-secret")
    shown = repr(load_settings())
    assert "very-secret" not in shown and "very_secret" not in shown


# --- checkpoint retention -----------------------------------------------------------------


def test_checkpoint_retention_defaults_to_a_week() -> None:
    assert load_settings().checkpoint_retention == timedelta(days=7)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", timedelta(0)),
        ("3600", timedelta(hours=1)),
        ("90.5", timedelta(seconds=90.5)),
        ("30m", timedelta(minutes=30)),
        ("12h", timedelta(hours=12)),
        (" 7D ", timedelta(days=7)),
        ("1.5d", timedelta(hours=36)),
    ],
)
def test_checkpoint_retention_takes_seconds_or_a_unit(
    monkeypatch: pytest.MonkeyPatch, text: str, expected: timedelta
) -> None:
    monkeypatch.setenv("AGENT_TEAM_CHECKPOINT_RETENTION", text)

    assert load_settings().checkpoint_retention == expected


def test_checkpoint_retention_in_toml_is_seconds_or_text(tmp_path: Path) -> None:
    seconds = write(tmp_path / "a.toml", "checkpoint_retention = 86400\n")
    text = write(tmp_path / "b.toml", 'checkpoint_retention = "2d"\n')

    assert load_settings(seconds).checkpoint_retention == timedelta(days=1)
    assert load_settings(text).checkpoint_retention == timedelta(days=2)


@pytest.mark.parametrize("text", ["-1", "7w", "a week", "nan", "inf", "1e30", "99999999999d"])
def test_a_bad_checkpoint_retention_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    monkeypatch.setenv("AGENT_TEAM_CHECKPOINT_RETENTION", text)

    message = config_error()

    assert "AGENT_TEAM_CHECKPOINT_RETENTION" in message
    assert "30m, 12h, 7d" in message and "0 keeps them forever" in message
    assert "\n" not in message


@pytest.mark.parametrize(("raw", "expected"), [("on", True), ("off", False), ("false", False)])
def test_pg_notify_is_on_by_default_and_reads_on_off(
    monkeypatch: pytest.MonkeyPatch, raw: str, expected: bool
) -> None:
    assert load_settings().pg_notify is True
    monkeypatch.setenv("AGENT_TEAM_PG_NOTIFY", raw)
    assert load_settings().pg_notify is expected


def test_a_bad_pg_notify_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_TEAM_PG_NOTIFY", "sometimes")
    assert "AGENT_TEAM_PG_NOTIFY" in config_error()


# --- Sign in with GitHub ------------------------------------------------------------------------


def test_github_sign_in_is_on_with_both_halves_of_the_oauth_app(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert not load_settings().github_sign_in
    monkeypatch.setenv("AGENT_TEAM_GITHUB_OAUTH_CLIENT_ID", "Iv1.abc")
    monkeypatch.setenv("AGENT_TEAM_GITHUB_OAUTH_CLIENT_SECRET", SECRET)
    monkeypatch.setenv("AGENT_TEAM_GITHUB_OAUTH_URL", "https://ghe.example/")

    settings = load_settings()

    assert settings.github_sign_in
    assert settings.github_oauth_url == "https://ghe.example"
    assert settings.github_signin_default_role is None
    assert SECRET not in repr(settings)


@pytest.mark.parametrize(
    ("given", "missing"),
    [
        ("AGENT_TEAM_GITHUB_OAUTH_CLIENT_ID", "AGENT_TEAM_GITHUB_OAUTH_CLIENT_SECRET"),
        ("AGENT_TEAM_GITHUB_OAUTH_CLIENT_SECRET", "AGENT_TEAM_GITHUB_OAUTH_CLIENT_ID"),
    ],
)
def test_half_an_oauth_app_names_the_missing_variable(
    monkeypatch: pytest.MonkeyPatch, given: str, missing: str
) -> None:
    monkeypatch.setenv(given, SECRET)

    message = config_error()

    assert f"{missing} is not set" in message
    assert SECRET not in message


def test_the_client_secret_is_refused_in_a_config_file(tmp_path: Path) -> None:
    config = write(
        tmp_path / "agent-team.toml",
        f'github_oauth_client_id = "Iv1.abc"\ngithub_oauth_client_secret = "{SECRET}"\n',
    )

    message = config_error(config)

    assert "github_oauth_client_secret" in message
    assert "AGENT_TEAM_GITHUB_OAUTH_CLIENT_SECRET" in message and "environment" in message
    assert SECRET not in message


def test_the_client_id_may_be_in_a_config_file_and_the_secret_in_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write(tmp_path / "agent-team.toml", 'github_oauth_client_id = "Iv1.abc"\n')
    monkeypatch.setenv("AGENT_TEAM_GITHUB_OAUTH_CLIENT_SECRET", SECRET)

    assert load_settings(config).github_sign_in


@pytest.mark.parametrize(
    ("role", "problem"),
    [("owner", "must not be owner"), ("admin", "must be viewer, contributor or maintainer")],
)
def test_the_default_role_is_a_role_below_owner(
    monkeypatch: pytest.MonkeyPatch, role: str, problem: str
) -> None:
    monkeypatch.setenv("AGENT_TEAM_GITHUB_OAUTH_CLIENT_ID", "Iv1.abc")
    monkeypatch.setenv("AGENT_TEAM_GITHUB_OAUTH_CLIENT_SECRET", SECRET)
    monkeypatch.setenv("AGENT_TEAM_GITHUB_SIGNIN_DEFAULT_ROLE", role)

    message = config_error()

    assert "AGENT_TEAM_GITHUB_SIGNIN_DEFAULT_ROLE" in message and problem in message
    monkeypatch.setenv("AGENT_TEAM_GITHUB_SIGNIN_DEFAULT_ROLE", "Contributor")
    assert load_settings().github_signin_default_role == "contributor"


def test_a_default_role_without_github_sign_in_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AGENT_TEAM_GITHUB_SIGNIN_DEFAULT_ROLE", "viewer")

    assert "needs Sign in with GitHub" in config_error()


def test_a_misspelt_environment_variable_is_warned_about_with_the_closest_name(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AGENT_TEAM_DASHBORD_PORT", "9000")
    monkeypatch.setenv("AGENT_TEAM_QQQQQ", "1")
    monkeypatch.setenv("AGENT_TEAM_TASK_ID", "t1")  # what a build's command is given
    with caplog.at_level("WARNING", logger="agent_team.config"):
        settings = load_settings()
        load_settings()  # once per process, not at every load
    assert settings.dashboard_port == 8765  # still ignored: the environment is shared
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "AGENT_TEAM_DASHBORD_PORT is set but is not a setting agent-team knows; "
        "did you mean AGENT_TEAM_DASHBOARD_PORT?",
        "AGENT_TEAM_QQQQQ is set but is not a setting agent-team knows "
        "(the README's Configuration lists them)",
    ]


def test_every_setting_and_its_provider_variable_is_known() -> None:
    from agent_team.config import unknown_env_names

    names = {ENV_PREFIX + name.upper(): "x" for name in Settings.model_fields}
    names |= {"AGENT_TEAM_CRASH_AT": "x", "OTHER_TOOL_SETTING": "x"}
    assert unknown_env_names(names) == []
    # Provider keys are the providers' own variables; ours with the prefix is a mistake.
    (line,) = unknown_env_names({"AGENT_TEAM_ANTHROPIC_API_KEY": "x"})
    assert line.endswith("from the provider's own variable: ANTHROPIC_API_KEY")
