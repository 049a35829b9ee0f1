"""A mixed load on a real daemon with kill -9 at random instants and a full disk for a while.

The daemon (`agent-team daemon`, a child process: SQLite, offline model and
builder, Slack transport against the loopback fake Slack, the GitHub webhook
on) keeps its ledger on a small tmpfs in a private mount namespace that a
holder process keeps alive, so the ledger survives each kill and the bench
can fill that file system from inside (`nsenter`) to make every write fail.

For `--seconds`, threads send what a team sends:
- submissions (`POST /api/tasks`);
- answers through the dashboard API and as signed Slack button clicks and
  thread replies, sometimes both on the same question at once;
- signed GitHub `issues` deliveries of labelled issues, some replayed with
  the same delivery id, some the same issue under a new delivery id.
Meanwhile the daemon is killed (`SIGKILL`) `--kills` times at random
instants and restarted at once, and for `--full-s` seconds its disk is full.

Then the ledger is checked: every task a 201 acknowledged exists (lost,
goal 0); no question has two answers recorded, two resume commands or two
answer audit rows, and every 200 from the answer API is the answer stored
(applied twice or lost, goal 0); one task per GitHub issue; no 5xx on any
request outside the full-disk window (goal 0). Restart-to-ready is spawn to
the first 200 from `/readyz`. Last, 200 concurrent submissions on the
recovered daemon (`bench/submit_burst.py`'s burst; goal p99 <= 500 ms).

    .venv/bin/python bench/chaos.py                 # 120 s, 3 kills, 10 s of full disk
    .venv/bin/python bench/chaos.py --seconds 60 --kills 2

Needs root, `unshare` and `nsenter` (for the tmpfs); exits 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

from slack_ack import CHANNEL, SECRET, USERS, answer_request  # noqa: E402
from submit_burst import TOKEN, _burst, _free_port, _pct  # noqa: E402

from agent_team.integrations.github.intake import task_id_for  # noqa: E402
from agent_team.integrations.github.webhook import sign  # noqa: E402
from tests.fakes.github_api import FakeGitHub  # noqa: E402
from tests.fakes.slack_api import BOT_TOKEN, FakeSlack  # noqa: E402

# submit_burst's token: its burst (reused below) sends it.
BEARER = {"Authorization": f"Bearer {TOKEN}"}
HOOK_SECRET = "chaos-webhook-secret"
REPO = "acme/app"
BODY = (
    "The login page should remember the user's email address between visits.\n"
    "- Store the email in a cookie after a successful login\n"
    "- Prefill the email field when the cookie is present\n"
)
AGENT_TEAM = Path(sys.executable).with_name("agent-team")
GRACE_S = 2.0  # after the disk has room again, before a 5xx counts


@dataclass
class Record:
    """What the load saw; appended from several threads under `lock`."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    replies: list[tuple[float, str, int]] = field(default_factory=list)  # (t, what, status)
    refused: int = 0  # no connection: the daemon was down
    tasks: set[str] = field(default_factory=set)  # acknowledged by a 201
    api_answers: dict[str, str] = field(default_factory=dict)  # question -> the text that won
    deliveries: set[int] = field(default_factory=set)  # issue numbers acknowledged
    full: list[tuple[float, float]] = field(default_factory=list)  # full-disk windows
    ready_s: list[float] = field(default_factory=list)

    def saw(self, what: str, status: int) -> None:
        with self.lock:
            self.replies.append((time.monotonic(), what, status))


class Daemon:
    """The daemon in the holder's mount namespace; `kill()` is `kill -9`."""

    def __init__(
        self, holder: int, env: dict[str, str], url: str, record: Record, log: Path
    ) -> None:
        self.holder, self.env, self.url, self.record, self.log = holder, env, url, record, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        began = time.monotonic()
        with self.log.open("ab") as log:
            log.write(f"--- start at {time.time():.3f}\n".encode())
            self.proc = subprocess.Popen(
                ["nsenter", "-t", str(self.holder), "-m", str(AGENT_TEAM), "daemon"],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        deadline = began + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/readyz", timeout=2).status_code == 200:
                    self.record.ready_s.append(time.monotonic() - began)
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.02)
        tail = self.log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"the daemon did not become ready in 120 s; its log ends:\n{tail}")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=90)


def _holder(disk: Path, size_mb: int) -> subprocess.Popen[str]:
    script = (
        f'set -e; mount -t tmpfs -o size={size_mb}m tmpfs "{disk}"; echo ready; exec sleep 1000000'
    )
    holder = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    if holder.stdout.readline().strip() != "ready":
        raise SystemExit("could not mount a tmpfs in a private mount namespace (needs root)")
    return holder


def _inside(holder: int, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["nsenter", "-t", str(holder), "-m", *command],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


class Load:
    """The request threads; each runs until `stop` is set."""

    def __init__(self, url: str, record: Record, stop: threading.Event) -> None:
        self.url, self.record, self.stop = url, record, stop
        self.rng = random.Random(7)
        self.issue = 0

    def _call(self, client: httpx.Client, what: str, method: str, path: str, **kw: Any) -> Any:
        try:
            reply = client.request(method, path, **kw)
        except httpx.TransportError:
            with self.record.lock:
                self.record.refused += 1
            return None
        self.record.saw(what, reply.status_code)
        return reply

    def submitter(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30, headers=BEARER) as client:
            n = 0
            while not self.stop.is_set():
                n += 1
                body = {"title": f"Chaos {n}", "body": BODY if n % 4 else "make it better"}
                reply = self._call(client, "submit", "POST", "/api/tasks", json=body)
                if reply is not None and reply.status_code == 201:
                    with self.record.lock:
                        self.record.tasks.add(reply.json()["task_id"])
                time.sleep(0.05)

    def answerer(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30, headers=BEARER) as client:
            i = 0
            while not self.stop.is_set():
                reply = self._call(client, "list", "GET", "/api/questions?status=open")
                if reply is None or reply.status_code != 200:
                    time.sleep(0.2)
                    continue
                for question in reply.json()["questions"][:5]:
                    i += 1
                    self._answer(client, question, i)
                time.sleep(0.1)

    def _answer(self, client: httpx.Client, question: dict[str, Any], i: int) -> None:
        qid, ref = question["question_id"], question["channel_ref"]
        text = "approve" if question["kind"] == "plan_decision" else BODY
        by_api = lambda: self._api_answer(client, qid, text)  # noqa: E731
        by_slack = lambda: self._slack_answer(ref, qid, i)  # noqa: E731
        if ref is None or i % 3 == 0:
            by_api()
        elif i % 3 == 1:
            by_slack()
        else:  # both at once: one wins
            racer = threading.Thread(target=by_slack)
            racer.start()
            by_api()
            racer.join()

    def _api_answer(self, client: httpx.Client, qid: str, text: str) -> None:
        path = f"/api/questions/{qid}/answer"
        reply = self._call(client, "answer", "POST", path, json={"answer": text})
        if reply is not None and reply.status_code == 200:
            with self.record.lock:
                self.record.api_answers[qid] = text

    def _slack_answer(self, ref: str | None, qid: str, i: int) -> None:
        if ref is None:
            return
        body, headers = answer_request(ref, qid, i)
        with httpx.Client(base_url=self.url, timeout=30) as client:
            self._call(client, "slack", "POST", "/slack/events", content=body, headers=headers)

    def github(self) -> None:
        sent: list[tuple[bytes, dict[str, str]]] = []
        with httpx.Client(base_url=self.url, timeout=30) as client:
            while not self.stop.is_set():
                roll = self.rng.random()
                if sent and roll < 0.2:
                    body, headers = self.rng.choice(sent)  # a redelivery: same delivery id
                elif sent and roll < 0.3:
                    body, old = self.rng.choice(sent)  # the same issue, a new delivery id
                    headers = {**old, "X-GitHub-Delivery": str(uuid.uuid4())}
                else:
                    self.issue += 1
                    body, headers = _delivery(self.issue)
                    sent.append((body, headers))
                reply = self._call(
                    client, "github", "POST", "/github/webhook", content=body, headers=headers
                )
                if reply is not None and reply.status_code in (200, 201):
                    number = json.loads(body)["issue"]["number"]
                    with self.record.lock:
                        self.record.deliveries.add(number)
                time.sleep(0.15)


def _delivery(number: int) -> tuple[bytes, dict[str, str]]:
    payload = {
        "action": "labeled",
        "issue": {
            "number": number,
            "title": f"Chaos issue {number}",
            "body": BODY,
            "state": "open",
            "html_url": f"https://github.example/{REPO}/issues/{number}",
            "labels": [{"name": "agent-team"}],
        },
        "repository": {"full_name": REPO},
        "sender": {"login": "someone"},
    }
    body = json.dumps(payload).encode()
    return body, {
        "X-Hub-Signature-256": sign(HOOK_SECRET, body),
        "X-GitHub-Event": "issues",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "Content-Type": "application/json",
    }


_CHECK = """
import json, sqlite3, sys
con = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
one = lambda sql: [r[0] for r in con.execute(sql)]
print(json.dumps({
    "tasks": one("SELECT id FROM tasks"),
    "github": one("SELECT id FROM tasks WHERE id LIKE 'gh-%'"),
    "answers": dict(con.execute(
        "SELECT question_id, answer_json FROM pending_questions WHERE status = 'answered'")),
    "audited_twice": one("SELECT target FROM audit_log WHERE action = 'answer' "
                         "GROUP BY target HAVING COUNT(*) > 1"),
    "resumes": one("SELECT command_id FROM commands WHERE kind = 'resume'"),
    "statuses": dict(con.execute("SELECT status, COUNT(*) FROM tasks GROUP BY status")),
    "failed": [r[0] for r in con.execute(
        "SELECT note FROM task_transitions WHERE status = 'failed' ORDER BY transition_id")],
}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--full-s", type=float, default=10.0)
    parser.add_argument("--burst", type=int, default=200)
    parser.add_argument(
        "--disk-mb", type=int, default=384, help="the tmpfs: room for the run's ledger and git"
    )
    args = parser.parse_args()
    record = Record()
    slack = FakeSlack().start()
    with tempfile.TemporaryDirectory(prefix="bench-chaos-") as tmp, FakeGitHub(token="t") as gh:
        gh.add_repo(REPO)
        disk = Path(tmp) / "disk"
        disk.mkdir()
        holder = _holder(disk, args.disk_mb)
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_TEAM_")}
        env.update(
            AGENT_TEAM_DB_PATH=f"{disk}/agent-team.db",
            AGENT_TEAM_STATE_DIR=f"{disk}/state",
            AGENT_TEAM_DASHBOARD_PORT=str(port),
            AGENT_TEAM_DASHBOARD_TOKENS=f"chaos:{TOKEN}",
            AGENT_TEAM_LOG_LEVEL="warning",
            AGENT_TEAM_TRANSPORT="slack",
            AGENT_TEAM_SLACK_BOT_TOKEN=BOT_TOKEN,
            AGENT_TEAM_SLACK_SIGNING_SECRET=SECRET,
            AGENT_TEAM_SLACK_CHANNEL=CHANNEL,
            AGENT_TEAM_SLACK_ALLOWED_USERS=",".join(USERS),
            AGENT_TEAM_SLACK_API_URL=slack.base_url,
            AGENT_TEAM_GITHUB_REPOS=REPO,
            AGENT_TEAM_GITHUB_TOKEN="t",
            AGENT_TEAM_GITHUB_API_URL=gh.url,
            AGENT_TEAM_GITHUB_WEBHOOK_SECRET=HOOK_SECRET,
            AGENT_TEAM_GITHUB_POLL_S="3600",
        )
        daemon = Daemon(holder.pid, env, url, record, Path(tmp) / "daemon.log")
        try:
            daemon.start()
            stop = threading.Event()
            load = Load(url, record, stop)
            workers = [
                threading.Thread(target=target, daemon=True)
                for target in (load.submitter, load.answerer, load.answerer, load.github)
            ]
            for worker in workers:
                worker.start()
            began = time.monotonic()
            rng = random.Random(11)
            kills = sorted(rng.uniform(0.1, 0.9) * args.seconds for _ in range(args.kills))
            full_at = args.seconds * 0.5
            while kills or full_at is not None:
                nxt = min([*kills, full_at] if full_at is not None else kills)
                time.sleep(max(0.0, began + nxt - time.monotonic()))
                if kills and nxt == kills[0]:
                    kills.pop(0)
                    daemon.kill()
                    daemon.start()
                else:
                    full_at = None
                    start = time.monotonic()
                    _inside(holder.pid, "sh", "-c", f'dd if=/dev/zero of="{disk}/fill" bs=1M')
                    time.sleep(args.full_s)
                    _inside(holder.pid, "rm", "-f", f"{disk}/fill")
                    record.full.append((start, time.monotonic()))
            time.sleep(max(0.0, began + args.seconds - time.monotonic()))
            stop.set()
            for worker in workers:
                worker.join(timeout=60)
            time.sleep(5)  # the runs the last answers started
            checked = _inside(holder.pid, sys.executable, "-c", _CHECK, f"{disk}/agent-team.db")
            ledger = json.loads(checked.stdout)
            burst = [_burst(url, args.burst, True, r) for r in range(3)]
        finally:
            daemon.stop()
            holder.kill()
            slack.stop()
    return _report(args, record, ledger, burst)


def _report(
    args: argparse.Namespace,
    record: Record,
    ledger: dict[str, Any],
    burst: list[tuple[list[float], int, float]],
) -> int:
    lost = sorted(record.tasks - set(ledger["tasks"]))
    answers: dict[str, str] = ledger["answers"]
    wrong = [
        qid
        for qid, text in record.api_answers.items()
        if qid not in answers
        or json.loads(answers[qid]).get("decision", "x") not in ("approve", "x")
    ]
    resumes: list[str] = ledger["resumes"]
    twice = sorted(set(ledger["audited_twice"]) | {c for c in resumes if resumes.count(c) > 1})
    # One task per issue by construction (its id is the issue's); each acknowledged one exists.
    made = set(ledger["github"])
    github_lost = sorted(n for n in record.deliveries if task_id_for(REPO, n) not in made)

    def in_fault(t: float) -> bool:
        return any(start <= t <= end + GRACE_S for start, end in record.full)

    five = [(what, s) for t, what, s in record.replies if s >= 500 and not in_fault(t)]
    five_in = [s for t, _what, s in record.replies if s >= 500 and in_fault(t)]
    by_kind: dict[str, int] = {}
    for _t, what, _s in record.replies:
        by_kind[what] = by_kind.get(what, 0) + 1
    submits = [x for latencies, _bad, _wall in burst for x in latencies]
    burst_bad = sum(bad for _l, bad, _w in burst)
    walls = [wall for _l, _b, wall in burst]
    print(
        f"chaos: {args.seconds:.0f} s of load, {args.kills} kill -9, {args.full_s:.0f} s disk full"
    )
    print(f"  requests answered: {len(record.replies)} {by_kind}; no connection: {record.refused}")
    print(
        f"  tasks acknowledged: {len(record.tasks)}; in the ledger: {len(ledger['tasks'])} "
        f"{ledger['statuses']}"
    )
    print(f"  tasks lost: {len(lost)} (goal 0) {lost[:5]}")
    for note in ledger["failed"][:3]:
        print(f"  a failed task's note: {str(note)[:160]}")
    print(
        f"  answers won through the API: {len(record.api_answers)}; answered in all: "
        f"{len(answers)}; answers applied twice: {len(twice)} (goal 0) {twice[:5]}; "
        f"API answers not stored: {len(wrong)} {wrong[:5]}"
    )
    print(
        f"  GitHub issues acknowledged: {len(record.deliveries)}; tasks from GitHub: "
        f"{len(made)}; acknowledged issues without a task: {len(github_lost)} (goal 0)"
    )
    print(
        f"  5xx outside the full-disk window: {len(five)} (goal 0) {five[:5]}; "
        f"inside it (503 expected): {len(five_in)}"
    )
    print(
        f"  restart to ready: {', '.join(f'{s:.2f} s' for s in record.ready_s[1:])} "
        f"(first start {record.ready_s[0]:.2f} s)"
    )
    p50, p99 = _pct(submits, 50) * 1e3, _pct(submits, 99) * 1e3
    rate = sum(args.burst / wall for wall in walls) / len(walls)
    print(
        f"  {args.burst} concurrent submissions x3 after the chaos: p50 {p50:.0f} ms, "
        f"p99 {p99:.0f} ms, {rate:.0f} submits/s, not 201: {burst_bad} (goal p99 <= 500 ms)"
    )
    missed = lost or twice or wrong or five or github_lost or burst_bad
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
