"""`/metrics`: Prometheus text computed from the ledger at scrape time.

Why a custom collector and not counters bumped in the code paths: the ledger
already holds every fact (tasks, questions, commands, spend), it survives
restarts, and it is written by several processes (daemon, CLI); counting in
one process's memory would miss the others' work and reset on restart. Each
app gets its own `CollectorRegistry`, so tests (and two apps in one process)
never share metrics through the global registry.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from agent_team import db
from agent_team.dashboard.context import DashboardContext
from agent_team.exceptions import LedgerError
from agent_team.task_model import BillingMode

__all__ = [
    "LATENCY_BUCKETS_S",
    "PR_MERGE_BUCKETS_S",
    "PR_ROUND_BUCKETS",
    "LedgerCollector",
    "histogram_buckets",
    "make_registry",
]

log = logging.getLogger(__name__)

# Answer -> resume includes the graph run that follows the answer (up to the
# next gate or the end, a build among them), so the buckets reach hours.
LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.5,
    1,
    2,
    5,
    10,
    30,
    60,
    120,
    300,
    600,
    1800,
    3600,
    7200,
)

# Follow-up rounds a pull request took: the cap (AGENT_TEAM_GITHUB_PR_ROUNDS) is small.
PR_ROUND_BUCKETS: tuple[float, ...] = (0, 1, 2, 3, 5, 10)
# From a draft PR opening to its merge: people review in hours to weeks.
PR_MERGE_BUCKETS_S: tuple[float, ...] = (
    600,
    1800,
    3600,
    4 * 3600,
    8 * 3600,
    86400,
    2 * 86400,
    3 * 86400,
    7 * 86400,
    14 * 86400,
)

# Health facts the intake poller sets; absent until it runs (then 0 here).
_INTAKE_FACTS = (
    ("intake_polls", "agent_team_intake_polls", "GitHub intake polls made by this process."),
    (
        "intake_not_modified",
        "agent_team_intake_not_modified",
        "GitHub intake polls answered 304 Not Modified (ETag matched).",
    ),
)


def histogram_buckets(
    values: Iterable[float], bounds: Sequence[float] = LATENCY_BUCKETS_S
) -> tuple[list[tuple[str, float]], float]:
    """Cumulative `(le, count)` buckets ending in `+Inf`, and the sum, of `values`.

    This is what a live `Histogram` would hold had it observed every value;
    computing it from stored values lets the ledger be the source.
    """
    observed = sorted(values)
    buckets = [
        (str(float(bound)), float(sum(1 for value in observed if value <= bound)))
        for bound in bounds
    ]
    buckets.append(("+Inf", float(len(observed))))
    return buckets, float(math.fsum(observed))


@dataclass(frozen=True)
class _LedgerFacts:
    tasks_by_status: dict[str, int]
    open_questions: db.OpenQuestions
    spent_today: dict[str, db.Spend]
    latencies_s: list[float]
    leases: db.LeaseSummary
    pulls: db.PullRequestStats


def _latency_s(row: db.AnswerResume) -> float:
    # A clock step backwards between two hosts must not yield a negative duration.
    return max(0.0, (db.from_iso(row.done_at) - db.from_iso(row.answered_at)).total_seconds())


def _merge_s(pull: db.FinishedPull) -> float | None:
    if pull.state != "merged" or pull.closed_at is None:
        return None
    return max(0.0, (db.from_iso(pull.closed_at) - db.from_iso(pull.opened_at)).total_seconds())


def _number(value: object) -> float:
    """A health fact as a sample value: numbers as they are, anything else 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value) if math.isfinite(value) else 0.0


class LedgerCollector(Collector):
    """Reads the ledger (and the loops' health) on every scrape.

    A ledger that cannot be read is reported as `agent_team_ledger_up 0`
    instead of failing the scrape, so the alert says what is wrong.
    """

    def __init__(self, ctx: DashboardContext) -> None:
        """Uses `ctx.read()` (one ledger view per scrape), `ctx.health` and `ctx.clock`."""
        self._ctx = ctx

    def _read(self, now: datetime) -> _LedgerFacts:
        with self._ctx.read() as view:
            return _LedgerFacts(
                tasks_by_status=db.count_tasks_by_status(view),
                open_questions=db.open_questions_summary(view),
                spent_today=db.spent_by_mode(view, day=now),
                latencies_s=[_latency_s(row) for row in db.answer_resume_times(view)],
                leases=db.lease_summary(view, now=now),
                pulls=db.pull_request_stats(view),
            )

    def collect(self) -> Iterable[Metric]:
        now = self._ctx.clock()
        yield from self._health_metrics()
        try:
            facts = self._read(now)
        except LedgerError as exc:
            log.warning("metrics: cannot read the ledger: %s", exc)
            yield GaugeMetricFamily(
                "agent_team_ledger_up", "1 if the ledger could be read at this scrape.", value=0
            )
            return
        yield GaugeMetricFamily(
            "agent_team_ledger_up", "1 if the ledger could be read at this scrape.", value=1
        )
        yield from self._ledger_metrics(facts, now)

    def _health_metrics(self) -> Iterable[Metric]:
        facts = self._ctx.health.facts()
        for key, name, documentation in _INTAKE_FACTS:
            yield CounterMetricFamily(name, documentation, value=_number(facts.get(key)))
        if "budget_outbox_rows" in facts:  # a daemon's loop says it; `tick` has none
            yield GaugeMetricFamily(
                "agent_team_budget_outbox_rows",
                "Spend rows the database refused, waiting in the outbox to be replayed (the "
                "daily cap counts them meanwhile).",
                value=_number(facts.get("budget_outbox_rows")),
            )
        loops = self._ctx.health.loops()
        up = GaugeMetricFamily("agent_team_loop_up", "1 while a daemon loop runs.", labels=["loop"])
        restarts = CounterMetricFamily(
            "agent_team_loop_restarts", "Times a daemon loop was restarted.", labels=["loop"]
        )
        for status in loops:
            up.add_metric([status.name], 1 if status.alive else 0)
            restarts.add_metric([status.name], status.restarts)
        yield up
        yield restarts
        yield from self._instance_metrics()

    def _instance_metrics(self) -> Iterable[Metric]:
        """This process's own counters: what no ledger row records."""
        yield CounterMetricFamily(
            "agent_team_fenced_writes_refused",
            "Writes this process refused because its run's lease had moved to another "
            "instance (a newer epoch).",
            value=db.fence_counters.refused,
        )
        coordinator = self._ctx.coordinator
        if coordinator is None:
            return
        writes = coordinator.ledger.write_health
        yield CounterMetricFamily(
            "agent_team_ledger_write_failures",
            "Write transactions the database refused (away, full, read-only, damaged).",
            value=writes.failures,
        )
        last = writes.last_failure
        yield GaugeMetricFamily(
            "agent_team_ledger_last_write_failure_timestamp_seconds",
            "Unix time of the last write the database refused (0: none since the start).",
            value=last.at if last is not None else 0,
        )
        yield GaugeMetricFamily(
            "agent_team_ledger_writable",
            "0 while the last write failed and none has succeeded since (see /readyz).",
            value=0 if writes.failing() is not None else 1,
        )
        info = GaugeMetricFamily(
            "agent_team_instance", "This process (1), named as in leases.", labels=["instance"]
        )
        info.add_metric([coordinator.instance], 1)
        yield info
        yield CounterMetricFamily(
            "agent_team_command_wakeups",
            "Times another instance's command woke this one's worker (PostgreSQL NOTIFY).",
            value=coordinator.wakeups,
        )
        held = GaugeMetricFamily(
            "agent_team_singleton_loop_held",
            "1 while this process holds a loop that runs on one instance at a time.",
            labels=["loop"],
        )
        for loop in coordinator.loops_held():
            held.add_metric([loop], 1)
        yield held

    def _ledger_metrics(self, facts: _LedgerFacts, now: datetime) -> Iterable[Metric]:
        tasks = GaugeMetricFamily("agent_team_tasks", "Tasks per status.", labels=["status"])
        for status, count in facts.tasks_by_status.items():
            tasks.add_metric([status], count)
        yield tasks
        yield GaugeMetricFamily(
            "agent_team_open_questions",
            "Gate questions waiting for an answer.",
            value=facts.open_questions.count,
        )
        oldest = facts.open_questions.oldest_posted_at
        age = max(0.0, (now - db.from_iso(oldest)).total_seconds()) if oldest else 0.0
        yield GaugeMetricFamily(
            "agent_team_oldest_open_question_age_seconds",
            "Seconds since the oldest open question was posted (0 when none is open).",
            value=age,
        )
        usd = GaugeMetricFamily(
            "agent_team_budget_spent_usd",
            "USD recorded today (UTC) per billing mode.",
            labels=["billing_mode"],
        )
        tokens = GaugeMetricFamily(
            "agent_team_budget_spent_tokens",
            "Input plus output tokens recorded today (UTC) per billing mode.",
            labels=["billing_mode"],
        )
        for mode in BillingMode:
            spend = facts.spent_today.get(mode.value, db.Spend())
            usd.add_metric([mode.value], spend.usd_cost)
            tokens.add_metric([mode.value], spend.tokens)
        yield usd
        yield tokens
        running = GaugeMetricFamily(
            "agent_team_running_tasks",
            "Tasks running now per instance (live execution leases), from the ledger.",
            labels=["instance"],
        )
        for owner, count in sorted(facts.leases.running_by_owner.items()):
            running.add_metric([owner], count)
        yield running
        takeovers = CounterMetricFamily(
            "agent_team_lease_takeovers",
            "Leases taken over from a holder whose time ran out (a dead or stalled "
            "instance), per kind (task runs, singleton loops), from the ledger.",
            labels=["kind"],
        )
        for kind in ("task", "loop"):
            takeovers.add_metric([kind], facts.leases.takeovers_by_kind.get(kind, 0))
        yield takeovers
        buckets, total = histogram_buckets(facts.latencies_s)
        yield HistogramMetricFamily(
            "agent_team_answer_resume_seconds",
            "From an answer being recorded to its resume command finishing.",
            buckets=buckets,
            sum_value=total,
        )
        yield from self._pull_request_metrics(facts.pulls)

    def _pull_request_metrics(self, pulls: db.PullRequestStats) -> Iterable[Metric]:
        states = GaugeMetricFamily(
            "agent_team_pull_requests",
            "Draft pull requests the agent opened, per state (open, merged, closed).",
            labels=["state"],
        )
        for state in db.PR_STATES:
            states.add_metric([state], pulls.by_state.get(state, 0))
        yield states
        buckets, total = histogram_buckets(
            (float(pull.rounds) for pull in pulls.finished), PR_ROUND_BUCKETS
        )
        yield HistogramMetricFamily(
            "agent_team_pr_rounds",
            "Follow-up rounds each pull request took, over those merged or closed.",
            buckets=buckets,
            sum_value=total,
        )
        merges = (_merge_s(pull) for pull in pulls.finished)
        buckets, total = histogram_buckets((s for s in merges if s is not None), PR_MERGE_BUCKETS_S)
        yield HistogramMetricFamily(
            "agent_team_pr_open_to_merge_seconds",
            "From a draft pull request opening to its merge, over merged ones.",
            buckets=buckets,
            sum_value=total,
        )


def make_registry(ctx: DashboardContext) -> CollectorRegistry:
    """A fresh registry holding only the ledger collector (never the global one)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LedgerCollector(ctx))
    return registry
