"""What the dashboard costs on a big ledger: daemon start-up, API latency and RSS.

One run seeds a fresh ledger with T tasks (default 10,000), each with a
ten-row journey (the last row open) that ends parked on an expired plan
question, three questions per task (two answered, with their `done` resume
commands, and the expired one) and B budget rows (default 1,000,000) spread
over the tasks, their model-calling stages and the last 30 UTC days. Seeding
is setup, not a measurement: `db.init_db` makes the schema, then raw
`executemany` on a plain `sqlite3` connection in one transaction fills it,
with the rows shaped exactly as the package writes them. No `start` command
(and no pending or claimed command of any kind) is seeded, so the daemon runs
no graph.

Then the real daemon (`agent-team --db FILE daemon`) runs as a child process:
first on an empty ledger (the idle baseline), then on the seeded one, each
started `--startups` times (the last start stays up).

    start-up   process start -> first `/healthz` 200, polled every 10 ms;
               the median of the starts, parked vs. idle.
    latency    GET /api/task/<random id>, /api/tasks?limit=50&offset=<random>,
               /api/budget?day=<a seeded day> and, as the in-run baseline,
               /healthz (the cheapest endpoint); one httpx client over
               loopback, requests interleaved round-robin after a warm-up,
               nearest-rank p50/p99, and each endpoint's ratio to /healthz.
               Two passes: one kept-alive connection (what a browser or a
               Prometheus scraper gets, and what the target is judged on),
               then a new connection per request, which shows the server's
               own cost when a kept-alive response stalls on TCP (a
               response written in two segments without TCP_NODELAY waits
               for the client's delayed ACK, about 40 ms on Linux).
    RSS        VmRSS of the daemon once settled (`--settle` seconds after
               /healthz, so the worker's 5-second timers have run on the
               parked tasks) vs. the idle daemon settled the same way.

`--agent-team PATH` runs another executable (another checkout's, or a
patched one) against the same seed, to compare; `--profile ROWS` then
cProfiles the start-up sweep, the worker's timers and each handler in this
process, on the same ledger.

This is a benchmark, not a test (nothing here runs under pytest); only the
ratios within one run, and the targets, mean anything.

    .venv/bin/python bench/dashboard.py                       # full size
    .venv/bin/python bench/dashboard.py --tasks 1000 --budget-rows 100000 --requests 100
    .venv/bin/python bench/dashboard.py --profile 25 2> profile.txt
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import math
import os
import pstats
import random
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from agent_team import db
from agent_team.requests.answers import PLAN_DECISION_HELP

TARGET_STARTUP_S = 2.0
TARGET_TASK_P99_S = 0.050
TARGET_RSS_RATIO = 1.2
DAYS = 30
HEALTHZ_DEADLINE_S = 120.0
STOP_DEADLINE_S = 60.0

VENV_BIN = Path(__file__).resolve().parent.parent / ".venv" / "bin"

# One task's journey: (to_phase, status) per transition row. The last row stays open.
JOURNEY: tuple[tuple[str, str], ...] = (
    ("intake", "running"),
    ("clarify", "running"),
    ("clarify", "waiting"),  # q1 (clarify) asked
    ("clarify", "running"),  # q1 answered
    ("plan", "running"),
    ("plan_review", "running"),
    ("plan_review", "waiting"),  # q2 (plan_decision) asked
    ("plan", "running"),  # q2 answered "revise"
    ("plan_review", "waiting"),  # q3 (plan_decision) asked
    ("plan_review", "parked"),  # q3 expired: the task is parked (open row)
)
# Transition rows during which a model is called: the budget rows go in their windows.
SPENDING_ROWS = (0, 1, 3, 4, 7)
ASKED = {2: 1, 6: 2, 8: 3}  # transition index -> question turn asked when it was entered
PARKED_REASON = "question_expired"
MODELS: tuple[tuple[str, str, float, float], ...] = (
    # model, billing mode, USD per million input tokens, per million output tokens
    ("anthropic:claude-sonnet-4-5", "api", 3.0, 15.0),
    ("anthropic:claude-haiku-4-5", "api", 1.0, 5.0),
    ("anthropic:claude-sonnet-4-5", "subscription", 0.0, 0.0),
    ("ollama:llama3.1", "api", 0.0, 0.0),
)
BODY = (
    "Remember the email address on the login page between visits.\n"
    "- Store it in a cookie that expires after 30 days\n"
    "- Prefill the field when the cookie is present\n"
    "- Test both paths, and the path where the cookie is malformed\n"
)
HOST = "bench-host"
KEEP_ALIVE = "keep-alive"
FRESH = "new connection"
PASS_NOTES = {
    KEEP_ALIVE: "one connection for every request, as a browser or a scraper has",
    FRESH: "a TCP connect per request: no delayed-ACK stall, plus the connect",
}
CHUNK = 50_000


# --- seeding ------------------------------------------------------------------------------------


@dataclass
class Seeded:
    path: Path
    task_ids: list[str]
    days: list[str]
    counts: dict[str, int]
    seconds: float


def _iso(epoch: float) -> str:
    return db.to_iso(datetime.fromtimestamp(epoch, UTC))


def _task_rows(
    rng: random.Random, index: int, first_s: float, now_s: float
) -> tuple[
    tuple[Any, ...],
    list[tuple[Any, ...]],
    list[tuple[Any, ...]],
    list[tuple[Any, ...]],
    list[tuple[float, float, str]],
]:
    """One task: its row, transitions, questions, resume commands and spending windows."""
    task_id = f"t{rng.getrandbits(40):010x}"
    durations = [
        rng.uniform(300.0, 4 * 3600.0) if status == "waiting" else rng.uniform(20.0, 600.0)
        for _phase, status in JOURNEY[:-1]
    ]
    span = sum(durations) + 60.0
    start = rng.uniform(first_s, max(first_s, now_s - span))
    entered = [start]
    for duration in durations:
        entered.append(entered[-1] + duration)
    title = f"Task {index}: remember the login email"
    transitions: list[tuple[Any, ...]] = []
    for i, (phase, status) in enumerate(JOURNEY):
        exited = _iso(entered[i + 1]) if i + 1 < len(JOURNEY) else None
        previous = JOURNEY[i - 1][0] if i else None
        note = (
            f"question {task_id}:q3 expired at {_iso(entered[i])}; "
            f"reopen it with `agent-team reopen {task_id}:q3`"
            if status == "parked"
            else None
        )
        transitions.append((task_id, previous, phase, _iso(entered[i]), exited, status, note))
    questions: list[tuple[Any, ...]] = []
    commands: list[tuple[Any, ...]] = []
    for row, turn in ASKED.items():
        question_id = f"{task_id}:q{turn}"
        kind = "clarify" if turn == 1 else "plan_decision"
        asked = entered[row]
        deadline = asked + (24 if kind == "clarify" else 72) * 3600.0
        payload = {"text": "Which browsers must keep the address?", "title": title}
        if kind == "plan_decision":
            payload = {
                "text": f"Review the plan for: {title}",
                "title": title,
                "plan_markdown": "## Plan\n- store the cookie\n- prefill the field\n- tests\n",
            }
        payload["help"] = PLAN_DECISION_HELP if turn > 1 else "reply with the missing details"
        if turn == 3:  # expired: the parked row was entered when it ran out
            questions.append(
                (
                    question_id,
                    task_id,
                    turn,
                    kind,
                    "expired",
                    "local",
                    f"local:{question_id}",
                    _iso(asked + 0.01),
                    _iso(entered[row + 1]),
                    None,
                    None,
                    None,
                    json.dumps(payload, sort_keys=True),
                )
            )
            continue
        answer: dict[str, str] = (
            {"text": "Chrome and Firefox, current versions."}
            if kind == "clarify"
            else {"decision": "revise", "text": "Also handle a malformed cookie."}
        )
        answered = entered[row + 1] - 0.05
        answered_at = _iso(answered)
        answer_json = json.dumps(answer, sort_keys=True)
        questions.append(
            (
                question_id,
                task_id,
                turn,
                kind,
                "answered",
                "local",
                f"local:{question_id}",
                _iso(asked + 0.01),
                _iso(deadline),
                answer_json,
                answered_at,
                "dashboard:alice",
                json.dumps(payload, sort_keys=True),
            )
        )
        commands.append(
            (
                db.resume_command_id(question_id),
                "resume",
                task_id,
                json.dumps({"answer": answer, "question_id": question_id}, sort_keys=True),
                "done",
                1,
                f"{HOST}:4242:abc123",
                _iso(answered + 600.0),
                _iso(answered + 0.001),
                _iso(entered[row + 1] + 0.02),
                None,
            )
        )
    windows = [(entered[i], entered[i + 1], JOURNEY[i][0]) for i in SPENDING_ROWS]
    created, updated = _iso(start - 0.5), _iso(entered[-1])
    task = (
        task_id,
        "code",
        "github",
        f"acme/shop#{index}",
        title,
        BODY,
        "parked",
        "plan_review",
        PARKED_REASON,
        created,
        updated,
    )
    return task, transitions, questions, commands, windows


def _insert(
    conn: sqlite3.Connection, table: str, columns: str, rows: list[tuple[Any, ...]]
) -> None:
    marks = ", ".join("?" for _ in columns.split(","))
    conn.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)


def seed_ledger(path: Path, *, tasks: int, budget_rows: int, seed: int, now: datetime) -> Seeded:
    """A fresh ledger at `path`, filled in one transaction; returns what the requests need.

    Every table is filled in time order, as the package appends to it (a task's
    budget rows sit among the rows of the tasks that ran at the same time, not
    scattered over the whole table), so rowids and pages follow time as in a
    real ledger.
    """
    began = time.perf_counter()
    db.init_db(path)
    rng = random.Random(seed)
    first_day = (now - timedelta(days=DAYS - 1)).replace(hour=0, minute=0, second=0, microsecond=0)
    first_s, now_s = first_day.timestamp(), now.timestamp() - 60.0
    bundles = [_task_rows(rng, index, first_s, now_s) for index in range(tasks)]
    bundles.sort(key=lambda bundle: str(bundle[0][9]))  # created_at
    task_ids = [bundle[0][0] for bundle in bundles]
    windows = [bundle[4] for bundle in bundles]
    transitions = sorted((row for b in bundles for row in b[1]), key=lambda row: str(row[3]))
    questions = sorted((row for b in bundles for row in b[2]), key=lambda row: str(row[7]))
    commands = sorted((row for b in bundles for row in b[3]), key=lambda row: str(row[8]))
    # Budget rows: (moment, task, stage, model, tokens in, tokens out), then sorted by time.
    calls: list[tuple[float, int, str, int, int, int]] = []
    for _ in range(budget_rows):
        task_index = rng.randrange(tasks)
        low, high, stage = rng.choice(windows[task_index])
        calls.append(
            (
                rng.uniform(low, high - 0.001),
                task_index,
                stage,
                rng.randrange(len(MODELS)),
                rng.randint(200, 20_000),
                rng.randint(50, 4_000),
            )
        )
    calls.sort()
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous = OFF")  # setup only; the daemon opens it normally
        conn.execute("BEGIN IMMEDIATE")
        _insert(
            conn,
            "tasks",
            "id, kind, source, source_ref, title, body, status, phase, parked_reason, "
            "created_at, updated_at",
            [bundle[0] for bundle in bundles],
        )
        _insert(
            conn,
            "task_transitions",
            "thread_id, from_phase, to_phase, entered_at, exited_at, status, note",
            transitions,
        )
        _insert(
            conn,
            "pending_questions",
            "question_id, thread_id, turn, kind, status, transport, channel_ref, posted_at, "
            "deadline_at, answer_json, answered_at, answered_via, payload_json",
            questions,
        )
        _insert(
            conn,
            "commands",
            "command_id, kind, task_id, payload_json, state, attempts, claimed_by, lease_until, "
            "created_at, done_at, error",
            commands,
        )
        for first in range(0, len(calls), CHUNK):
            rows: list[tuple[Any, ...]] = []
            for epoch, task_index, stage, model_index, tokens_in, tokens_out in calls[
                first : first + CHUNK
            ]:
                model, mode, price_in, price_out = MODELS[model_index]
                usd = round((tokens_in * price_in + tokens_out * price_out) / 1e6, 6)
                moment = datetime.fromtimestamp(epoch, UTC)
                rows.append(
                    (
                        task_ids[task_index],
                        stage,
                        model,
                        mode,
                        tokens_in,
                        tokens_out,
                        usd,
                        db.to_iso(moment),
                        db.day_bucket(moment),
                    )
                )
            _insert(
                conn,
                "budget_ledger",
                "thread_id, stage, model, billing_mode, input_tokens, output_tokens, usd_cost, "
                "recorded_at, day_bucket",
                rows,
            )
        # The days' totals the cap check reads, as `db.record_usage` keeps them.
        conn.execute(
            "INSERT INTO budget_days (day_bucket, billing_mode, calls, input_tokens, "
            "output_tokens, usd_cost) SELECT day_bucket, billing_mode, COUNT(*), "
            "SUM(input_tokens), SUM(output_tokens), SUM(usd_cost) FROM budget_ledger "
            "GROUP BY day_bucket, billing_mode"
        )
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        days = [row[0] for row in conn.execute("SELECT DISTINCT day_bucket FROM budget_ledger")]
        counts = {
            name: int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
            for name, table in (
                ("tasks", "tasks"),
                ("transitions", "task_transitions"),
                ("questions", "pending_questions"),
                ("commands", "commands"),
                ("budget", "budget_ledger"),
            )
        }
        runnable = conn.execute(
            "SELECT COUNT(*) FROM commands WHERE kind = 'start' OR state IN ('pending', 'claimed')"
        ).fetchone()[0]
    finally:
        conn.close()
    if runnable:
        raise SystemExit(f"the seed left {runnable} runnable commands; the daemon would run them")
    return Seeded(path, task_ids, sorted(days), counts, time.perf_counter() - began)


# --- the daemon -----------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _proc_kib(pid: int, key: str) -> int:
    """A `/proc/<pid>/status` figure in KiB (VmRSS: resident now; VmHWM: the peak)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1])
    raise SystemExit(f"no {key} in /proc/{pid}/status")


@dataclass
class RunningDaemon:
    name: str
    proc: subprocess.Popen[bytes]
    url: str
    log: Path
    startup_s: float
    startups: list[float] = field(default_factory=list)  # every start of this ledger, in order
    rss_kib: dict[str, int] = field(default_factory=dict)

    def rss(self, label: str) -> int:
        self.rss_kib[label] = _proc_kib(self.proc.pid, "VmRSS")
        self.rss_kib[f"{label} peak"] = _proc_kib(self.proc.pid, "VmHWM")
        return self.rss_kib[label]

    def fail(self, why: str) -> SystemExit:
        tail = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
        return SystemExit(f"{self.name} daemon: {why}\n--- its log (tail) ---\n{tail}")


def _clean_env(port: int, state_dir: Path) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("AGENT_TEAM_")
        and key not in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "STATE_DIRECTORY")
    }
    env.update(
        AGENT_TEAM_DASHBOARD_PORT=str(port),
        AGENT_TEAM_STATE_DIR=str(state_dir),
        AGENT_TEAM_LOG_LEVEL="warning",
        AGENT_TEAM_LIMIT_WRITES_PER_MIN="0",  # the load is the measurement, not abuse
    )
    return env


def start_daemon(name: str, ledger: Path, folder: Path, executable: Path) -> RunningDaemon:
    """Start `agent-team --db <ledger> daemon`; time process start -> first /healthz 200."""
    port = _free_port()
    state_dir = folder / f"state-{name}"
    log = folder / f"daemon-{name}.log"
    url = f"http://127.0.0.1:{port}"
    command = [str(executable), "--db", str(ledger), "daemon"]
    with open(log, "wb") as out:
        began = time.perf_counter()
        proc = subprocess.Popen(
            command,
            cwd=folder,  # no stray .env from the caller's folder
            env=_clean_env(port, state_dir),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    daemon = RunningDaemon(name, proc, url, log, startup_s=0.0)
    deadline = began + HEALTHZ_DEADLINE_S
    with httpx.Client(base_url=url, timeout=2.0) as client:
        while True:
            if proc.poll() is not None:
                raise daemon.fail(f"exited with {proc.returncode} before /healthz answered")
            try:
                if client.get("/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.perf_counter() > deadline:
                stop_daemon(daemon)
                raise daemon.fail(f"/healthz not 200 within {HEALTHZ_DEADLINE_S:.0f} s")
            time.sleep(0.01)
    daemon.startup_s = time.perf_counter() - began
    return daemon


def stop_daemon(daemon: RunningDaemon) -> float:
    """SIGTERM, then wait for a clean exit; returns the seconds it took."""
    proc = daemon.proc
    if proc.poll() is not None:
        return 0.0
    began = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_DEADLINE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise daemon.fail(f"did not stop within {STOP_DEADLINE_S:.0f} s of SIGTERM") from None
    if proc.returncode != 0:
        raise daemon.fail(f"exited with {proc.returncode} after SIGTERM")
    return time.perf_counter() - began


def start_repeatedly(
    name: str, ledger: Path, folder: Path, args: argparse.Namespace, started: list[RunningDaemon]
) -> RunningDaemon:
    """Start (and stop) the daemon `--startups` times; the last one stays up.

    Its `startup_s` is the median of all starts (the first start on a fresh
    ledger also creates the checkpoint tables).
    """
    times: list[float] = []
    for attempt in range(args.startups):
        daemon = start_daemon(name, ledger, folder, args.agent_team)
        started.append(daemon)
        times.append(daemon.startup_s)
        if attempt < args.startups - 1:
            stop_daemon(daemon)
    daemon.startups = times
    daemon.startup_s = statistics.median(times)
    return daemon


# --- latency ------------------------------------------------------------------------------------


def _pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100): p99 of 500 values is the 495th smallest."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered))))
    return ordered[rank - 1]


@dataclass
class Endpoint:
    label: str
    path: Callable[[], str]
    check: Callable[[dict[str, Any]], bool]
    seconds: list[float] = field(default_factory=list)


def endpoints(seeded: Seeded, rng: random.Random) -> list[Endpoint]:
    """/healthz first: it is the baseline the others are divided by."""
    tasks = len(seeded.task_ids)
    transitions = len(JOURNEY)
    return [
        Endpoint("GET /healthz", lambda: "/healthz", lambda body: body["status"] == "ok"),
        Endpoint(
            "GET /api/task/<id>",
            lambda: f"/api/task/{rng.choice(seeded.task_ids)}",
            lambda body: len(body["transitions"]) == transitions and body["totals"]["tokens"] >= 0,
        ),
        Endpoint(
            "GET /api/tasks?limit=50&offset=<r>",
            lambda: f"/api/tasks?limit=50&offset={rng.randrange(max(1, tasks - 50))}",
            lambda body: body["total"] == tasks and len(body["tasks"]) == min(50, tasks),
        ),
        Endpoint(
            "GET /api/budget?day=<seeded day>",
            lambda: f"/api/budget?day={rng.choice(seeded.days)}",
            lambda body: bool(body["rows"]),
        ),
    ]


def measure(url: str, targets: list[Endpoint], requests: int, warmup: int, *, fresh: bool) -> None:
    """Round-robin over the endpoints, so background work (timers) hits them all alike.

    `fresh`: a new TCP connection per request instead of one kept-alive connection.
    """
    limits = httpx.Limits(max_keepalive_connections=0) if fresh else httpx.Limits()
    with httpx.Client(base_url=url, timeout=30.0, limits=limits) as client:
        for round_ in range(warmup + requests):
            for target in targets:
                path = target.path()
                began = time.perf_counter()
                response = client.get(path)
                elapsed = time.perf_counter() - began
                if response.status_code != 200:
                    raise SystemExit(f"{path}: HTTP {response.status_code}: {response.text[:300]}")
                if round_ < warmup:
                    if not target.check(response.json()):
                        raise SystemExit(f"{path}: unexpected body {response.text[:300]}")
                    continue
                target.seconds.append(elapsed)


# --- profiling (in-process, on the same ledger) ---------------------------------------------------


def _print_stats(title: str, profile: cProfile.Profile, rows: int) -> None:
    stats = pstats.Stats(profile).strip_dirs()
    for order in ("cumulative", "tottime"):
        text = io.StringIO()
        stats.stream = text  # type: ignore[attr-defined]
        stats.sort_stats(order).print_stats(rows)
        print(f"--- {title}, by {order} ---\n{text.getvalue()}", file=sys.stderr)


def profile_in_process(seeded: Seeded, folder: Path, targets: list[Endpoint], rows: int) -> None:
    """cProfile what the daemon does with this ledger, in this process (threads hide it there).

    Start-up: `build_coordinator` (init_db, assert_ready, checkpointer setup, graph)
    and its recovery sweep, then one pass of the worker's timers. Requests: each
    endpoint's own handler, called directly with a built Request, so the profile
    holds the handler and the ledger reads, not uvicorn.
    """
    from starlette.requests import Request
    from starlette.routing import Route

    from agent_team.config import load_settings
    from agent_team.dashboard.api import routes
    from agent_team.dashboard.app import DashboardContext
    from agent_team.service.wiring import build_coordinator

    settings = load_settings(db_path=seeded.path, state_dir=folder / "state-profile")
    startup = cProfile.Profile()
    began = time.perf_counter()
    coordinator = startup.runcall(build_coordinator, settings)
    built = time.perf_counter()
    startup.runcall(coordinator.recovery_sweep)
    swept = time.perf_counter()
    print(
        f"in-process: build_coordinator() {built - began:.3f} s, "
        f"recovery_sweep() {swept - built:.3f} s (both under cProfile)",
        file=sys.stderr,
    )
    _print_stats("start-up: build_coordinator() + recovery_sweep()", startup, rows)
    timers = cProfile.Profile()
    began = time.perf_counter()
    timers.runcall(
        lambda: (
            coordinator.check_deadlines(),
            coordinator.unpark_budget(),
            coordinator.deliver_open(),
        )
    )
    print(f"in-process: one timer pass {time.perf_counter() - began:.3f} s", file=sys.stderr)
    _print_stats("worker timers: check_deadlines + unpark_budget + deliver_open", timers, rows)
    coordinator.close()

    by_path = {
        route.path: route
        for route in routes(DashboardContext(settings))
        if isinstance(route, Route) and route.methods and "GET" in route.methods
    }
    for target in targets[1:]:
        first = target.path().partition("?")[0]
        route = by_path["/api/task/{task_id}" if first.startswith("/api/task/") else first]
        profile = cProfile.Profile()
        calls, spent = 50, 0.0
        for _ in range(calls):
            path, _, query = target.path().partition("?")
            scope = {
                "type": "http",
                "method": "GET",
                "path": path,
                "query_string": query.encode(),
                "headers": [],
                "path_params": {"task_id": path.rsplit("/", 1)[-1]},
            }
            began = time.perf_counter()
            profile.runcall(route.endpoint, Request(scope))
            spent += time.perf_counter() - began
        title = f"{target.label}: the handler, {calls} calls, {spent / calls * 1e3:.2f} ms each"
        _print_stats(title, profile, rows)


# --- the report ---------------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def _mib(kib: int) -> str:
    return f"{kib / 1024:.1f} MiB"


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def report(
    seeded: Seeded,
    idle: RunningDaemon,
    parked: RunningDaemon,
    passes: dict[str, list[Endpoint]],
    stops: dict[str, float],
    args: argparse.Namespace,
) -> None:
    size = seeded.path.stat().st_size
    counts = seeded.counts
    print(
        f"ledger: {counts['tasks']:,} parked tasks, {counts['transitions']:,} transitions, "
        f"{counts['budget']:,} budget rows over {len(seeded.days)} UTC days, "
        f"{counts['questions']:,} questions, {counts['commands']:,} done resume commands; "
        f"{size / 2**20:.0f} MiB; seeded in {seeded.seconds:.1f} s (setup, not measured)"
    )
    print(
        f"requests: {args.requests} per endpoint after {args.warmup} warm-up rounds, "
        "one httpx client over loopback, interleaved round-robin; hz = /healthz"
    )
    print()
    verdicts: list[str] = []
    for title, targets in passes.items():
        print(f"{title}: {PASS_NOTES[title]}")
        print(f"{'':36}{'p50':>10}{'p99':>10}{'max':>10}{'p50/hz':>8}{'p99/hz':>8}  target")
        base = targets[0].seconds
        for target in targets:
            values = target.seconds
            p50, p99 = _pct(values, 50), _pct(values, 99)
            goal = ""
            if target.label.startswith("GET /api/task/"):
                ok = p99 <= TARGET_TASK_P99_S
                goal = f"p99 <= {_ms(TARGET_TASK_P99_S)}: {_verdict(ok)}"
                verdicts.append(f"/api/task p99 {_ms(p99)} ({title}) {_verdict(ok)}")
            print(
                f"  {target.label:34}{_ms(p50):>10}{_ms(p99):>10}{_ms(max(values)):>10}"
                f"{p50 / _pct(base, 50):>7.1f}x{p99 / _pct(base, 99):>7.1f}x  {goal}"
            )
    print()
    print(f"{'':36}{'parked':>12}{'idle':>12}{'ratio':>8}  target")
    ok = parked.startup_s <= TARGET_STARTUP_S
    print(
        f"{'start-up: process -> /healthz 200':36}{parked.startup_s:>10.2f} s"
        f"{idle.startup_s:>10.2f} s{parked.startup_s / idle.startup_s:>7.2f}x  "
        f"<= {TARGET_STARTUP_S:.0f} s: {_verdict(ok)} (median of {len(parked.startups)})"
    )
    for label, daemon in (("parked", parked), ("idle", idle)):
        each = ", ".join(f"{seconds:.2f}" for seconds in daemon.startups)
        print(f"{'':38}{label} starts: {each} s")
    verdicts.append(f"start-up {parked.startup_s:.2f} s {_verdict(ok)}")
    settled = f"RSS {args.settle:.0f} s after /healthz"
    ratio = parked.rss_kib["settled"] / idle.rss_kib["settled"]
    ok = ratio <= TARGET_RSS_RATIO
    print(
        f"{settled:36}{_mib(parked.rss_kib['settled']):>12}{_mib(idle.rss_kib['settled']):>12}"
        f"{ratio:>7.2f}x  <= {TARGET_RSS_RATIO}x idle: {_verdict(ok)}"
    )
    verdicts.append(f"RSS {ratio:.2f}x idle {_verdict(ok)}")
    after = parked.rss_kib["after requests"]
    print(
        f"{'RSS after the requests (parked only)':36}{_mib(after):>12}{'':>12}"
        f"{after / idle.rss_kib['settled']:>7.2f}x"
    )
    print(
        f"{'peak RSS (VmHWM) at the end':36}{_mib(parked.rss_kib['after requests peak']):>12}"
        f"{_mib(idle.rss_kib['settled peak']):>12}"
        f"{parked.rss_kib['after requests peak'] / idle.rss_kib['settled peak']:>7.2f}x"
    )
    print(
        f"{'stop: SIGTERM -> exit 0':36}{stops['parked']:>10.2f} s{stops['idle']:>10.2f} s"
        f"{stops['parked'] / max(stops['idle'], 1e-9):>7.2f}x"
    )
    print()
    print("targets: " + "; ".join(verdicts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--budget-rows", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=500, help="timed requests per endpoint")
    parser.add_argument("--warmup", type=int, default=25, help="untimed rounds first")
    parser.add_argument(
        "--settle", type=float, default=6.0, help="seconds after /healthz before reading RSS"
    )
    parser.add_argument(
        "--startups", type=int, default=3, help="starts per ledger; the median is reported"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--keep", type=Path, help="seed into this folder and keep it (for digging afterwards)"
    )
    parser.add_argument(
        "--agent-team",
        type=Path,
        default=VENV_BIN / "agent-team",
        help="the agent-team executable to run (e.g. another checkout's, to compare)",
    )
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="ROWS",
        help="then cProfile the start-up and the handlers in-process; top ROWS to stderr",
    )
    args = parser.parse_args()
    if (
        args.tasks < 51
        or args.budget_rows < 1
        or args.requests < 1
        or args.warmup < 1
        or args.startups < 1
    ):
        parser.error("need --tasks > 50, and --budget-rows, --requests, --warmup, --startups >= 1")

    with tempfile.TemporaryDirectory(prefix="bench-dashboard-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        ledger = folder / "seeded.db"
        for name in ("seeded.db", "empty.db"):  # only our own files, from an earlier --keep
            for suffix in ("", "-wal", "-shm"):
                (folder / f"{name}{suffix}").unlink(missing_ok=True)
        now = datetime.now(UTC)
        print(
            f"seeding {args.tasks:,} tasks and {args.budget_rows:,} budget rows ...",
            file=sys.stderr,
        )
        seeded = seed_ledger(
            ledger, tasks=args.tasks, budget_rows=args.budget_rows, seed=args.seed, now=now
        )
        empty = folder / "empty.db"
        db.init_db(empty)
        # Warm the page cache for the interpreter and imports, so neither daemon pays it.
        subprocess.run(
            [str(VENV_BIN / "python"), "-c", "import agent_team.service.daemon"],
            check=True,
            cwd=folder,
        )

        started: list[RunningDaemon] = []  # killed on the way out, whatever happens
        stops: dict[str, float] = {}
        try:
            idle = start_repeatedly("idle", empty, folder, args, started)
            time.sleep(args.settle)
            idle.rss("settled")
            stops["idle"] = stop_daemon(idle)

            parked = start_repeatedly("parked", ledger, folder, args, started)
            time.sleep(args.settle)
            parked.rss("settled")
            rng = random.Random(args.seed + 1)
            passes = {
                KEEP_ALIVE: endpoints(seeded, rng),
                FRESH: endpoints(seeded, rng),
            }
            for title, targets in passes.items():
                measure(parked.url, targets, args.requests, args.warmup, fresh=title == FRESH)
            parked.rss("after requests")
            stops["parked"] = stop_daemon(parked)
        finally:
            for daemon in started:
                if daemon.proc.poll() is None:
                    daemon.proc.kill()
                    daemon.proc.wait()
        report(seeded, idle, parked, passes, stops, args)
        if args.profile:
            profile_in_process(seeded, folder, endpoints(seeded, random.Random(7)), args.profile)


if __name__ == "__main__":
    main()
