"""Model specs to chat models: offline, providers loaded lazily, clear errors."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from pydantic import Field

from agent_team.exceptions import ConfigError, ModelUnavailableError
from agent_team.models.offline import OfflineChatModel
from agent_team.models.registry import PROVIDERS, ModelSpec, make_chat_model, parse_model_spec


def test_offline_spec() -> None:
    assert isinstance(make_chat_model("offline"), OfflineChatModel)
    assert isinstance(make_chat_model("  offline\n"), OfflineChatModel)
    assert parse_model_spec("offline") == ModelSpec("offline", None)


def test_provider_spec_parses() -> None:
    assert parse_model_spec("anthropic:claude-sonnet-4-5") == ModelSpec(
        "anthropic", "claude-sonnet-4-5"
    )
    assert parse_model_spec("ollama:llama3.1:8b") == ModelSpec("ollama", "llama3.1:8b")


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("gpt4", "no provider prefix"),
        ("", "no provider prefix"),
        ("Offline", "no provider prefix"),
        ("foo:bar", "unknown provider 'foo'"),
        ("offline:x", "unknown provider 'offline'"),
        ("anthropic:", "model name"),
        ("openai:gpt 4o", "model name"),
    ],
)
def test_bad_specs_are_config_errors(spec: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        make_chat_model(spec)
    message = str(caught.value)
    assert message.startswith("AGENT_TEAM_MODEL ")
    assert problem in message
    assert "`offline`, `anthropic:<model>`, `openai:<model>` or `ollama:<model>`" in message


def test_bad_spec_message_does_not_echo_a_pasted_key() -> None:
    with pytest.raises(ConfigError) as caught:
        make_chat_model("sk-ant-api03-abcdefghijklmnopqrstuvwxyz")
    assert "abcdefghijklmnop" not in str(caught.value)


def test_real_clients_get_our_endpoint_time_limit_and_no_retries_of_their_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The extras are dev dependencies: these are the providers' own classes.
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    anthropic = make_chat_model(
        "anthropic:claude-sonnet-4-5", base_url="http://127.0.0.1:9/a", timeout_s=7.0
    )
    openai = make_chat_model("openai:gpt-5", base_url="http://127.0.0.1:9/v1", timeout_s=7.0)
    ollama = make_chat_model("ollama:llama3.1", base_url="http://127.0.0.1:9", timeout_s=7.0)

    assert type(anthropic).__name__ == "ChatAnthropic"
    assert (anthropic.max_retries, anthropic.default_request_timeout) == (0, 7.0)  # type: ignore[attr-defined]
    assert anthropic.anthropic_api_url == "http://127.0.0.1:9/a"  # type: ignore[attr-defined]
    assert (openai.max_retries, openai.request_timeout) == (0, 7.0)  # type: ignore[attr-defined]
    assert openai.openai_api_base == "http://127.0.0.1:9/v1"  # type: ignore[attr-defined]
    assert ollama.client_kwargs == {"timeout": 7.0}  # type: ignore[attr-defined]
    assert ollama.base_url == "http://127.0.0.1:9"  # type: ignore[attr-defined]


@pytest.mark.parametrize("provider", ["anthropic", "openai", "ollama"])
def test_missing_extra_names_its_pip_install(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # None in sys.modules makes `import` raise ImportError, as if not installed.
    monkeypatch.setitem(sys.modules, PROVIDERS[provider].module, None)
    with pytest.raises(ModelUnavailableError) as caught:
        make_chat_model(f"{provider}:some-model")
    assert f"pip install 'agent-team[{provider}]'" in str(caught.value)


class _FakeProviderChat(FakeMessagesListChatModel):
    model: str = ""
    responses: list[Any] = Field(default_factory=list)


def _install(monkeypatch: pytest.MonkeyPatch, module: str, name: str, cls: Any) -> None:
    fake = types.ModuleType(module)
    setattr(fake, name, cls)
    monkeypatch.setitem(sys.modules, module, fake)


@pytest.mark.parametrize("provider", ["anthropic", "openai", "ollama"])
def test_provider_class_is_loaded_lazily_with_the_model_name(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = PROVIDERS[provider]
    _install(monkeypatch, info.module, info.class_name, _FakeProviderChat)
    chat = make_chat_model(f"{provider}:the-model")
    assert isinstance(chat, _FakeProviderChat)
    assert chat.model == "the-model"


def test_provider_refusing_its_settings_is_a_redacted_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(**_: Any) -> Any:
        raise ValueError("bad key sk-ant-api03-SECRETSECRETSECRET99")

    _install(monkeypatch, "langchain_anthropic", "ChatAnthropic", refuse)
    with pytest.raises(ConfigError) as caught:
        make_chat_model("anthropic:claude-sonnet-4-5")
    message = str(caught.value)
    assert "SECRETSECRET" not in message
    assert "[redacted]" in message
    assert "ANTHROPIC_API_KEY" in message
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_provider_class_that_is_not_a_chat_model(monkeypatch: pytest.MonkeyPatch) -> None:
    _install(monkeypatch, "langchain_openai", "ChatOpenAI", lambda **_: object())
    with pytest.raises(ModelUnavailableError, match="not a langchain-core chat model"):
        make_chat_model("openai:gpt-4o")


def test_module_without_the_class(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_ollama", types.ModuleType("langchain_ollama"))
    with pytest.raises(ModelUnavailableError, match=r"agent-team\[ollama\]"):
        make_chat_model("ollama:llama3.1")
