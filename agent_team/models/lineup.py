"""Which models a daemon's calls use, read from its settings: one per stage, then the fallbacks.

Why one place: the wiring builds the caller from it and `doctor` reports it,
so what an operator is told is what runs. A spec named twice (a stage's model
that is also a fallback) gets one client.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from langchain_core.language_models import BaseChatModel

from agent_team.common.model_spec import split_model_spec
from agent_team.config import MODEL_STAGES, Settings
from agent_team.models.registry import make_chat_model
from agent_team.models.retry_policy import RetryPolicy

__all__ = [
    "PIPELINE_STAGES",
    "Lineup",
    "base_url_for",
    "chat_models",
    "lineup",
    "retry_policy",
    "shown_url",
]

# The pipeline stage (`ModelCaller.structured(stage=...)`) each `[models]` key names.
PIPELINE_STAGES = {"clarify": "clarify", "plan": "plan", "docs": "conf_draft"}

# What a provider's client uses when no address is set (for `doctor`).
_DEFAULT_URLS = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com/v1",
    "ollama": "http://127.0.0.1:11434",
}


@dataclass(frozen=True, slots=True)
class Lineup:
    """The specs in use: the default, each `[models]` stage's, and the fallbacks in order."""

    default: str
    stages: dict[str, str]  # settings stage (`clarify`, `plan`, `docs`) -> spec
    fallbacks: tuple[str, ...]

    def specs(self) -> list[str]:
        """Every distinct spec, the default first."""
        return list(dict.fromkeys([self.default, *self.stages.values(), *self.fallbacks]))

    def providers(self) -> list[str]:
        """Every provider a spec names, the offline model left out."""
        named = (split_model_spec(spec) for spec in self.specs())
        return list(dict.fromkeys(provider for provider, model in named if model is not None))


def lineup(settings: Settings) -> Lineup:
    return Lineup(
        default=settings.model,
        stages={stage: settings.model_for(stage) for stage in MODEL_STAGES},
        fallbacks=tuple(settings.model_fallbacks),
    )


def base_url_for(settings: Settings, provider: str) -> str | None:
    """The endpoint set for a provider (ours or its own variable), or None for the client's."""
    url: str | None = getattr(settings, f"{provider}_base_url", None)
    return url


def shown_url(settings: Settings, provider: str) -> str:
    """The endpoint as `doctor` prints it: no user, password, query or fragment."""
    url = base_url_for(settings, provider)
    if url is None:
        return f"{_DEFAULT_URLS.get(provider, '?')} (the client's default)"
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def retry_policy(settings: Settings) -> RetryPolicy:
    return RetryPolicy(
        retries=settings.model_retries,
        backoff_s=settings.model_backoff_s,
        window_s=settings.model_retry_window_s,
        timeout_s=settings.model_timeout_s,
    )


ChatModels = tuple[
    BaseChatModel, dict[str, tuple[str, BaseChatModel]], list[tuple[str, BaseChatModel]]
]


def chat_models(settings: Settings) -> ChatModels:
    """The clients: `(default, {pipeline stage: (spec, chat)}, [(spec, chat)] fallbacks)`.

    One client per spec, however many roles it plays.

    Raises:
        ConfigError: a provider refused its settings (e.g. no API key).
        ModelUnavailableError: a provider's package (extra) is not installed.
    """
    made: dict[str, BaseChatModel] = {}

    def chat(spec: str) -> BaseChatModel:
        if spec not in made:
            provider, _ = split_model_spec(spec)
            made[spec] = make_chat_model(
                spec,
                base_url=base_url_for(settings, provider),
                timeout_s=settings.model_timeout_s,
            )
        return made[spec]

    chosen = lineup(settings)
    default = chat(chosen.default)
    stages = {
        PIPELINE_STAGES[stage]: (spec, chat(spec))
        for stage, spec in chosen.stages.items()
        if spec != chosen.default
    }
    return default, stages, [(spec, chat(spec)) for spec in chosen.fallbacks]
