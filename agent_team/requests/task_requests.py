"""One path for every request that changes a task, from every surface.

The CLI, the dashboard and its JSON API, Slack, GitHub intake, the LangGraph
API and automations all submit, answer, reopen, retry and cancel through a
`TaskRequests`. Each request is validated, lands in the ledger in one
transaction with its audit row (`inbox`), and then wakes the worker of this
process, if it has one; a request from another process (the CLI beside a
daemon) is picked up by that daemon's poll or its LISTEN/NOTIFY wake-up.
Checks that must hold for every surface (the role table, `roles.authorize`)
belong here, so each is written once. HTTP rate limits are the exception: they must answer
before a key is checked or a body read, so they sit in front of the HTTP
server (`dashboard/rate_limits.py`).

Nothing else wakes the worker: the coordinator builds its `TaskRequests` with
its own wake-up and delivery, and every surface in the daemon uses that one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from agent_team import db
from agent_team.common.repo_spec import checked_repo
from agent_team.common.testhooks import wall_clock
from agent_team.config import Settings
from agent_team.exceptions import UnknownTaskError
from agent_team.requests import inbox
from agent_team.requests.actors import INTERNAL, Actor
from agent_team.requests.roles import authorize
from agent_team.task_model import QuestionKind, TaskKind

__all__ = ["TaskRequests", "default_deadlines"]


def default_deadlines(settings: Settings) -> dict[str, timedelta]:
    """How long each kind of question stays open before it expires."""
    return {
        QuestionKind.CLARIFY.value: timedelta(hours=settings.clarify_deadline_h),
        QuestionKind.PLAN_DECISION.value: timedelta(hours=settings.plan_deadline_h),
        QuestionKind.CONFLUENCE_APPROVAL.value: timedelta(hours=settings.confluence_deadline_h),
        # A pull request stays open as long as its reviewers need: no deadline.
        QuestionKind.PR_DECISION.value: timedelta(hours=settings.pr_decision_deadline_h),
    }


def _nothing() -> None:
    """No worker in this process: the daemon that drains the commands finds the request."""


def _no_delivery(_task_id: str) -> None:
    """No transport in this process: the daemon's delivery pass posts a reopened question."""


class TaskRequests:
    """Submit, answer, reopen, retry, cancel and note, checked and written once, then a
    wake-up."""

    def __init__(
        self,
        ledger: db.Ledger,
        *,
        clock: Callable[[], datetime] = wall_clock,
        confluence_enabled: bool = False,
        deadlines: Mapping[str, timedelta] | None = None,
        checkpoint_retention: timedelta | None = None,
        wake: Callable[[], None] = _nothing,
        deliver: Callable[[str], object] = _no_delivery,
    ) -> None:
        self.ledger = ledger
        self.clock = clock
        self.confluence_enabled = confluence_enabled
        self.deadlines = dict(deadlines or {})
        # How long a finished task keeps its checkpoints (None or 0: for ever); a failed
        # task is retried only within it (`inbox.retry_task`).
        self.checkpoint_retention = checkpoint_retention
        self._wake = wake
        self._deliver = deliver

    @classmethod
    def of(
        cls,
        ledger: db.Ledger,
        settings: Settings,
        *,
        clock: Callable[[], datetime] = wall_clock,
        wake: Callable[[], None] = _nothing,
        deliver: Callable[[str], object] = _no_delivery,
    ) -> TaskRequests:
        """The requests of a process configured by `settings` (the docs lane, the deadlines,
        the checkpoint retention)."""
        return cls(
            ledger,
            clock=clock,
            confluence_enabled=settings.confluence_enabled,
            deadlines=default_deadlines(settings),
            checkpoint_retention=settings.checkpoint_retention,
            wake=wake,
            deliver=deliver,
        )

    def submit(
        self,
        *,
        title: str,
        body: str = "",
        kind: str = TaskKind.CODE.value,
        source: str = "cli",
        source_ref: str | None = None,
        repo: str | None = None,
        task_id: str | None = None,
        confluence_enabled: bool | None = None,
        actor: Actor = INTERNAL,
    ) -> str:
        """Record a task and its `start` command (see `inbox.submit_task`); returns its id.

        `repo` is checked first (`common.repo_spec.checked_repo`: a form we
        take, an absolute path to a folder that is there; no network) and
        stored as it reads then.

        Raises:
            InvalidRepoError: `repo` is no form we take, or a path that is not there.
            TaskRefusedError, TaskTooLargeError: see `inbox.submit_task`.
        """
        authorize(self.ledger, actor, "submit", task_id or title[:80])
        repo = checked_repo(repo) if repo else None
        new_id = inbox.submit_task(
            self.ledger,
            title=title,
            body=body,
            kind=kind,
            source=source,
            source_ref=source_ref,
            repo=repo,
            task_id=task_id,
            confluence_enabled=(
                self.confluence_enabled if confluence_enabled is None else confluence_enabled
            ),
            actor=actor,
        )
        self._wake()
        return new_id

    def submit_once(
        self,
        idempotency_key: str,
        *,
        title: str,
        body: str = "",
        kind: str = TaskKind.CODE.value,
        source: str = "cli",
        source_ref: str | None = None,
        repo: str | None = None,
        actor: Actor = INTERNAL,
    ) -> db.KeptRequest:
        """`submit` under the caller's idempotency key: a retry of the same request within
        `db.KEY_WINDOW` gets the first one's task back, never a second task (see
        `inbox.submit_task_once`). Wakes the worker only when a task was made.

        Raises:
            IdempotencyKeyReusedError: the key names a different request; nothing stored.
            InvalidRepoError, TaskRefusedError, TaskTooLargeError: as `submit`.
        """
        authorize(self.ledger, actor, "submit", title[:80])
        repo = checked_repo(repo) if repo else None
        kept = inbox.submit_task_once(
            self.ledger,
            idempotency_key,
            now=self.clock(),
            title=title,
            body=body,
            kind=kind,
            source=source,
            source_ref=source_ref,
            repo=repo,
            confluence_enabled=self.confluence_enabled,
            actor=actor,
        )
        if kept.created:
            self._wake()
        return kept

    def answer(
        self,
        question_id: str,
        text: str | dict[str, Any],
        *,
        via: str,
        events: Sequence[db.NewPrEvent] = (),
        actor: Actor | None = None,
    ) -> db.Question:
        """Record the first valid answer and its `resume` command (see `inbox.submit_answer`).

        Args:
            actor: who answers, when `via` cannot say it all (the CLI's `--as`); by
                default read from `via`.

        Raises:
            AccessDeniedError: the person's role may not answer this kind (audited).
        """
        question = db.get_question(self.ledger, question_id)
        if question is not None:
            who = actor or Actor.from_via(via)
            authorize(self.ledger, who, f"answer:{question.kind}", question_id)
        answered = inbox.submit_answer(
            self.ledger, question_id, text, via=via, now=self.clock(), events=events
        )
        self._wake()
        return answered

    def reopen(
        self, question_id: str, *, deadline: timedelta | None = None, actor: Actor = INTERNAL
    ) -> db.Question:
        """Reopen an expired question for `deadline` (else its kind's window) and deliver it."""
        authorize(self.ledger, actor, "reopen", question_id)
        question = db.get_question(self.ledger, question_id)
        if question is None:
            raise UnknownTaskError(f"no question {question_id!r}")
        window = {question.kind: deadline} if deadline is not None else self.deadlines
        reopened = inbox.reopen(
            self.ledger,
            question_id,
            deadline_at=inbox.deadline_for(question.kind, window, self.clock()),
            actor=actor,
        )
        self._deliver(reopened.thread_id)
        return reopened

    def retry(self, task_id: str, *, actor: Actor = INTERNAL) -> str:
        """Continue a parked or failed task from its checkpoint (see `inbox.retry_task`)."""
        authorize(self.ledger, actor, "retry", task_id)
        command_id = inbox.retry_task(
            self.ledger, task_id, actor=actor, failed_since=self._pruning_before()
        )
        self._wake()
        return command_id

    def _pruning_before(self) -> datetime | None:
        """Finished tasks last changed before this lose their checkpoints to the retention
        pass (the sweeper's cutoff, `Sweeper.prune_checkpoints`); None: nothing is pruned."""
        keep = self.checkpoint_retention
        if keep is None or keep <= timedelta(0):
            return None
        try:
            return self.clock() - keep
        except OverflowError:  # a retention longer than the calendar: nothing is that old
            return None

    def note(self, task_id: str, text: str, *, actor: Actor = INTERNAL) -> db.AuditRow:
        """Leave a note on a task (see `inbox.add_note`); nothing wakes: no work follows."""
        authorize(self.ledger, actor, "note", task_id)
        return inbox.add_note(self.ledger, task_id, text, actor=actor)

    def cancel(self, task_id: str, *, actor: Actor = INTERNAL) -> None:
        """Queue a cancel (see `inbox.cancel_task`)."""
        authorize(self.ledger, actor, "cancel", task_id)
        inbox.cancel_task(self.ledger, task_id, actor=actor)
        self._wake()
