"""Several `agent-team daemon` processes on one ledger, for the scale-out tests and bench.

Each instance is a real process with its own dashboard port and state folder
(as on its own host). An instance that is killed is never started again under
its name: its slot gets a new incarnation (`d1`, `d1.1`, ...) with a fresh
state folder, so every builder run and every claim can be traced to the
process that made it. The builder, when it is the `command` builder, sees
`E2E_INSTANCE` (variables named `AGENT_TEAM_*` are not passed on), which is
how a build command says which incarnation ran it and how `kill` finds a
killed daemon's build processes.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.e2e.daemon_process import clean_env, free_port, start_daemon, wait_healthy

__all__ = [
    "INSTANCE_ENV",
    "TOKEN",
    "Answerer",
    "BuildRun",
    "Cluster",
    "Instance",
    "answer_text",
    "base_env",
    "builds_recorded",
    "free_port",
    "read_runs",
    "run_logging_build",
]

INSTANCE_ENV = "E2E_INSTANCE"
TOKEN = "scale-out-test-token-0123456789abcdef"
CLARIFY_ANSWER = (
    "Store the email in a cookie after login and prefill the field on the next visit, "
    "with a test for both paths."
)


def base_env() -> dict[str, str]:
    """The test's environment without any agent-team, systemd or instance setting."""
    return {k: v for k, v in clean_env().items() if not k.startswith(INSTANCE_ENV)}


def run_logging_build(runs: Path, *, sleep_s: float = 0.0, until: Path | None = None) -> str:
    """A build command that appends `start` and `end` lines to `runs` (atomic appends).

    Each line: kind, task id, incarnation, the shell's pid (its process group:
    builds run in a session of their own), and the wall-clock time. With `until`,
    the build goes on until that file exists (the test lets builds end when it is ready).
    """
    stamp = f'"$AGENT_TEAM_TASK_ID" "${INSTANCE_ENV}" "$$" "$(date +%s.%N)"'
    pause = f"sleep {sleep_s}; " if sleep_s > 0 else ""
    if until is not None:
        pause += f"while [ ! -e {until} ]; do sleep 0.05; done; "
    return (
        f"echo start {stamp} >> {runs}; {pause}echo built > built.txt; echo end {stamp} >> {runs}"
    )


@dataclass(frozen=True)
class BuildRun:
    kind: str  # start or end
    task_id: str
    instance: str
    pid: int
    at: float


def read_runs(runs: Path) -> list[BuildRun]:
    if not runs.exists():
        return []
    found = []
    for line in runs.read_text().splitlines():
        kind, task_id, instance, pid, at = line.split()
        found.append(BuildRun(kind, task_id, instance, int(pid), float(at)))
    return found


def builds_recorded(state_dir: Path) -> list[str]:
    """Task ids of a state folder's build records (commits with an `Agent-Team-Task` trailer),
    in its default repository and in its mirrors of remote ones."""
    repos = [state_dir / "repos" / "default", *sorted((state_dir / "mirrors").glob("*.git"))]
    tasks = []
    for repo in repos:
        if not ((repo / ".git").exists() or (repo / "HEAD").is_file()):
            continue
        done = subprocess.run(
            ["git", "log", "--all", "--format=%B%x00"],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
            env={**base_env(), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull},
        )
        for message in done.stdout.split("\0"):
            for line in message.splitlines():
                if line.startswith("Agent-Team-Task: "):
                    tasks.append(line.removeprefix("Agent-Team-Task: ").strip())
    return tasks


def answer_text(kind: str) -> str:
    return "approve" if kind == "plan_decision" else CLARIFY_ANSWER


@dataclass
class Instance:
    name: str  # the incarnation: slot name, then `.1`, `.2` after restarts
    slot: str
    port: int
    state_dir: Path
    log: Path
    proc: subprocess.Popen[str]
    killed_at: float | None = None  # wall clock, as the build lines' times

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.killed_at is None and self.proc.poll() is None

    def owns(self, consumer: str | None) -> bool:
        """Whether a lease owner or `claimed_by` (`host:pid:start`) names this process."""
        return consumer is not None and consumer.split(":")[1:2] == [str(self.proc.pid)]


def _marked(name: str) -> list[int]:
    """Pids of live processes whose environment says they belong to incarnation `name`."""
    wanted = f"{INSTANCE_ENV}={name}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue  # gone, or a zombie
        if wanted in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


@dataclass
class Cluster:
    """Daemons on one ledger (`target`: a PostgreSQL URL or a SQLite file)."""

    root: Path
    target: str
    settings: Mapping[str, str] = field(default_factory=dict)
    instances: dict[str, Instance] = field(default_factory=dict)  # by incarnation
    generations: dict[str, int] = field(default_factory=dict)

    def env(self, name: str, port: int, state_dir: Path) -> dict[str, str]:
        env = base_env()
        env.update(
            AGENT_TEAM_STATE_DIR=str(state_dir),
            AGENT_TEAM_DASHBOARD_PORT=str(port),
            AGENT_TEAM_DASHBOARD_TOKENS=f"tester:{TOKEN}",
            AGENT_TEAM_POLL_S="0.1",
            AGENT_TEAM_LOG_LEVEL="info",
            AGENT_TEAM_STOP_GRACE_S="5",
        )
        if self.target.startswith("postgresql://"):
            env["AGENT_TEAM_DATABASE_URL"] = self.target
            env["AGENT_TEAM_DB_PATH"] = str(self.root / "unused.db")
        else:
            env["AGENT_TEAM_DB_PATH"] = self.target
        env.update(self.settings)
        env[INSTANCE_ENV] = name
        return env

    def start(self, slot: str) -> Instance:
        generation = self.generations.get(slot, -1) + 1
        self.generations[slot] = generation
        name = slot if generation == 0 else f"{slot}.{generation}"
        port = free_port()
        state_dir = self.root / f"state-{name}"
        log = self.root / f"{name}.log"
        proc = start_daemon(env=self.env(name, port, state_dir), cwd=self.root, output=log)
        instance = Instance(name, slot, port, state_dir, log, proc)
        self.instances[name] = instance
        return instance

    def wait_ready(self, instance: Instance, timeout_s: float = 60.0) -> None:
        wait_healthy(
            instance.port,
            instance.proc,
            timeout_s=timeout_s,
            log=instance.log,
            what=instance.name,
        )

    def live(self) -> list[Instance]:
        return [i for i in self.instances.values() if i.alive()]

    def by_consumer(self, consumer: str | None) -> Instance | None:
        for instance in self.instances.values():
            if instance.owns(consumer):
                return instance
        return None

    def kill(self, instance: Instance) -> None:
        """kill -9 the daemon and every process it left (as systemd kills a unit's cgroup).

        `killed_at` is taken once all of them are gone: a build that was already
        starting may still write its `start` line between our signal and its death.
        """
        instance.killed_at = time.time()  # marks it dead for `alive()` at once
        instance.proc.send_signal(signal.SIGKILL)
        instance.proc.wait(timeout=10)
        for _ in range(50):  # a build shell may start one more child while we look
            pids = _marked(instance.name)
            if not pids:
                instance.killed_at = time.time()
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.01)
        raise AssertionError(f"processes of {instance.name} kept running: {_marked(instance.name)}")

    def stop_all(self) -> None:
        for instance in self.instances.values():
            if instance.proc.poll() is None:
                instance.proc.send_signal(signal.SIGTERM)
        for instance in self.instances.values():
            try:
                instance.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill(instance)
        for instance in self.instances.values():
            for pid in _marked(instance.name):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


@dataclass
class Answerer:
    """Answers every open question by POSTing to a random live daemon's dashboard."""

    cluster: Cluster
    pick: random.Random = field(default_factory=lambda: random.Random(7))
    accepted: dict[str, list[str]] = field(default_factory=dict)  # question -> instances (200)
    refused: dict[str, list[int]] = field(default_factory=dict)  # question -> statuses
    client: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=10))

    def answer(self, question_id: str, kind: str) -> bool:
        live = self.cluster.live()
        if not live:
            return False
        target = self.pick.choice(live)
        try:
            response = self.client.post(
                f"{target.url}/api/questions/{question_id}/answer",
                json={"answer": answer_text(kind)},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
        except httpx.HTTPError:
            return False  # killed under us: the question is still open, or answered; look again
        if response.status_code == 200:
            self.accepted.setdefault(question_id, []).append(target.name)
            return True
        self.refused.setdefault(question_id, []).append(response.status_code)
        return response.status_code == 409  # someone else's answer won

    def close(self) -> None:
        self.client.close()
