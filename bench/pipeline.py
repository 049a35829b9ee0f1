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
import importlib
import io
import itertools
import json
import math
import os
import pstats
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

TARGET_LATENCY_RATIO = 1.5
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


# --- (b) agent-team ------------------------------------------------------------------------------


def _seconds_between(earlier: str, later: str) -> float:
    from agent_team.db import from_iso

    return (from_iso(later) - from_iso(earlier)).total_seconds()


def _ledger_latencies(conn: Any, task_ids: list[str]) -> tuple[list[float], list[float]]:
    """start->waiting and answer->done per task, from the ledger's own timestamps."""
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
        start.append(_seconds_between(task.created_at, waiting.entered_at))
        answer.append(_seconds_between(question.answered_at, finished.exited_at))
    return start, answer


def run_agent_team(
    n: int, tmp: Path, workers: int, profiles: list[cProfile.Profile] | None = None
) -> dict[str, Any]:
    from agent_team import db
    from agent_team.config import load_settings
    from agent_team.wiring import build_coordinator

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
        handle = coordinator.worker.handle

        def profiled(command: Any, fence: Any = None) -> bool:
            profiler = cProfile.Profile()
            profiles.append(profiler)
            return bool(profiler.runcall(handle, command, fence))

        coordinator.worker.handle = profiled  # type: ignore[method-assign]

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

    for first in range(0, n, workers):
        batch = range(first, min(n, first + workers))
        t0 = time.perf_counter()
        ids = [coordinator.start_task(title=f"Task {i}", body=BODY, source="bench") for i in batch]
        while coordinator.run_pending():
            pass
        start_lat.extend([time.perf_counter() - t0] * len(ids))
        task_ids.extend(ids)
    coordinator.tick(until_idle=True)  # the daemon's sweep and timers: nothing should be left
    for task_id in task_ids:
        if status(task_id) != "waiting":
            raise SystemExit(f"task {task_id} is {status(task_id)}, not waiting at plan_review")
        (question,) = db.list_questions(conn, status="open", thread_id=task_id)
        questions[task_id] = question.question_id

    for first in range(0, n, workers):
        batch_ids = task_ids[first : first + workers]
        t0 = time.perf_counter()
        for task_id in batch_ids:
            coordinator.answer(questions[task_id], "approve", via="bench")
        while coordinator.run_pending():
            pass
        answer_lat.extend([time.perf_counter() - t0] * len(batch_ids))
    coordinator.tick(until_idle=True)
    elapsed = time.perf_counter() - began
    rss_peak = _rss_kib()

    for task_id in task_ids:
        if status(task_id) != "done":
            raise SystemExit(f"task {task_id} is {status(task_id)}, not done")
    ledger_start, ledger_answer = _ledger_latencies(conn, task_ids)
    coordinator.close()
    apparent, allocated, files = _tree_bytes(state_dir)
    timed = workers == 1
    return {
        "variant": "b",
        "n": n,
        "finished": n + 1,
        "workers": workers,
        "latency_source": "timed" if timed else "ledger",
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


def _print_stats(title: str, stats: pstats.Stats, rows: int) -> None:
    for order in ("cumulative", "tottime"):
        text = io.StringIO()
        stats.stream = text  # type: ignore[attr-defined]
        stats.sort_stats(order).print_stats(rows)
        print(f"--- {title}, by {order} ---\n{text.getvalue()}", file=sys.stderr)


def _child(variant: str, n: int, workers: int, profile: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"bench-pipeline-{variant}-") as tmp:
        folder = Path(tmp)
        if not profile:
            if variant == "a":
                return run_baseline(n, folder)
            return run_agent_team(n, folder, workers)
        # Import first, so the profile shows the work and not module loading.
        modules = ["langgraph.checkpoint.sqlite", "langgraph.graph", "langgraph.types"]
        for module in modules + (["agent_team.coordinator"] if variant == "b" else []):
            importlib.import_module(module)
        main = cProfile.Profile()
        workers_profiles: list[cProfile.Profile] = []
        if variant == "a":
            result = main.runcall(run_baseline, n, folder)
        else:
            result = main.runcall(run_agent_team, n, folder, workers, workers_profiles)
        _print_stats(f"({variant}) main thread", pstats.Stats(main).strip_dirs(), profile)
        if workers_profiles:
            pool = pstats.Stats(workers_profiles[0])
            for extra in workers_profiles[1:]:
                pool.add(extra)
            _print_stats(f"({variant}) coordinator pool threads", pool.strip_dirs(), profile)
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
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    sys.stderr.write(done.stderr)  # the profile, and any warning the variant logged
    if done.returncode != 0:
        raise SystemExit(f"variant {variant} failed (exit {done.returncode}); see above")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _ms(value: float) -> str:
    return f"{value * 1e3:9.2f} ms"


def _ratio(b: float, a: float) -> str:
    return f"{b / a:8.2f}x" if a else "     n/a"


def report(a: dict[str, Any], b: dict[str, Any]) -> None:
    n = a["n"]
    print(
        f"tasks per variant: {n} (+1 warm-up task, in the byte counts only); "
        f"(b) workers: {b['workers']}"
    )
    print("(a) bare LangGraph + SqliteSaver, durability=sync, trivial nodes")
    print("(b) agent-team Coordinator: offline model, local transport, offline builder (git)")
    print()
    print(f"{'':34}{'(a) baseline':>14}{'(b) agent-team':>16}{'b/a':>10}")
    rows: list[tuple[str, float, float, Callable[[float], str]]] = []
    for key, label in (("start", "start->waiting"), ("answer", "answer->done")):
        for stat in ("median", "p99"):
            rows.append((f"{label} {stat}", a[key][stat], b[key][stat], _ms))
    rows.append(("throughput (tasks/s)", a["throughput"], b["throughput"], lambda v: f"{v:12.1f}"))
    rows.append(("whole run", a["elapsed_s"], b["elapsed_s"], lambda v: f"{v:10.2f} s"))
    mib: Callable[[float], str] = lambda v: f"{v / 1024:8.1f} MiB"  # noqa: E731
    rows.append(("peak RSS", a["rss_peak_kib"], b["rss_peak_kib"], mib))
    rows.append(("  RSS before the first task", a["rss_ready_kib"], b["rss_ready_kib"], mib))
    rows.append(
        (
            "  RSS growth during the run",
            a["rss_peak_kib"] - a["rss_ready_kib"],
            b["rss_peak_kib"] - b["rss_ready_kib"],
            mib,
        )
    )
    kib: Callable[[float], str] = lambda v: f"{v / 1024:8.1f} KiB"  # noqa: E731
    done_a, done_b = a["finished"], b["finished"]
    rows.append(
        ("SQLite bytes per task", a["sqlite_bytes"] / done_a, b["sqlite_bytes"] / done_b, kib)
    )
    rows.append(
        (
            "SQLite + git bytes per task",
            a["sqlite_bytes"] / done_a,
            (b["sqlite_bytes"] + b["git_bytes"]) / done_b,
            kib,
        )
    )
    for label, va, vb, fmt in rows:
        print(f"{label:34}{fmt(va):>14}{fmt(vb):>16}{_ratio(vb, va):>10}")
    print()
    print(
        f"(b) git state (worktrees + repository): {b['git_bytes'] / done_b / 1024:.1f} KiB/task "
        f"apparent, {b['git_bytes_allocated'] / done_b / 1024:.1f} KiB/task on disk, "
        f"{b['git_files'] / done_b:.1f} files/task (git runs in child processes: not in the RSS)"
    )
    print(
        f"(b) latencies from the ledger timestamps: start->waiting median "
        f"{b['start_ledger']['median'] * 1e3:.2f} ms p99 {b['start_ledger']['p99'] * 1e3:.2f} ms; "
        f"answer->done median {b['answer_ledger']['median'] * 1e3:.2f} ms "
        f"p99 {b['answer_ledger']['p99'] * 1e3:.2f} ms "
        f"(the table uses the {b['latency_source']} figures)"
    )
    for key, label in (("start", "start->waiting"), ("answer", "answer->done")):
        print(
            f"{label} median, first tenth of the tasks -> last tenth: "
            f"(a) {a[key]['first_tenth'] * 1e3:.2f} -> {a[key]['last_tenth'] * 1e3:.2f} ms, "
            f"(b) {b[key]['first_tenth'] * 1e3:.2f} -> {b[key]['last_tenth'] * 1e3:.2f} ms"
        )
    print()
    verdicts = []
    for key, label in (("start", "start->waiting"), ("answer", "answer->done")):
        for stat in ("median", "p99"):
            ratio = b[key][stat] / a[key][stat]
            ok = "met" if ratio <= TARGET_LATENCY_RATIO else "MISSED"
            verdicts.append(f"{label} {stat} {ratio:.2f}x {ok}")
    print(f"target: b/a <= {TARGET_LATENCY_RATIO} on both latencies -> " + "; ".join(verdicts))


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
    parser.add_argument("--variant", choices=("a", "b"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.n < 1 or args.workers < 1:
        parser.error("--n and --workers must be at least 1")
    if args.variant:
        print(json.dumps(_child(args.variant, args.n, args.workers, args.profile)))
        return
    baseline = _run_child("a", args)
    agent_team = _run_child("b", args)
    report(baseline, agent_team)


if __name__ == "__main__":
    main()
