"""Three daemons on one PostgreSQL database share the work, and lose none of it to kill -9;
`agent-team daemons` says which of them are up, gone or stopped.

Each daemon is a process with its own dashboard port and state folder (as on
its own host), the offline model, and a command builder that appends a
`start` and an `end` line per run to one shared file, so builder runs can be
counted per task and per process. Answers are POSTed to a random daemon's
dashboard as each question opens (often while the run that asked is still
delivering it). GitHub issues come through a loopback GitHub that every
daemon polls.
"""

from __future__ import annotations

import itertools
import json
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_team import __version__, db
from agent_team.requests import inbox
from tests.e2e.cluster import (
    Answerer,
    BuildRun,
    Cluster,
    Instance,
    base_env,
    builds_recorded,
    read_runs,
    run_logging_build,
)
from tests.e2e.conftest import AGENT_TEAM, LONG_BODY, SHORT_BODY
from tests.fakes.github_api import FakeGitHub
from tests.git_server import make_remote
from tests.waiting import wait_for

LEASE_S = "2"  # a killed daemon's tasks are taken over this soon
# Without kills nobody may be taken over: a little more room for renewals on a busy machine.
QUIET_LEASE_S = "3"
REPO = "acme/app"
GITHUB_TOKEN = "ghp_" + "ScaleOutTest" * 3
SLOTS = ("d1", "d2", "d3")


@pytest.fixture
def ledger(pg_url: str) -> Iterator[db.Ledger]:
    db.init_db(pg_url)
    opened = db.open_ledger(pg_url)
    yield opened
    opened.close()


def all_tasks(ledger: db.Ledger) -> list[db.Task]:
    return db.list_tasks(ledger, limit=1000)


def answer_until_done(
    ledger: db.Ledger, answerer: Answerer, expected: int, timeout_s: float, cluster: Cluster
) -> None:
    def settled() -> bool:
        for question in db.list_questions(ledger, status="open"):
            answerer.answer(question.question_id, question.kind)
        counts = db.count_tasks_by_status(ledger)
        stuck = {k: v for k, v in counts.items() if k in ("failed", "parked", "cancelled") and v}
        assert not stuck, f"tasks ended badly: {counts}; logs in {cluster.root}"
        return counts.get("done", 0) == expected

    wait_for(settled, f"{expected} tasks done", timeout_s=timeout_s, step_s=0.05)


def runs_by_task(runs: list[BuildRun]) -> dict[str, list[BuildRun]]:
    found: dict[str, list[BuildRun]] = {}
    for run in sorted(runs, key=lambda r: r.at):
        found.setdefault(run.task_id, []).append(run)
    return found


def check_history(ledger: db.Ledger, task: db.Task) -> None:
    """One `done` row, last; every row closed; each question answered once and resumed once."""
    rows = db.list_transitions(ledger, task.id)
    journey = [(r.to_phase, r.status, r.entered_at, r.exited_at, r.epoch, r.note) for r in rows]
    assert [row.to_phase for row in rows].count("done") == 1, journey
    assert rows[-1].to_phase == "done" and rows[-1].status == "done", journey
    assert all(row.exited_at is not None for row in rows), journey
    questions = db.list_questions(ledger, thread_id=task.id)
    assert questions and all(q.status == "answered" for q in questions), [
        (q.question_id, q.kind, q.status, q.answered_via) for q in questions
    ]
    assert [q.turn for q in questions] == list(range(1, len(questions) + 1))
    resumes = [c for c in db.list_commands(ledger, task_id=task.id) if c.kind == "resume"]
    assert sorted(c.command_id for c in resumes) == sorted(
        db.resume_command_id(q.question_id) for q in questions
    )
    assert all(c.state == "done" for c in resumes), resumes


@pytest.mark.slow
@pytest.mark.timeout(300)  # about 90 s on two busy cores; daemons boot slowly when loaded
def test_three_daemons_share_120_tasks_and_do_each_once(
    tmp_path: Path, pg_url: str, ledger: db.Ledger
) -> None:
    runs = tmp_path / "runs.txt"
    with FakeGitHub(token=GITHUB_TOKEN) as github:
        # The issues' tasks build from a mirror of the repository (no configured clone).
        github.add_repo(REPO, remote=make_remote(tmp_path / "remotes", REPO))
        issues = [
            github.add_issue(REPO, title=f"Issue {n}", body=LONG_BODY, labels=("agent-team",))
            for n in range(20)
        ]
        cluster = Cluster(
            tmp_path,
            pg_url,
            settings={
                "AGENT_TEAM_BUILDER": "command",
                "AGENT_TEAM_BUILD_COMMAND": run_logging_build(runs),
                "AGENT_TEAM_LEASE_S": QUIET_LEASE_S,
                "AGENT_TEAM_GITHUB_REPOS": REPO,
                "AGENT_TEAM_GITHUB_API_URL": github.url,
                "AGENT_TEAM_GITHUB_TOKEN": GITHUB_TOKEN,
                "AGENT_TEAM_GITHUB_POLL_S": "5",
            },
        )
        answerer = Answerer(cluster)
        try:
            for slot in SLOTS:
                cluster.start(slot)
            for instance in cluster.live():
                cluster.wait_ready(instance)
            cli_env = {**base_env(), "AGENT_TEAM_DATABASE_URL": pg_url}
            submitted = []
            for n in range(3):  # as a person would, beside the daemons
                done = subprocess.run(
                    [str(AGENT_TEAM), "submit", "--title", f"CLI task {n}", "--body", LONG_BODY],
                    env=cli_env,
                    cwd=tmp_path,
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=True,
                )
                submitted.append(done.stdout.strip())
            for n in range(97):  # one in ten asks a clarifying question before its plan
                body = SHORT_BODY if n % 10 == 0 else LONG_BODY
                submitted.append(inbox.submit_task(ledger, title=f"Task {n}", body=body))
            answer_until_done(ledger, answerer, expected=120, timeout_s=150, cluster=cluster)
        finally:
            cluster.stop_all()
            answerer.close()
        exits = {i.name: i.proc.returncode for i in cluster.instances.values()}
        assert set(exits.values()) == {0}, exits

    tasks = all_tasks(ledger)
    assert len(tasks) == 120 and {t.status for t in tasks} == {"done"}
    # Every issue became one task, whichever daemon polled it first.
    github_tasks = sorted(t.source_ref or "" for t in tasks if t.source == "github")
    assert len(github_tasks) == len(issues) == len(set(github_tasks)), github_tasks
    source = f"github:{REPO}"
    assert all(db.issue_already_ingested(ledger, source=source, issue_id=n) for n in issues)
    assert sorted(t.id for t in tasks if t.source != "github") == sorted(submitted)

    # The builder ran exactly once per approved plan, and its run was recorded once.
    by_task = runs_by_task(read_runs(runs))
    assert set(by_task) == {t.id for t in tasks}
    assert {tid: [r.kind for r in rs] for tid, rs in by_task.items() if len(rs) != 2} == {}
    assert all([r.kind for r in rs] == ["start", "end"] for rs in by_task.values())
    recorded = Counter(
        task_id for i in cluster.instances.values() for task_id in builds_recorded(i.state_dir)
    )
    assert recorded == Counter({t.id: 1 for t in tasks})

    # Each answer was accepted once and applied once; no duplicated or open transitions.
    questions = [q for t in tasks for q in db.list_questions(ledger, thread_id=t.id)]
    assert len(questions) == 120 + 10  # the ten short bodies asked twice
    assert {q.question_id: len(answerer.accepted.get(q.question_id, [])) for q in questions} == {
        q.question_id: 1 for q in questions
    }
    for task in tasks:
        check_history(ledger, task)

    # The work was spread: claims were made by more than one daemon, builds ran on more than one.
    claimers = Counter(
        instance.name
        for task in tasks
        for command in db.list_commands(ledger, task_id=task.id)
        if (instance := cluster.by_consumer(command.claimed_by)) is not None
    )
    builders = Counter(rs[0].instance for rs in by_task.values())
    print(f"commands claimed per daemon: {dict(claimers)}; builds per daemon: {dict(builders)}")
    assert len(claimers) > 1 and len(builders) > 1, (claimers, builders)
    assert sum(claimers.values()) == sum(len(db.list_commands(ledger, task_id=t.id)) for t in tasks)
    # Nobody stalled, so nobody was taken over or fenced.
    assert sum(lease.takeovers for lease in db.list_leases(ledger, prefix="task:")) == 0
    assert not any("was taken over" in i.log.read_text() for i in cluster.instances.values())


def building_on(cluster: Cluster, runs: Path) -> Instance | None:
    """A live daemon with a build under way (a `start` line and no `end` yet)."""
    started = Counter[tuple[str, str, int]]()
    for run in read_runs(runs):
        key = (run.task_id, run.instance, run.pid)
        started[key] += 1 if run.kind == "start" else -1
    for (_task, name, _pid), count in started.items():
        instance = cluster.instances[name]
        if count > 0 and instance.alive():
            return instance
    return None


def taken_over(
    ledger: db.Ledger, victim: Instance, held: dict[str, int], answer_open: Callable[[], None]
) -> bool:
    """Every lease the victim held went to another instance, with the next epoch."""
    answer_open()
    now = {lease.name: lease for lease in db.list_leases(ledger, prefix="task:")}
    return all(
        now[name].epoch > epoch and not victim.owns(now[name].owner) for name, epoch in held.items()
    )


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_kill_nine_three_times_loses_no_task(
    tmp_path: Path, pg_url: str, ledger: db.Ledger
) -> None:
    runs = tmp_path / "runs.txt"
    cluster = Cluster(
        tmp_path,
        pg_url,
        settings={
            "AGENT_TEAM_BUILDER": "command",
            "AGENT_TEAM_BUILD_COMMAND": run_logging_build(runs, sleep_s=1.0),
            "AGENT_TEAM_LEASE_S": LEASE_S,
        },
    )
    answerer = Answerer(cluster)
    waves, per_wave = 3, 12
    n = waves * per_wave
    killed: list[Instance] = []
    task_ids: list[str] = []
    try:
        for slot in SLOTS:
            cluster.start(slot)
        for instance in cluster.live():
            cluster.wait_ready(instance)

        def answer_open() -> None:
            for question in db.list_questions(ledger, status="open"):
                answerer.answer(question.question_id, question.kind)

        def victim_building() -> Instance | None:
            answer_open()
            return building_on(cluster, runs)

        for wave in range(waves):  # fresh work for each kill, so builds are under way
            task_ids += [
                inbox.submit_task(ledger, title=f"Task {wave}.{i}", body=LONG_BODY)
                for i in range(per_wave)
            ]
            wait_for(victim_building, "a daemon to be building", timeout_s=60, step_s=0.05)
            victim = building_on(cluster, runs)
            assert victim is not None
            held = {
                lease.name: lease.epoch
                for lease in db.list_leases(ledger, prefix="task:")
                if victim.owns(lease.owner)
            }
            cluster.kill(victim)
            killed.append(victim)
            # Restarted only after the others took its tasks over: a restart's recovery
            # sweep frees a dead process's leases at once (this host's process), and a
            # lease freed so is taken with the next epoch but not counted as a takeover.
            wait_for(
                lambda victim=victim, held=held: taken_over(ledger, victim, held, answer_open),
                f"the tasks of {victim.name} to be taken over",
                timeout_s=60,
                step_s=0.05,
            )
            cluster.start(victim.slot)  # three again once it is up; the next kill goes on
        for instance in cluster.live():
            cluster.wait_ready(instance)
        answer_until_done(ledger, answerer, expected=n, timeout_s=120, cluster=cluster)
    finally:
        cluster.stop_all()
        answerer.close()

    tasks = all_tasks(ledger)
    assert len(tasks) == n and {t.status for t in tasks} == {"done"}
    assert sorted(t.id for t in tasks) == sorted(task_ids)
    takeovers = sum(lease.takeovers for lease in db.list_leases(ledger, prefix="task:"))
    assert takeovers > 0
    for task in tasks:
        check_history(ledger, task)

    # At-least-once at the kill boundary, exactly-once elsewhere. A builder run cut off by
    # kill -9 (its daemon and its build processes killed, as systemd kills a unit) left no
    # record, so the task's next owner runs the builder again; a run repeats only so.
    # Per task: every run but the last started on a daemon that was killed after that
    # start and before the next run began; the last run finished; and its record is the
    # task's only one outside the killed daemons' state folders.
    kills = {i.name: i.killed_at for i in killed}
    repeated = 0
    for task_id, task_runs in runs_by_task(read_runs(runs)).items():
        starts = [r for r in task_runs if r.kind == "start"]
        for run, after in itertools.pairwise(starts):
            cut = kills.get(run.instance)
            assert cut is not None and run.at < cut < after.at, (task_id, task_runs, kills)
            repeated += 1
        last = starts[-1]
        assert any(r.kind == "end" and r.pid == last.pid for r in task_runs), task_runs
    assert repeated <= 2 * len(killed)  # at most `workers` builds were cut off per kill
    survivors = [i for i in cluster.instances.values() if i.name not in kills]
    recorded = Counter(t for i in survivors for t in builds_recorded(i.state_dir))
    assert max(recorded.values(), default=1) == 1, recorded
    everywhere = Counter(
        t for i in cluster.instances.values() for t in builds_recorded(i.state_dir)
    )
    assert set(everywhere) == {t.id for t in tasks}
    print(
        f"kills: {sorted(kills)}; takeovers: {takeovers}; builder runs repeated after a kill: "
        f"{repeated}; runs: {len([r for r in read_runs(runs) if r.kind == 'start'])} for {n} tasks"
    )


def listed(instance: Instance) -> dict[int, dict[str, Any]]:
    """`GET /api/daemons` on one daemon (any of them answers for all), by pid."""
    body = httpx.get(f"{instance.url}/api/daemons", timeout=10).json()
    return {daemon["pid"]: daemon for daemon in body["daemons"]}


def cli_daemons(tmp_path: Path, pg_url: str, *args: str) -> str:
    """`agent-team daemons ARGS` beside the daemons, as an operator runs it."""
    done = subprocess.run(
        [str(AGENT_TEAM), "daemons", *args],
        env={**base_env(), "AGENT_TEAM_DATABASE_URL": pg_url, "COLUMNS": "250"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def held_tasks(ledger: db.Ledger, instance: Instance) -> list[str]:
    """The tasks whose live lease `instance` holds, from the ledger itself."""
    return sorted(
        lease.name.removeprefix("task:")
        for lease in db.held_leases(ledger)
        if lease.name.startswith("task:") and instance.owns(lease.owner)
    )


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_daemons_lists_the_three_and_the_one_killed_as_gone(
    tmp_path: Path, pg_url: str, ledger: db.Ledger
) -> None:
    """`agent-team daemons` and `/api/daemons` with three daemons on PostgreSQL, one killed -9.

    Four builds wait on a file the test makes at the end, so what each daemon runs
    holds still while it is looked at: two slots on each of three daemons, then
    the survivors' four slots for all four tasks once the killed one's leases ran out.
    """
    runs, gate = tmp_path / "runs.txt", tmp_path / "builds-may-end"
    cluster = Cluster(
        tmp_path,
        pg_url,
        settings={
            "AGENT_TEAM_BUILDER": "command",
            "AGENT_TEAM_BUILD_COMMAND": run_logging_build(runs, until=gate),
            "AGENT_TEAM_LEASE_S": QUIET_LEASE_S,
            "AGENT_TEAM_WORKERS": "2",
        },
    )
    answerer = Answerer(cluster)
    try:
        for slot in SLOTS:
            cluster.start(slot)
        for instance in cluster.live():
            cluster.wait_ready(instance)
        first = cluster.live()
        task_ids = [inbox.submit_task(ledger, title=f"Held {n}", body=LONG_BODY) for n in range(4)]

        def all_building() -> bool:
            for question in db.list_questions(ledger, status="open"):
                answerer.answer(question.question_id, question.kind)
            started = {run.task_id for run in read_runs(runs) if run.kind == "start"}
            held = {t for i in first for t in held_tasks(ledger, i)}
            return started == held == set(task_ids)

        wait_for(all_building, "four builds under way", timeout_s=90, step_s=0.05)

        # All three are up, each with the tasks it runs; one of them makes the timers' passes.
        shown = listed(first[0])
        assert sorted(shown) == sorted(i.proc.pid for i in first), shown
        for instance in first:
            daemon = shown[instance.proc.pid]
            assert daemon["status"] == "up", daemon
            assert daemon["url"] == f"{instance.url}/", daemon
            assert daemon["tasks"] == held_tasks(ledger, instance), (daemon, instance.name)
            assert daemon["version"] == __version__
        assert sum(d["loops"] == ["timers"] for d in shown.values()) == 1, shown

        victim = building_on(cluster, runs)
        assert victim is not None
        survivors = [i for i in first if i is not victim]
        cluster.kill(victim)

        def settled() -> dict[int, dict[str, Any]] | None:
            """The victim gone, the survivors up with all four tasks and the timers."""
            now = listed(survivors[0])
            gone = now[victim.proc.pid]
            if gone["status"] != "gone" or gone["loops"] or gone["tasks"]:
                return None
            up = [now[i.proc.pid] for i in survivors]
            if any(d["status"] != "up" for d in up):
                raise AssertionError(f"a live daemon shows as {now}")
            if sorted(t for d in up for t in d["tasks"]) != sorted(task_ids):
                return None
            return now if sorted(d["loops"] == ["timers"] for d in up) == [False, True] else None

        shown = wait_for(settled, f"{victim.name} gone, its tasks moved", timeout_s=60)
        for instance in survivors:
            daemon = shown[instance.proc.pid]
            assert daemon["tasks"] == held_tasks(ledger, instance), (daemon, instance.name)
            assert len(daemon["tasks"]) == 2  # the four tasks fill the survivors' four slots
        assert shown[victim.proc.pid]["seen_s_ago"] > float(QUIET_LEASE_S)

        # The CLI says the same, from the ledger, beside the daemons.
        report = json.loads(cli_daemons(tmp_path, pg_url, "--json"))
        assert report["counts"] == {"up": 2, "gone": 1, "stopped": 0}
        by_pid = {d["pid"]: d for d in report["daemons"]}
        assert {pid: d["status"] for pid, d in by_pid.items()} == {
            pid: d["status"] for pid, d in shown.items()
        }
        assert {pid: d["tasks"] for pid, d in by_pid.items()} == {
            pid: d["tasks"] for pid, d in shown.items()
        }
        table = cli_daemons(tmp_path, pg_url)
        assert "gone (not seen for" in table and table.rstrip().endswith("2 up, 1 gone, 0 stopped")

        gate.touch()
        answer_until_done(ledger, answerer, expected=4, timeout_s=90, cluster=cluster)
    finally:
        gate.touch()
        cluster.stop_all()
        answerer.close()

    # A clean stop says so; the killed one stays gone.
    report = json.loads(cli_daemons(tmp_path, pg_url, "--json"))
    assert report["counts"] == {"up": 0, "gone": 1, "stopped": 2}, report
    statuses = {d["pid"]: (d["status"], d["loops"], d["tasks"]) for d in report["daemons"]}
    assert statuses == {
        victim.proc.pid: ("gone", [], []),
        **{i.proc.pid: ("stopped", [], []) for i in survivors},
    }
