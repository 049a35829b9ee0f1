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

A call survives its provider (docs/architecture.md §4, "Model calls"): each
stage has its model (`[models]`), followed by the fallbacks. An error worth
retrying (429, 5xx, 529, a timeout, a lost connection) is retried on the same
model after a pause (`RetryPolicy`); once its retries are spent, or at once
for an unknown model (404), the next model is asked. Every failed attempt is a
`model_failures` row. When no model is left the call raises `ModelsDownError`
(the task parks `model_unavailable` and continues by itself later); a refusal
(401, 403, 400) raises `ModelRefusedError` at once: no retry, no fallback.
Each attempt is checked against the cap and priced with its own model; a
timed-out attempt counts its estimate, as the provider may bill it.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable
from pydantic import BaseModel

from agent_team import db
from agent_team.common.model_spec import split_model_spec
from agent_team.common.redact import redact
from agent_team.common.stops import stop_requested, stopped_error, watching
from agent_team.exceptions import (
    BudgetExhaustedError,
    ConfigError,
    ModelError,
    ModelRefusedError,
    ModelsDownError,
    TaskStoppedError,
)
from agent_team.models.budget_view import capped_in_usd
from agent_team.models.pricing import Price, cost_usd, price_for
from agent_team.models.provider_errors import ProviderFailure, classify
from agent_team.models.registry import PROVIDERS
from agent_team.models.retry_policy import RetryPolicy
from agent_team.models.tokens import estimate_tokens, message_text, reply_text
from agent_team.task_model import BillingMode

__all__ = ["ModelCaller", "Remaining", "Usage"]

log = logging.getLogger(__name__)

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


@dataclass(frozen=True, slots=True)
class _Model:
    """One model a call may use: its spec, its client and its price (None: capped by tokens)."""

    spec: str
    chat: BaseChatModel
    price: Price | None
    structured: dict[type[BaseModel], Runnable[Any, Any]] = field(
        default_factory=dict, compare=False
    )


class _AttemptFailed(Exception):
    """One attempt's failure, already classified (internal to the caller)."""

    def __init__(self, failure: ProviderFailure) -> None:
        super().__init__(failure.detail)
        self.failure = failure


class ModelCaller:
    """Calls a chat model for structured output under the daily budget, recording usage.

    Thread-safe: one instance is shared by every graph worker.

    Attributes:
        calls: model attempts made (budget refusals are not attempts).
        last_usage: what the most recent answered attempt recorded, or None.
        last_model: the spec of the model that gave the most recent answer, or None.
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
        stage_models: Mapping[str, tuple[str, BaseChatModel]] | None = None,
        fallbacks: Sequence[tuple[str, BaseChatModel]] = (),
        retry: RetryPolicy | None = None,
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
            stage_models: a stage's own model `(spec, chat)` by pipeline stage
                (e.g. `plan`); a stage not named uses `model`.
            fallbacks: `(spec, chat)` asked in turn when a call's model keeps failing.
            retry: pauses, attempts and the per-attempt time limit.

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
        self._prices = prices
        # Prices are validated now, not mid-task.
        self._default = self._model_of(model, chat)
        self._by_stage = {
            stage: self._model_of(spec, stage_chat)
            for stage, (spec, stage_chat) in (stage_models or {}).items()
        }
        self._fallbacks = tuple(self._model_of(spec, chat_) for spec, chat_ in fallbacks)
        self._retry = retry or RetryPolicy()
        self._budget_usd = daily_budget_usd
        self._token_cap = daily_token_cap
        self._outbox = outbox
        self._clock = clock
        self._secrets = tuple(secret for secret in secrets if secret)
        self._lock = threading.Lock()
        self._inflight_usd = 0.0
        self._inflight_tokens = 0
        self.calls = 0
        self.last_usage: Usage | None = None
        self.last_model: str | None = None

    def _model_of(self, spec: str, chat: BaseChatModel) -> _Model:
        spec = spec.strip()
        return _Model(spec, chat, price_for(spec, self._prices))

    @property
    def model(self) -> str:
        """The default model spec (`AGENT_TEAM_MODEL`)."""
        return self._default.spec

    @property
    def price(self) -> Price | None:
        """The default model's price, or None when it is capped by tokens."""
        return self._default.price

    @property
    def billing_mode(self) -> str:
        """`api` or `subscription`."""
        return self._mode.value

    def models_for(self, stage: str) -> tuple[str, ...]:
        """The specs a call in `stage` may use, in the order they are asked."""
        return tuple(model.spec for model in self._chain(stage))

    def _chain(self, stage: str) -> list[_Model]:
        first = self._by_stage.get(stage, self._default)
        chain = [first]
        for model in self._fallbacks:
            if all(model.spec != seen.spec for seen in chain):
                chain.append(model)
        return chain

    def structured(
        self,
        *,
        thread_id: str,
        stage: str,
        schema: type[T],
        messages: Sequence[BaseMessage],
        expected_output_tokens: int = 1024,
    ) -> T:
        """Ask the stage's model for an instance of `schema`, within today's budget.

        Args:
            thread_id: the task, recorded on the ledger row.
            stage: the pipeline stage (e.g. `clarify`, `plan`), recorded on the row.
            schema: the pydantic model the answer must fit.
            messages: the prompt.
            expected_output_tokens: the output part of the pre-call estimate.

        Returns:
            The model's answer, validated.

        Raises:
            BudgetExhaustedError: the next attempt could exceed today's cap;
                it was not made.
            ModelsDownError: every model failed with errors worth retrying,
                retries spent (the task parks `model_unavailable`).
            ModelRefusedError: a provider refused the call (401, 403, 400).
            ModelError: an answer that does not fit `schema` (usage recorded),
                or a failure that is no provider's (a bug); redacted.
            TaskStoppedError: the task was told to stop.
        """
        chain = self._chain(stage)
        started = time.monotonic()
        gave_up: list[str] = []
        worth_waiting = False  # some model failed in a way that passes by itself
        asked_wait = 0.0  # the longest retry-after a provider sent
        for index, model in enumerate(chain):
            attempt = 0
            while True:
                attempt += 1
                try:
                    result = self._attempt(
                        model, thread_id, stage, schema, messages, expected_output_tokens
                    )
                except _AttemptFailed as failed:
                    failure = failed.failure
                else:
                    return self._answer(model, stage, schema, result, thread_id, attempt, index)
                # Outside the `except`: what is raised next carries no exception context.
                asked_wait = max(asked_wait, failure.retry_after_s or 0.0)
                if not failure.worth_falling_back:  # a refusal, or a failure that is no outage
                    outcome = "invalid" if failure.kind == "invalid" else "refused"
                    self._note_failure(model, thread_id, stage, attempt, outcome, failure)
                    if index == 0:  # the stage's own model: no fallback can mend its settings
                        self._raise_final(model, stage, failure)
                    # A fallback's own fault must not stop the others, nor the wait for them.
                    gave_up.append(
                        f"{model.spec}: {failure.detail} ({self._fix_for(model, failure)})"
                    )
                    break
                worth_waiting = worth_waiting or failure.worth_retrying
                pause = self._retry.pause_s(attempt, failure.retry_after_s)
                spent = time.monotonic() - started  # attempts and pauses, every model counted
                if failure.worth_retrying and self._retry.may_retry(attempt, pause, spent):
                    self._note_failure(model, thread_id, stage, attempt, "retried", failure)
                    self._pause(thread_id, stage, pause)
                    continue
                last = index + 1 == len(chain)
                outcome = "gave_up" if last else "fell_back"
                self._note_failure(model, thread_id, stage, attempt, outcome, failure)
                tries = f"{attempt} attempt{'s' if attempt > 1 else ''}"
                gave_up.append(f"{model.spec}: {failure.detail} after {tries}")
                break
        told = "; ".join(gave_up)
        if not worth_waiting:
            # Unknown models and refusals only: waiting cannot help, a person must.
            raise ModelRefusedError(
                f"no model could take the {stage} call: {told}; check the model names "
                "(AGENT_TEAM_MODEL, [models], AGENT_TEAM_MODEL_FALLBACKS) and the keys"
            )
        raise ModelsDownError(
            f"no model answered the {stage} call: {told} (retries and fallbacks spent; "
            "AGENT_TEAM_MODEL_FALLBACKS adds models to fall back on)",
            retry_after_s=asked_wait or None,
        )

    def _answer(
        self,
        model: _Model,
        stage: str,
        schema: type[T],
        result: dict[str, Any],
        thread_id: str,
        attempt: int,
        index: int,
    ) -> T:
        """The parsed answer of a successful attempt (its usage is recorded already)."""
        self.last_model = model.spec
        if attempt > 1 or index > 0:
            log.info(
                "model %s answered the %s call of task %s on attempt %d%s",
                model.spec,
                stage,
                thread_id,
                attempt,
                " (a fallback)" if index > 0 else "",
            )
        self._forget_parks(thread_id)
        error = result.get("parsing_error")
        if error is not None:
            raise ModelError(
                self._redact(
                    f"model {model.spec} answered the {stage} stage with output that does not "
                    f"fit {schema.__name__}: {type(error).__name__}: {error}"
                )
                + "; the task can be retried, or use a more capable model (AGENT_TEAM_MODEL)"
            )
        parsed = result.get("parsed")
        if not isinstance(parsed, schema):
            raise ModelError(
                f"model {model.spec} gave no {schema.__name__} answer in the {stage} stage "
                "(no tool call); the task can be retried, or use a model that supports tool "
                "calling (AGENT_TEAM_MODEL)"
            )
        return parsed

    @staticmethod
    def _fix_for(model: _Model, failure: ProviderFailure) -> str:
        """What a person checks after a refusal: the key's variable (never its value)."""
        if failure.kind == "auth":
            provider = PROVIDERS.get(split_model_spec(model.spec)[0])
            return f"check {provider.key_hint if provider else 'the provider settings'}"
        if failure.kind == "invalid":
            return "the reply could not be read"
        return "check the model name and the prompt's size for this model"

    def _raise_final(self, model: _Model, stage: str, failure: ProviderFailure) -> NoReturn:
        """Raise for the stage's own model's failure that no retry or other model can mend."""
        if failure.kind == "invalid":
            raise ModelError(
                f"model {model.spec} failed in the {stage} stage: {failure.detail}; the task "
                "can be retried"
            )
        raise ModelRefusedError(
            f"model {model.spec} refused the {stage} call: {failure.detail}; "
            f"{self._fix_for(model, failure)}"
        )

    def _pause(self, thread_id: str, stage: str, seconds: float) -> None:
        """Wait before the next attempt; a cancel ends the wait at once."""
        woken = threading.Event()
        with watching(thread_id, woken):
            woken.wait(seconds)
        told = stop_requested(thread_id)
        if told is not None:
            raise stopped_error(told, f"{stage} model call")

    def _note_failure(
        self,
        model: _Model,
        thread_id: str,
        stage: str,
        attempt: int,
        outcome: str,
        failure: ProviderFailure,
    ) -> None:
        """A `model_failures` row; the call goes on if the ledger cannot take it (a record)."""
        detail = self._redact(failure.detail)
        log.warning(
            "model %s, %s call of task %s, attempt %d: %s (%s)",
            model.spec,
            stage,
            thread_id,
            attempt,
            detail,
            outcome.replace("_", " "),
        )
        try:
            db.record_model_failure(
                self._ledger,
                thread_id=thread_id,
                stage=stage,
                model=model.spec,
                attempt=attempt,
                outcome=outcome,
                http_status=failure.status,
                detail=detail,
                at=self._clock(),
            )
        except Exception as exc:
            if not db.is_outage(exc):
                raise
            log.warning("could not record that failure: the ledger is unavailable")

    def _forget_parks(self, thread_id: str) -> None:
        """A model answered: the task's next `model_unavailable` park waits the first pause."""
        try:
            db.reset_model_parks(self._ledger, thread_id)
        except Exception as exc:
            if not db.is_outage(exc):
                raise

    def check_remaining(self, stage: str) -> Remaining:
        """What today's cap leaves for spend of unknown size, such as a priced build.

        The cap is the one a call of the default model is checked against (USD
        for a priced model in `api` billing, tokens otherwise), and calls in
        flight in this process count. Nothing is reserved and nothing is
        counted as a call: the spend this guards reports its cost only when it ends.

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
        model = self._default
        with self._lock:
            if self._capped_in_usd(model):
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
                    f"at or over the {self._token_cap} cap that applies to {model.spec} "
                    f"({self._token_cap_why(model)}), so the {stage} does not start; the task "
                    "resumes after UTC midnight or when AGENT_TEAM_DAILY_TOKEN_CAP is raised"
                )
            return Remaining("tokens", float(self._token_cap - used))

    # -- one attempt ------------------------------------------------------------------------

    def _attempt(
        self,
        model: _Model,
        thread_id: str,
        stage: str,
        schema: type[BaseModel],
        messages: Sequence[BaseMessage],
        expected_output_tokens: int,
    ) -> dict[str, Any]:
        """One request to one model, under the cap; its usage recorded when it is billed.

        Raises:
            _AttemptFailed: the provider failed; an attempt that timed out has
                its estimate recorded (the provider may bill it).
        """
        told = stop_requested(thread_id)
        if told is not None:  # told before it asked, or between attempts: nothing is sent
            raise stopped_error(told, f"{stage} model call")
        estimated_input = estimate_tokens(message_text(messages))
        expected_output = max(0, expected_output_tokens)
        estimated_usd, estimated_tokens = self._reserve(
            model, stage, estimated_input, expected_output
        )
        sent: list[bool] = []
        try:
            try:
                result = self._invoke_stoppable(model, thread_id, stage, schema, messages, sent)
            except TaskStoppedError:
                if sent:
                    # Abandoned while the provider worked: it may bill the whole call, so the
                    # estimate is counted (the prompt, and the reply it was held for).
                    self._record(model, thread_id, stage, None, estimated_input, expected_output)
                raise
            except _AttemptFailed as failed:
                if failed.failure.timed_out:  # sent, and maybe billed: its estimate counts
                    self._record(model, thread_id, stage, None, estimated_input, expected_output)
                raise
            self._record(model, thread_id, stage, result.get("raw"), estimated_input, 0)
            return result
        finally:
            # Released only once the row is written, so no other call sees neither.
            with self._lock:
                self._inflight_usd -= estimated_usd
                self._inflight_tokens -= estimated_tokens

    def _capped_in_usd(self, model: _Model) -> bool:
        return model.price is not None and capped_in_usd(model.price, self._mode.value)

    @staticmethod
    def _token_cap_why(model: _Model) -> str:
        return "subscription billing" if model.price is not None else "no price known"

    def _reserve(
        self, model: _Model, stage: str, input_tokens: int, output_tokens: int
    ) -> tuple[float, int]:
        """Check the cap for this attempt's estimate and hold it as in flight; (usd, tokens)."""
        day = db.day_bucket(self._clock())
        mode = self._mode.value
        with self._lock:
            if model.price is not None and self._capped_in_usd(model):
                usd = cost_usd(model.price, input_tokens, output_tokens)
                spent = self._spent_usd(day, mode)
                if spent + usd > self._budget_usd:
                    raise BudgetExhaustedError(
                        f"daily budget reached: ${spent:.4f} spent on {day} (UTC, {mode} "
                        f"billing) and the {stage} call to {model.spec} may cost ${usd:.4f}, "
                        f"over the ${self._budget_usd:.2f} cap; the task resumes after UTC "
                        "midnight or when AGENT_TEAM_DAILY_BUDGET_USD is raised"
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
                    f"that applies to {model.spec} ({self._token_cap_why(model)}); the task "
                    "resumes after UTC midnight or when AGENT_TEAM_DAILY_TOKEN_CAP is raised"
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
        self,
        model: _Model,
        thread_id: str,
        stage: str,
        schema: type[BaseModel],
        messages: Sequence[BaseMessage],
        sent: list[bool],
    ) -> dict[str, Any]:
        """`_invoke` in a thread of its own, abandoned at once if the task is told to stop,
        and after the attempt's time limit if the client itself does not give up.

        Why: a provider can take minutes to answer, and a cancel must not wait
        for it (docs/architecture.md §4); a client with no time limit of its own
        must not hold a worker for ever. The abandoned thread ends when the
        provider answers or its client times out; what it returns is dropped.
        `sent` gets an entry once the request is on its way (a stop before that
        sends, and bills, nothing).
        """
        wake = threading.Event()
        outcome: dict[str, Any] = {}

        def call() -> None:
            try:
                outcome["result"] = self._invoke(model, stage, schema, messages)
            except BaseException as exc:  # handed to the waiting thread
                outcome["error"] = exc
            finally:
                wake.set()

        limit = self._retry.timeout_s
        # The client enforces the limit itself; this is the backstop, a little later.
        backstop = None if limit is None else limit * 1.25 + 1.0
        started = time.monotonic()
        with watching(thread_id, wake):
            if not wake.is_set():  # told to stop just now: send nothing
                sent.append(True)  # from here the provider may bill it
                threading.Thread(target=call, name=f"model-{stage}", daemon=True).start()
                wake.wait(backstop)
        if "error" in outcome:
            raise outcome["error"]
        if "result" in outcome:
            result: dict[str, Any] = outcome["result"]
            return result
        told = stop_requested(thread_id)
        if told is not None or backstop is None:
            raise stopped_error(told or "cancelled", f"{stage} model call")
        raise _AttemptFailed(
            ProviderFailure(
                kind="transient",
                status=None,
                retry_after_s=None,
                detail=f"timed out (no answer in {time.monotonic() - started:.0f} s)",
            )
        )

    def _invoke(
        self,
        model: _Model,
        stage: str,
        schema: type[BaseModel],
        messages: Sequence[BaseMessage],
    ) -> dict[str, Any]:
        try:
            runnable = model.structured.get(schema)
            if runnable is None:  # built once per schema: binding tools is not free
                runnable = model.structured[schema] = _structured_runnable(model.chat, schema)
            result = runnable.invoke(list(messages))
        except Exception as exc:
            # Classified, never re-raised: the original exception's text is not redacted
            # and would reach logs through the traceback chain.
            raise _AttemptFailed(classify(exc, now=self._clock)) from None
        if not isinstance(result, dict):
            raise ModelError(
                f"model {model.spec} returned {type(result).__name__} instead of the "
                "include_raw result; this is a bug in the chat model's with_structured_output"
            )
        return result

    def _record(
        self,
        model: _Model,
        thread_id: str,
        stage: str,
        raw: Any,
        estimated_input: int,
        estimated_output: int,
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
        price = model.price
        usd = cost_usd(price, input_tokens, output_tokens) if price is not None else 0.0
        self.last_usage = Usage(
            input_tokens=input_tokens, output_tokens=output_tokens, usd_cost=usd
        )
        db.record_usage(
            self._ledger,
            thread_id=thread_id,
            stage=stage,
            model=model.spec,
            billing_mode=self._mode.value,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            usd_cost=usd,
            recorded_at=self._clock(),
            outbox=self._outbox,
            estimated=raw is None,  # no reply: our estimate, and no answer
        )

    def _redact(self, text: str) -> str:
        return _shorten(redact(text, self._secrets))


def _structured_runnable(chat: BaseChatModel, schema: type[BaseModel]) -> Runnable[Any, Any]:
    """`with_structured_output` by tool calling, with the raw reply kept for its usage.

    Tool calling is asked for explicitly where the client takes a `method`
    (ChatOpenAI and ChatOllama default to a JSON-schema response format that
    gateways and local servers often lack); every provider supports tools.
    """
    if "method" in inspect.signature(chat.with_structured_output).parameters:
        return chat.with_structured_output(schema, include_raw=True, method="function_calling")
    return chat.with_structured_output(schema, include_raw=True)
