"""Scale-out: pipeline tasks/s with 1, 2 and 3 daemons on PostgreSQL vs. one daemon on SQLite.

Each configuration gets a fresh ledger (a SQLite file, or a new database on a
throwaway PostgreSQL server this script starts and stops, `tests/pg_server.py`)
and its own `agent-team daemon` processes (`tests/e2e/cluster.py`: one
dashboard port and state folder each), with the offline model, the offline
builder (a git worktree and commit per task), the local transport and the
default settings (`AGENT_TEAM_POLL_S` 1 s, two workers, 30 s leases). Then,
timed from the first submit:

    1. N tasks are POSTed to `/api/tasks` of a random daemon;
    2. as each plan question opens (the script polls the ledger every 20 ms), its
       approval is POSTed to a random daemon's `/api/questions/<id>/answer`;
    3. until all N are done.

Throughput is N over the span from the first task's `created_at` to the last
`done` row's `exited_at` (ledger times), so the script's own polling is not in
it. Daemon start-up is not timed. Also from the ledger: each task's
submit -> done latency, and each answer's `answered_at` -> the resume run
re-entering `plan_review`, split by whether the daemon that stored the answer
(and was woken by it in-process) claimed the resume, or another one did.

Then two latency runs isolate the hand-over between instances: two daemons
on PostgreSQL, A with one worker kept busy by a long build, B idle. Answers
are POSTed to A (stored there; A cannot claim), so B must learn of them:
answer -> resume claimed on B, p50/p99, beside answers POSTed to B itself
(woken in-process). Once with LISTEN/NOTIFY (the default: A's write wakes B),
once with `AGENT_TEAM_PG_NOTIFY=off` (only B's inbox poll finds them). Each
answer waits a random fraction of the poll interval first, so the polling
figures sample B's poll phase evenly.

    .venv/bin/python bench/scale_out.py                 # N = 60, 30 latency rounds
    .venv/bin/python bench/scale_out.py --n 20 --latency 10   # quick run

This is a benchmark, not a test: only the ratios within one run mean anything.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent_team import db  # noqa: E402
from tests.e2e.cluster import TOKEN, Cluster, Instance, answer_text  # noqa: E402
from tests.pg_server import PgServer  # noqa: E402

BODY = (
    "Remember the email address on the login page between visits, for this task.\n"
    "- Store it in a cookie\n"
    "- Prefill the field\n"
    "- Test both paths\n"
)
CONFIGS = (("sqlite", 1), ("postgres", 1), ("postgres", 2), ("postgres", 3))
HEADERS = {"Authorization": f"Bearer {TOKEN}"}


def cpu_s(pid: int) -> float:
    """CPU seconds of a process and of the children it waited for (git, builds)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(value) for value in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(1, min(len(ordered), math.ceil(q / 100 * len(ordered)))) - 1]


def seconds(start: str, end: str) -> float:
    return (db.from_iso(end) - db.from_iso(start)).total_seconds()


@dataclass
class Run:
    """What one configuration measured."""

    backend: str
    daemons: int
    n: int
    span_s: float = 0.0
    wall_s: float = 0.0
    e2e: list[float] = field(default_factory=list)
    resume_same: list[float] = field(default_factory=list)  # claimed by the answering daemon
    resume_other: list[float] = field(default_factory=list)  # claimed by another daemon
    per_daemon: dict[str, int] = field(default_factory=dict)  # builds: who ran the approval
    daemon_cpu_s: float = 0.0  # all daemons, from the first submit to the last done
    retried: int | None = None  # PostgreSQL: writes that failed to serialise (and ran again)

    @property
    def throughput(self) -> float:
        return self.n / self.span_s if self.span_s else math.nan


class Driver:
    """Submits and answers through the daemons' dashboards, reads the outcome from the ledger."""

    def __init__(self, cluster: Cluster, ledger: db.Ledger, seed: int = 11) -> None:
        self.cluster = cluster
        self.ledger = ledger
        self.pick = random.Random(seed)
        self.client = httpx.Client(timeout=30, headers=HEADERS)
        self.answered_on: dict[str, str] = {}  # question id -> instance the answer went to

    def close(self) -> None:
        self.client.close()

    def submit(self, title: str, to: Instance | None = None) -> str:
        target = to or self.pick.choice(self.cluster.live())
        response = self.client.post(f"{target.url}/api/tasks", json={"title": title, "body": BODY})
        response.raise_for_status()
        return str(response.json()["task_id"])

    def answer(self, question: db.Question, to: Instance | None = None) -> None:
        target = to or self.pick.choice(self.cluster.live())
        response = self.client.post(
            f"{target.url}/api/questions/{question.question_id}/answer",
            json={"answer": answer_text(question.kind)},
        )
        response.raise_for_status()
        self.answered_on[question.question_id] = target.name

    def answer_open(self) -> None:
        for question in db.list_questions(self.ledger, status="open"):
            if question.question_id not in self.answered_on:
                self.answer(question)

    def done(self) -> int:
        return db.count_tasks_by_status(self.ledger).get("done", 0)

    def resume_latency(self, question: db.Question) -> tuple[float, str | None]:
        """answered_at -> the resume run's first transition, and who claimed the resume."""
        assert question.answered_at is not None
        later = [
            row
            for row in db.list_transitions(self.ledger, question.thread_id)
            if row.entered_at > question.answered_at
        ]
        command = db.get_command(self.ledger, db.resume_command_id(question.question_id))
        claimer = self.cluster.by_consumer(command.claimed_by if command else None)
        return seconds(question.answered_at, later[0].entered_at), (
            claimer.name if claimer else None
        )


def wait(condition: Any, timeout_s: float, what: str, step: float = 0.02) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting for {what}")
        time.sleep(step)


def task_done(ledger: db.Ledger, task_id: str) -> bool:
    task = db.get_task(ledger, task_id)
    return task is not None and task.status == "done"


def server_log_size(server: PgServer | None) -> int:
    return server.log.stat().st_size if server is not None and server.log.exists() else 0


def serialisation_failures(server: PgServer, since: int) -> int:
    """Errors the server logged since byte `since` that make our writes run again."""
    with server.log.open("rb") as log:
        log.seek(since)
        text = log.read().decode(errors="replace")
    return text.count("could not serialize access") + text.count("deadlock detected")


def fresh_target(backend: str, server: PgServer | None, folder: Path) -> str:
    if backend == "sqlite":
        path = folder / "agent-team.db"
        db.init_db(path)
        return str(path)
    assert server is not None
    url = server.create_database()
    db.init_db(url)
    return url


def run_config(
    backend: str, daemons: int, n: int, server: PgServer | None, folder: Path, poll_s: float
) -> Run:
    target = fresh_target(backend, server, folder)
    settings = {
        "AGENT_TEAM_POLL_S": str(poll_s),
        "AGENT_TEAM_LOG_LEVEL": "warning",
        "AGENT_TEAM_LIMIT_WRITES_PER_MIN": "0",  # the driver's submits are load, not abuse
    }
    cluster = Cluster(folder, target, settings=settings)
    ledger = db.open_ledger(target)
    driver = Driver(cluster, ledger)
    run = Run(backend, daemons, n)
    try:
        for slot in range(daemons):
            cluster.start(f"d{slot + 1}")
        for instance in cluster.live():
            cluster.wait_ready(instance)
        cpu_ready = sum(cpu_s(i.proc.pid) for i in cluster.live())
        log_from = server_log_size(server)
        began = time.perf_counter()
        task_ids = [driver.submit(f"Task {i}") for i in range(n)]

        def finished() -> bool:
            driver.answer_open()
            return driver.done() == n

        wait(finished, 900, f"{n} tasks done ({backend} x{daemons})")
        run.wall_s = time.perf_counter() - began
        run.daemon_cpu_s = sum(cpu_s(i.proc.pid) for i in cluster.live()) - cpu_ready
        if server is not None and backend == "postgres":
            run.retried = serialisation_failures(server, log_from)
        created, ended = [], []
        for task_id in task_ids:
            task = db.get_task(ledger, task_id)
            rows = db.list_transitions(ledger, task_id)
            assert task is not None and rows[-1].exited_at is not None
            created.append(task.created_at)
            ended.append(rows[-1].exited_at)
            run.e2e.append(seconds(task.created_at, rows[-1].exited_at))
            for question in db.list_questions(ledger, thread_id=task_id):
                latency, claimer = driver.resume_latency(question)
                same = claimer == driver.answered_on.get(question.question_id)
                (run.resume_same if same else run.resume_other).append(latency)
                if question.kind == "plan_decision":  # the run that resumes it builds
                    name = claimer or "?"
                    run.per_daemon[name] = run.per_daemon.get(name, 0) + 1
        run.span_s = seconds(min(created), max(ended))
    finally:
        driver.close()
        cluster.stop_all()
        ledger.close()
        if server is not None and backend == "postgres":
            server.drop_database(target)
    return run


@dataclass
class Latency:
    cross: list[float] = field(default_factory=list)  # answer stored on A, claimed on B
    local: list[float] = field(default_factory=list)  # answer stored on B, claimed on B


def run_latency(
    rounds: int, server: PgServer, folder: Path, poll_s: float, *, notify: bool
) -> Latency:
    """Answer written on A (busy) -> resume claimed on B (idle), vs. written on B.

    With `notify` B is woken by A's NOTIFY; without it (AGENT_TEAM_PG_NOTIFY=off)
    only B's inbox poll finds the answer A stored.
    """
    target = fresh_target("postgres", server, folder)
    blocker_build = f"touch {folder / 'blocking'}; sleep 600"
    common = {
        "AGENT_TEAM_POLL_S": str(poll_s),
        "AGENT_TEAM_LOG_LEVEL": "warning",
        "AGENT_TEAM_LIMIT_WRITES_PER_MIN": "0",
        "AGENT_TEAM_PG_NOTIFY": "on" if notify else "off",
    }
    cluster = Cluster(folder, target, settings=common)
    ledger = db.open_ledger(target)
    driver = Driver(cluster, ledger, seed=5)
    pause = random.Random(3)
    found = Latency()
    try:
        # A alone first, so the blocking build is its own: one worker, kept busy.
        cluster.settings = {
            **common,
            "AGENT_TEAM_WORKERS": "1",
            "AGENT_TEAM_BUILDER": "command",
            "AGENT_TEAM_BUILD_COMMAND": blocker_build,
        }
        a = cluster.start("a")
        cluster.wait_ready(a)
        blocker = driver.submit("Blocker", to=a)
        wait(lambda: bool(db.list_questions(ledger, status="open", thread_id=blocker)), 60, "q")
        (question,) = db.list_questions(ledger, status="open", thread_id=blocker)
        driver.answer(question, to=a)
        wait((folder / "blocking").exists, 60, "A's blocking build")
        cluster.settings = dict(common)
        b = cluster.start("b")
        cluster.wait_ready(b)
        for i in range(rounds):
            task_id = driver.submit(f"Latency {i}", to=b)

            def delivered(task_id: str = task_id) -> bool:
                open_ones = db.list_questions(ledger, status="open", thread_id=task_id)
                return bool(open_ones) and all(q.channel_ref for q in open_ones)

            wait(delivered, 60, "the plan question")
            (question,) = db.list_questions(ledger, status="open", thread_id=task_id)
            time.sleep(pause.uniform(0, poll_s))  # land anywhere in B's poll interval
            writer = a if i % 2 == 0 else b
            driver.answer(question, to=writer)
            wait(lambda task_id=task_id: task_done(ledger, task_id), 60, "the task done")
            answered = db.get_question(ledger, question.question_id)
            assert answered is not None
            latency, claimer = driver.resume_latency(answered)
            if claimer != b.name:
                raise SystemExit(f"the resume was claimed by {claimer}, not by B")
            (found.cross if writer is a else found.local).append(latency)
    finally:
        driver.close()
        cluster.stop_all()
        ledger.close()
        server.drop_database(target)
    return found


def ms(value: float) -> str:
    return "      n/a" if math.isnan(value) else f"{value * 1e3:7.0f}ms"


def report(runs: list[Run], latency: dict[str, Latency], poll_s: float) -> None:
    base = runs[0]
    print(
        f"N = {base.n} tasks per configuration; offline model and builder; local transport; "
        f"AGENT_TEAM_POLL_S={poll_s:g}; 2 workers per daemon; answers POSTed to a random daemon"
    )
    print()
    header = (
        f"{'backend':10}{'daemons':>8}{'span':>9}{'tasks/s':>9}{'ratio':>8}"
        f"{'cpu/task':>10}{'retries':>9}{'e2e p50':>10}{'e2e p99':>10}"
        f"{'resume same p50/p99':>22}{'resume other p50/p99':>23}"
        f"   builds per daemon"
    )
    print(header)
    for run in runs:
        ratio = run.throughput / base.throughput
        print(
            f"{run.backend:10}{run.daemons:>8}{run.span_s:>8.1f}s{run.throughput:>9.2f}"
            f"{ratio:>7.2f}x{ms(run.daemon_cpu_s / run.n):>10}"
            f"{'-' if run.retried is None else run.retried:>9}"
            f"{ms(statistics.median(run.e2e)):>10}{ms(pct(run.e2e, 99)):>10}"
            f"{ms(pct(run.resume_same, 50)):>12}{ms(pct(run.resume_same, 99)):>10}"
            f"{ms(pct(run.resume_other, 50)):>13}{ms(pct(run.resume_other, 99)):>10}"
            f"   {dict(sorted(run.per_daemon.items()))}"
        )
    print()
    print(
        "ratio: tasks/s over the SQLite single daemon's; span: first created_at -> last done "
        "(ledger); cpu/task: the daemons' CPU (with their git children; not PostgreSQL's);\n"
        "retries: writes PostgreSQL refused to serialise (each ran again), from its log;\n"
        "e2e: one task's submit -> done; resume: answered_at -> the resume run re-entering "
        "plan_review, 'same' when the daemon that stored the answer claimed it"
    )
    for label, found in latency.items():
        print()
        print(
            f"answer -> resume claimed, PostgreSQL, A busy (1 worker, a long build) and B idle, "
            f"{len(found.cross) + len(found.local)} answers, {label}:"
        )
        print(
            f"  written on A, claimed on B: p50 {ms(pct(found.cross, 50)).strip()}  "
            f"p99 {ms(pct(found.cross, 99)).strip()}  (n={len(found.cross)})"
        )
        print(
            f"  written on B, claimed on B (woken in-process): "
            f"p50 {ms(pct(found.local, 50)).strip()}  p99 {ms(pct(found.local, 99)).strip()}  "
            f"(n={len(found.local)})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=60, help="tasks per configuration")
    parser.add_argument(
        "--latency", type=int, default=30, help="answers in the latency run (0: skip)"
    )
    parser.add_argument(
        "--poll-s", type=float, default=1.0, help="AGENT_TEAM_POLL_S of every daemon"
    )
    args = parser.parse_args()
    if args.n < 1 or args.latency < 0 or args.poll_s <= 0:
        parser.error("--n must be at least 1, --latency at least 0, --poll-s above 0")
    server = PgServer().start()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-scale-out-") as tmp:
            runs = []
            for backend, daemons in CONFIGS:
                folder = Path(tmp) / f"{backend}-{daemons}"
                folder.mkdir()
                print(f"running {backend} x{daemons} ...", file=sys.stderr, flush=True)
                runs.append(run_config(backend, daemons, args.n, server, folder, args.poll_s))
            latency: dict[str, Latency] = {}
            for notify, label in ((True, "LISTEN/NOTIFY"), (False, "polling only (NOTIFY off)")):
                if not args.latency:
                    break
                print(f"running the latency rounds, {label} ...", file=sys.stderr, flush=True)
                folder = Path(tmp) / f"latency-{'notify' if notify else 'poll'}"
                folder.mkdir()
                latency[label] = run_latency(
                    args.latency, server, folder, args.poll_s, notify=notify
                )
    finally:
        server.stop()
    report(runs, latency, args.poll_s)


if __name__ == "__main__":
    main()
