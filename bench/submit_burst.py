"""Many submissions at once over HTTP: request -> 201 latency and submits/s, vs /healthz.

A real daemon (`agent-team daemon`, a child process: SQLite, offline model and
builder, a bearer token) on a loopback port. A spawned second process fires
`--burst` (200) `POST /api/tasks` at once, each on its own connection, released
by a barrier, for `--rounds` rounds, then the same burst of `GET /healthz` as
the in-run baseline. The daemon's worker runs the submitted tasks meanwhile,
as it would. Group commit is what keeps the tail short: the submissions that
arrive while one commit flushes share the next one.

    .venv/bin/python bench/submit_burst.py [--burst 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

TOKEN = "bench-token-0123456789abcdef"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def daemon_env(root: str, port: int) -> dict[str, str]:
    """A daemon child's environment: ours without AGENT_TEAM_*, its ledger and state in `root`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_TEAM_")}
    env.update(
        AGENT_TEAM_DB_PATH=f"{root}/agent-team.db",
        AGENT_TEAM_STATE_DIR=f"{root}/state",
        AGENT_TEAM_DASHBOARD_PORT=str(port),
        AGENT_TEAM_DASHBOARD_TOKENS=f"bench:{TOKEN}",
        AGENT_TEAM_LOG_LEVEL="warning",
        AGENT_TEAM_LIMIT_WRITES_PER_MIN="0",  # a load generator, not abuse: measure the submits
    )
    return env


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))]


def _burst(url: str, size: int, submit: bool, round_no: int) -> tuple[list[float], int, float]:
    """Latencies, non-2xx count, and the burst's wall time (first start -> last reply)."""
    barrier = threading.Barrier(size)
    latencies: list[float] = []
    bad = 0
    guard = threading.Lock()
    starts: list[float] = []
    ends: list[float] = []

    def one(i: int) -> None:
        nonlocal bad
        with httpx.Client(base_url=url, timeout=60) as client:
            client.get("/healthz")  # the connection is open before the barrier
            barrier.wait()
            t0 = time.perf_counter()
            if submit:
                reply = client.post(
                    "/api/tasks",
                    json={"title": f"Burst {round_no}.{i}", "body": "Submitted in a burst."},
                    headers={"Authorization": f"Bearer {TOKEN}"},
                )
            else:
                reply = client.get("/healthz")
            t1 = time.perf_counter()
            with guard:
                latencies.append(t1 - t0)
                starts.append(t0)
                ends.append(t1)
                if reply.status_code >= 300:
                    bad += 1

    threads = [threading.Thread(target=one, args=(i,)) for i in range(size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies, bad, max(ends) - min(starts)


def _load(url: str, size: int, rounds: int, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    submits: list[float] = []
    walls: list[float] = []
    failed = 0
    for r in range(rounds):
        latencies, bad, wall = _burst(url, size, True, r)
        submits += latencies
        walls.append(wall)
        failed += bad
        time.sleep(1.0)
    health: list[float] = []
    for _ in range(rounds):
        latencies, _bad, _wall = _burst(url, size, False, 0)
        health += latencies
    queue.put((submits, walls, failed, health))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    agent_team = Path(sys.executable).with_name("agent-team")
    with tempfile.TemporaryDirectory(prefix="bench-submit-") as tmp:
        port = _free_port()
        env = daemon_env(tmp, port)
        daemon = subprocess.Popen(
            [str(agent_team), "daemon"], env=env, cwd=tmp, stdin=subprocess.DEVNULL
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit("the daemon did not become ready")
                time.sleep(0.1)
            queue: multiprocessing.Queue = multiprocessing.get_context("spawn").Queue()  # type: ignore[type-arg]
            loader = multiprocessing.get_context("spawn").Process(
                target=_load, args=(url, args.burst, args.rounds, queue)
            )
            loader.start()
            submits, walls, failed, health = queue.get(timeout=600)
            loader.join(timeout=60)
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=60)
    total = args.burst * args.rounds
    print(f"{args.rounds} bursts of {args.burst} concurrent POST /api/tasks ({total} submits)")
    p50, p99 = _pct(submits, 50) * 1e3, _pct(submits, 99) * 1e3
    print(
        f"  submit -> 201: p50 {p50:.1f} ms, p99 {p99:.1f} ms,"
        f" max {max(submits) * 1e3:.1f} ms; not 2xx: {failed}"
    )
    print(f"  submits/s per burst (median): {statistics.median(args.burst / w for w in walls):.0f}")
    print(
        f"  /healthz under the same burst size: p50 {_pct(health, 50) * 1e3:.1f} ms, "
        f"p99 {_pct(health, 99) * 1e3:.1f} ms; submit/healthz p99 "
        f"{_pct(submits, 99) / _pct(health, 99):.2f}x"
    )
    print("  goal (issue #17): p99 <= 500 ms")


if __name__ == "__main__":
    main()
