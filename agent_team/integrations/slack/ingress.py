"""The Slack listener: Events API / interactivity requests in, answers to the ledger out.

One slack-bolt `App` serves both modes: HTTP (`POST /slack/events` on the
daemon's own server, Bolt's signature check on) and Socket Mode (when an
app-level token is set). Handlers stay thin (DESIGN.md §7): parse, check the
sender, then the one answer path every transport uses (`inbox.submit_answer`
through the coordinator, so the worker wakes at once).

Why `process_before_response=True`: the handler's own work before the
response is a ledger lookup and the answer's compare-and-set (milliseconds),
so Slack gets its 200 after the answer is durable and a crash can never ack
an answer that was not stored. Everything that talks back to Slack
(`chat.update`, thread acks, ephemerals, `views.open`) runs afterwards on a
small thread pool, so a slow or rate-limited Web API never delays the ack
past Slack's 3 s.

Deliveries are de-duplicated by `event_id` in the ledger (`seen_events`):
Slack retries a slow delivery with `X-Slack-Retry-Num`, and a retry after a
restart is still recognised. The id is written when the event changed
something or earned a public reply (the winning answer, in the same lock as
its compare-and-set; a refused answer's help text); a retry of the winner
then finds its question answered and its id claimed. Events we ignore (chatter,
bots, edits) and late answers, which only earn a private note, cost no write:
their de-dup is a read plus an in-memory set.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from datetime import datetime
from typing import Any, Protocol

from slack_bolt import App, BoltRequest, BoltResponse
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_bolt.error import BoltError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agent_team import db, inbox
from agent_team.answers import PLAN_DECISION_HELP, PUBLISH_HELP, parse_answer
from agent_team.config import Settings
from agent_team.exceptions import (
    ConfigError,
    InvalidAnswerError,
    QuestionClosedError,
    UnknownTaskError,
)
from agent_team.integrations.slack.blocks import (
    ACTION_PREFIX,
    BUTTON_ANSWERS,
    REVISE_ACTION,
    REVISE_BLOCK,
    REVISE_CALLBACK,
    REVISE_INPUT,
    escape,
    revise_modal,
)
from agent_team.integrations.slack.transport import SlackTransport, make_web_client, split_ref
from agent_team.task_model import QuestionKind, QuestionStatus

__all__ = ["EVENTS_PATH", "AnswerFn", "SlackListener"]

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
TIMERS_S = 30.0  # how often the timer loop looks for due reminders and missed redraws
RECENT_EVENTS = 10_000  # event ids remembered in memory for private-note de-dup
STALE_AFTER_S = 300  # Slack's rule: a request older than 5 minutes is a replay
MAX_BODY = 1_000_000  # Slack's payloads are a few KB; refuse anything absurd before parsing
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
_HELP = {
    QuestionKind.CLARIFY.value: "reply in this thread with the missing details",
    QuestionKind.PLAN_DECISION.value: PLAN_DECISION_HELP,
    QuestionKind.CONFLUENCE_APPROVAL.value: PUBLISH_HELP,
}


class AnswerFn(Protocol):
    """`Coordinator.answer`'s shape: records the answer or raises like `inbox.submit_answer`."""

    def __call__(self, question_id: str, text: str, *, via: str) -> db.Question: ...


class SlackListener:
    """Bolt app + handlers; `route()` for HTTP mode, `socket_mode_handler()` for Socket Mode."""

    def __init__(
        self,
        settings: Settings,
        transport: SlackTransport,
        *,
        answer: AnswerFn | None = None,
        clock: Callable[[], datetime] | None = None,
        followup_workers: int = 4,
        dispatch_workers: int = 4,
        verify_token: bool = False,
    ) -> None:
        """Build the app and its handlers.

        Args:
            verify_token: call `auth.test` now (the daemon does, before READY).
                Without it Bolt calls `auth.test` on the first request, and if
                that call fails it acks the request and drops it: an answer lost.

        Raises:
            ConfigError: `verify_token` and Slack refused the bot token or could not be reached.
        """
        self.settings = settings
        self.transport = transport
        self.clock: Callable[[], datetime] = clock or transport.clock
        self._answer_fn: AnswerFn = answer or self._answer_in_ledger
        self.allowed = frozenset(settings.slack_allowed_users)
        self.socket_mode = settings.slack_app_token is not None
        secret = settings.slack_signing_secret
        self._signing_secret = secret.get_secret_value() if secret is not None else ""
        # First, before any thread starts: with `verify_token` this is where a bad token stops us.
        self.app = _build_app(
            transport, self._signing_secret, socket_mode=self.socket_mode, verify=verify_token
        )
        self._pool = ThreadPoolExecutor(
            max_workers=followup_workers, thread_name_prefix="agent-team-slack"
        )
        self._notes_pool = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="agent-team-slack-n"
        )
        # Bolt's dispatch runs here, not on the server's 40-thread default pool: the work is
        # a few ms of CPU and SQLite, so more threads only add GIL and lock contention
        # (and starve the worker that resumes the task) without acking any sooner.
        self._dispatch_pool = ThreadPoolExecutor(
            max_workers=dispatch_workers, thread_name_prefix="agent-team-slack-in"
        )
        self._pending: set[Future[None]] = set()
        self._pending_lock = threading.Lock()
        # The listener's own ledger writes (event claims, answers) queue here instead of in
        # SQLite: a writer that finds the file locked sleeps in SQLite's busy handler (1 ms,
        # then 2, 5, 10 ... 100 ms), which under a burst of 50 answers costs far more than
        # the few milliseconds each write takes.
        self._write_lock = threading.Lock()
        self._recent: OrderedDict[str, None] = OrderedDict()
        self._recent_lock = threading.Lock()
        self._register()
        if not self.allowed:
            log.warning(
                "AGENT_TEAM_SLACK_ALLOWED_USERS is empty: nobody can answer questions in Slack"
            )

    # -- wiring ----------------------------------------------------------------------------

    def _register(self) -> None:
        app = self.app
        app.middleware(self._log_request)
        app.event("message")(self._on_message)
        app.action(re.compile(rf"^{re.escape(ACTION_PREFIX)}"))(self._on_action)
        app.view(REVISE_CALLBACK)(self._on_revise_submit)
        app.event(re.compile(".*"))(self._on_other_event)

    def route(self) -> Route:
        """`POST /slack/events` for the daemon's Starlette app."""
        return Route(EVENTS_PATH, self.handle_http, methods=["POST"], name="slack_events")

    def socket_mode_handler(self) -> SocketModeHandler:
        """Built, not connected: `connect()` opens the WebSocket (the daemon's loop does)."""
        token = self.settings.slack_app_token
        if token is None:
            raise ValueError("Socket Mode needs AGENT_TEAM_SLACK_APP_TOKEN")
        app_token = token.get_secret_value()
        return SocketModeHandler(
            self.app, app_token, web_client=make_web_client(self.settings, token=app_token)
        )

    def run_socket_mode(self, stop: threading.Event, beat: Callable[[], None]) -> None:
        """The daemon's Socket Mode loop: connect, beat until `stop`, disconnect."""
        handler = self.socket_mode_handler()  # starts the client's threads already
        try:
            # Inside the try: a failed connect must still close the handler, or every
            # supervisor restart of this loop leaks its threads.
            handler.connect()  # type: ignore[no-untyped-call]  # the WebSocket runs in its threads
            while not stop.wait(5.0):
                beat()
        finally:
            handler.close()  # type: ignore[no-untyped-call]

    def run_timers(
        self, stop: threading.Event, beat: Callable[[], None], every_s: float = TIMERS_S
    ) -> None:
        """The daemon's Slack timer loop: reminders, late and superseded redraws; on stop, drain."""
        try:
            while not stop.is_set():
                self.transport.remind_due()
                self.transport.reconcile_answered()
                self.transport.redraw_superseded()
                beat()
                stop.wait(every_s)
        finally:
            if stop.is_set():
                self.drain(5.0)
                self.close()

    def close(self) -> None:
        self._dispatch_pool.shutdown(wait=True, cancel_futures=False)
        self._pool.shutdown(wait=True, cancel_futures=False)
        self._notes_pool.shutdown(wait=True, cancel_futures=False)

    def drain(self, timeout_s: float = 10.0) -> bool:
        """Wait for the follow-up calls queued so far (tests and shutdown)."""
        with self._pending_lock:
            pending = list(self._pending)
        _done, not_done = wait(pending, timeout=timeout_s)
        return not not_done

    def _note_later(self, channel: str, user: str, thread_ts: str, text: str) -> None:
        """A private note to someone who answered too late: one at a time, off the hot path.

        A stampede of clicks produces one note per click; sending them on
        their own single thread keeps them from competing for the CPU with
        the acks and with the winning answer's resume.
        """
        self._later(self._ephemeral, channel, user, thread_ts, text, pool=self._notes_pool)

    def _later(
        self, fn: Callable[..., None], *args: Any, pool: ThreadPoolExecutor | None = None
    ) -> None:
        def run() -> None:
            try:
                fn(*args)
            except Exception:  # a follow-up message must never take the listener down
                log.exception("slack follow-up %s failed", getattr(fn, "__name__", fn))

        try:
            future = (pool or self._pool).submit(run)
        except RuntimeError:  # shutting down: the answer is stored, only the message is lost
            log.warning("slack follow-up %s dropped: shutting down", getattr(fn, "__name__", fn))
            return
        with self._pending_lock:
            self._pending.add(future)
        future.add_done_callback(self._forget)

    def _forget(self, future: Future[None]) -> None:
        with self._pending_lock:
            self._pending.discard(future)

    # -- HTTP ----------------------------------------------------------------------------------

    async def handle_http(self, request: Request) -> Response:
        """Bolt's dispatch on a worker thread, so the server's event loop never blocks."""
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_BODY:
            log.warning("slack request refused: body of %s bytes", declared)
            return Response(status_code=413)
        # Counted as it streams: a chunked body has no Content-Length to refuse up front,
        # and `request.body()` would buffer all of it before anyone checked the signature.
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY:
                log.warning("slack request refused: body over %d bytes", MAX_BODY)
                return Response(status_code=413)
            chunks.append(chunk)
        body = b"".join(chunks)
        headers: dict[str, str | Sequence[str]] = dict(request.headers.items())
        retry = headers.get("x-slack-retry-num")
        problem: str | None = None
        try:
            bolt_request = BoltRequest(
                body=body.decode("utf-8"), query=request.url.query, headers=headers
            )
            parsed: Any = bolt_request.body  # typed as a dict, but it is whatever the JSON was
            if not isinstance(parsed, dict):
                problem = f"a JSON {type(parsed).__name__}, not an object"
        except Exception as exc:  # Bolt parses in its constructor; any failure is bad input
            problem = type(exc).__name__
        if problem is not None:
            # Unparseable: still refuse forgeries with 401; a signed one is acked and dropped
            # (Slack retries anything but 200, and it would never parse).
            if not self._signed(body, headers):
                log.warning("slack request refused: bad signature")
                return Response(status_code=401)
            log.warning("slack request ignored: malformed body (%s)", problem)
            return Response(status_code=200)
        loop = asyncio.get_running_loop()
        response = await loop.run_in_executor(self._dispatch_pool, self.app.dispatch, bolt_request)
        if response.status == 404:
            log.info("slack request ignored: nothing handles it (retry %s)", retry or "-")
            return Response(status_code=200)
        if response.status == 401:
            log.warning("slack request refused: bad or stale signature")
        return _to_starlette(response)

    def _signed(self, body: bytes, headers: Mapping[str, Any]) -> bool:
        """Slack's v0 signature over the raw bytes (slack-sdk's verifier needs UTF-8)."""
        if not self._signing_secret:
            return False
        lowered = {key.lower(): value for key, value in headers.items()}
        timestamp, signature = (
            lowered.get("x-slack-request-timestamp"),
            lowered.get("x-slack-signature"),
        )
        if not isinstance(timestamp, str) or not isinstance(signature, str):
            return False
        try:
            stale = abs(time.time() - int(timestamp)) > STALE_AFTER_S
        except ValueError:
            return False
        base = b"v0:" + timestamp.encode() + b":" + body
        digest = hmac.new(self._signing_secret.encode(), base, hashlib.sha256).hexdigest()
        return not stale and hmac.compare_digest(f"v0={digest}", signature)

    # -- middleware and handlers ---------------------------------------------------------------

    def _log_request(
        self, req: BoltRequest, resp: BoltResponse, next: Callable[[], BoltResponse]
    ) -> Any:
        """Every request in the log: type, ids, retry number, who; never the text."""
        body = req.body if isinstance(req.body, dict) else {}
        kind = body.get("type")
        if kind == "event_callback":
            event = _dict(body.get("event"))
            log.info(
                "slack event %s %s/%s retry=%s user=%s",
                body.get("event_id"), event.get("type"), event.get("subtype") or "-",
                _header(req, "x-slack-retry-num") or "-",
                event.get("user") or event.get("bot_id") or "-",
            )  # fmt: skip
        elif kind is not None:
            log.info("slack %s from %s", kind, _dict(body.get("user")).get("id") or "-")
        return next()

    def _claim(self, event_id: str | None) -> bool:
        """Record in the ledger that this delivery was acted on; False if it already was."""
        if not event_id:
            return True
        with self._write_lock:
            first = db.claim_event(
                self.transport.conn, source="slack", event_id=event_id, now=self.clock()
            )
        if not first:
            log.info("slack event %s already handled; acking the redelivery", event_id)
        return first

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
        return db.event_seen(self.transport.conn, source="slack", event_id=event_id)

    def _on_other_event(self, event: dict[str, Any]) -> None:
        log.info("slack event %s ignored (not one we handle)", event.get("type"))

    def _on_message(
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
        found = db.find_open_question_kind_by_channel_ref(self.transport.conn, ref)
        if found is None:
            self._reply_to_closed(ref, user, text, channel, thread_ts, _event_id(body))
            return
        question_id, _kind = found
        event_id = _event_id(body)
        if user not in self.allowed:
            if self._claim(event_id):
                self._later(self._not_allowed, channel, user, thread_ts)
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
        question = db.find_question_by_channel_ref(self.transport.conn, ref)
        if question is None or user not in self.allowed:
            log.info("slack reply ignored: %s is not an open question", ref)
            return
        try:
            parse_answer(question.kind, text)
        except InvalidAnswerError:
            return
        if self._repeat(event_id):
            return
        self._note_later(channel, user, thread_ts, inbox.closed_message(question))

    def _on_action(
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
        if user not in self.allowed:
            self._later(self._not_allowed, channel, user, message_ts)
            return
        question = db.get_question(self.transport.conn, question_id)
        ref = f"{channel}:{message_ts}"
        if question is None:
            self._later(
                self._ephemeral, channel, user, message_ts, "unknown question; nothing changed"
            )
            return
        # Only the question's recorded post takes answers: a NULL channel_ref (reopened,
        # not yet posted again) matches no message, least of all an old one.
        if question.channel_ref != ref:
            self._later(
                self._ephemeral, channel, user, message_ts,
                f"this message is out of date: question {question_id} was posted again; "
                "answer the newest post",
            )  # fmt: skip
            return
        if question.status != QuestionStatus.OPEN:
            # Already decided (the common case in a burst of clicks): no write, no second read.
            self._note_later(channel, user, message_ts, inbox.closed_message(question))
            return
        if action_id == REVISE_ACTION:
            trigger = str(body.get("trigger_id") or "")
            self._later(self._open_modal, trigger, question, ref, user)
            return
        text = BUTTON_ANSWERS.get(action_id)
        if text is None:
            log.warning("slack button %s is not one of ours", action_id)
            return
        self._answer(question_id, text, user, channel, message_ts)

    def _on_revise_submit(
        self, ack: Callable[..., None], body: dict[str, Any], view: dict[str, Any]
    ) -> None:
        user = str((body.get("user") or {}).get("id") or "")
        question_id, _, ref = str(view.get("private_metadata") or "").partition("|")
        values = ((view.get("state") or {}).get("values") or {}).get(REVISE_BLOCK) or {}
        feedback = str((values.get(REVISE_INPUT) or {}).get("value") or "").strip()
        log.info("slack modal %s on %s by %s", REVISE_CALLBACK, question_id or "-", user or "-")
        if user not in self.allowed:
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
        question = db.get_question(self.transport.conn, question_id)
        if question is not None and question.channel_ref != ref:
            # Like a button: only the question's recorded post takes answers.
            ack(
                response_action="errors",
                errors={REVISE_BLOCK: "This form is out of date: the question was posted "
                        "again; answer the newest post."},
            )  # fmt: skip
            return
        problem = self._answer(
            question_id, f"revise {feedback}", user, channel, thread_ts, quiet=True
        )
        if problem:
            ack(response_action="errors", errors={REVISE_BLOCK: problem[:150]})
        else:
            ack()

    # -- the answer path -----------------------------------------------------------------------

    def _answer_in_ledger(self, question_id: str, text: str, *, via: str) -> db.Question:
        return inbox.submit_answer(
            self.transport.conn, question_id, text, via=via, now=self.clock()
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
            with self._write_lock:
                question = self._answer_fn(question_id, text, via=f"slack:{user}")
                if event_id:
                    self._claim_won(event_id, question_id)
        except InvalidAnswerError as exc:
            log.info("slack answer to %s by %s refused: %s", question_id, user, exc)
            if not quiet and self._claim(event_id):
                self._later(self._bad_answer, question_id, user, channel, thread_ts, str(exc))
            return str(exc)
        except (QuestionClosedError, UnknownTaskError) as exc:
            log.info("slack answer to %s by %s came too late", question_id, user)
            if not quiet and not self._repeat(event_id):
                self._note_later(channel, user, thread_ts, str(exc))
            return str(exc)
        log.info("slack answer to %s by %s won", question_id, user)
        self._later(self._show_outcome, question, user)
        return None

    def _claim_won(self, event_id: str, question_id: str) -> None:
        """Record the winning delivery's id; the answer is already committed.

        A failure here must not turn into a 500 (Slack would retry an answer
        that is stored) nor skip the outcome: log it and go on. A retry then
        finds the question answered and gets the "already answered" path.
        """
        try:
            db.claim_event(self.transport.conn, source="slack", event_id=event_id, now=self.clock())
        except Exception:
            log.exception(
                "slack event %s: the answer to %s is stored but its event id was not recorded",
                event_id, question_id,
            )  # fmt: skip

    # -- follow-ups (on the pool, after the ack) -----------------------------------------------

    def _ephemeral(self, channel: str, user: str, thread_ts: str, text: str) -> None:
        self.transport.call(
            "chat.postEphemeral", channel=channel, user=user, thread_ts=thread_ts, text=text
        )

    def _not_allowed(self, channel: str, user: str, thread_ts: str) -> None:
        self._ephemeral(
            channel, user, thread_ts,
            "You are not allowed to answer this; the question stays open. "
            "Ask an operator to add you to AGENT_TEAM_SLACK_ALLOWED_USERS.",
        )  # fmt: skip

    def _bad_answer(
        self, question_id: str, user: str, channel: str, thread_ts: str, problem: str
    ) -> None:
        question = db.get_question(self.transport.conn, question_id)
        accepted = _HELP.get(question.kind, "") if question is not None else ""
        text = f"<@{user}> {escape(problem)}. The question stays open"
        text += f"; {escape(accepted)}." if accepted and accepted not in problem else "."
        self.transport.post(channel, text, thread_ts=thread_ts)

    def _open_modal(self, trigger_id: str, question: db.Question, ref: str, user: str) -> None:
        channel, ts = split_ref(ref)
        try:
            self.transport.call(
                "views.open",
                trigger_id=trigger_id,
                view=revise_modal(question.question_id, ref, question.kind),
            )
        except Exception:
            # The trigger lives 3 s; if the modal cannot open, ask in the thread instead.
            self.transport.post(
                channel,
                f"<@{user}> reply in this thread with `revise <what to change>`.",
                thread_ts=ts,
            )

    def _show_outcome(self, question: db.Question, user: str) -> None:
        self.transport.show_outcome(question)


def _as_written(text: str) -> str:
    """A message's text as the person typed it: links to their URL, entities unescaped.

    One pass over the entities, so `&amp;lt;` becomes `&lt;` (what was typed), not `<`.
    """
    text = _LINK.sub(lambda m: m.group(1), text)
    return _ENTITY.sub(lambda m: _ENTITIES[m.group(1)], text)


def _build_app(
    transport: SlackTransport, signing_secret: str, *, socket_mode: bool, verify: bool
) -> App:
    """The Bolt app; with `verify`, the bot token is checked now with `auth.test`."""
    try:
        return App(
            client=transport.client,
            # Passed explicitly: Bolt would otherwise read SLACK_SIGNING_SECRET itself.
            signing_secret=signing_secret,
            process_before_response=True,
            # With the check, Bolt keeps the result and never calls auth.test per request.
            token_verification_enabled=verify,
            request_verification_enabled=not socket_mode,
            logger=logging.getLogger("agent_team.integrations.slack.bolt"),
        )
    except BoltError as exc:
        # Bolt wraps auth.test's SlackApiError; name Slack's error code, never the token.
        cause = exc.__cause__ or exc.__context__
        response = getattr(cause, "response", None)
        code = response.get("error", "error") if response is not None else type(exc).__name__
        raise ConfigError(
            f"Slack refused AGENT_TEAM_SLACK_BOT_TOKEN at start-up (auth.test: {code}); "
            "check the token, its workspace and AGENT_TEAM_SLACK_API_URL "
            "(`agent-team doctor` checks them)"
        ) from None
    except Exception as exc:  # could not reach Slack at all
        raise ConfigError(
            f"could not reach Slack to check AGENT_TEAM_SLACK_BOT_TOKEN at start-up "
            f"({type(exc).__name__}); check AGENT_TEAM_SLACK_API_URL and the network, "
            "then start again"
        ) from None


def _event_id(body: dict[str, Any]) -> str | None:
    event_id = body.get("event_id")
    return event_id if isinstance(event_id, str) and event_id else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _header(req: BoltRequest, name: str) -> str | None:
    values = req.headers.get(name) or []
    return values[0] if values else None


def _to_starlette(response: BoltResponse) -> Response:
    return Response(
        content=response.body,
        status_code=response.status,
        headers=response.first_headers_without_set_cookie(),
    )
