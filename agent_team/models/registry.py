"""Turn a model spec (`AGENT_TEAM_MODEL`) into a langchain-core chat model.

Why lazy imports: provider packages are optional extras (`agent-team[anthropic]`
and so on), so a daemon on the offline model installs none of them, and a
missing one is reported as "install this extra", not as an ImportError at
start-up. Provider packages read their API keys from their usual environment
variables (`ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, ...); we never read them
(`config.py` is the only reader of the environment).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel

from agent_team.common.model_spec import split_model_spec
from agent_team.common.redact import redact
from agent_team.exceptions import ConfigError, ModelUnavailableError
from agent_team.models.offline import OfflineChatModel

__all__ = ["PROVIDERS", "ModelSpec", "Provider", "make_chat_model", "parse_model_spec"]


@dataclass(frozen=True)
class Provider:
    """Where a provider's chat model class lives and which extra installs it."""

    module: str
    class_name: str
    extra: str
    key_hint: str


PROVIDERS: dict[str, Provider] = {
    "anthropic": Provider("langchain_anthropic", "ChatAnthropic", "anthropic", "ANTHROPIC_API_KEY"),
    "openai": Provider("langchain_openai", "ChatOpenAI", "openai", "OPENAI_API_KEY"),
    "ollama": Provider("langchain_ollama", "ChatOllama", "ollama", "a running Ollama server"),
}


@dataclass(frozen=True)
class ModelSpec:
    """A parsed spec: provider `offline` has no model name."""

    provider: str
    model: str | None


def parse_model_spec(spec: str, *, setting: str = "AGENT_TEAM_MODEL") -> ModelSpec:
    """Check and split a model spec.

    Args:
        spec: `offline` or `<provider>:<model>`; surrounding white space is ignored.
        setting: the setting it came from, for the message.

    Returns:
        The provider and model name.

    Raises:
        ConfigError: the spec has no known provider or no model name.
    """
    try:
        provider, model = split_model_spec(spec)
    except ValueError as exc:
        raise ConfigError(f"{setting} {exc}") from None
    return ModelSpec(provider, model)


def make_chat_model(
    spec: str, *, base_url: str | None = None, timeout_s: float | None = None
) -> BaseChatModel:
    """The chat model for a spec, with no retries of its own and our time limit.

    Args:
        spec: `offline`, `anthropic:<model>`, `openai:<model>` or `ollama:<model>`.
        base_url: the provider's endpoint (a gateway, a local server); None: the
            client's default, which reads the provider's own variable
            (`ANTHROPIC_BASE_URL`, `OPENAI_BASE_URL`, `OLLAMA_HOST`).
        timeout_s: the longest one request may take; Ollama's client has no
            limit unless given one.

    Returns:
        `OfflineChatModel` for `offline`; otherwise the provider's chat model
        (`ChatAnthropic`, `ChatOpenAI`, `ChatOllama`) for that model name.
        Its own retries are off (`max_retries=0`): `ModelCaller` retries, so
        that a cancel reaches the pauses and every attempt is on the record.

    Raises:
        ConfigError: a malformed spec, or the provider refused its settings
            (typically a missing API key).
        ModelUnavailableError: the provider's package (extra) is not installed.
    """
    parsed = parse_model_spec(spec)
    if parsed.model is None:
        return OfflineChatModel()
    provider = PROVIDERS[parsed.provider]
    try:
        module = importlib.import_module(provider.module)
        chat_class: Any = getattr(module, provider.class_name)
    except (ImportError, AttributeError) as exc:
        raise ModelUnavailableError(
            f"model {spec.strip()!r} needs the {provider.module} package, which is not "
            f"installed ({type(exc).__name__}); run: pip install 'agent-team[{provider.extra}]'"
        ) from None
    try:
        chat = chat_class(
            model=parsed.model, **_client_options(parsed.provider, base_url, timeout_s)
        )
    except Exception as exc:
        # Provider constructors validate settings such as the API key; their messages
        # can quote what they found, so they are redacted.
        raise ConfigError(
            f"could not set up model {spec.strip()!r}: "
            f"{redact(f'{type(exc).__name__}: {exc}')}; check {provider.key_hint}"
        ) from None
    if not isinstance(chat, BaseChatModel):
        raise ModelUnavailableError(
            f"{provider.module}.{provider.class_name} is not a langchain-core chat model; "
            f"reinstall with pip install 'agent-team[{provider.extra}]'"
        )
    return chat


def _client_options(provider: str, base_url: str | None, timeout_s: float | None) -> dict[str, Any]:
    """Each client's own names for the endpoint, the time limit and its retries."""
    options: dict[str, Any] = {}
    if base_url:
        options["base_url"] = base_url
    if provider == "anthropic":
        options["max_retries"] = 0
        if timeout_s is not None:
            options["default_request_timeout"] = timeout_s
    elif provider == "openai":
        options["max_retries"] = 0
        if timeout_s is not None:
            options["timeout"] = timeout_s
    elif provider == "ollama" and timeout_s is not None:
        options["client_kwargs"] = {"timeout": timeout_s}  # the ollama client retries nothing
    return options
