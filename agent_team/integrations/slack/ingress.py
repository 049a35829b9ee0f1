"""The Slack listener's ingress: the Bolt app, HTTP and Socket Mode in, dispatch to the handlers.

One slack-bolt `App` serves both modes: HTTP (`POST /slack/events` on the
daemon's own server, Bolt's signature check on) and Socket Mode (when an
app-level token is set). `SlackListener` puts the three parts together: this
module's ingress, `answers.AnswerHandler` (what a reply, button or modal
means, recorded in the ledger) and `followups.FollowUps` (what is said back
afterwards, and the reminder timer).

Why `process_before_response=True`: the handler's own work before the
response is a ledger lookup and the answer's compare-and-set (milliseconds),
so Slack gets its 200 after the answer is durable and a crash can never ack
an answer that was not stored. Everything that talks back to Slack runs
afterwards on the follow-up pools, once the requests in flight are answered
(`followups.Lull`).

Over HTTP, the two requests a burst of answers is made of (a click on an
answer button, a reply in a question's thread) skip Bolt's dispatch
(`hotpath`): the listener checks their signature itself and calls the same
handler methods, with the same ack-after-store rule. Bolt's dispatch cost
more CPU per request than the handler's own work, and in a burst every ack
waits for the CPU of the requests ahead of it.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from functools import partial
from typing import Any

from slack_bolt import App, BoltRequest, BoltResponse
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_bolt.error import BoltError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agent_team import db
from agent_team.exceptions import ConfigError
from agent_team.integrations.refusals import RefusalLog, outage_reason
from agent_team.integrations.slack.answers import AnswerFn, AnswerHandler
from agent_team.integrations.slack.blocks import ACTION_PREFIX, REVISE_CALLBACK
from agent_team.integrations.slack.followups import TIMERS_S, FollowUps
from agent_team.integrations.slack.hotpath import HotRequest, classify
from agent_team.integrations.slack.settings import SlackSettings
from agent_team.integrations.slack.transport import SlackTransport, make_web_client

__all__ = ["EVENTS_PATH", "SlackListener"]

log = logging.getLogger(__name__)
# Bolt logs a rejected request's whole body at INFO; ours refuse those before Bolt runs,
# and what Bolt says below WARNING is not worth a line per request.
_BOLT_LOG = logging.getLogger("agent_team.integrations.slack.bolt")
_BOLT_LOG.setLevel(logging.WARNING)

EVENTS_PATH = "/slack/events"
STALE_AFTER_S = 300  # Slack's rule: a request older than 5 minutes is a replay
MAX_BODY = 1_000_000  # Slack's payloads are a few KB; refuse anything absurd before parsing


class SlackListener:
    """Bolt app + handlers; `route()` for HTTP mode, `socket_mode_handler()` for Socket Mode."""

    def __init__(
        self,
        settings: SlackSettings,
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
        # Before the route serves: answers recorded earlier reached no listener of this process.
        self.started_at = self.clock()
        self.socket_mode = settings.app_token is not None
        secret = settings.signing_secret
        self._signing_secret = secret.get_secret_value() if secret is not None else ""
        # First, before any thread starts: with `verify_token` this is where a bad token stops us.
        self.app = _build_app(
            transport, self._signing_secret, socket_mode=self.socket_mode, verify=verify_token
        )
        self.followups = FollowUps(transport, workers=followup_workers)
        self.refusals = RefusalLog(log, "slack request")
        # The ledger refusing writes (full disk, read-only mount) is an outage, not a bug:
        # a 503 and a bounded line per source, not a 500 with a traceback per request.
        self.outages = RefusalLog(log, "slack request", level=logging.ERROR)
        # The bot's own user id, for telling its own messages apart on the hot path; learnt
        # from Bolt's authorization (auth.test) on the first request that goes through Bolt.
        self._bot_user_id: str | None = None
        # Bolt's dispatch runs here, not on the server's 40-thread default pool: the work is
        # a few ms of CPU and SQLite, so more threads only add GIL and lock contention
        # (and starve the worker that resumes the task) without acking any sooner.
        self._dispatch_pool = ThreadPoolExecutor(
            max_workers=dispatch_workers, thread_name_prefix="agent-team-slack-in"
        )
        self.answers = AnswerHandler(
            settings, transport, self.followups, clock=self.clock, answer=answer
        )
        self._register()

    # -- wiring ----------------------------------------------------------------------------

    def _register(self) -> None:
        app, answers = self.app, self.answers
        app.middleware(self._log_request)
        app.event("message")(answers.on_message)
        app.action(re.compile(rf"^{re.escape(ACTION_PREFIX)}"))(answers.on_action)
        app.view(REVISE_CALLBACK)(answers.on_revise_submit)
        app.event(re.compile(".*"))(self._on_other_event)
        app.error(self._on_listener_error)

    def _on_listener_error(self, error: Exception, request: BoltRequest) -> BoltResponse | None:
        """Bolt's listener failed: 503 for a ledger outage (Slack delivers it again), else 500."""
        if db.is_outage(error):
            self.outages.refused(request.context.get(SOURCE_KEY), outage_reason(error, "Slack"))
            return BoltResponse(status=503, body="")
        log.error("slack listener failed: %s", error, exc_info=error)
        return None

    def route(self) -> Route:
        """`POST /slack/events` for the daemon's Starlette app."""
        return Route(EVENTS_PATH, self.handle_http, methods=["POST"], name="slack_events")

    def socket_mode_handler(self) -> SocketModeHandler:
        """Built, not connected: `connect()` opens the WebSocket (the daemon's loop does)."""
        token = self.settings.app_token
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
        self,
        stop: threading.Event,
        beat: Callable[[], None],
        every_s: float = TIMERS_S,
        turn: Callable[[], bool] = lambda: True,
    ) -> None:
        """The daemon's Slack timer loop: reminders, late and superseded redraws; on stop, drain."""
        try:
            self.followups.run_timers(stop, beat, every_s, turn, listening_since=self.started_at)
        finally:
            if stop.is_set():
                self.drain(5.0)
                self.close()

    def close(self) -> None:
        self._dispatch_pool.shutdown(wait=True, cancel_futures=False)
        self.followups.close()

    def drain(self, timeout_s: float = 10.0) -> bool:
        """Wait for the follow-up calls queued so far (tests and shutdown)."""
        return self.followups.drain(timeout_s)

    # -- HTTP ----------------------------------------------------------------------------------

    async def handle_http(self, request: Request) -> Response:
        """Answer one request; follow-ups wait until no request is in flight (`Lull`)."""
        with self.followups.lull.busy():
            return await self._handle_http(request)

    async def _handle_http(self, request: Request) -> Response:
        """The hot path or Bolt's dispatch, on a worker thread: the event loop never blocks."""
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
        # Ours first, for every request: Bolt never sees (nor logs) one that is not Slack's.
        refusal = self._refusal(body, headers)
        if refusal is not None:
            self.refusals.refused(request.client.host if request.client else None, refusal)
            return Response(status_code=401)
        retry = headers.get("x-slack-retry-num")
        content_type = request.headers.get("content-type", "").split(";")[0] or None
        source = request.client.host if request.client else None
        hot = classify(body, content_type)
        if hot is not None and (hot.kind == "action" or self._bot_user_id is not None):
            return await self._handle_hot(hot, body, headers, source)
        problem: str | None = None
        try:
            bolt_request = BoltRequest(
                body=body.decode("utf-8"),
                query=request.url.query,
                headers=headers,
                context={SOURCE_KEY: source},
            )
            parsed: Any = bolt_request.body  # typed as a dict, but it is whatever the JSON was
            if not isinstance(parsed, dict):
                problem = f"a JSON {type(parsed).__name__}, not an object"
        except Exception as exc:  # Bolt parses in its constructor; any failure is bad input
            problem = type(exc).__name__
        if problem is not None:
            # Unparseable but signed (checked above): acked and dropped (Slack retries
            # anything but 200, and it would never parse).
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

    async def _handle_hot(
        self, hot: HotRequest, body: bytes, headers: Mapping[str, Any], source: str | None
    ) -> Response:
        """A button click or thread reply without Bolt: verify, then the handler on the pool.

        The same rules as Bolt's path: a bad or stale signature is refused
        with 401 before the handler sees anything; the 200 goes out after the
        handler returned (the answer and its resume command are committed);
        a handler that fails gets a 500 (a 503 if the ledger cannot be
        written), so Slack delivers it again.
        """
        retry = headers.get("x-slack-retry-num")  # signed: `_handle_http` checked it
        self._log_body(hot.body, retry if isinstance(retry, str) else None)
        if hot.kind == "action":
            work = partial(self.answers.on_action, _no_ack, hot.body, hot.item)
        else:
            context = {"bot_user_id": self._bot_user_id}
            work = partial(self.answers.on_message, hot.item, hot.body, context)
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._dispatch_pool, work)
        except Exception as exc:
            if db.is_outage(exc):
                self.outages.refused(source, outage_reason(exc, "Slack"))
                return Response(status_code=503)
            log.exception("slack %s failed; Slack will deliver it again", hot.kind)
            return Response(status_code=500)
        return Response(status_code=200)

    def _signed(self, body: bytes, headers: Mapping[str, Any]) -> bool:
        """Slack's v0 signature over the raw bytes (slack-sdk's verifier needs UTF-8)."""
        return self._refusal(body, headers) is None

    def _refusal(self, body: bytes, headers: Mapping[str, Any]) -> str | None:
        """Why the request is not Slack's (None: signed with our secret, within 5 minutes).

        Constant-time, on the raw bytes, never raising: a non-numeric or absurd timestamp
        is a refusal like any other, not an error (it was a 500 in Bolt's verifier).
        """
        if not self._signing_secret:
            return "no signing secret is configured"
        lowered = {key.lower(): value for key, value in headers.items()}
        timestamp, signature = (
            lowered.get("x-slack-request-timestamp"),
            lowered.get("x-slack-signature"),
        )
        if not isinstance(timestamp, str) or not isinstance(signature, str):
            return "no signature headers"
        if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= 12):
            return "the timestamp is not a number of seconds"
        if abs(time.time() - int(timestamp)) > STALE_AFTER_S:
            return "the timestamp is more than 5 minutes away"
        base = b"v0:" + timestamp.encode() + b":" + body
        digest = hmac.new(self._signing_secret.encode(), base, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(f"v0={digest}".encode(), signature.encode("utf-8", "replace")):
            return "bad signature"
        return None

    # -- middleware -------------------------------------------------------------------------

    def _log_request(
        self, req: BoltRequest, resp: BoltResponse, next: Callable[[], BoltResponse]
    ) -> Any:
        """Every request in the log; and the bot's user id, once Bolt's authorization knows it."""
        if self._bot_user_id is None and req.context.bot_user_id:
            self._bot_user_id = req.context.bot_user_id
        body = req.body if isinstance(req.body, dict) else {}
        self._log_body(body, _header(req, "x-slack-retry-num"))
        return next()

    def _log_body(self, body: Mapping[str, Any], retry: str | None) -> None:
        """Type, ids, retry number, who; never the text."""
        kind = body.get("type")
        if kind == "event_callback":
            event = _dict(body.get("event"))
            log.info(
                "slack event %s %s/%s retry=%s user=%s",
                body.get("event_id"),
                event.get("type"),
                event.get("subtype") or "-",
                retry or "-",
                event.get("user") or event.get("bot_id") or "-",
            )
        elif kind is not None:
            log.info("slack %s from %s", kind, _dict(body.get("user")).get("id") or "-")

    def _on_other_event(self, event: dict[str, Any]) -> None:
        log.info("slack event %s ignored (not one we handle)", event.get("type"))


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
            logger=_BOLT_LOG,
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


SOURCE_KEY = "agent_team_source"  # the client's address, in a Bolt request's context


def _no_ack(*_args: Any, **_kwargs: Any) -> None:
    """The hot path's `ack`: the 200 is the response to the request itself."""


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
