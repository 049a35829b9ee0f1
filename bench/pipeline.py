"""What the pipeline costs: agent-team's coordinator vs. a bare LangGraph + SqliteSaver graph.

Both variants push N tasks through the same six nodes (intake, clarify, plan,
plan_review, build, done), stop each one at the plan_review gate, then answer
every gate and run each task to the end.

    (a) baseline: a bare StateGraph with trivial node bodies and one
        `interrupt()` in plan_review, checkpointed by `SqliteSaver` on a fresh
        file, invoked with `durability="sync"` and resumed with
        `Command(resume=...)`.
    (b) agent-team: `Coordinator` with the offline model, the local transport
        and the offline builder (a real git commit per task, made without a
        worktree by `git fast-import`);
        tasks go in with `start_task`, answers with `answer(..., via="bench")`,
        and `run_pending()` drives them, exactly as the daemon's worker does.

Each variant runs in its own child process of this script (`--variant a|b`),
so its peak RSS (`ru_maxrss`) is its own. Runs are sequential by default (one
task in flight), so a task's latency is timed around its submit/answer plus
the run that follows. With `--workers K > 1`, (b) submits K tasks at a time and
its latencies come from the ledger's timestamps instead (the baseline stays
sequential). This is a benchmark, not a test: only ratios on one machine mean
anything.

    .venv/bin/python bench/pipeline.py [--n 500] [--workers 1] [--profile 30]
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import importlib
import io
import itertools
import json
import math
import os
import pstats
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

TARGET_SAME_NODES_RATIO = 1.3
AIM_DO_NOTHING_RATIO = 2.0
TARGET_THROUGHPUT = 25.0
BODY = (
    "Remember the email address on the login page between visits, for this task.\n"
    "- Store it in a cookie\n"
    "- Prefill the field\n"
    "- Test both paths\n"
)


# --- shared helpers ------------------------------------------------------------------------------


def _rss_kib() -> int:
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _sqlite_bytes(path: Path) -> int:
    """Checkpoint the WAL into the file, then count the file and what is left of the WAL."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    finally:
        conn.close()
    return sum(
        candidate.stat().st_size
        for candidate in (path, path.with_name(path.name + "-wal"))
        if candidate.exists()
    )


def _tree_bytes(root: Path) -> tuple[int, int, int]:
    """(apparent bytes, allocated bytes, files) under `root`."""
    apparent = allocated = files = 0
    for folder, _dirs, names in os.walk(root):
        for name in names:
            info = os.lstat(os.path.join(folder, name))
            apparent += info.st_size
            allocated += info.st_blocks * 512
            files += 1
    return apparent, allocated, files


def _pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100): p99 of 500 values is the 495th smallest."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered))))
    return ordered[rank - 1]


def _summary(values: list[float]) -> dict[str, float]:
    """Median, p99, and the medians of the first and last tenth (does a task cost more later?)."""
    tenth = max(1, len(values) // 10)
    return {
        "median": statistics.median(values),
        "p99": _pct(values, 99),
        "max": max(values),
        "first_tenth": statistics.median(values[:tenth]),
        "last_tenth": statistics.median(values[-tenth:]),
    }


# --- (a) the baseline ----------------------------------------------------------------------------


class _BaseState(TypedDict, total=False):
    task_id: str
    title: str
    body: str
    phase: str
    plan: str
    decision: str
    build: str


def run_baseline(n: int, tmp: Path) -> dict[str, Any]:
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Command, interrupt

    def intake(state: _BaseState) -> _BaseState:
        return {"phase": "intake"}

    def clarify(state: _BaseState) -> _BaseState:
        return {"phase": "clarify"}

    def plan(state: _BaseState) -> _BaseState:
        return {"phase": "plan", "plan": f"- do {state['title']}"}

    def plan_review(state: _BaseState) -> _BaseState:
        decision = interrupt({"question": f"{state['task_id']}:q1", "plan": state.get("plan")})
        return {"phase": "plan_review", "decision": str(decision)}

    def build(state: _BaseState) -> _BaseState:
        return {"phase": "build", "build": "built"}

    def done(state: _BaseState) -> _BaseState:
        return {"phase": "done"}

    graph = StateGraph(_BaseState)
    graph.add_node("intake", intake)
    graph.add_node("clarify", clarify)
    graph.add_node("plan", plan)
    graph.add_node("plan_review", plan_review)
    graph.add_node("build", build)
    graph.add_node("done", done)
    chain = [START, "intake", "clarify", "plan", "plan_review", "build", "done", END]
    for here, there in itertools.pairwise(chain):
        graph.add_edge(here, there)

    db_file = tmp / "baseline.db"
    conn = sqlite3.connect(db_file, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    app = graph.compile(checkpointer=saver)
    # One task end to end first, outside the figures: lazy imports and first-use costs.
    warm: Any = {"configurable": {"thread_id": "warm-up"}}
    app.invoke({"task_id": "warm-up", "title": "Warm-up", "body": BODY}, warm, durability="sync")
    app.invoke(Command(resume="approve"), warm, durability="sync")
    rss_ready = _rss_kib()

    start_lat: list[float] = []
    answer_lat: list[float] = []
    began = time.perf_counter()
    for i in range(n):
        config: Any = {"configurable": {"thread_id": f"t{i}"}}
        t0 = time.perf_counter()
        out = app.invoke(
            {"task_id": f"t{i}", "title": f"Task {i}", "body": BODY},
            config,
            durability="sync",
        )
        start_lat.append(time.perf_counter() - t0)
        if not out.get("__interrupt__"):
            raise SystemExit(f"baseline task t{i} did not stop at plan_review")
    for i in range(n):
        config = {"configurable": {"thread_id": f"t{i}"}}
        t0 = time.perf_counter()
        out = app.invoke(Command(resume="approve"), config, durability="sync")
        answer_lat.append(time.perf_counter() - t0)
        if out.get("phase") != "done":
            raise SystemExit(f"baseline task t{i} did not finish: {out.get('phase')}")
    elapsed = time.perf_counter() - began
    rss_peak = _rss_kib()
    conn.close()
    return {
        "variant": "a",
        "n": n,
        "finished": n + 1,
        "start": _summary(start_lat),
        "answer": _summary(answer_lat),
        "elapsed_s": elapsed,
        "throughput": n / elapsed,
        "rss_ready_kib": rss_ready,
        "rss_peak_kib": rss_peak,
        "sqlite_bytes": _sqlite_bytes(db_file),
    }


# --- (c) the same nodes, bare ------------------------------------------------------------------


def run_same_nodes(n: int, tmp: Path) -> dict[str, Any]:
    """agent-team's node bodies without agent-team: the fair baseline for its bookkeeping.

    The graph has agent-team's nodes, routing and state schema; each node does
    the work agent-team's does (the offline model through `with_structured_output`,
    the same prompts and pydantic schemas, the gate's `interrupt()` with the same
    payload and answer model, the offline builder through `run_build`, a real git
    commit), and nothing else: no ledger, no transitions, no questions table, no
    budget rows, no transport, no coordinator, no leases.
    """
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Command, interrupt

    from agent_team.builders.base import BuildTask
    from agent_team.builders.offline import OfflineBuilder
    from agent_team.builders.registry import run_build
    from agent_team.models.prompts import clarify_messages, plan_messages
    from agent_team.models.registry import make_chat_model
    from agent_team.models.schemas import ClarifyDecision, Plan
    from agent_team.nodes.clarify import route_after_clarify
    from agent_team.nodes.plan_review import route_after_review
    from agent_team.requests.answers import ANSWER_MODELS, PLAN_DECISION_HELP, parse_answer
    from agent_team.task_model import QuestionKind, TaskState, question_id_for

    chat = make_chat_model("offline")
    structured = {
        schema: chat.with_structured_output(schema, include_raw=True)
        for schema in (ClarifyDecision, Plan)
    }
    builder = OfflineBuilder()
    state_dir = tmp / "state"

    def ask(schema: Any, messages: Any) -> Any:
        result = structured[schema].invoke(list(messages))
        parsed = result.get("parsed")
        if not isinstance(parsed, schema):
            raise SystemExit(f"the offline model gave no {schema.__name__}")
        return parsed

    def intake(state: TaskState) -> dict[str, Any]:
        return {"clarifications": [], "clarify_rounds": 0, "turn": 0}

    def clarify(state: TaskState) -> dict[str, Any]:
        decision = ask(ClarifyDecision, clarify_messages(state["title"], state["body"], []))
        return {"pending_question": None if decision.clear else decision.question}

    def clarify_gate(state: TaskState) -> dict[str, Any]:
        raise SystemExit("the offline model asked to clarify; the bench expects a clear task")

    def plan(state: TaskState) -> dict[str, Any]:
        result = ask(Plan, plan_messages(state["title"], state["body"], [], None, None))
        return {"plan": result.model_dump(), "plan_source": "model", "decision": None}

    def plan_review(state: TaskState) -> dict[str, Any]:
        current = Plan.model_validate(state["plan"])
        turn = state.get("turn", 0) + 1
        kind = QuestionKind.PLAN_DECISION.value
        payload = {
            "text": f"Review the plan for: {state['title']}",
            "title": state["title"],
            "plan_markdown": current.to_markdown(),
            "help": PLAN_DECISION_HELP,
        }
        json.dumps(payload, sort_keys=True)  # agent-team stores it; the bare graph only encodes it
        answer = interrupt(
            {"question_id": question_id_for(state["task_id"], turn), "kind": kind, **payload},
            response_schema=ANSWER_MODELS[kind],
        )
        return {"decision": answer.model_dump()["decision"], "turn": turn}

    def build(state: TaskState) -> dict[str, Any]:
        task = BuildTask(task_id=state["task_id"], title=state["title"], body=state["body"])
        plan_markdown = Plan.model_validate(state["plan"]).to_markdown()
        result = run_build(builder, task, plan_markdown, repo_path=None, state_dir=state_dir)
        return {"build": result.model_dump(mode="json")}

    def done(state: TaskState) -> dict[str, Any]:
        return {"outcome": state.get("outcome") or "done"}

    graph = StateGraph(TaskState)
    for name, body in (
        ("intake", intake),
        ("clarify", clarify),
        ("clarify_gate", clarify_gate),
        ("plan", plan),
        ("plan_review", plan_review),
        ("build", build),
        ("done", done),
    ):
        graph.add_node(name, body)
    graph.add_edge(START, "intake")
    graph.add_edge("intake", "clarify")
    graph.add_conditional_edges("clarify", route_after_clarify, ["clarify_gate", "plan"])
    graph.add_edge("clarify_gate", "clarify")
    graph.add_edge("plan", "plan_review")
    graph.add_conditional_edges("plan_review", route_after_review, ["build", "plan", "done"])
    graph.add_edge("build", "done")
    graph.add_edge("done", END)

    db_file = tmp / "same-nodes.db"
    conn = sqlite3.connect(db_file, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    app = graph.compile(checkpointer=saver)
    approve = parse_answer(QuestionKind.PLAN_DECISION.value, "approve")

    def start(task_id: str, title: str) -> float:
        t0 = time.perf_counter()
        out = app.invoke(
            {"task_id": task_id, "kind": "code", "title": title, "body": BODY, "repo": None},
            {"configurable": {"thread_id": task_id}},
            durability="sync",
        )
        if not out.get("__interrupt__"):
            raise SystemExit(f"same-nodes task {task_id} did not stop at plan_review")
        return time.perf_counter() - t0

    def resume(task_id: str) -> float:
        config: Any = {"configurable": {"thread_id": task_id}}
        t0 = time.perf_counter()
        (pending,) = app.get_state(config).interrupts
        out = app.invoke(Command(resume={pending.id: approve}), config, durability="sync")
        if out.get("outcome") != "done":
            raise SystemExit(f"same-nodes task {task_id} did not finish")
        return time.perf_counter() - t0

    start("warm-up", "Warm-up")
    resume("warm-up")
    rss_ready = _rss_kib()
    began = time.perf_counter()
    start_lat = [start(f"t{i}", f"Task {i}") for i in range(n)]
    answer_lat = [resume(f"t{i}") for i in range(n)]
    elapsed = time.perf_counter() - began
    rss_peak = _rss_kib()
    conn.close()
    apparent, allocated, files = _tree_bytes(state_dir)
    return {
        "variant": "c",
        "n": n,
        "finished": n + 1,
        "start": _summary(start_lat),
        "answer": _summary(answer_lat),
        "elapsed_s": elapsed,
        "throughput": n / elapsed,
        "rss_ready_kib": rss_ready,
        "rss_peak_kib": rss_peak,
        "sqlite_bytes": _sqlite_bytes(db_file),
        "git_bytes": apparent,
        "git_bytes_allocated": allocated,
        "git_files": files,
    }


# --- (b) agent-team ------------------------------------------------------------------------------


def _seconds_between(earlier: str, later: str) -> float:
    from agent_team.db import from_iso

    return (from_iso(later) - from_iso(earlier)).total_seconds()


def _ledger_latencies(
    conn: Any, task_ids: list[str], *, service: bool = False
) -> tuple[list[float], list[float]]:
    """start->waiting and answer->done per task, from the ledger's own timestamps; with
    `service`, from the first step each run took instead (no queueing)."""
    from agent_team import db

    start: list[float] = []
    answer: list[float] = []
    for task_id in task_ids:
        task = db.get_task(conn, task_id)
        assert task is not None
        journey = db.list_transitions(conn, task_id)
        waiting = next(t for t in journey if t.status == "waiting")
        finished = journey[-1]
        (question,) = db.list_questions(conn, thread_id=task_id)
        assert question.answered_at is not None and finished.exited_at is not None
        if service:  # from the run's first step, leaving out the time queued behind others
            began = journey[0].entered_at
            resumed = next(t for t in journey if t.entered_at >= question.answered_at)
            start.append(_seconds_between(began, waiting.entered_at))
            answer.append(_seconds_between(resumed.entered_at, finished.exited_at))
        else:
            start.append(_seconds_between(task.created_at, waiting.entered_at))
            answer.append(_seconds_between(question.answered_at, finished.exited_at))
    return start, answer


def _drive(coordinator: Any) -> None:
    """Run the worker as the daemon's loop does (`fill` on every wake) until nothing is left."""
    worker = coordinator.worker
    while True:
        worker.wake.clear()
        worker.fill()
        if worker.wait_idle(0):  # nothing running: one more pass to be sure nothing is queued
            worker.fill()
            if worker.wait_idle(0):
                return
        worker.wake.wait(1.0)


def run_agent_team(
    n: int, tmp: Path, workers: int, profiles: list[cProfile.Profile] | None = None
) -> dict[str, Any]:
    from agent_team import db
    from agent_team.config import load_settings
    from agent_team.service.wiring import build_coordinator

    db_file = tmp / "agent-team.db"
    state_dir = tmp / "state"
    settings = load_settings(
        db_path=db_file,
        state_dir=state_dir,
        workers=workers,
        model="offline",
        builder="offline",
        billing_mode="api",
    )
    coordinator = build_coordinator(settings)
    conn = coordinator.ledger
    if profiles is not None:
        # cProfile sees only the thread that enabled it, and graph runs happen on the
        # coordinator's pool threads: give every command its own profiler.
        handle = coordinator.worker._handle_in_order

        def profiled(*args: Any) -> None:
            profiler = cProfile.Profile()
            profiles.append(profiler)
            profiler.runcall(handle, *args)

        coordinator.worker._handle_in_order = profiled  # type: ignore[method-assign]

    def status(task_id: str) -> str:
        task = db.get_task(conn, task_id)
        return task.status if task is not None else "missing"

    # One task end to end first, outside the figures: lazy imports, the default git repository.
    warm = coordinator.start_task(title="Warm-up", body=BODY, source="bench")
    coordinator.run_pending()
    (warm_question,) = db.list_questions(conn, status="open", thread_id=warm)
    coordinator.answer(warm_question.question_id, "approve", via="bench")
    coordinator.run_pending()
    if status(warm) != "done":
        raise SystemExit(f"the warm-up task is {status(warm)}, not done")
    rss_ready = _rss_kib()

    task_ids: list[str] = []
    questions: dict[str, str] = {}
    start_lat: list[float] = []
    answer_lat: list[float] = []
    began = time.perf_counter()

    if workers == 1:  # one task in flight: its latency timed around submit/answer + run
        for i in range(n):
            t0 = time.perf_counter()
            task_ids.append(coordinator.start_task(title=f"Task {i}", body=BODY, source="bench"))
            while coordinator.run_pending():
                pass
            start_lat.append(time.perf_counter() - t0)
    else:  # a queue of work, as a daemon sees it: every task offered at once
        task_ids = [
            coordinator.start_task(title=f"Task {i}", body=BODY, source="bench") for i in range(n)
        ]
        _drive(coordinator)
    coordinator.tick(until_idle=True)  # the daemon's sweep and timers: nothing should be left
    for task_id in task_ids:
        if status(task_id) != "waiting":
            raise SystemExit(f"task {task_id} is {status(task_id)}, not waiting at plan_review")
        (question,) = db.list_questions(conn, status="open", thread_id=task_id)
        questions[task_id] = question.question_id

    if workers == 1:
        for task_id in task_ids:
            t0 = time.perf_counter()
            coordinator.answer(questions[task_id], "approve", via="bench")
            while coordinator.run_pending():
                pass
            answer_lat.append(time.perf_counter() - t0)
    else:
        for task_id in task_ids:
            coordinator.answer(questions[task_id], "approve", via="bench")
        _drive(coordinator)
    coordinator.tick(until_idle=True)
    elapsed = time.perf_counter() - began
    rss_peak = _rss_kib()

    for task_id in task_ids:
        if status(task_id) != "done":
            raise SystemExit(f"task {task_id} is {status(task_id)}, not done")
    ledger_start, ledger_answer = _ledger_latencies(conn, task_ids, service=workers > 1)
    coordinator.close()
    apparent, allocated, files = _tree_bytes(state_dir)
    timed = workers == 1
    return {
        "variant": "b",
        "n": n,
        "finished": n + 1,
        "workers": workers,
        "latency_source": "timed" if timed else "ledger (service time: from the run's first step)",
        "start": _summary(start_lat if timed else ledger_start),
        "answer": _summary(answer_lat if timed else ledger_answer),
        "start_ledger": _summary(ledger_start),
        "answer_ledger": _summary(ledger_answer),
        "elapsed_s": elapsed,
        "throughput": n / elapsed,
        "rss_ready_kib": rss_ready,
        "rss_peak_kib": rss_peak,
        "sqlite_bytes": _sqlite_bytes(db_file),
        "git_bytes": apparent,
        "git_bytes_allocated": allocated,
        "git_files": files,
    }


# --- the driver ----------------------------------------------------------------------------------


# --- where the time goes ------------------------------------------------------------------------


class _Meter:
    """Wall time and calls per kind of work, from wrappers around the functions that do it.

    Not cProfile: LangGraph writes checkpoints and runs steps on threads of its
    own, which a profiler started on one thread never sees, and a profiler's
    overhead would swamp the millisecond figures. Only the outermost call of a
    kind on a thread counts (a fenced saver's `put` calls SqliteSaver's).
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._guard = threading.Lock()
        self._depth = threading.local()

    def wrap(self, owner: Any, name: str, kind: str) -> None:
        inner = getattr(owner, name)
        meter = self

        @functools.wraps(inner)
        def timed(*args: Any, **kwargs: Any) -> Any:
            depth = getattr(meter._depth, kind, 0)
            setattr(meter._depth, kind, depth + 1)
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                setattr(meter._depth, kind, depth)
                if depth == 0:
                    spent = time.perf_counter() - t0
                    with meter._guard:
                        meter.seconds[kind] = meter.seconds.get(kind, 0.0) + spent
                        meter.calls[kind] = meter.calls.get(kind, 0) + 1

        setattr(owner, name, timed)

    def per_task(self, tasks: int, elapsed: float) -> dict[str, dict[str, float]]:
        table = {
            kind: {"ms": self.seconds[kind] * 1e3 / tasks, "calls": self.calls[kind] / tasks}
            for kind in sorted(self.seconds)
        }
        table["(the whole run)"] = {"ms": elapsed * 1e3 / tasks, "calls": 0.0}
        return table


def _metered() -> _Meter:
    """Wrap what a task spends its time on, in both (b) and (c)."""
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.pregel import Pregel

    from agent_team.builders import proc
    from agent_team.models.offline import OfflineChatModel

    meter = _Meter()
    for name in ("put", "put_writes"):
        meter.wrap(SqliteSaver, name, "checkpoint writes")
    meter.wrap(SqliteSaver, "get_tuple", "checkpoint reads")
    meter.wrap(Pregel, "get_state", "graph.get_state")
    meter.wrap(OfflineChatModel, "_generate", "offline model")
    original = proc.run_process
    meter.wrap(proc, "run_process", "git (child processes)")
    for module in list(sys.modules.values()):  # modules that imported it by name
        if getattr(module, "run_process", None) is original and module is not proc:
            module.run_process = proc.run_process  # type: ignore[attr-defined]
    try:
        from agent_team.coordinator.runner import GraphRunner
        from agent_team.db.sqlite_ledger import SqliteLedger
    except ImportError:
        return meter
    meter.wrap(SqliteLedger, "write", "ledger write transactions")
    for name in ("fetch_all", "execute"):
        meter.wrap(SqliteLedger, name, "ledger reads")
    meter.wrap(GraphRunner, "notify", "transport: notify")
    meter.wrap(GraphRunner, "deliver_open", "transport: deliver")
    return meter


def _child(
    variant: str, n: int, workers: int, profile: int, profile_dir: Path, breakdown: bool
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"bench-pipeline-{variant}-") as tmp:
        folder = Path(tmp)
        if breakdown and variant != "a":
            meter = _metered()
            began = time.perf_counter()
            result = (
                run_same_nodes(n, folder) if variant == "c" else run_agent_team(n, folder, workers)
            )
            result["where"] = meter.per_task(n + 1, time.perf_counter() - began)
            return result
        if not profile:
            if variant == "a":
                return run_baseline(n, folder)
            if variant == "c":
                return run_same_nodes(n, folder)
            return run_agent_team(n, folder, workers)
        # Import first, so the profile shows the work and not module loading.
        modules = ["langgraph.checkpoint.sqlite", "langgraph.graph", "langgraph.types"]
        if variant != "a":
            modules += ["agent_team.coordinator", "agent_team.builders.registry"]
        for module in modules:
            importlib.import_module(module)
        main = cProfile.Profile()
        workers_profiles: list[cProfile.Profile] = []
        if variant == "a":
            result = main.runcall(run_baseline, n, folder)
        elif variant == "c":
            result = main.runcall(run_same_nodes, n, folder)
        else:
            result = main.runcall(run_agent_team, n, folder, workers, workers_profiles)
        stats = pstats.Stats(main)
        for extra in workers_profiles:  # graph runs happen on the pool threads
            stats.add(extra)
        out = profile_dir / f"pipeline-{variant}"
        stats.dump_stats(str(out.with_suffix(".pstats")))
        text = io.StringIO()
        stats.stream = text  # type: ignore[attr-defined]
        stats.strip_dirs()
        for order in ("cumulative", "tottime"):
            stats.sort_stats(order).print_stats(profile)
        out.with_suffix(".txt").write_text(text.getvalue(), encoding="utf-8")
        return result


def _run_child(variant: str, args: argparse.Namespace) -> dict[str, Any]:
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--variant",
        variant,
        "--n",
        str(args.n),
        "--workers",
        str(args.workers),
        "--profile",
        str(args.profile),
        "--profile-dir",
        str(args.profile_dir),
        *(["--breakdown"] if args.breakdown else []),
    ]
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-strace-") as traces:
        counts = Path(traces) / "fsyncs.txt"
        if args.fsyncs:
            strace = shutil.which("strace")
            if strace is None:
                raise SystemExit("--fsyncs needs strace (apt-get install strace)")
            traced = ["-f", "-qq", "-c", "-e", "trace=fsync,fdatasync", "-o", str(counts)]
            command = [strace, *traced, *command]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        sys.stderr.write(done.stderr)  # the profile, and any warning the variant logged
        if done.returncode != 0:
            raise SystemExit(f"variant {variant} failed (exit {done.returncode}); see above")
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        if args.fsyncs:
            result["fsyncs"] = _syscalls(counts.read_text(encoding="utf-8"))
    return result


def _syscalls(summary: str) -> int:
    """Calls of fsync and fdatasync in `strace -c` output (its rows end with the call name)."""
    total = 0
    for line in summary.splitlines():
        fields = line.split()
        if fields and fields[-1] in ("fsync", "fdatasync") and fields[3].isdigit():
            total += int(fields[3])
    return total


def _ms(value: float) -> str:
    return f"{value * 1e3:9.2f} ms"


def _count(value: float) -> str:
    return f"{value:10.1f}"


def _ratio(b: float, a: float) -> str:
    return f"{b / a:8.2f}x" if a else "     n/a"


def report(a: dict[str, Any], c: dict[str, Any], b: dict[str, Any]) -> None:
    n = a["n"]
    print(
        f"tasks per variant: {n} (+1 warm-up task, in the byte counts only); "
        f"(b) workers: {b['workers']}"
    )
    print("(a) do-nothing: bare LangGraph + SqliteSaver, durability=sync, trivial nodes")
    print("(c) same nodes: bare LangGraph + SqliteSaver running agent-team's node work")
    print("    (offline model calls, prompts, schemas, the gate's interrupt, the offline builder)")
    print("(b) agent-team Coordinator: offline model, local transport, offline builder (git)")
    print()
    print(f"{'':34}{'(a)':>12}{'(c)':>12}{'(b)':>12}{'b/c':>9}{'b/a':>9}")
    rows: list[tuple[str, float, float, float, Callable[[float], str]]] = []
    for key, label in (("start", "start->waiting"), ("answer", "answer->done")):
        for stat in ("median", "p99"):
            rows.append((f"{label} {stat}", a[key][stat], c[key][stat], b[key][stat], _ms))
    rows.append(
        (
            "throughput (tasks/s)",
            a["throughput"],
            c["throughput"],
            b["throughput"],
            lambda v: f"{v:10.1f}",
        )
    )
    rows.append(
        ("whole run", a["elapsed_s"], c["elapsed_s"], b["elapsed_s"], lambda v: f"{v:8.2f} s")
    )
    mib: Callable[[float], str] = lambda v: f"{v / 1024:6.1f} MiB"  # noqa: E731
    rows.append(("peak RSS", a["rss_peak_kib"], c["rss_peak_kib"], b["rss_peak_kib"], mib))
    growth = [v["rss_peak_kib"] - v["rss_ready_kib"] for v in (a, c, b)]
    rows.append(("  RSS growth during the run", growth[0], growth[1], growth[2], mib))
    kib: Callable[[float], str] = lambda v: f"{v / 1024:6.1f} KiB"  # noqa: E731
    per_task = [v["sqlite_bytes"] / v["finished"] for v in (a, c, b)]
    rows.append(("SQLite bytes per task", per_task[0], per_task[1], per_task[2], kib))
    git = [v.get("git_bytes", 0) / v["finished"] for v in (a, c, b)]
    rows.append(("git bytes per task (apparent)", git[0], git[1], git[2], kib))
    if "fsyncs" in b:  # setup's and the warm-up task's are in: a little over the true figure
        syncs = [v["fsyncs"] / v["finished"] for v in (a, c, b)]
        rows.append(("fsyncs per task (strace)", syncs[0], syncs[1], syncs[2], _count))
    for label, va, vc, vb, fmt in rows:
        ratios = f"{_ratio(vb, vc):>9}{_ratio(vb, va):>9}"
        print(f"{label:34}{fmt(va):>12}{fmt(vc):>12}{fmt(vb):>12}{ratios}")
    print()
    for name, v in (("(c)", c), ("(b)", b)):
        print(
            f"{name} git state: {v['git_bytes_allocated'] / v['finished'] / 1024:.1f} KiB/task "
            f"on disk, {v['git_files'] / v['finished']:.1f} files/task"
        )
    print(
        f"(b) latencies from the ledger timestamps: start->waiting median "
        f"{b['start_ledger']['median'] * 1e3:.2f} ms p99 {b['start_ledger']['p99'] * 1e3:.2f} ms; "
        f"answer->done median {b['answer_ledger']['median'] * 1e3:.2f} ms "
        f"p99 {b['answer_ledger']['p99'] * 1e3:.2f} ms (the table uses the {b['latency_source']} "
        "figures)"
    )
    for key, label in (("start", "start->waiting"), ("answer", "answer->done")):
        print(
            f"{label} median, first tenth of the tasks -> last tenth: "
            + ", ".join(
                f"{name} {v[key]['first_tenth'] * 1e3:.2f} -> {v[key]['last_tenth'] * 1e3:.2f} ms"
                for name, v in (("(a)", a), ("(c)", c), ("(b)", b))
            )
        )
    if "where" in b:
        print()
        print("where a task's time goes (--breakdown: wall ms and calls per task, both phases):")
        print(f"{'':30}{'(c) ms':>9}{'calls':>7}{'(b) ms':>9}{'calls':>7}")
        empty = {"ms": 0.0, "calls": 0.0}
        for kind in sorted(set(b["where"]) | set(c.get("where", {}))):
            vb, vc = b["where"].get(kind, empty), c.get("where", {}).get(kind, empty)
            print(f"{kind:30}{vc['ms']:9.2f}{vc['calls']:7.1f}{vb['ms']:9.2f}{vb['calls']:7.1f}")
    print()
    verdicts = []
    for key, label in (("start", "start->waiting"), ("answer", "answer->done")):
        ratio = b[key]["median"] / c[key]["median"]
        ok = "met" if ratio <= TARGET_SAME_NODES_RATIO else "MISSED"
        verdicts.append(f"{label} median b/c {ratio:.2f}x {ok}")
    print(f"target: b/c <= {TARGET_SAME_NODES_RATIO} (p50) -> " + "; ".join(verdicts))
    verdicts = [
        f"{label} median b/a {b[key]['median'] / a[key]['median']:.2f}x"
        for key, label in (("start", "start->waiting"), ("answer", "answer->done"))
    ]
    print(f"aim: b/a <= {AIM_DO_NOTHING_RATIO} (p50) -> " + "; ".join(verdicts))
    if b["workers"] > 1:
        ok = "met" if b["throughput"] >= TARGET_THROUGHPUT else "MISSED"
        print(
            f"target: >= {TARGET_THROUGHPUT} tasks/s with {b['workers']} workers -> "
            f"{b['throughput']:.1f} {ok}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500, help="tasks per variant")
    parser.add_argument(
        "--workers", type=int, default=1, help="(b) graph runs at once (1: sequential, timed)"
    )
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="ROWS",
        help="profile each variant with cProfile and print its top ROWS functions to stderr",
    )
    parser.add_argument(
        "--profile-dir",
        type=Path,
        default=Path("bench-profile"),
        help="where --profile saves pipeline-<variant>.pstats and .txt (default: ./bench-profile)",
    )
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="time what (b) and (c) spend per task on the ledger, checkpoints, git, the model",
    )
    parser.add_argument(
        "--fsyncs",
        action="store_true",
        help="count each variant's fsync and fdatasync calls per task under strace "
        "(the timings of such a run are strace's, not the variants')",
    )
    parser.add_argument("--variant", choices=("a", "b", "c"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.n < 1 or args.workers < 1:
        parser.error("--n and --workers must be at least 1")
    if args.variant:
        result = _child(
            args.variant, args.n, args.workers, args.profile, args.profile_dir, args.breakdown
        )
        print(json.dumps(result))
        return
    if args.profile:
        args.profile_dir.mkdir(parents=True, exist_ok=True)
    if args.fsyncs:
        print("--fsyncs: every variant runs under strace; read the fsync counts, not the times\n")
    baseline = _run_child("a", args)
    same_nodes = _run_child("c", args)
    agent_team = _run_child("b", args)
    report(baseline, same_nodes, agent_team)
    if args.profile:
        print(f"\nprofiles (sorted tables and .pstats for snakeviz/flameprof): {args.profile_dir}/")


if __name__ == "__main__":
    main()
