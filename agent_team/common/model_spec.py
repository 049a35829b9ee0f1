"""The grammar of a model spec (`offline`, `anthropic:<model>`, ...), shared by settings and models.

In `common` because `config.py` checks every spec a setting names (the model,
each stage's, the fallbacks) when it loads, and the model registry, which
turns a spec into a client, sits above the settings.
"""

from __future__ import annotations

import re

from agent_team.common.redact import redact

__all__ = ["OFFLINE_SPEC", "PROVIDER_NAMES", "SPEC_FORMS", "split_model_spec"]

OFFLINE_SPEC = "offline"
PROVIDER_NAMES = ("anthropic", "openai", "ollama")
SPEC_FORMS = "`offline`, `anthropic:<model>`, `openai:<model>` or `ollama:<model>`"
_MODEL_NAME = re.compile(r"^\S+$")


def split_model_spec(spec: str) -> tuple[str, str | None]:
    """`(provider, model)` of a spec; `("offline", None)` for the offline model.

    Raises:
        ValueError: no provider prefix, an unknown provider, or no single model
            name. The message never echoes the whole value: a pasted API key
            must not reach a log line.
    """
    text = spec.strip()
    if text == OFFLINE_SPEC:
        return OFFLINE_SPEC, None
    provider, sep, model = text.partition(":")
    if not sep:
        problem = "has no provider prefix"
    elif provider not in PROVIDER_NAMES:
        problem = f"names an unknown provider {redact(provider)!r}"
    elif not _MODEL_NAME.match(model):
        problem = "needs one model name (no spaces) after the colon"
    else:
        return provider, model
    raise ValueError(f"{problem}; use {SPEC_FORMS} (e.g. anthropic:claude-sonnet-4-5)")
