"""Models: the registry of `provider:model` specs, the offline model, prices, and the caller.

Nodes use `ModelCaller.structured` with the prompts and schemas here; nothing
else in agent-team talks to a model (docs/architecture.md §8).
"""

from __future__ import annotations

from agent_team.models.caller import ModelCaller, Usage
from agent_team.models.offline import CLEAR_MIN_WORDS, OFFLINE_SPEC, OfflineChatModel
from agent_team.models.pricing import DEFAULT_PRICES, Price, cost_usd, price_for
from agent_team.models.prompts import clarify_messages, plan_messages
from agent_team.models.registry import make_chat_model, parse_model_spec
from agent_team.models.schemas import ClarifyDecision, Plan
from agent_team.models.tokens import estimate_tokens

__all__ = [
    "CLEAR_MIN_WORDS",
    "DEFAULT_PRICES",
    "OFFLINE_SPEC",
    "ClarifyDecision",
    "ModelCaller",
    "OfflineChatModel",
    "Plan",
    "Price",
    "Usage",
    "clarify_messages",
    "cost_usd",
    "estimate_tokens",
    "make_chat_model",
    "parse_model_spec",
    "plan_messages",
    "price_for",
]
