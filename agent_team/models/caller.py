"""`ModelCaller`: the only way nodes call models, so every call is capped, counted and safe to log.

Why one choke point (docs/architecture.md §2, §4): the daily cap must be checked *before*
each call, each call's tokens must land in the budget ledger (even when its
output turns out unusable: the tokens were spent), and a provider's error text
must be redacted before it reaches a log line or a task row.

Caps, per UTC day of the injected clock and per billing mode:

- `api` mode, priced model: today's USD (`db.spent`) + this call's estimate
  must not exceed `daily_budget_usd`.
- `api` mode, unpriced model (offline, Ollama, unknown), and every model in
  `subscription` mode: today's tokens (`db.tokens_spent`) + this call's
  estimate must not exceed `daily_token_cap`. In subscription mode the USD
  recorded is the list-price equivalent, for information; it is not capped.

The estimate is ceil(prompt characters / 4) input tokens plus the caller's
`expected_output_tokens`. Calls already running in this process count against
the cap too, so parallel workers cannot all pass the check at once.

A priced builder (`claude-code`) spends from the same day and is checked the
same way before it starts (`check_remaining`), with the same cap: its cost is
not known in advance, so only a day already at or over the cap stops it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable
from pydantic import BaseModel

from agent_team import db
from agent_team.common.redact import redact
from agent_team.common.stops import stop_requested, stopped_error, watching
from agent_team.exceptions import BudgetExhaustedError, ConfigError, ModelError, TaskStoppedError
from agent_team.models.budget_view import capped_in_usd
from agent_team.models.pricing import Price, cost_usd, price_for
from agent_team.models.tokens import estimate_tokens, message_text, reply_text
from agent_team.task_model import BillingMode

__all__ = ["ModelCaller", "Remaining", "Usage"]

T = TypeVar("T", bound=BaseModel)

_MAX_ERROR_CHARS = 1000


class Usage(BaseModel):
    """One call's tokens and cost, as recorded in the ledger."""

    input_tokens: int
    output_tokens: int
    usd_cost: float


@dataclass(frozen=True, slots=True)
class Remaining:
    """What today's cap still allows, in the unit of the cap that applies (always > 0).

    Attributes:
        unit: `usd` (a priced model in `api` billing) or `tokens` (otherwise).
        amount: USD or tokens left today, calls in flight in this process counted.
    """

    unit: str
    amount: float

    @property
    def usd(self) -> float | None:
        """USD left today, or None when the day is capped in tokens."""
        return self.amount if self.unit == "usd" else None

    @property
    def tokens(self) -> int | None:
        """Tokens left today, or None when the day is capped in USD."""
        return int(self.amount) if self.unit == "tokens" else None


def _shorten(text: str) -> str:
    return text if len(text) <= _MAX_ERROR_CHARS else text[:_MAX_ERROR_CHARS] + "…"


class ModelCaller:
    """Calls a chat model for structured output under the daily budget, recording usage.

    Thread-safe: one instance is shared by every graph worker.

    Attributes:
        calls: model invocations attempted (budget refusals are not calls).
        last_usage: what the most recent call recorded, or None.
    """

    def __init__(
        self,
        ledger: db.Ledger,
        chat: BaseChatModel,
        *,
        model: str,
        billing_mode: str,
        daily_budget_usd: float,
        daily_token_cap: int,
        prices: Mapping[str, tuple[float, float]] | None = None,
        outbox: Path | None = None,
        clock: Callable[[], datetime] = db.utc_now,
        secrets: Iterable[str | None] = (),
    ) -> None:
        """Set up the caller.

        Args:
            ledger: the ledger the spend goes to (shared between threads).
            chat: the chat model, from `make_chat_model(model)` or a test double.
            model: the model spec, as recorded in the ledger and priced.
            billing_mode: `api` or `subscription`.
            daily_budget_usd: USD cap per UTC day for priced models in `api` mode.
            daily_token_cap: token cap per UTC day for unpriced models and
                subscription mode.
            prices: `Settings.prices` overrides of the price table.
            outbox: where ledger rows go if the database refuses them (None:
                beside the database).
            clock: aware UTC "now"; the day bucket and `recorded_at` come from it.
            secrets: known secret values to scrub from error messages, on top
                of the credential-shaped patterns `redact` always removes.

        Raises:
            ConfigError: an unknown billing mode or an invalid price override.
        """
        try:
            self._mode = BillingMode(billing_mode)
        except ValueError:
            raise ConfigError(
                "AGENT_TEAM_BILLING_MODE must be one of: "
                + ", ".join(mode.value for mode in BillingMode)
            ) from None
        self._ledger = ledger
        self._chat = chat
        self._model = model.strip()
        self._budget_usd = daily_budget_usd
        self._token_cap = daily_token_cap
        self._price = price_for(self._model, prices)  # validates overrides now, not mid-task
        self._outbox = outbox
        self._clock = clock
        self._secrets = tuple(secret for secret in secrets if secret)
        self._lock = threading.Lock()
        self._structured: dict[type[BaseModel], Runnable[Any, Any]] = {}
        self._inflight_usd = 0.0
        self._inflight_tokens = 0
        self.calls = 0
        self.last_usage: Usage | None = None

    @property
    def model(self) -> str:
        """The model spec this caller records usage under."""
        return self._model

    @property
    def price(self) -> Price | None:
        """The model's price, or None when it is capped by tokens."""
        return self._price

    @property
    def billing_mode(self) -> str:
        """`api` or `subscription`."""
        return self._mode.value

    def structured(
        self,
        *,
        thread_id: str,
        stage: str,
        schema: type[T],
        messages: Sequence[BaseMessage],
        expected_output_tokens: int = 1024,
    ) -> T:
        """Ask the model for an instance of `schema`, within today's budget.

        Args:
            thread_id: the task, recorded on the ledger row.
            stage: the pipeline stage (e.g. `clarify`, `plan`), recorded on the row.
            schema: the pydantic model the answer must fit.
            messages: the prompt.
            expected_output_tokens: the output part of the pre-call estimate.

        Returns:
            The model's answer, validated.

        Raises:
            BudgetExhaustedError: the call could exceed today's cap; nothing was
                called and nothing recorded.
            ModelError: the provider failed (nothing recorded) or its answer did
                not fit `schema` (usage recorded); the message is redacted.
        """
        told = stop_requested(thread_id)
        if told is not None:  # stopped before it asked: nothing called, nothing spent
            raise stopped_error(told, f"{stage} model call")
        estimated_input = estimate_tokens(message_text(messages))
        estimated_usd, estimated_tokens = self._reserve(
            stage, estimated_input, max(0, expected_output_tokens)
        )
        try:
            try:
                result = self._invoke_stoppable(thread_id, stage, schema, messages)
            except TaskStoppedError:
                # Abandoned while the provider worked: it may bill the whole call, so the
                # estimate is counted (the prompt, and the reply it was held for).
                self._record(
                    thread_id,
                    stage,
                    None,
                    estimated_input,
                    estimated_output=max(0, expected_output_tokens),
                )
                raise
            self._record(thread_id, stage, result.get("raw"), estimated_input)
        finally:
            # Released only once the row is written, so no other call sees neither.
            with self._lock:
                self._inflight_usd -= estimated_usd
                self._inflight_tokens -= estimated_tokens
        error = result.get("parsing_error")
        if error is not None:
            raise ModelError(
                self._redact(
                    f"model {self._model} answered the {stage} stage with output that does not "
                    f"fit {schema.__name__}: {type(error).__name__}: {error}"
                )
                + "; the task can be retried, or use a more capable model (AGENT_TEAM_MODEL)"
            )
        parsed = result.get("parsed")
        if not isinstance(parsed, schema):
            raise ModelError(
                f"model {self._model} gave no {schema.__name__} answer in the {stage} stage "
                "(no tool call); the task can be retried, or use a model that supports tool "
                "calling (AGENT_TEAM_MODEL)"
            )
        return parsed

    def check_remaining(self, stage: str) -> Remaining:
        """What today's cap leaves for spend of unknown size, such as a priced build.

        The cap is the one a model call is checked against (USD for a priced
        model in `api` billing, tokens otherwise), and calls in flight in this
        process count. Nothing is reserved and nothing is counted as a call:
        the spend this guards reports its cost only when it ends.

        Args:
            stage: the pipeline stage asking (e.g. `build`), for the message.

        Returns:
            What is left today (a later change stops a build that passes it).

        Raises:
            BudgetExhaustedError: today's spend is already at or over the cap;
                the task parks and continues after UTC midnight.
        """
        day = db.day_bucket(self._clock())
        mode = self._mode.value
        with self._lock:
            if self._capped_in_usd():
                spent = self._spent_usd(day, mode)
                if spent >= self._budget_usd:
                    raise BudgetExhaustedError(
                        f"daily budget reached: ${spent:.4f} spent on {day} (UTC, {mode} "
                        f"billing), at or over the ${self._budget_usd:.2f} cap, so the {stage} "
                        "does not start; the task resumes after UTC midnight or when "
                        "AGENT_TEAM_DAILY_BUDGET_USD is raised"
                    )
                return Remaining("usd", self._budget_usd - spent)
            used = self._used_tokens(day, mode)
            if used >= self._token_cap:
                raise BudgetExhaustedError(
                    f"daily token cap reached: {used} tokens used on {day} (UTC, {mode} billing), "
                    f"at or over the {self._token_cap} cap that applies to {self._model} "
                    f"({self._token_cap_why()}), so the {stage} does not start; the task resumes "
                    "after UTC midnight or when AGENT_TEAM_DAILY_TOKEN_CAP is raised"
                )
            return Remaining("tokens", float(self._token_cap - used))

    # -- steps ------------------------------------------------------------------------------

    def _capped_in_usd(self) -> bool:
        return self._price is not None and capped_in_usd(self._price, self._mode.value)

    def _token_cap_why(self) -> str:
        return "subscription billing" if self._price is not None else "no price known"

    def _reserve(self, stage: str, input_tokens: int, output_tokens: int) -> tuple[float, int]:
        """Check the cap for this call's estimate and hold it as in flight; (usd, tokens) held."""
        day = db.day_bucket(self._clock())
        mode = self._mode.value
        with self._lock:
            if self._price is not None and self._capped_in_usd():
                usd = cost_usd(self._price, input_tokens, output_tokens)
                spent = self._spent_usd(day, mode)
                if spent + usd > self._budget_usd:
                    raise BudgetExhaustedError(
                        f"daily budget reached: ${spent:.4f} spent on {day} (UTC, {mode} "
                        f"billing) and the {stage} call may cost ${usd:.4f}, over the "
                        f"${self._budget_usd:.2f} cap; the task resumes after UTC midnight or "
                        "when AGENT_TEAM_DAILY_BUDGET_USD is raised"
                    )
                self._inflight_usd += usd
                self.calls += 1
                return usd, 0
            tokens = input_tokens + output_tokens
            used = self._used_tokens(day, mode)
            if used + tokens > self._token_cap:
                raise BudgetExhaustedError(
                    f"daily token cap reached: {used} tokens used on {day} (UTC, {mode} billing) "
                    f"and the {stage} call may use {tokens}, over the {self._token_cap} cap "
                    f"that applies to {self._model} ({self._token_cap_why()}); the task resumes "
                    "after UTC midnight or when AGENT_TEAM_DAILY_TOKEN_CAP is raised"
                )
            self._inflight_tokens += tokens
            self.calls += 1
            return 0.0, tokens

    def _stranded(self, day: str, mode: str) -> db.OutboxSpend:
        """Today's spend the database refused, still in the outbox: the cap counts it too."""
        return db.outbox_spend(
            self._outbox or db.default_outbox_path(self._ledger), day=day, billing_mode=mode
        )

    def _spent_usd(self, day: str, mode: str) -> float:
        """USD the cap sees for `day`: ledger, outbox and calls in flight (hold `_lock`)."""
        recorded = db.spent(self._ledger, day=day, billing_mode=mode)
        return recorded + self._stranded(day, mode).usd + self._inflight_usd

    def _used_tokens(self, day: str, mode: str) -> int:
        """Tokens the token cap sees for `day`, counted as `_spent_usd` counts USD."""
        recorded = db.tokens_spent(self._ledger, day=day, billing_mode=mode)
        return recorded + self._stranded(day, mode).tokens + self._inflight_tokens

    def _invoke_stoppable(
        self, thread_id: str, stage: str, schema: type[BaseModel], messages: Sequence[BaseMessage]
    ) -> dict[str, Any]:
        """`_invoke` in a thread of its own, abandoned at once if the task is told to stop.

        Why: a provider can take a minute to answer, and a cancel must not wait
        for it (docs/architecture.md §4). The abandoned thread ends when the
        provider answers or its client times out; what it returns is dropped.
        """
        wake = threading.Event()
        outcome: dict[str, Any] = {}

        def call() -> None:
            try:
                outcome["result"] = self._invoke(stage, schema, messages)
            except BaseException as exc:  # handed to the waiting thread
                outcome["error"] = exc
            finally:
                wake.set()

        with watching(thread_id, wake):
            threading.Thread(target=call, name=f"model-{stage}", daemon=True).start()
            wake.wait()
        if "error" in outcome:
            raise outcome["error"]
        if "result" not in outcome:
            told = stop_requested(thread_id) or "cancelled"
            raise stopped_error(told, f"{stage} model call")
        result: dict[str, Any] = outcome["result"]
        return result

    def _invoke(
        self, stage: str, schema: type[BaseModel], messages: Sequence[BaseMessage]
    ) -> dict[str, Any]:
        try:
            runnable = self._structured.get(schema)
            if runnable is None:  # built once per schema: binding tools is not free
                runnable = self._structured[schema] = self._chat.with_structured_output(
                    schema, include_raw=True
                )
            result = runnable.invoke(list(messages))
        except Exception as exc:
            # `from None`: the original exception's text is not redacted and would reach
            # logs through the traceback chain.
            raise ModelError(
                self._redact(
                    f"model {self._model} failed in the {stage} stage: {type(exc).__name__}: {exc}"
                )
                + "; check the provider's status and API key, then retry the task"
            ) from None
        if not isinstance(result, dict):
            raise ModelError(
                f"model {self._model} returned {type(result).__name__} instead of the "
                "include_raw result; this is a bug in the chat model's with_structured_output"
            )
        return result

    def _record(
        self,
        thread_id: str,
        stage: str,
        raw: Any,
        estimated_input: int,
        *,
        estimated_output: int = 0,
    ) -> None:
        usage = getattr(raw, "usage_metadata", None)
        if usage:
            input_tokens = max(0, int(usage.get("input_tokens") or 0))
            output_tokens = max(0, int(usage.get("output_tokens") or 0))
        else:
            # No usage reported: count what we sent and what came back, as the estimate does.
            input_tokens = estimated_input
            output_tokens = (
                estimate_tokens(reply_text(raw))
                if isinstance(raw, BaseMessage)
                else estimated_output
            )
        price = self._price
        usd = cost_usd(price, input_tokens, output_tokens) if price is not None else 0.0
        self.last_usage = Usage(
            input_tokens=input_tokens, output_tokens=output_tokens, usd_cost=usd
        )
        db.record_usage(
            self._ledger,
            thread_id=thread_id,
            stage=stage,
            model=self._model,
            billing_mode=self._mode.value,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            usd_cost=usd,
            recorded_at=self._clock(),
            outbox=self._outbox,
        )

    def _redact(self, text: str) -> str:
        return _shorten(redact(text, self._secrets))
