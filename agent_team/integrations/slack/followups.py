"""What the Slack listener says back after the ack: redraws, thread acks, notices, reminders.

Everything that talks back to Slack (`chat.update`, thread acks, ephemerals,
`views.open`) runs here, on a small thread pool after the request has been
acked, so a slow or rate-limited Web API never delays the ack past Slack's
3 s. Late answers' private notes get a single thread of their own. Queued
work also waits for a lull in the listener's requests (`Lull`), so it runs
behind a burst of answers instead of taking the CPU from their acks. The
timer loop (reminders, late and superseded redraws) lives here too: it is
the same kind of talking back, only on a clock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from agent_team import db
from agent_team.integrations.slack.blocks import escape, pull_request_help, revise_modal
from agent_team.integrations.slack.transport import SlackTransport, split_ref
from agent_team.requests.answers import (
    PLAN_DECISION_HELP,
    PR_DECISION_HELP,
    PUBLISH_HELP,
    PULL_REQUEST_HELP,
)
from agent_team.task_model import QuestionKind

__all__ = ["LULL_S", "MAX_DEFER_S", "TIMERS_S", "FollowUps", "Lull"]

log = logging.getLogger(__name__)

TIMERS_S = 30.0  # how often the timer loop looks for due reminders and missed redraws
LULL_S = 0.02  # follow-ups start once no Slack request has been in flight for this long...
MAX_DEFER_S = 1.0  # ...or this long after they were queued (a modal's trigger_id lives 3 s)
# A late answer's private note, at most once per person and question in this window.
NOTE_EVERY_S = 60.0
_NOTED_KEPT = 4096
_HELP = {
    QuestionKind.CLARIFY.value: "reply in this thread with the missing details",
    QuestionKind.PLAN_DECISION.value: PLAN_DECISION_HELP,
    QuestionKind.CONFLUENCE_APPROVAL.value: PUBLISH_HELP,
    QuestionKind.PR_DECISION.value: PR_DECISION_HELP,
    QuestionKind.PULL_REQUEST.value: PULL_REQUEST_HELP,
}


class Lull:
    """The listener's requests in flight; follow-ups wait for a lull between them.

    Why: a follow-up is a Web API call of a millisecond or more of CPU, and a
    burst of 50 clicks leaves a redraw, a thread ack and 49 private notes
    behind. Run while the burst is still being acked, they take the GIL from
    the acks and every ack queued behind them waits longer. So a follow-up
    starts only once no request has been in flight for `lull_s`; `max_defer_s`
    after it was queued it starts anyway, so a steady stream of requests
    delays follow-ups and never starves them. Nothing is stored later than
    before: the answer and its resume command are committed before the ack,
    and what a follow-up does is what it did (a crash loses what was queued,
    as it did; the timer pass redraws answered questions).
    """

    def __init__(self, lull_s: float = LULL_S) -> None:
        self.lull_s = lull_s
        self._changed = threading.Condition()
        self._in_flight = 0
        self._quiet_since = time.monotonic() - lull_s

    @property
    def in_flight(self) -> int:
        with self._changed:
            return self._in_flight

    @contextmanager
    def busy(self) -> Iterator[None]:
        """Around one request, from its arrival to its response."""
        with self._changed:
            self._in_flight += 1
        try:
            yield
        finally:
            with self._changed:
                self._in_flight -= 1
                if self._in_flight == 0:
                    self._quiet_since = time.monotonic()
                    self._changed.notify_all()

    def wait(self, deadline: float) -> None:
        """Until a lull, or until `deadline` (`time.monotonic()`), whichever comes first."""
        with self._changed:
            while True:
                now = time.monotonic()
                if now >= deadline:
                    return
                if self._in_flight == 0:
                    quiet_for = now - self._quiet_since
                    if quiet_for >= self.lull_s:
                        return
                    timeout = self.lull_s - quiet_for
                else:
                    timeout = deadline - now  # woken when the last request is answered
                self._changed.wait(min(timeout, deadline - now))


class FollowUps:
    """The follow-up pools and the messages they send; `drain()` waits for what is queued.

    Both pools have a fixed number of threads, so a burst queues work; it never adds threads.
    """

    def __init__(
        self,
        transport: SlackTransport,
        *,
        workers: int = 4,
        lull: Lull | None = None,
        max_defer_s: float = MAX_DEFER_S,
    ) -> None:
        self.transport = transport
        self.lull = lull or Lull()
        self._noted: OrderedDict[tuple[str, str, str], float] = OrderedDict()
        self._noted_guard = threading.Lock()
        self.max_defer_s = max_defer_s
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="agent-team-slack")
        self._notes_pool = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="agent-team-slack-n"
        )
        self._pending: set[Future[None]] = set()
        self._pending_lock = threading.Lock()

    def run_timers(
        self,
        stop: threading.Event,
        beat: Callable[[], None],
        every_s: float = TIMERS_S,
        turn: Callable[[], bool] = lambda: True,
        *,
        listening_since: datetime | None = None,
    ) -> None:
        """Reminders, late and superseded redraws, every `every_s` until `stop`, in the passes
        `turn` says are this instance's (one instance at a time reminds).

        The first pass runs at once: questions answered while the daemon was down
        (or whose redraw died with it, answered before `listening_since`) are
        redrawn at start-up, not `every_s` later.
        """
        while not stop.is_set():
            if turn():
                self.transport.remind_due()
                self.transport.reconcile_answered(listening_since=listening_since)
                self.transport.redraw_superseded()
            beat()
            stop.wait(every_s)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=False)
        self._notes_pool.shutdown(wait=True, cancel_futures=False)

    def later(
        self, fn: Callable[..., None], *args: Any, pool: ThreadPoolExecutor | None = None
    ) -> None:
        """Run `fn(*args)` on a follow-up thread, after the requests in flight (see `Lull`)."""
        deadline = time.monotonic() + self.max_defer_s

        def run() -> None:
            self.lull.wait(deadline)
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

    def note_later(self, channel: str, user: str, thread_ts: str, text: str) -> None:
        """A private note to someone who answered too late: one at a time, off the hot path.

        A stampede of clicks produces one note per clicker; sending them on
        their own single thread keeps them from competing for the CPU with
        the acks and with the winning answer's resume. The same person on the
        same question gets at most one note a minute: a click replayed inside
        Slack's five-minute signature window (or an impatient double click)
        costs no Slack call.
        """
        key = (channel, thread_ts, user)
        now = time.monotonic()
        with self._noted_guard:
            last = self._noted.get(key)
            if last is not None and now - last < NOTE_EVERY_S:
                log.info(
                    "slack note to %s skipped: one was sent under %s a moment ago", user, thread_ts
                )
                return
            self._noted[key] = now
            self._noted.move_to_end(key)
            while len(self._noted) > _NOTED_KEPT:
                self._noted.popitem(last=False)
        self.later(self.ephemeral, channel, user, thread_ts, text, pool=self._notes_pool)

    def _forget(self, future: Future[None]) -> None:
        with self._pending_lock:
            self._pending.discard(future)

    def drain(self, timeout_s: float = 10.0) -> bool:
        """Wait for the follow-up calls queued so far (tests and shutdown)."""
        with self._pending_lock:
            pending = list(self._pending)
        _done, not_done = wait(pending, timeout=timeout_s)
        return not not_done

    def ephemeral(self, channel: str, user: str, thread_ts: str, text: str) -> None:
        self.transport.call(
            "chat.postEphemeral", channel=channel, user=user, thread_ts=thread_ts, text=text
        )

    def not_allowed(self, channel: str, user: str, thread_ts: str) -> None:
        self.ephemeral(
            channel,
            user,
            thread_ts,
            "You are not allowed to answer this; the question stays open. "
            f"To answer, {self.transport.answerers().hint(user)}.",
        )

    def refused(self, channel: str, user: str, thread_ts: str, problem: str) -> None:
        """A role below what the answer needs: said to that person alone, as `not_allowed`."""
        self.ephemeral(
            channel,
            user,
            thread_ts,
            f"{escape(problem)}. Nothing was stored; the question stays open.",
        )

    def bad_answer(
        self, question_id: str, user: str, channel: str, thread_ts: str, problem: str
    ) -> None:
        question = db.get_question(self.transport.ledger, question_id)
        if question is not None and question.kind == QuestionKind.PULL_REQUEST:
            # Nobody answers the PR gate here; say who does, not that it "stays open".
            text = f"<@{user}> nothing was stored: {escape(pull_request_help(question.thread_id))}."
            self.transport.post(channel, text, thread_ts=thread_ts)
            return
        accepted = _HELP.get(question.kind, "") if question is not None else ""
        text = f"<@{user}> {escape(problem)}. The question stays open"
        text += f"; {escape(accepted)}." if accepted and accepted not in problem else "."
        self.transport.post(channel, text, thread_ts=thread_ts)

    def open_modal(self, trigger_id: str, question: db.Question, ref: str, user: str) -> None:
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

    def show_outcome(self, question: db.Question, user: str) -> None:
        self.transport.show_outcome(question)
