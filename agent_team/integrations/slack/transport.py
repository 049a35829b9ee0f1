"""The Slack transport: questions become Block Kit messages, notices go into their threads.

Every post is a side effect recorded in the ledger before and after the call
(docs/architecture.md §4), keyed so that a crash or a second delivery pass never posts
twice: `slack:post:<question>:<n>` (n counts reopenings), `slack:notify:
<task>:<event>:<occurrence>:<digest>` (a new occurrence of the same notice,
after a retry, is posted again), `slack:remind:<question>:<posted_at>:<fraction>`,
`slack:outcome:<question>`, `slack:superseded:<question>:<n>`. A post that
failed or was cut off before its result was saved is tried again; Slack
gives no idempotency key, so that one case is at-least-once.

The answers coming back (thread replies, buttons, the modal) are handled by
`ingress.SlackListener`; this module is the outbound half.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
)

from agent_team import db
from agent_team.common.redact import redact, redact_deep, tail
from agent_team.common.testhooks import wall_clock
from agent_team.common.timefmt import utc_text
from agent_team.config import Settings
from agent_team.exceptions import ConfigError
from agent_team.integrations.slack.answerers import SlackAnswerers
from agent_team.integrations.slack.blocks import (
    closed_blocks,
    escape,
    mention,
    outcome_line,
    question_blocks,
    question_fallback,
)
from agent_team.integrations.slack.settings import SlackSettings
from agent_team.reports.plandiff import PlanVersion, plan_versions
from agent_team.task_model import EffectState, QuestionKind, QuestionStatus

__all__ = [
    "POST_KIND",
    "SlackTransport",
    "build_slack_transport",
    "make_web_client",
    "require_slack_settings",
    "split_ref",
]

log = logging.getLogger(__name__)

POST_KIND = "slack.post"
NOTIFY_KIND = "slack.notify"
QUIET_EVENTS = frozenset({"started", "waiting"})  # the question itself is the message
TERMINAL_EVENTS = frozenset({"done", "failed", "cancelled"})
OUTCOME_WINDOW = timedelta(days=2)  # how far back `reconcile_answered` looks
OUTCOME_GRACE = timedelta(seconds=60)  # the listener's own redraw gets this long first


def require_slack_settings(settings: SlackSettings) -> None:
    """Refuse to start a Slack transport that could not work, naming every missing variable.

    Raises:
        ConfigError: a required setting is missing.
    """
    missing = []
    if settings.bot_token is None:
        missing.append("AGENT_TEAM_SLACK_BOT_TOKEN")
    if not settings.channel:
        missing.append("AGENT_TEAM_SLACK_CHANNEL")
    if settings.app_token is None and settings.signing_secret is None:
        missing.append("AGENT_TEAM_SLACK_SIGNING_SECRET (or AGENT_TEAM_SLACK_APP_TOKEN)")
    if missing:
        raise ConfigError(
            f"AGENT_TEAM_TRANSPORT=slack needs {', '.join(missing)}; set them "
            "(see the Slack section of the README) or use AGENT_TEAM_TRANSPORT=local"
        )


def make_web_client(settings: SlackSettings, token: str | None = None) -> WebClient:
    """The Web API client: our base URL, and 429s retried after Slack's `Retry-After`."""
    base_url = settings.api_url
    if not base_url.endswith("/"):
        base_url += "/"
    if token is None and settings.bot_token is not None:
        token = settings.bot_token.get_secret_value()
    return WebClient(
        token=token,
        base_url=base_url,
        timeout=10,
        retry_handlers=[
            ConnectionErrorRetryHandler(max_retry_count=1),
            RateLimitErrorRetryHandler(max_retry_count=3),
        ],
    )


def split_ref(channel_ref: str) -> tuple[str, str]:
    """`<channel_id>:<ts>` -> (channel, ts)."""
    channel, _, ts = channel_ref.partition(":")
    if not channel or not ts:
        raise ValueError(f"{channel_ref!r} is not a Slack channel_ref (<channel>:<ts>)")
    return channel, ts


# What the task does next, said under an answered question (default: it resumes).
_THEN = {
    "reject": "The task stops here.",
    "closed": "The task stops here.",
    "merged": "The task goes on after the merge.",
    "feedback": "Acting on the feedback.",
    "ci_failed": "A person decides what to do next.",
    "fix": "The agent makes one follow-up commit.",
    "ignore": "The agent leaves the pull request as it is and keeps following it.",
    "takeover": "The agent stops working on this pull request; the task ends when it is "
    "merged or closed.",
}


def _then(decision: Any) -> str:
    return _THEN.get(str(decision), "Resuming the task.")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


class SlackTransport:
    """Posts questions, outcomes, reminders and task notices; safe to share between threads."""

    name = "slack"
    posts = True

    def __init__(
        self,
        settings: SlackSettings,
        *,
        client: WebClient | None = None,
        clock: Callable[[], datetime] | None = None,
        ledger: db.Ledger | None = None,
    ) -> None:
        require_slack_settings(settings)
        self.settings = settings
        self.channel: str = settings.channel or ""
        self.client = client or make_web_client(settings)
        self.clock: Callable[[], datetime] = clock or wall_clock
        self._secrets = [
            s.get_secret_value()
            for s in (
                settings.bot_token,
                settings.signing_secret,
                settings.app_token,
            )
            if s is not None
        ]
        self._ledger: db.Ledger | None = ledger
        self._owns_ledger = ledger is None  # standing alone, it opens one on first use
        self._ledger_lock = threading.Lock()

    # -- plumbing ------------------------------------------------------------------------

    @property
    def ledger(self) -> db.Ledger:
        """The process's ledger, or one of its own opened on first use."""
        with self._ledger_lock:
            if self._ledger is None:
                self._ledger = db.open_ledger(self.settings.ledger_target)
            return self._ledger

    def answerers(self) -> SlackAnswerers:
        """Who may answer, read now: people with a Slack id, else the allow-list."""
        return SlackAnswerers(self.ledger, self.settings.allowed_users)

    def close(self) -> None:
        with self._ledger_lock:
            if self._owns_ledger and self._ledger is not None:
                self._ledger.close()
                self._ledger = None

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """One Web API call, logged by method and channel (never the token or the text).

        Every Web API call of the process goes through here (posts, redraws, thread
        acks, reminders, notices, digests, private notes, modals), so this is where
        the one redaction rule is applied to what Slack is sent: a token pasted into
        a task must not reach the channel (issue #17).
        """
        where = params.get("channel", "")
        params = redact_deep(params, self._secrets)
        try:
            response = self.client.api_call(method, json=params)
        except SlackApiError as exc:
            error = exc.response.get("error", "error") if exc.response is not None else "error"
            log.warning("slack %s %s -> %s", method, where, redact(str(error), self._secrets))
            raise
        except Exception as exc:
            log.warning("slack %s %s failed: %s", method, where, redact(f"{exc!r}", self._secrets))
            raise
        log.info("slack %s %s -> ok", method, where)
        return dict(response.data) if isinstance(response.data, dict) else {}

    def once(
        self,
        effect_id: str,
        *,
        task_id: str,
        kind: str,
        request: Any,
        do: Callable[[], tuple[str | None, Any]],
    ) -> db.SideEffect:
        """Run `do` unless the effect is done; record `(result_ref, result)` or the error."""
        effect = db.begin_effect(
            self.ledger, effect_id=effect_id, task_id=task_id, kind=kind, request=request
        )
        if effect.state == EffectState.DONE:
            return effect
        try:
            ref, result = do()
        except Exception as exc:
            db.finish_effect(
                self.ledger,
                effect_id=effect_id,
                state=EffectState.FAILED.value,
                error=tail(redact(f"{type(exc).__name__}: {exc}", self._secrets), 500),
            )
            raise
        db.finish_effect(self.ledger, effect_id=effect_id, result_ref=ref, result=result)
        found = db.get_effect(self.ledger, effect_id)
        assert found is not None
        return found

    def post(self, channel: str, text: str, *, thread_ts: str | None = None, **extra: Any) -> str:
        """chat.postMessage; returns the new message's `<channel>:<ts>`."""
        params: dict[str, Any] = {"channel": channel, "text": text, "unfurl_links": False}
        if thread_ts:
            params["thread_ts"] = thread_ts
        params.update(extra)
        data = self.call("chat.postMessage", **params)
        return f"{data.get('channel') or channel}:{data.get('ts')}"

    # -- the Transport interface -----------------------------------------------------------

    def _posts(self, question_id: str, task_id: str) -> list[db.SideEffect]:
        posts = [
            effect
            for effect in db.list_effects(self.ledger, task_id=task_id, kind=POST_KIND)
            if isinstance(effect.request, dict) and effect.request.get("question_id") == question_id
        ]
        return sorted(posts, key=lambda effect: int(effect.request.get("n", 0)))

    def deliver(self, question: db.Question, task: db.Task) -> str:
        """Post the question, once per opening.

        An older post of a reopened question is marked superseded later, by
        `redraw_superseded`, once the coordinator has recorded this post as the
        question's `channel_ref`: "answer below" must never point at a post
        that a crash could leave unrecorded.
        """
        posts = self._posts(question.question_id, task.id)
        latest = posts[-1] if posts else None
        if latest is not None and latest.request.get("deadline_at") == question.deadline_at:
            if latest.state == EffectState.DONE and latest.result_ref:
                return latest.result_ref  # posted before a crash cost us `record_delivery`
            n = int(latest.request["n"])
        else:
            n = int(latest.request["n"]) + 1 if latest is not None else 1
        blocks = question_blocks(
            question, task, self.settings.dashboard_url, plans=self._plans(question)
        )

        def post() -> tuple[str, Any]:
            ref = self.post(self.channel, question_fallback(question, task), blocks=blocks)
            return ref, {"channel_ref": ref}

        effect = self.once(
            f"slack:post:{question.question_id}:{n}",
            task_id=task.id,
            kind=POST_KIND,
            request={
                "question_id": question.question_id,
                "deadline_at": question.deadline_at,
                "n": n,
            },
            do=post,
        )
        assert effect.result_ref is not None
        log.info(
            "task %s: question %s posted at %s", task.id, question.question_id, effect.result_ref
        )
        return effect.result_ref

    def _plans(self, question: db.Question) -> list[PlanVersion]:
        """The task's plan versions, for a plan question's "changed since" section."""
        if question.kind != QuestionKind.PLAN_DECISION:
            return []
        return plan_versions(db.list_questions(self.ledger, thread_id=question.thread_id))

    def redraw_superseded(self) -> int:
        """Take the buttons off older posts of reopened questions; returns how many now.

        Runs on the timer pass, after delivery was recorded: only a post other
        than the question's recorded `channel_ref` is superseded (a question
        with no `channel_ref` yet is left for a later pass). Once per old post
        (`slack:superseded:<question>:<n>`); a pass with nothing to do writes nothing.
        """
        redrawn = 0
        since = self.clock() - OUTCOME_WINDOW
        questions = [
            *db.list_questions(self.ledger, status=QuestionStatus.OPEN.value),
            *db.answered_since(self.ledger, since),
        ]
        for question in questions:
            if question.transport != self.name or not question.channel_ref:
                continue
            stale = [
                post
                for post in self._posts(question.question_id, question.thread_id)
                if post.result_ref and post.result_ref != question.channel_ref
            ]
            for old in stale:
                effect_id = f"slack:superseded:{question.question_id}:{old.request.get('n')}"
                effect = db.get_effect(self.ledger, effect_id)  # a read: most passes write nothing
                if effect is not None and effect.state == EffectState.DONE:
                    continue
                task = db.get_task(self.ledger, question.thread_id)
                if task is None:
                    break
                assert old.result_ref is not None
                redrawn += self._redraw_closed(
                    effect_id,
                    question,
                    old.result_ref,
                    task,
                    "↪️ Superseded: this question was reopened and posted again below; "
                    "answer there.",
                )
        return redrawn

    def task_thread(self, task_id: str) -> str | None:
        """The `<channel>:<ts>` of the task's newest question post, where its notices go."""
        posts = [
            effect
            for effect in db.list_effects(
                self.ledger, task_id=task_id, kind=POST_KIND, state="done"
            )
            if effect.result_ref
        ]
        return posts[-1].result_ref if posts else None

    def notify(self, task: db.Task, event: str, text: str) -> None:
        """Parked, done, failed, cancelled: one message per distinct notice, in the task thread."""
        if event in QUIET_EVENTS:
            return
        thread = self.task_thread(task.id)
        message = self._notice_text(task, event, text)
        channel, thread_ts = split_ref(thread) if thread else (self.channel, None)

        def post() -> tuple[str, Any]:
            return self.post(channel, message, thread_ts=thread_ts), None

        self.once(
            f"slack:notify:{task.id}:{event}:{self._occurrence(task)}:{_digest(text)}",
            task_id=task.id,
            kind=NOTIFY_KIND,
            request={"event": event},
            do=post,
        )
        if event == "parked" and task.parked_reason == "question_expired":
            self._show_expired(task)
        if event in TERMINAL_EVENTS:
            self._close_leftovers(task, event)

    def _occurrence(self, task: db.Task) -> str:
        """Which time this is: the newest transition and the task's `updated_at`.

        A retried task that parks (or fails) again with the same text is a new
        occurrence and is posted again; the same occurrence notified twice is not.
        """
        transitions = db.list_transitions(self.ledger, task.id)
        newest = max((t.transition_id for t in transitions), default=0)
        return _digest(f"{newest}|{task.updated_at}")

    def _close_leftovers(self, task: db.Task, event: str) -> None:
        """Questions the task ended without: their buttons go, so nobody answers into a void."""
        for question in db.list_questions(self.ledger, status="superseded", thread_id=task.id):
            if question.channel_ref:
                self._redraw_closed(
                    f"slack:closed:{question.question_id}",
                    question,
                    question.channel_ref,
                    task,
                    f"↪️ No longer needed: the task is {event}.",
                )

    def _redraw_closed(
        self, effect_id: str, question: db.Question, ref: str, task: db.Task, line: str
    ) -> bool:
        """Once per `effect_id`: the message at `ref` redrawn without buttons, `line` below.

        Returns True if the redraw is done (now or before), False if it failed.
        """
        channel, ts = split_ref(ref)
        blocks = closed_blocks(
            question, task, self.settings.dashboard_url, line, plans=self._plans(question)
        )

        def update() -> tuple[str, Any]:
            self.call("chat.update", channel=channel, ts=ts, text=line, blocks=blocks)
            return ref, None

        try:
            self.once(
                effect_id, task_id=task.id, kind="slack.update", request={"ts": ts}, do=update
            )
        except Exception:  # the message keeps its buttons; an answer there is refused anyway
            log.exception("could not redraw %s (%s)", ref, effect_id)
            return False
        return True

    def _notice_text(self, task: db.Task, event: str, text: str) -> str:
        body = escape(tail(text, 1500))
        title = f"*{escape(task.title)}* (task `{task.id}`)"
        if event == "parked":
            if task.parked_reason == "question_expired":
                line = f"⌛ {title} is parked: {body}. Nobody answered in time."
                if self.settings.escalate_to:
                    line += f" {mention(self.settings.escalate_to)}: please decide or reopen."
                return line
            if task.parked_reason == "budget_exhausted":
                how = "it continues by itself after midnight UTC, or raise the daily budget"
            elif task.parked_reason == "model_unavailable":
                when = f"at {utc_text(db.from_iso(task.resume_at))}" if task.resume_at else "soon"
                how = f"it continues by itself {when}, or now: `agent-team retry {task.id}`"
            elif task.parked_reason == "model_refused":
                how = (
                    "fix the API key or the model setting the message names, then "
                    f"`agent-team retry {task.id}`"
                )
            elif task.parked_reason == "repo_unavailable":
                how = (
                    "make the repository reachable (it exists, the address is right, the "
                    f"token may read it), then `agent-team retry {task.id}`"
                )
            else:
                how = (
                    f"fix the cause (`agent-team doctor` helps), then `agent-team retry {task.id}`"
                )
            return (
                f"⏸️ {title} is parked ({task.parked_reason or 'parked'}): {body}. To unpark: {how}."
            )
        if event == "done":
            return f"✅ {title} is done: {body}"
        if event == "failed":
            return f"❌ {title} failed: {body}"
        if event == "cancelled":
            return f"🛑 {title} was cancelled: {body}"
        return f"{title}: {event}: {body}"

    def _show_expired(self, task: db.Task) -> None:
        """Take the buttons off an expired question's message (it cannot be answered there)."""
        for question in db.list_questions(self.ledger, status="expired", thread_id=task.id):
            if question.channel_ref:
                self._redraw_closed(
                    f"slack:expired:{question.question_id}:{question.deadline_at}",
                    question,
                    question.channel_ref,
                    task,
                    "⌛ Expired: nobody answered before the deadline. An operator can reopen it.",
                )

    # -- outcomes --------------------------------------------------------------------------

    def show_outcome(self, question: db.Question) -> bool:
        """Redraw an answered question without its buttons (decision, who, when) and ack it.

        Once per question (`slack:outcome:<question>`). The listener calls it
        right after a winning Slack answer; `reconcile_answered` catches the
        rest (answers from the CLI or dashboard, a crash before the redraw).
        Returns True if the message was redrawn now.
        """
        if not question.channel_ref or question.status != QuestionStatus.ANSWERED:
            return False
        task = db.get_task(self.ledger, question.thread_id)
        if task is None:
            return False
        channel, ts = split_ref(question.channel_ref)
        when = db.from_iso(question.answered_at) if question.answered_at else self.clock()
        line = outcome_line(question.answer, question.answered_via, when)
        blocks = closed_blocks(
            question, task, self.settings.dashboard_url, line, plans=self._plans(question)
        )
        done_now = False

        def show() -> tuple[str, Any]:
            nonlocal done_now
            self.call("chat.update", channel=channel, ts=ts, text=line, blocks=blocks)
            decision = (
                question.answer.get("decision") if isinstance(question.answer, dict) else None
            )
            self.post(channel, f"{line}. {_then(decision)}", thread_ts=ts)
            done_now = True
            return question.channel_ref or "", None

        self.once(
            f"slack:outcome:{question.question_id}",
            task_id=task.id,
            kind="slack.update",
            request={"via": question.answered_via},
            do=show,
        )
        return done_now

    def reconcile_answered(
        self, now: datetime | None = None, *, listening_since: datetime | None = None
    ) -> int:
        """Redraw recently answered questions whose message still shows buttons.

        Slack answers are redrawn by the listener within seconds, so they are
        left alone for `OUTCOME_GRACE`; answers from elsewhere at once. A Slack
        answer recorded before `listening_since` (when this process's listener
        was built) is in no listener's hands: its follow-up died with the
        process that acked it, so it is redrawn at once too, at start-up
        rather than a minute later (issue #17).
        """
        now = now or self.clock()
        redrawn = 0
        for question in db.answered_since(self.ledger, now - OUTCOME_WINDOW):
            if question.transport != self.name or not question.channel_ref:
                continue
            effect = db.get_effect(self.ledger, f"slack:outcome:{question.question_id}")
            if effect is not None and effect.state == EffectState.DONE:
                continue
            answered = db.from_iso(question.answered_at) if question.answered_at else now
            from_slack = (question.answered_via or "").startswith("slack:")
            orphaned = listening_since is not None and answered < listening_since
            if from_slack and not orphaned and now - answered < OUTCOME_GRACE:
                continue
            try:
                redrawn += int(self.show_outcome(question))
            except Exception as exc:
                if db.is_outage(exc):  # every other question would fail the same way
                    log.warning("slack redraws wait for the ledger: %s", exc)
                    break
                log.exception("could not redraw answered question %s", question.question_id)
        return redrawn

    # -- reminders ---------------------------------------------------------------------------

    def remind_due(self, now: datetime | None = None) -> int:
        """Post the reminders that are due (once each); returns how many were posted.

        A reminder is due at `posted_at + fraction * (deadline - posted_at)`.
        When several fell due at once (the daemon was down), only the latest
        is posted and the earlier ones are recorded as skipped.
        """
        now = now or self.clock()
        posted_count = 0
        fractions = self.settings.reminder_fractions
        for question in db.list_questions(self.ledger, status=QuestionStatus.OPEN.value):
            if question.transport != self.name or not question.channel_ref:
                continue
            if not question.posted_at or not question.deadline_at:
                continue
            posted, deadline = db.from_iso(question.posted_at), db.from_iso(question.deadline_at)
            span = deadline - posted
            if span.total_seconds() <= 0 or now >= deadline:
                continue
            due = [f for f in fractions if now >= posted + span * f]
            try:
                posted_count += self._remind_question(question, due, deadline, now)
            except Exception as exc:  # Slack down or refusing: the next pass tries again
                if db.is_outage(exc):  # every other question would fail the same way
                    log.warning("slack reminders wait for the ledger: %s", exc)
                    break
                log.exception("reminder for %s failed", question.question_id)
        return posted_count

    def _remind_question(
        self, question: db.Question, due: list[float], deadline: datetime, now: datetime
    ) -> int:
        """Post the latest due reminder of one question if not yet posted; mark the rest skipped."""
        posted = 0
        for fraction in due:
            effect_id = f"slack:remind:{question.question_id}:{question.posted_at}:{fraction:g}"
            effect = db.get_effect(self.ledger, effect_id)  # a read: most passes write nothing
            if effect is not None and effect.state == EffectState.DONE:
                continue
            if fraction != due[-1]:
                do: Callable[[], tuple[str | None, Any]] = lambda: (None, {"skipped": True})  # noqa: E731
            else:
                do = partial(self._remind, question, deadline, now)
                posted += 1
            self.once(
                effect_id,
                task_id=question.thread_id,
                kind="slack.remind",
                request={"fraction": fraction},
                do=do,
            )
        return posted

    def _remind(self, question: db.Question, deadline: datetime, now: datetime) -> tuple[str, Any]:
        assert question.channel_ref is not None
        channel, ts = split_ref(question.channel_ref)
        left = deadline - now
        hours = left.total_seconds() / 3600
        when = f"{hours:.1f} h" if hours >= 1 else f"{max(1, int(left.total_seconds() // 60))} min"
        answerers = self.answerers()
        who = mention(answerers.for_kind(question.kind))
        if not who:
            who = f"(nobody may answer yet: {answerers.hint()})"
        text = (
            f"⏰ Reminder {who}: this question is still open and expires in {when} "
            f"(question `{question.question_id}`)."
        )
        return self.post(channel, text, thread_ts=ts), None


def build_slack_transport(
    settings: Settings,
    *,
    ledger: db.Ledger | None = None,
    clock: Callable[[], datetime] | None = None,
) -> SlackTransport:
    """The one place a Slack transport is built from `Settings` (wiring and the integration).

    Raises:
        ConfigError: a Slack setting it needs is missing (each is named).
    """
    return SlackTransport(SlackSettings.from_settings(settings), clock=clock, ledger=ledger)
