"""The Slack listener's answers: parse, check the sender, claim the event, answer in the ledger.

The handlers (thread replies, buttons, the revise modal) stay thin
(docs/architecture.md §8): parse, check the sender, then the one answer path every
transport uses (`TaskRequests.answer` through the coordinator, so the worker
wakes at once). What they say back goes to `FollowUps`, after the ack.

Deliveries are de-duplicated by `event_id` in the ledger (`seen_events`):
Slack retries a slow delivery with `X-Slack-Retry-Num`, and a retry after a
restart is still recognised. The id is written when the event changed
something or earned a reply (the winning answer, in the same lock as its
compare-and-set; a refused answer's help text, or the refusal of a role or
of someone who is not allowed, each audited once people exist); a retry of the winner
then finds its question answered and its id claimed. Events we ignore (chatter,
bots, edits) and late answers, which only earn a private note, cost no write:
their de-dup is a read plus an in-memory set.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from agent_team import db
from agent_team.exceptions import (
    AccessDeniedError,
    InvalidAnswerError,
    QuestionClosedError,
    UnknownTaskError,
)
from agent_team.integrations.slack.blocks import (
    BUTTON_ANSWERS,
    REVISE_ACTION,
    REVISE_BLOCK,
    REVISE_CALLBACK,
    REVISE_INPUT,
)
from agent_team.integrations.slack.followups import FollowUps
from agent_team.integrations.slack.settings import SlackSettings
from agent_team.integrations.slack.transport import SlackTransport, split_ref
from agent_team.requests.actors import Actor
from agent_team.requests.answers import closed_message, parse_answer
from agent_team.requests.roles import authorize
from agent_team.requests.task_requests import TaskRequests
from agent_team.task_model import QuestionStatus

__all__ = ["AnswerFn", "AnswerHandler"]

log = logging.getLogger(__name__)

RECENT_EVENTS = 10_000  # event ids remembered in memory for private-note de-dup
# Message subtypes that are still a person writing in the thread; the rest (edits,
# deletes, joins, bot messages, ...) are ignored.
_ANSWER_SUBTYPES = frozenset({"thread_broadcast", "file_share"})
_LEADING_MENTION = re.compile(r"^\s*<@[A-Z0-9]+>\s*[:,]?\s*")
# Slack's formatting of what people type ("Escaping text", api.slack.com/reference/surfaces/
# formatting#escaping): links arrive as `<url>` or `<url|label>`, and `& < >` as entities.
# Mentions (`<@U..>`), channels (`<#C..>`) and specials (`<!here>`) are left as they are.
_LINK = re.compile(r"<([^<>|@#!][^<>|]*)(?:\|[^<>]*)?>")
_ENTITY = re.compile(r"&(lt|gt|amp);")
_ENTITIES = {"lt": "<", "gt": ">", "amp": "&"}


class AnswerFn(Protocol):
    """`Coordinator.answer`'s shape: records the answer or raises like `TaskRequests.answer`."""

    def __call__(self, question_id: str, text: str, *, via: str) -> db.Question: ...


class AnswerHandler:
    """Bolt's message, button and modal handlers; each answer is one write under one lock."""

    def __init__(
        self,
        settings: SlackSettings,
        transport: SlackTransport,
        followups: FollowUps,
        *,
        clock: Callable[[], datetime],
        answer: AnswerFn | None = None,
    ) -> None:
        self.transport = transport
        self.followups = followups
        self.clock = clock
        self._answer_fn: AnswerFn = answer or self._answer_in_ledger
        self._recent: OrderedDict[str, None] = OrderedDict()
        self._recent_lock = threading.Lock()
        if not settings.allowed_users:
            log.warning(
                "AGENT_TEAM_SLACK_ALLOWED_USERS is empty: nobody can answer questions in Slack "
                "unless people with a Slack id are set up (agent-team people add NAME --role "
                "ROLE --slack ID)"
            )

    def on_message(
        self, event: dict[str, Any], body: dict[str, Any], context: dict[str, Any]
    ) -> None:
        user = event.get("user")
        subtype = event.get("subtype")
        if subtype and subtype not in _ANSWER_SUBTYPES:
            log.info("slack message ignored: subtype %s", subtype)
            return
        if event.get("bot_id") or not isinstance(user, str) or user == context.get("bot_user_id"):
            log.info("slack message ignored: from a bot")
            return
        thread_ts, channel = event.get("thread_ts"), event.get("channel")
        if not isinstance(thread_ts, str) or not isinstance(channel, str):
            return  # a top-level channel message: not an answer
        if thread_ts == event.get("ts"):
            return
        ref = f"{channel}:{thread_ts}"
        text = _as_written(_LEADING_MENTION.sub("", str(event.get("text") or "")).strip())
        found = db.find_open_question_kind_by_channel_ref(self.transport.ledger, ref)
        if found is None:
            self._reply_to_closed(ref, user, text, channel, thread_ts, _event_id(body))
            return
        question_id, kind = found
        event_id = _event_id(body)
        if not self.transport.answerers().may_answer(user):
            if self._claim(event_id):
                self._audit_stranger(user, question_id, kind)
                self.followups.later(self.followups.not_allowed, channel, user, thread_ts)
            return
        # A retry of a delivery we acted on finds its question answered (closed path
        # below) or, if it was refused, its claim; the winning claim is written after
        # the answer, so a failure before that leaves Slack's retry to be processed.
        self._answer(question_id, text, user, channel, thread_ts, event_id=event_id)

    def _reply_to_closed(
        self, ref: str, user: str, text: str, channel: str, thread_ts: str, event_id: str | None
    ) -> None:
        """A reply under a question that no longer takes answers.

        People talk in these threads after the fact, so only a message that
        *reads* as an answer, from someone allowed to answer, gets the
        "already answered by ..." note; the rest is conversation and ignored.
        """
        question = db.find_question_by_channel_ref(self.transport.ledger, ref)
        if question is None or not self.transport.answerers().may_answer(user):
            log.info("slack reply ignored: %s is not an open question", ref)
            return
        try:
            parse_answer(question.kind, text)
        except InvalidAnswerError:
            return
        if self._repeat(event_id):
            return
        self.followups.note_later(channel, user, thread_ts, closed_message(question))

    def on_action(
        self, ack: Callable[..., None], body: dict[str, Any], action: dict[str, Any]
    ) -> None:
        ack()
        user = str((body.get("user") or {}).get("id") or "")
        container = body.get("container") or {}
        channel = str(container.get("channel_id") or (body.get("channel") or {}).get("id") or "")
        message_ts = str(container.get("message_ts") or (body.get("message") or {}).get("ts") or "")
        question_id = str(action.get("value") or "")
        action_id = str(action.get("action_id") or "")
        log.info("slack button %s on %s by %s", action_id, question_id or "-", user or "-")
        if not user or not channel or not message_ts or not question_id:
            log.warning("slack button ignored: incomplete payload")
            return
        question = db.get_question(self.transport.ledger, question_id)
        if not self.transport.answerers().may_answer(user):
            if question is not None:
                self._audit_stranger(user, question_id, question.kind)
            self.followups.later(self.followups.not_allowed, channel, user, message_ts)
            return
        ref = f"{channel}:{message_ts}"
        if question is None:
            self.followups.later(
                self.followups.ephemeral,
                channel,
                user,
                message_ts,
                "unknown question; nothing changed",
            )
            return
        # Only the question's recorded post takes answers: a NULL channel_ref (reopened,
        # not yet posted again) matches no message, least of all an old one.
        if question.channel_ref != ref:
            self.followups.later(
                self.followups.ephemeral,
                channel,
                user,
                message_ts,
                f"this message is out of date: question {question_id} was posted again; "
                "answer the newest post",
            )
            return
        if question.status != QuestionStatus.OPEN:
            # Already decided (the common case in a burst of clicks): no write, no second read.
            self.followups.note_later(channel, user, message_ts, closed_message(question))
            return
        if action_id == REVISE_ACTION:
            trigger = str(body.get("trigger_id") or "")
            self.followups.later(self.followups.open_modal, trigger, question, ref, user)
            return
        text = BUTTON_ANSWERS.get(action_id)
        if text is None:
            log.warning("slack button %s is not one of ours", action_id)
            return
        self._answer(question_id, text, user, channel, message_ts)

    def on_revise_submit(
        self, ack: Callable[..., None], body: dict[str, Any], view: dict[str, Any]
    ) -> None:
        user = str((body.get("user") or {}).get("id") or "")
        question_id, _, ref = str(view.get("private_metadata") or "").partition("|")
        values = ((view.get("state") or {}).get("values") or {}).get(REVISE_BLOCK) or {}
        feedback = str((values.get(REVISE_INPUT) or {}).get("value") or "").strip()
        log.info("slack modal %s on %s by %s", REVISE_CALLBACK, question_id or "-", user or "-")
        if not self.transport.answerers().may_answer(user):
            ack(
                response_action="errors",
                errors={REVISE_BLOCK: "You are not allowed to answer this."},
            )
            return
        try:
            channel, thread_ts = split_ref(ref)
        except ValueError:
            ack(response_action="errors", errors={REVISE_BLOCK: "This form is out of date."})
            return
        question = db.get_question(self.transport.ledger, question_id)
        if question is not None and question.channel_ref != ref:
            # Like a button: only the question's recorded post takes answers.
            ack(
                response_action="errors",
                errors={
                    REVISE_BLOCK: "This form is out of date: the question was posted "
                    "again; answer the newest post."
                },
            )
            return
        problem = self._answer(
            question_id, f"revise {feedback}", user, channel, thread_ts, quiet=True
        )
        if problem:
            ack(response_action="errors", errors={REVISE_BLOCK: problem[:150]})
        else:
            ack()

    def _audit_stranger(self, user: str, question_id: str, kind: str) -> None:
        """Record who tried, as the request path records a refusal (`roles.authorize`).

        Someone Slack's allow-list refuses never reaches `TaskRequests`, so once people
        decide who answers, a Slack id nobody holds would be refused unrecorded. Before
        anyone is set up roles do not apply and nothing is written, as before.
        """
        try:
            authorize(self.transport.ledger, Actor(user, "slack"), f"answer:{kind}", question_id)
        except AccessDeniedError:
            pass  # audited; `not_allowed` tells them how to be added

    def _answer_in_ledger(self, question_id: str, text: str, *, via: str) -> db.Question:
        return TaskRequests(self.transport.ledger, clock=self.clock).answer(
            question_id, text, via=via
        )

    def _answer(
        self,
        question_id: str,
        text: str,
        user: str,
        channel: str,
        thread_ts: str,
        *,
        quiet: bool = False,
        event_id: str | None = None,
    ) -> str | None:
        """Record the answer; returns the problem (bad or late answer), or None if it won.

        With `quiet` (the modal) the problem is shown in the form instead of
        Slack. `event_id` (thread replies) keeps Slack's retries from being
        told twice.
        """
        try:
            question = self._answer_fn(question_id, text, via=f"slack:{user}")
            if event_id:
                self._claim_won(event_id, question_id)
        except AccessDeniedError as exc:  # their role may not (audited on the request path)
            log.info("slack answer to %s by %s refused: %s", question_id, user, exc)
            if not quiet and self._claim(event_id):
                self.followups.later(self.followups.refused, channel, user, thread_ts, str(exc))
            return str(exc)
        except InvalidAnswerError as exc:
            log.info("slack answer to %s by %s refused: %s", question_id, user, exc)
            if not quiet and self._claim(event_id):
                self.followups.later(
                    self.followups.bad_answer, question_id, user, channel, thread_ts, str(exc)
                )
            return str(exc)
        except (QuestionClosedError, UnknownTaskError) as exc:
            log.info("slack answer to %s by %s came too late", question_id, user)
            if not quiet and not self._repeat(event_id):
                self.followups.note_later(channel, user, thread_ts, str(exc))
            return str(exc)
        log.info("slack answer to %s by %s won", question_id, user)
        self.followups.later(self.followups.show_outcome, question, user)
        return None

    def _claim(self, event_id: str | None) -> bool:
        """Record in the ledger that this delivery was acted on; False if it already was."""
        if not event_id:
            return True
        first = db.claim_event(
            self.transport.ledger, source="slack", event_id=event_id, now=self.clock()
        )
        if not first:
            log.info("slack event %s already handled; acking the redelivery", event_id)
        return first

    def _claim_won(self, event_id: str, question_id: str) -> None:
        """Record the winning delivery's id; the answer is already committed.

        A failure here must not turn into a 500 (Slack would retry an answer
        that is stored) nor skip the outcome: log it and go on. A retry then
        finds the question answered and gets the "already answered" path.
        """
        try:
            db.claim_event(
                self.transport.ledger, source="slack", event_id=event_id, now=self.clock()
            )
        except Exception:
            log.exception(
                "slack event %s: the answer to %s is stored but its event id was not recorded",
                event_id,
                question_id,
            )

    def _repeat(self, event_id: str | None) -> bool:
        """A delivery seen before: claimed in the ledger, or already met in this process.

        For replies that only earn a private note: a repeated note after a
        restart is harmless, so these cost a read, not a write.
        """
        if not event_id:
            return False
        with self._recent_lock:
            if event_id in self._recent:
                return True
            self._recent[event_id] = None
            if len(self._recent) > RECENT_EVENTS:
                self._recent.popitem(last=False)
        return db.event_seen(self.transport.ledger, source="slack", event_id=event_id)


def _as_written(text: str) -> str:
    """A message's text as the person typed it: links to their URL, entities unescaped.

    One pass over the entities, so `&amp;lt;` becomes `&lt;` (what was typed), not `<`.
    """
    text = _LINK.sub(lambda m: m.group(1), text)
    return _ENTITY.sub(lambda m: _ENTITIES[m.group(1)], text)


def _event_id(body: dict[str, Any]) -> str | None:
    event_id = body.get("event_id")
    return event_id if isinstance(event_id, str) and event_id else None
