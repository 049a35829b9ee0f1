"""The LangGraph API through the real `langgraph_sdk` client, against our own API and `/healthz`.

A daemon in this process (SQLite, offline model, local answers) with
`AGENT_TEAM_LANGGRAPH_API=on` and `--waiting` tasks each waiting on its plan
question. Measured in one run, each with the same httpx-based client:

- `threads.search(status="interrupted", limit=10)`: the Inbox's list call
  (ten threads, each with its question as an interrupt), vs. `/api/tasks`
  (the dashboard's list of ten tasks) and `/healthz`;
- `threads.get_state` of one waiting thread vs. `/api/task/<id>`;
- an answer: `runs.create` with an accept vs. `POST /api/questions/<id>/answer`
  (each on its own fresh waiting task, so both store and resume one answer).

    .venv/bin/python bench/langgraph_api.py [--waiting 40] [--reads 300] [--answers 40]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from langgraph_sdk import get_sync_client

from agent_team import db
from agent_team.config import load_settings
from agent_team.service.daemon import Daemon

KEY = "bench-key-0123456789abcdef"
BODY = (
    "The login page should remember the user's email address between visits.\n"
    "- Store the email in a cookie after a successful login\n"
    "- Prefill the email field when the cookie is present\n"
)


def _ms(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return statistics.median(ordered) * 1000, p99 * 1000


def _time(call: Callable[[], object], times: int) -> list[float]:
    samples = []
    for _ in range(times):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return samples


def _waiting_plans(daemon: Daemon, conn: db.Ledger, count: int) -> list[tuple[str, str]]:
    """`count` new tasks waiting on their plan question: (task id, question id)."""
    tasks = [daemon.coordinator.start_task(title=f"Bench {i}", body=BODY) for i in range(count)]
    found: dict[str, str] = {}
    deadline = time.monotonic() + 120
    while len(found) < count:
        assert time.monotonic() < deadline, "tasks did not reach their plan question"
        for question in db.list_questions(conn, status="open"):
            if question.thread_id in tasks:
                found[question.thread_id] = question.question_id
        time.sleep(0.05)
    return [(task, found[task]) for task in tasks]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waiting", type=int, default=40, help="tasks waiting while reading")
    parser.add_argument("--reads", type=int, default=300, help="requests per read measurement")
    parser.add_argument("--answers", type=int, default=40, help="answers per answer path")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        settings = load_settings(
            db_path=root / "agent-team.db",
            state_dir=root / "state",
            dashboard_port=0,
            poll_s=0.05,
            langgraph_api=True,
            dashboard_tokens=f"bench:{KEY}",
            limit_writes_per_min=0,  # the answers are the measurement, not abuse
        )
        daemon = Daemon(settings)
        thread = threading.Thread(target=daemon.run, daemon=True)
        thread.start()
        while daemon.bound is None:
            time.sleep(0.02)
        conn = db.open_ledger(settings.db_path)
        sdk = get_sync_client(url=daemon.url + "langgraph", api_key=KEY)
        http = httpx.Client(base_url=daemon.url, headers={"Authorization": f"Bearer {KEY}"})
        try:
            waiting = _waiting_plans(daemon, conn, args.waiting)
            one = waiting[0][0]
            rows = {
                "threads.search (10 interrupted)": _time(
                    lambda: sdk.threads.search(status="interrupted", limit=10), args.reads
                ),
                "GET /api/tasks?limit=10": _time(
                    lambda: http.get("api/tasks", params={"limit": 10}).raise_for_status(),
                    args.reads,
                ),
                "threads.get_state": _time(lambda: sdk.threads.get_state(one), args.reads),
                "GET /api/task/<id>": _time(
                    lambda: http.get(f"api/task/{one}").raise_for_status(), args.reads
                ),
                "GET /healthz": _time(lambda: http.get("healthz").raise_for_status(), args.reads),
            }
            by_sdk = iter(_waiting_plans(daemon, conn, args.answers))
            by_api = iter(_waiting_plans(daemon, conn, args.answers))

            def answer_by_sdk() -> None:
                task, _ = next(by_sdk)
                sdk.runs.create(task, "agent-team", command={"resume": [{"type": "accept"}]})

            def answer_by_api() -> None:
                _, question = next(by_api)
                http.post(
                    f"api/questions/{question}/answer", json={"answer": "approve"}
                ).raise_for_status()

            rows["runs.create (accept)"] = _time(answer_by_sdk, args.answers)
            rows["POST /api/questions/<id>/answer"] = _time(answer_by_api, args.answers)
        finally:
            sdk.close()
            http.close()
            conn.close()
            daemon.request_stop()
            thread.join(timeout=60)
    health = statistics.median(rows["GET /healthz"])
    print(f"{'call':<36} {'p50 ms':>8} {'p99 ms':>8} {'p50 / healthz':>14}")
    for name, samples in rows.items():
        p50, p99 = _ms(samples)
        print(f"{name:<36} {p50:>8.2f} {p99:>8.2f} {statistics.median(samples) / health:>13.2f}x")
    search, tasks = (
        statistics.median(rows[next(iter(rows))]),
        statistics.median(rows["GET /api/tasks?limit=10"]),
    )
    answer_sdk = statistics.median(rows["runs.create (accept)"])
    answer_api = statistics.median(rows["POST /api/questions/<id>/answer"])
    print(
        f"search / dashboard list: {search / tasks:.2f}x; answer SDK / API: "
        f"{answer_sdk / answer_api:.2f}x"
    )


if __name__ == "__main__":
    main()
