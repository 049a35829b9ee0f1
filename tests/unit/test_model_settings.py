"""The settings for model calls: a model per stage, fallbacks, endpoints, retries and pauses.

Tested through `load_settings` with real TOML files and real environment variables,
because the precedence between `[models]`, `AGENT_TEAM_MODEL_<STAGE>` and the providers'
own variables is decided by the sources together, not by one validator. Every test runs
in an empty `tmp_path` with no `AGENT_TEAM_*` variable and none of the providers' endpoint
variables, so a developer's or CI machine's environment cannot decide the outcome.
"""

from __future__ import annotations

import string
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from agent_team.config import MODEL_STAGES, load_settings
from agent_team.exceptions import ConfigError

# Shaped like an Anthropic key: a pasted key must never reach an error line (or a log).
KEY = "sk-ant-api03-" + string.ascii_letters[:30]
# The providers' own endpoint variables, which our settings read as fallbacks.
PROVIDER_URL_VARIABLES = ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "OLLAMA_HOST", "OPENAI_API_BASE")


@pytest.fixture(autouse=True)
def clean_env(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in PROVIDER_URL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return isolated_env


def toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agent-team.toml"
    path.write_text(text, encoding="utf-8")
    return path


def config_error(config_file: Path | None = None, **overrides: Any) -> str:
    """The message of the ConfigError that `load_settings` raises for these arguments."""
    with pytest.raises(ConfigError) as info:
        load_settings(config_file, **overrides)
    return str(info.value)


# --- a model per stage ---------------------------------------------------------------------------


def test_models_table_sets_the_stages_it_names_and_the_others_use_model(tmp_path: Path) -> None:
    config = toml(
        tmp_path,
        'model = "anthropic:claude-sonnet-4-5"\n'
        "[models]\n"
        'plan = "anthropic:claude-opus-4-5"\n'
        'docs = "openai:gpt-5-mini"\n',
    )

    settings = load_settings(config)

    assert settings.model_for("plan") == "anthropic:claude-opus-4-5"
    assert settings.model_for("docs") == "openai:gpt-5-mini"
    assert settings.model_for("clarify") == "anthropic:claude-sonnet-4-5"
    assert settings.model_clarify is None


@pytest.mark.parametrize("stage", MODEL_STAGES)
def test_every_known_stage_can_be_set_in_the_models_table(tmp_path: Path, stage: str) -> None:
    config = toml(tmp_path, f'[models]\n{stage} = "ollama:llama3.1"\n')

    settings = load_settings(config)

    assert settings.model_for(stage) == "ollama:llama3.1"
    others = [other for other in MODEL_STAGES if other != stage]
    assert [settings.model_for(other) for other in others] == ["offline"] * len(others)


def test_no_models_table_means_every_stage_uses_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_TEAM_MODEL", "openai:gpt-5")

    settings = load_settings()

    assert {stage: settings.model_for(stage) for stage in MODEL_STAGES} == dict.fromkeys(
        MODEL_STAGES, "openai:gpt-5"
    )


def test_the_stage_variable_wins_over_the_models_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = toml(tmp_path, '[models]\nplan = "anthropic:claude-opus-4-5"\n')
    monkeypatch.setenv("AGENT_TEAM_MODEL_PLAN", "openai:gpt-5")

    assert load_settings(config).model_for("plan") == "openai:gpt-5"


def test_a_stage_spec_is_stored_without_surrounding_space(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AGENT_TEAM_MODEL_CLARIFY", "  openai:gpt-5-mini ")

    assert load_settings().model_for("clarify") == "openai:gpt-5-mini"


def test_an_unknown_stage_in_the_models_table_names_the_known_stages(tmp_path: Path) -> None:
    config = toml(tmp_path, '[models]\nplan = "offline"\nreview = "offline"\n')

    message = config_error(config)

    assert "clarify, plan, docs" in message
    assert "review" in message


def test_models_that_is_not_a_table_is_refused(tmp_path: Path) -> None:
    message = config_error(toml(tmp_path, 'models = "anthropic:claude-sonnet-4-5"\n'))

    assert "[models] must be a table" in message


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param(KEY, id="no-provider"),
        pytest.param(f"{KEY}:claude", id="key-as-provider"),
        pytest.param(f"anthropic:claude {KEY}", id="key-after-the-model"),
    ],
)
def test_a_bad_spec_in_the_models_table_is_refused_without_echoing_it(
    tmp_path: Path, spec: str
) -> None:
    config = toml(tmp_path, f'[models]\nplan = "{spec}"\n')

    message = config_error(config)

    assert "AGENT_TEAM_MODEL_PLAN" in message
    assert f"`plan` under [models] in {config}" in message  # where to fix it in the file
    assert KEY not in message
    assert string.ascii_letters[:30] not in message


# --- fallbacks -----------------------------------------------------------------------------------


def test_fallbacks_are_split_on_commas_stripped_and_deduplicated_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(
        "AGENT_TEAM_MODEL_FALLBACKS",
        " openai:gpt-5-mini , ollama:llama3.1,,openai:gpt-5-mini, anthropic:claude-haiku-4-5 ",
    )

    assert load_settings().model_fallbacks == [
        "openai:gpt-5-mini",
        "ollama:llama3.1",
        "anthropic:claude-haiku-4-5",
    ]


def test_fallbacks_from_toml_are_a_list_deduplicated_in_order(tmp_path: Path) -> None:
    config = toml(
        tmp_path, 'model_fallbacks = ["ollama:llama3.1", "openai:gpt-5", "ollama:llama3.1"]\n'
    )

    assert load_settings(config).model_fallbacks == ["ollama:llama3.1", "openai:gpt-5"]


def test_no_fallbacks_by_default() -> None:
    assert load_settings().model_fallbacks == []


@pytest.mark.parametrize(
    "bad", [KEY, f"{KEY}:claude", f"openai:gpt 5 {KEY}"], ids=["bare", "provider", "spaces"]
)
def test_a_bad_fallback_is_refused_without_echoing_it(
    monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    monkeypatch.setenv("AGENT_TEAM_MODEL_FALLBACKS", f"openai:gpt-5-mini,{bad}")

    message = config_error()

    assert "AGENT_TEAM_MODEL_FALLBACKS" in message
    assert KEY not in message
    assert string.ascii_letters[:30] not in message


# --- endpoints -----------------------------------------------------------------------------------


def test_no_endpoint_is_set_by_default() -> None:
    settings = load_settings()

    assert (settings.anthropic_base_url, settings.openai_base_url, settings.ollama_base_url) == (
        None,
        None,
        None,
    )


def test_our_anthropic_variable_wins_over_the_providers_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://theirs.example.com")
    monkeypatch.setenv("AGENT_TEAM_ANTHROPIC_BASE_URL", "https://ours.example.com")

    assert load_settings().anthropic_base_url == "https://ours.example.com"


@pytest.mark.parametrize(
    ("variable", "field", "url"),
    [
        ("ANTHROPIC_BASE_URL", "anthropic_base_url", "https://gateway.example.com"),
        ("OPENAI_BASE_URL", "openai_base_url", "https://gateway.example.com/v1"),
        ("OLLAMA_HOST", "ollama_base_url", "http://gpu-box:11434"),
    ],
)
def test_the_providers_own_variable_alone_is_used(
    monkeypatch: pytest.MonkeyPatch, variable: str, field: str, url: str
) -> None:
    monkeypatch.setenv(variable, url)

    assert getattr(load_settings(), field) == url


@pytest.mark.parametrize(
    ("field", "url"),
    [
        ("anthropic_base_url", "https://gateway.example.com"),
        ("openai_base_url", "http://127.0.0.1:8000/v1"),
        ("ollama_base_url", "http://gpu-box:11434"),
    ],
)
def test_the_toml_key_sets_the_endpoint(tmp_path: Path, field: str, url: str) -> None:
    config = toml(tmp_path, f'{field} = "{url}"\n')

    assert getattr(load_settings(config), field) == url


def test_a_bare_ollama_host_and_port_gets_http(monkeypatch: pytest.MonkeyPatch) -> None:
    # OLLAMA_HOST may be `host:port`, as the ollama client accepts it.
    monkeypatch.setenv("OLLAMA_HOST", "box:11434")

    assert load_settings().ollama_base_url == "http://box:11434"


@pytest.mark.parametrize(
    "variable",
    [
        "ANTHROPIC_BASE_URL",
        "AGENT_TEAM_ANTHROPIC_BASE_URL",
        "OPENAI_BASE_URL",
        "AGENT_TEAM_OPENAI_BASE_URL",
    ],
)
@pytest.mark.parametrize("url", ["ftp://user:hunter2@files.example.com", "gateway.example.com"])
def test_a_url_that_is_not_http_is_refused_without_echoing_it(
    monkeypatch: pytest.MonkeyPatch, variable: str, url: str
) -> None:
    monkeypatch.setenv(variable, url)

    message = config_error()

    provider = variable.removeprefix("AGENT_TEAM_").removesuffix("_BASE_URL")
    assert f"{provider}_BASE_URL" in message
    assert "http://" in message  # says what is allowed
    assert "hunter2" not in message and "example.com" not in message


@pytest.mark.parametrize("field", ["anthropic_base_url", "openai_base_url"])
def test_a_url_that_is_not_http_in_toml_names_the_key_to_fix(tmp_path: Path, field: str) -> None:
    # The file's key is `anthropic_base_url`; naming the variable as a TOML key misleads.
    config = toml(tmp_path, f'{field} = "ftp://files.example.com/v1"\n')

    message = config_error(config)

    assert f"`{field}` in {config}" in message
    assert f"`{field.upper()}`" not in message and f"`AGENT_TEAM_{field.upper()}`" not in message
    assert "example.com" not in message


# --- pauses before a parked task resumes ---------------------------------------------------------


def test_resume_pauses_default_to_one_five_fifteen_minutes_then_an_hour() -> None:
    assert load_settings().resume_pauses() == [
        timedelta(minutes=1),
        timedelta(minutes=5),
        timedelta(minutes=15),
        timedelta(hours=1),
    ]


def test_resume_pauses_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_TEAM_MODEL_RESUME_PAUSES", "30s, 2m")

    assert load_settings().resume_pauses() == [timedelta(seconds=30), timedelta(minutes=2)]


def test_resume_pauses_from_toml_are_a_list(tmp_path: Path) -> None:
    config = toml(tmp_path, 'model_resume_pauses = ["10m", "2h"]\n')

    assert load_settings(config).resume_pauses() == [timedelta(minutes=10), timedelta(hours=2)]


@pytest.mark.parametrize("value", ["0s", "soon", "1m,0s", "1m,soon", ","])
def test_a_bad_resume_pause_is_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    # A zero pause would resume a parked task at once, over and over.
    monkeypatch.setenv("AGENT_TEAM_MODEL_RESUME_PAUSES", value)

    assert "AGENT_TEAM_MODEL_RESUME_PAUSES" in config_error()


# --- timeouts, retries and back-off --------------------------------------------------------------


def test_retry_settings_defaults() -> None:
    settings = load_settings()

    assert (
        settings.model_timeout_s,
        settings.model_retries,
        settings.model_backoff_s,
        settings.model_retry_window_s,
    ) == (300.0, 2, 1.0, 120.0)


@pytest.mark.parametrize("value", ["0", "-1"])
def test_model_timeout_must_be_over_zero(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("AGENT_TEAM_MODEL_TIMEOUT_S", value)

    assert "AGENT_TEAM_MODEL_TIMEOUT_S" in config_error()


@pytest.mark.parametrize(
    ("field", "lowest", "highest"),
    [
        ("model_timeout_s", 0.001, 3600.0),
        ("model_backoff_s", 0.0, 600.0),
        ("model_retry_window_s", 0.0, 3600.0),
        ("model_retries", 0, 10),
    ],
)
def test_the_limits_themselves_are_accepted(
    monkeypatch: pytest.MonkeyPatch, field: str, lowest: float, highest: float
) -> None:
    for value in (lowest, highest):
        monkeypatch.setenv(f"AGENT_TEAM_{field.upper()}", str(value))
        assert getattr(load_settings(), field) == value


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("model_timeout_s", "3600.5"),
        ("model_timeout_s", "86400"),
        ("model_backoff_s", "600.5"),
        ("model_backoff_s", "-1"),
        ("model_retry_window_s", "3601"),
        ("model_retry_window_s", "-1"),
        ("model_retries", "11"),
        ("model_retries", "-1"),
    ],
)
def test_values_past_the_limits_are_refused(
    monkeypatch: pytest.MonkeyPatch, field: str, value: str
) -> None:
    variable = f"AGENT_TEAM_{field.upper()}"
    monkeypatch.setenv(variable, value)

    assert variable in config_error()


@pytest.mark.parametrize("field", ["model_timeout_s", "model_backoff_s", "model_retry_window_s"])
@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "Infinity"])
def test_non_finite_seconds_from_the_environment_are_refused(
    monkeypatch: pytest.MonkeyPatch, field: str, value: str
) -> None:
    # An infinite timeout hangs a worker for good; an infinite window never parks the task.
    variable = f"AGENT_TEAM_{field.upper()}"
    monkeypatch.setenv(variable, value)

    assert variable in config_error()


@pytest.mark.parametrize("field", ["model_timeout_s", "model_backoff_s", "model_retry_window_s"])
@pytest.mark.parametrize("value", ["inf", "nan"])
def test_non_finite_seconds_in_toml_are_refused(tmp_path: Path, field: str, value: str) -> None:
    # TOML has `inf` and `nan` literals, so a file can carry them without quotes.
    message = config_error(toml(tmp_path, f"{field} = {value}\n"))

    assert f"AGENT_TEAM_{field.upper()}" in message and f"`{field}`" in message
