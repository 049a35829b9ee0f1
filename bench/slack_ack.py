"""Slack answers under contention: how fast `POST /slack/events` acks, how fast the task resumes.

One run starts the real daemon in this process (`Daemon(settings).run()` in
a thread, the dashboard's uvicorn server on an ephemeral loopback port,
`AGENT_TEAM_TRANSPORT=slack`, offline model and builder). Slack's side runs
in a second process: the loopback Web API from `tests/fakes/slack_api.py`
and the load generator. Then, for each `--concurrency` level (50 and 200 by
default) and each of `--rounds` tasks:

    1. submit a task and wait until its plan question is posted (channel_ref set);
    2. a burst of as many `GET /healthz` alone (the baseline without answers);
    3. fire that many signed answers at once from as many threads, each with
       its own connection, released by a barrier: two in three are
       `block_actions` Approve clicks, one in three thread replies "approve";
       one `GET /healthz` in ten rides in the same burst, interleaved;
    4. time each request -> HTTP 200 (the ack Slack waits at most 3 s for);
    5. from the winning answer's `answered_at` to the resume run starting,
       twice: the worker picking the resume up (a hook on `GraphRunner.resume`
       in this script) and the graph re-entering `plan_review` (the task's next
       `plan_review running` transition in the ledger);
    6. wait until the task is done and every late answer's private note is
       out before the next round.

Then the same answers once more, one at a time (each is a late answer by
then): the per-request cost without queueing.

Baselines in the same run, same server, same client setup:

    ack      `/healthz` under the same burst (the goal's yardstick: the answers'
             p99 over the p99 of the `/healthz` requests sent among them), and a
             burst of `/healthz` alone, the same size, just before;
    resume   an answer given in-process with `Coordinator.answer` (what the
             CLI and dashboard do), timed the same way on `--rounds` more tasks.

Targets: p99 ack <= 50 ms at 50 concurrent answers and <= 1.2x `/healthz`
p99 in the same burst; answer -> resume start p50 <= 20 ms.

    .venv/bin/python bench/slack_ack.py                   # 20 rounds at 50, 20 at 200 (about 1 min)
    .venv/bin/python bench/slack_ack.py --rounds 5        # quick run
    .venv/bin/python bench/slack_ack.py --concurrency 50  # one level only

This is a benchmark, not a test; only the figures and ratios within one run mean anything.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import logging
import math
import multiprocessing
import socket
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent_team import db  # noqa: E402
from agent_team.config import load_settings  # noqa: E402
from agent_team.coordinator import GraphRunner  # noqa: E402
from agent_team.service.daemon import Daemon  # noqa: E402
from tests.fakes.slack_api import BOT_TOKEN, FakeSlack  # noqa: E402

SECRET = "bench-signing-secret-0123456789ab"
CHANNEL = "C0BENCH01"
USERS = ["UALICE001", "UBOB00001"]
BODY = (
    "The login page should remember the user's email address between visits.\n"
    "- Store the email in a cookie after a successful login\n"
    "- Prefill the email field when the cookie is present\n"
)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def signed(body: bytes) -> dict[str, str]:
    ts = str(int(time.time()))
    digest = hmac.new(SECRET.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256)
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest.hexdigest()}"}


def answer_request(ref: str, question_id: str, i: int) -> tuple[bytes, dict[str, str]]:
    channel, ts = ref.split(":")
    user = USERS[i % 2]
    if i % 3:
        payload: dict[str, Any] = {
            "type": "block_actions",
            "user": {"id": user},
            "trigger_id": f"t{i}",
            "team": {"id": "T1"},
            "container": {"channel_id": channel, "message_ts": ts},
            "actions": [{"action_id": "agent_team.approve", "value": question_id}],
        }
        body = urlencode({"payload": json.dumps(payload)}).encode()
        return body, {"Content-Type": "application/x-www-form-urlencoded", **signed(body)}
    event = {
        "type": "event_callback",
        "event_id": f"Ev{uuid.uuid4().hex[:12]}",
        "team_id": "T1",
        "event": {
            "type": "message",
            "channel": channel,
            "user": user,
            "text": "approve",
            "ts": f"{time.time():.6f}",
            "thread_ts": ts,
        },
    }
    body = json.dumps(event).encode()
    return body, {"Content-Type": "application/json", **signed(body)}


Request = tuple[str, str, bytes | None, dict[str, str]]  # method, url, body, headers


def _raw(method: str, url: str, body: bytes | None, headers: dict[str, str]) -> bytes:
    """The request as bytes, built before the clock starts (the client costs ~no CPU then)."""
    parts = urlsplit(url)
    lines = [f"{method} {parts.path} HTTP/1.1", f"Host: {parts.netloc}", "Connection: close"]
    lines += [f"{key}: {value}" for key, value in headers.items()]
    lines.append(f"Content-Length: {len(body or b'')}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")


def burst(requests: list[Request]) -> list[float]:
    """One thread per request, released together; each request's seconds to its response.

    Plain sockets and pre-built request bytes: 50 threads of an HTTP client
    library would spend tens of milliseconds queueing for their own GIL and
    that would be timed as the server's. Each request opens its own
    connection, as Slack does per delivery; the time runs from `connect` to
    the end of the response.
    """
    n = len(requests)
    raws = [_raw(*request) for request in requests]
    host, port = urlsplit(requests[0][1]).hostname or "", urlsplit(requests[0][1]).port or 80
    barrier = threading.Barrier(n)
    times: list[float] = []
    statuses: list[int] = []
    lock = threading.Lock()

    def run(i: int) -> None:
        barrier.wait()
        started = time.perf_counter()
        with socket.create_connection((host, port), timeout=10) as sock:
            sock.sendall(raws[i])
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        elapsed = time.perf_counter() - started
        status = int(b"".join(chunks).split(b" ", 2)[1])
        with lock:
            times.append(elapsed)
            statuses.append(status)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if any(status != 200 for status in statuses):
        raise SystemExit(f"non-200 responses: {sorted(set(statuses))}")
    return times


def _outside(inbox: Connection, outbox: Connection) -> None:
    """Slack's side, in its own process (its threads must not share the daemon's GIL).

    Serves the loopback Web API the daemon posts to, and sends the bursts of
    answers; "updates" asks how many question messages were redrawn.
    """
    fake = FakeSlack().start()
    outbox.send(fake.base_url)
    try:
        while True:
            requests = inbox.recv()
            if requests is None:
                return
            if isinstance(requests, str):  # "count:<method>": calls of a Web API method so far
                outbox.send(len(fake.of(requests.removeprefix("count:"))))
                continue
            outbox.send(burst(requests))
    finally:
        fake.stop()


def _ask(to_child: Connection, from_child: Connection, child: Any, message: Any) -> Any:
    """Send to Slack's side and wait for its answer; fail loudly if that process died."""
    to_child.send(message)
    deadline = time.monotonic() + 120
    while not from_child.poll(0.1):
        if not child.is_alive() or time.monotonic() > deadline:
            raise SystemExit("the Slack-side process died or hung; see its traceback above")
    return from_child.recv()


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.002)


RESUME_STARTS: dict[str, datetime] = {}  # task id -> when GraphRunner.resume began (bench hook)


def hook_resume_starts() -> None:
    """Note when the worker starts each resume: the ledger only shows the node entry after it."""
    original = GraphRunner.resume

    def timed(self: GraphRunner, command: db.Command) -> None:
        RESUME_STARTS.setdefault(command.task_id, datetime.now(UTC))
        original(self, command)

    GraphRunner.resume = timed  # type: ignore[method-assign]


def resume_started(conn: db.Ledger, task_id: str, answered_at: str) -> datetime | None:
    for row in db.list_transitions(conn, task_id):
        if (
            row.to_phase == "plan_review"
            and row.status == "running"
            and row.entered_at > answered_at
        ):
            return db.from_iso(row.entered_at)
    return None


HEALTH_EVERY = 10  # one /healthz in this many requests of an answer burst


def mixed_burst(answers: list[Request], health: Request) -> list[Request]:
    """The answers with one `/healthz` after every `HEALTH_EVERY - 1`, at least 5 in all."""
    count = max(5, len(answers) // HEALTH_EVERY)
    step = max(1, len(answers) // count)
    mixed: list[Request] = []
    added = 0
    for i, request in enumerate(answers):
        mixed.append(request)
        if i % step == step - 1 and added < count:
            mixed.append(health)
            added += 1
    return mixed


@dataclass
class Level:
    """What one concurrency level measured (seconds)."""

    concurrency: int
    acks: list[float] = field(default_factory=list)
    health_in_burst: list[float] = field(default_factory=list)
    health_alone: list[float] = field(default_factory=list)
    resumes: dict[str, list[float]] = field(default_factory=lambda: {"slack": [], "direct": []})
    picked: dict[str, list[float]] = field(default_factory=lambda: {"slack": [], "direct": []})
    slowest: list[float] = field(default_factory=list)  # each burst's slowest ack, in order


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[50, 200])
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    spawn = multiprocessing.get_context("spawn")
    child_in, to_child = spawn.Pipe(duplex=False)
    from_child, child_out = spawn.Pipe(duplex=False)
    outside = spawn.Process(target=_outside, args=(child_in, child_out), daemon=True)
    outside.start()
    if not from_child.poll(60):
        raise SystemExit("the Slack-side process did not start; see its traceback above")
    slack_api_url: str = from_child.recv()
    levels = [Level(n) for n in args.concurrency]
    alone: list[float] = []
    alone_health: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(
            db_path=Path(tmp) / "agent-team.db",
            state_dir=Path(tmp) / "state",
            dashboard_port=0,
            transport="slack",
            slack_bot_token=BOT_TOKEN,
            slack_signing_secret=SECRET,
            slack_channel=CHANNEL,
            slack_allowed_users=USERS,
            slack_api_url=slack_api_url,
            log_level="error",
        )
        hook_resume_starts()
        daemon = Daemon(settings)
        thread = threading.Thread(target=daemon.run, daemon=True)
        thread.start()
        wait_for(lambda: daemon.bound is not None, "the daemon")
        url = daemon.url + "slack/events"
        health: Request = ("GET", daemon.url + "healthz", None, {})
        conn = db.open_ledger(settings.db_path)
        notes = 0  # private notes the late answers so far have earned
        round_no = 0
        try:
            for level in levels:
                for _ in range(args.rounds * 2):
                    via = "slack" if round_no % 2 == 0 else "direct"
                    task_id = daemon.coordinator.start_task(title=f"bench {round_no}", body=BODY)
                    round_no += 1

                    def posted(task_id: str = task_id) -> bool:
                        found = db.list_questions(conn, status="open", thread_id=task_id)
                        return bool(found) and found[0].channel_ref is not None

                    wait_for(posted, "the question post")
                    (question,) = db.list_questions(conn, status="open", thread_id=task_id)
                    ref, qid = question.channel_ref or "", question.question_id
                    if via == "slack":
                        answers: list[Request] = [
                            ("POST", url, *answer_request(ref, qid, i))
                            for i in range(level.concurrency)
                        ]
                        # The baseline first: the private notes a burst of late answers leaves
                        # behind would still be going out during a burst right after it.
                        level.health_alone += _ask(
                            to_child, from_child, outside, [health] * len(answers)
                        )
                        mixed = mixed_burst(answers, health)
                        times = _ask(to_child, from_child, outside, mixed)
                        for request, elapsed in zip(mixed, times, strict=True):
                            (level.acks if request[0] == "POST" else level.health_in_burst).append(
                                elapsed
                            )
                        level.slowest.append(
                            max(t for r, t in zip(mixed, times, strict=True) if r[0] == "POST")
                        )
                        # One note per person and question (issue #17), not one per click.
                        notes += min(len(USERS), level.concurrency - 1)
                    else:
                        daemon.coordinator.answer(qid, "approve", via="bench")
                    answered = db.get_question(conn, qid)
                    assert answered is not None and answered.answered_at is not None

                    def resumed(t: str = task_id, at: str = answered.answered_at) -> bool:
                        return resume_started(conn, t, at) is not None

                    wait_for(resumed, "the resume run")
                    started = resume_started(conn, task_id, answered.answered_at)
                    assert started is not None
                    answered_at = db.from_iso(answered.answered_at)
                    level.resumes[via].append((started - answered_at).total_seconds())
                    level.picked[via].append((RESUME_STARTS[task_id] - answered_at).total_seconds())

                    def done(t: str = task_id) -> bool:
                        task = db.get_task(conn, t)
                        return task is not None and task.status == "done"

                    wait_for(done, "the task to finish")
                    if via == "slack":  # every late answer's private note is out: a quiet start

                        def sent(notes: int = notes) -> bool:
                            count = _ask(to_child, from_child, outside, "count:chat.postEphemeral")
                            return bool(count >= notes)

                        wait_for(sent, "the private notes")
            # The same requests one at a time (a late answer each): the per-request floor.
            for i in range(min(args.concurrency)):
                one = [("POST", url, *answer_request(ref, qid, i))]
                alone += _ask(to_child, from_child, outside, one)
                alone_health += _ask(to_child, from_child, outside, [health])
        finally:
            daemon.request_stop()
            thread.join(timeout=60)
            conn.close()
            updates = (
                _ask(to_child, from_child, outside, "count:chat.update")
                if outside.is_alive()
                else "?"
            )
            to_child.send(None)
            outside.join(timeout=30)

    def ms(values: list[float], p: float) -> float:
        return percentile(values, p) * 1000

    def ratio(a: list[float], b: list[float], p: float) -> float:
        return percentile(a, p) / max(percentile(b, p), 1e-9)

    print(f"rounds {args.rounds} per level; one GET /healthz in {HEALTH_EVERY} rides in each burst")
    for level in levels:
        acks, inside, before = level.acks, level.health_in_burst, level.health_alone
        print(f"\n{level.concurrency} concurrent answers ({len(acks)} requests)")
        print(
            f"  ack  POST /slack/events        p50 {ms(acks, 50):7.1f} ms  "
            f"p99 {ms(acks, 99):7.1f} ms"
            + ("   (target p99 <= 50 ms)" if level.concurrency == 50 else "")
        )
        print(
            f"       GET /healthz, same burst  p50 {ms(inside, 50):7.1f} ms  "
            f"p99 {ms(inside, 99):7.1f} ms   ack/healthz p50 {ratio(acks, inside, 50):.2f}x  "
            f"p99 {ratio(acks, inside, 99):.2f}x   (target p99 <= 1.2x)"
        )
        print(
            f"       GET /healthz, alone       p50 {ms(before, 50):7.1f} ms  "
            f"p99 {ms(before, 99):7.1f} ms   ack/healthz p50 {ratio(acks, before, 50):.2f}x  "
            f"p99 {ratio(acks, before, 99):.2f}x"
        )
        slowest = sorted(range(len(level.slowest)), key=lambda i: -level.slowest[i])[:3]
        print(
            "       slowest bursts (round: slowest ack): "
            + ", ".join(f"{i + 1}: {level.slowest[i] * 1000:.0f} ms" for i in slowest)
            + f"; median burst {percentile(level.slowest, 50) * 1000:.0f} ms"
        )
        for label, values in (("node entry", level.resumes), ("worker pick-up", level.picked)):
            slack, direct = values["slack"], values["direct"]
            print(
                f"  answer -> {label:14s} slack p50 {ms(slack, 50):6.1f} ms  "
                f"p99 {ms(slack, 99):6.1f} ms   direct (base) p50 {ms(direct, 50):5.1f} ms  "
                f"p99 {ms(direct, 99):5.1f} ms   ratio p50 {ratio(slack, direct, 50):.1f}x"
            )
    print(
        f"\none at a time: ack p50 {ms(alone, 50):.1f} ms  p99 {ms(alone, 99):.1f} ms"
        f"   (/healthz p50 {ms(alone_health, 50):.1f} ms  p99 {ms(alone_health, 99):.1f} ms)"
    )
    print("(target: answer -> resume run start p50 <= 20 ms)")
    print(f"question messages redrawn: {updates} (one per Slack round: one winner each)")


if __name__ == "__main__":
    main()
