"""Builds in a real bubblewrap sandbox: what the agent can reach, and what it cannot.

Each test runs the `command` builder through `run_build` with a script that
tries something a coding agent must not do, and asserts it was refused or
contained, and that an ordinary build still commits its work.
"""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_team.builders import BuildTask, prepare_worktree, run_build
from agent_team.builders.command import CommandBuilder
from agent_team.builders.egress import resolve_target
from agent_team.builders.live_log import read_build_log
from agent_team.builders.proc import stop_tagged
from agent_team.builders.sandbox import Bubblewrap, SandboxPolicy
from agent_team.builders.sandbox_choice import make_sandbox
from agent_team.builders.sandbox_limits import Limits, cgroup_support, open_cgroup, sweep_cgroups
from agent_team.common.stops import forget_stop
from agent_team.config import load_settings
from agent_team.exceptions import BuildError, ConfigError, TaskStoppedError
from agent_team.service.doctor import check_sandbox
from tests.integration.builders.helpers import git, make_repo, processes_with
from tests.waiting import wait_for

if shutil.which("bwrap") is None:
    if os.environ.get("CI"):
        raise RuntimeError("bubblewrap is missing; .ci/run installs it (apt install bubblewrap)")
    pytest.skip("bubblewrap is not installed", allow_module_level=True)

PY = f"{sys.executable} -I -S"


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A test folder outside /tmp.

    A sandbox has a private /tmp, so anything under pytest's `tmp_path` is out of
    its sight whatever the sandbox hides: a test that a folder is hidden must put
    it where the sandbox would otherwise see it.
    """
    folder = Path(tempfile.mkdtemp(prefix="agent-team-sandbox-test-", dir="/var/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def world(outside_tmp: Path) -> dict[str, Path]:
    """A repository, a state folder, a ledger folder and a home, as a daemon has them."""
    ledger_dir = outside_tmp / "var"
    ledger_dir.mkdir()
    (ledger_dir / "agent-team.db").write_text("LEDGER-CONTENT\n")
    home = outside_tmp / "home"
    home.mkdir()
    (home / ".netrc").write_text("HOME-SECRET\n")
    return {
        "repo": make_repo(outside_tmp / "repo"),
        "state": outside_tmp / "state",
        "ledger_dir": ledger_dir,
        "home": home,
    }


def test_the_test_world_is_in_the_sandboxs_sight_unless_hidden(world: dict[str, Path]) -> None:
    """What the other tests find hidden is hidden by the sandbox, not by where tests live."""
    seen = world["ledger_dir"].parent / "seen.txt"
    seen.write_text("VISIBLE\n")
    assert "VISIBLE" in build(world, f"cat {seen}")


def sandbox_for(world: dict[str, Path], **policy: object) -> Bubblewrap:
    made = make_sandbox(
        "bwrap",
        SandboxPolicy(
            state_dir=world["state"],
            hide=(world["ledger_dir"], world["home"]),
            **policy,  # type: ignore[arg-type]
        ),
        runs_processes=True,
    )
    assert isinstance(made, Bubblewrap)
    return made


def build(
    world: dict[str, Path],
    script: str,
    task_id: str = "t1",
    timeout_s: float = 60,
    **policy: object,
) -> str:
    """Run `script` as the build command of `task_id`; returns the build's output."""
    builder = CommandBuilder(script, timeout_s, sandbox=sandbox_for(world, **policy))
    result = run_build(
        builder,
        BuildTask(task_id, "sandboxed"),
        "the plan",
        repo_path=world["repo"],
        state_dir=world["state"],
    )
    return result.output


def test_an_ordinary_build_commits_its_work(world: dict[str, Path]) -> None:
    output = build(world, "echo built > out.txt && git status --short && echo done")

    assert "done" in output and "?? out.txt" in output
    assert git(world["repo"], "show", "agent-team/t1:out.txt") == "built"


def test_it_cannot_read_other_worktrees_the_ledger_the_home_or_the_daemons_secrets(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    build(world, "echo OTHER-TASK-WORK > mine.txt", task_id="other")
    other = world["state"] / "worktrees" / "other"
    (other / "unsaved.txt").write_text("OTHER-TASK-UNSAVED\n")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_SECRETSECRET")
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-SECRET")
    monkeypatch.setenv("EXTRA_KEY", "handed-in")
    dotenv = world["repo"].parent / ".env"  # the daemon's working folder's settings
    dotenv.write_text("AGENT_TEAM_GITHUB_TOKEN=DOTENV-SECRET\n")

    output = build(
        world,
        f"cat {other}/unsaved.txt {other}/mine.txt; "
        f"cat {world['ledger_dir']}/agent-team.db; "
        f"echo WT:$(ls -A {world['state']}/worktrees | tr '\\n' ,); "
        f"cat {world['home']}/.netrc; cat {dotenv}; env; ls -A /run; echo END",
        env_names=("EXTRA_KEY",),
        hide_files=(dotenv,),
    )

    assert "END" in output
    for secret in (
        "OTHER-TASK",
        "LEDGER-CONTENT",
        "HOME-SECRET",
        "DOTENV-SECRET",
        "ghp_SECRETSECRET",
        "xoxb-SECRET",
        "GITHUB_TOKEN",
    ):
        assert secret not in output
    assert "EXTRA_KEY=handed-in" in output  # what the operator named does enter
    assert "WT:t1," in output  # of the state folder, only its own worktree


def test_it_cannot_write_outside_its_worktree(world: dict[str, Path]) -> None:
    outside = world["repo"].parent / "outside.txt"
    repo_file = world["repo"] / "README.md"

    output = build(
        world,
        f"echo x > /etc/agent-team-was-here; echo x > {outside}; echo x >> {repo_file}; "
        f"echo x > {world['state']}/planted; echo END",
    )

    assert "END" in output
    assert "Read-only file system" in output
    assert not Path("/etc/agent-team-was-here").exists()
    assert not outside.exists() and not (world["state"] / "planted").exists()
    assert repo_file.read_text() == "hello\n"


@pytest.fixture
def web() -> Iterator[tuple[int, list[str]]]:
    """A loopback HTTP server on the host; yields its port and the paths it was asked for."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            body = b"HELLO-FROM-THE-HOST"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], seen
    server.shutdown()
    server.server_close()


def test_it_has_no_network_not_even_the_hosts_loopback(
    world: dict[str, Path], web: tuple[int, list[str]]
) -> None:
    port, seen = web
    probe = (
        "import socket\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=5); print('CONNECTED')\n"
        "except OSError as e: print('REFUSED', e)\n"
    )
    (world["repo"] / "probe.py").write_text(probe)
    git(world["repo"], "add", "probe.py")
    git(world["repo"], "commit", "-q", "-m", "probe")

    output = build(world, f"{PY} probe.py")

    assert "REFUSED" in output and "CONNECTED" not in output
    assert seen == []


def test_the_proxy_lets_listed_hosts_through_and_logs_the_others(
    world: dict[str, Path], web: tuple[int, list[str]]
) -> None:
    port, seen = web
    fetch = (
        "import sys, urllib.request, urllib.error\n"
        "for url in sys.argv[1:]:\n"
        "    try:\n"
        "        print(url, urllib.request.urlopen(url, timeout=20).read().decode())\n"
        "    except urllib.error.HTTPError as e:\n"
        "        print(url, 'HTTP', e.code)\n"
    )
    (world["repo"] / "fetch.py").write_text(fetch)
    git(world["repo"], "add", "fetch.py")
    git(world["repo"], "commit", "-q", "-m", "fetch")

    output = build(
        world,
        f"{PY} fetch.py http://localhost:{port}/allowed http://127.0.0.1:{port}/refused",
        allow_hosts=("localhost",),
    )

    assert f"http://localhost:{port}/allowed HELLO-FROM-THE-HOST" in output
    assert f"http://127.0.0.1:{port}/refused HTTP 403" in output
    assert seen == ["/allowed"]
    kept = read_build_log(world["state"], "t1")  # what people watch
    assert kept is not None and f"refused a connection to 127.0.0.1:{port}" in kept.text


def test_it_cannot_start_processes_past_its_limit(world: dict[str, Path]) -> None:
    if "pids" not in cgroup_support() and os.geteuid() == 0:
        pytest.skip("root without a pids cgroup: the process limit cannot bind here")
    forker = (
        "import os, signal, time\n"
        "kids = []\n"
        "for _ in range(64):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        break\n"
        "    if pid == 0:\n"
        "        time.sleep(600); os._exit(0)\n"
        "    kids.append(pid)\n"
        "print('FORKED', len(kids))\n"
        "for pid in kids: os.kill(pid, signal.SIGKILL)\n"
    )
    (world["repo"] / "fork.py").write_text(forker)
    git(world["repo"], "add", "fork.py")
    git(world["repo"], "commit", "-q", "-m", "fork")

    output = build(world, f"{PY} fork.py", limits=Limits(max_procs=16))

    forked = int(output.split("FORKED", 1)[1].split()[0])
    assert forked < 16


def test_a_build_that_outlives_its_timeout_is_killed_with_everything_it_started(
    world: dict[str, Path],
) -> None:
    marker = "600.4242"
    with pytest.raises(BuildError, match="timed out after 1 s"):
        build(world, f"sleep {marker} & sleep {marker}", timeout_s=1)

    wait_for(lambda: not processes_with(marker), "the sandbox's processes to be gone", 10)


def test_a_stop_kills_the_running_build_at_once(world: dict[str, Path]) -> None:
    marker = "600.4343"
    errors: list[BaseException] = []

    def run() -> None:
        try:
            build(world, f"sleep {marker}", task_id="stop-me")
        except BaseException as exc:
            errors.append(exc)

    runner = threading.Thread(target=run)
    runner.start()
    try:
        wait_for(lambda: processes_with(marker), "the build to start", 30)
        stop_tagged("stop-me", "cancelled")
        # "At once" against the build's 600 s: a loaded machine may take seconds to tear
        # the sandbox down and close its pipes, so the bound is generous (it was 5 s and
        # failed once in CI by timing).
        runner.join(timeout=60)
        assert not runner.is_alive()
    finally:
        forget_stop("stop-me")
    (error,) = errors
    assert isinstance(error, TaskStoppedError) and error.reason == "cancelled"
    wait_for(lambda: not processes_with(marker), "the sandbox's processes to be gone", 10)


def test_an_unknown_sandbox_or_a_missing_bwrap_stops_the_start_with_one_line(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = SandboxPolicy(state_dir=world["state"])
    with pytest.raises(ConfigError, match="unknown sandbox 'podmn'"):
        make_sandbox("podmn", policy, runs_processes=True)
    monkeypatch.setenv("PATH", str(world["home"]))
    with pytest.raises(ConfigError, match=r"apt install bubblewrap.*AGENT_TEAM_SANDBOX=none"):
        make_sandbox("auto", policy, runs_processes=True)
    # The offline builder runs no process: `auto` needs no bwrap for it.
    assert make_sandbox("auto", policy, runs_processes=False).name == "none"


def test_doctor_names_the_sandbox_and_a_claude_code_that_cannot_reach_its_api(
    tmp_path: Path,
) -> None:
    def check(**settings: object) -> tuple[bool, str]:
        result = check_sandbox(
            load_settings(db_path=tmp_path / "agent-team.db", builder="claude-code", **settings)
        )
        return result.ok, result.detail

    ok, detail = check(sandbox="bwrap")
    assert not ok and "cannot reach api.anthropic.com" in detail and detail.startswith("bwrap")
    ok, detail = check(sandbox="bwrap", sandbox_allow_hosts=["api.anthropic.com"])
    assert ok and "egress only to api.anthropic.com" in detail
    ok, detail = check(sandbox="none")
    assert ok and detail.startswith("none")


def test_it_cannot_redirect_its_worktrees_git_or_move_a_branch(world: dict[str, Path]) -> None:
    """The daemon runs git in the worktree after the build: what git trusts there is read-only."""
    main_before = git(world["repo"], "rev-parse", "main")
    admin = git(world["repo"], "rev-parse", "--git-common-dir")  # the repository's .git
    planted = world["state"].parent / "planted-by-fsmonitor"
    output = build(
        world,
        # Point .git at a folder of its own whose config runs a program on the host's git;
        # write the worktree's HEAD to move `main`; plant a config.worktree; then use git.
        "mkdir -p fake && git init -q --bare fake/git && "
        f"git --git-dir=fake/git config core.fsmonitor 'touch {planted}'; "
        "echo 'gitdir: fake/git' > .git; "
        f"echo 'ref: refs/heads/main' > {world['repo']}/.git/worktrees/t1/HEAD; "
        f"echo '[core]' > {world['repo']}/.git/worktrees/t1/config.worktree; "
        "echo change > changed.txt; git status --short; git diff --stat HEAD; echo END",
    )

    assert "END" in output and "Read-only file system" in output
    assert "?? changed.txt" in output  # its own git still reads the worktree (private index)
    assert not planted.exists()
    assert git(world["repo"], "rev-parse", "main") == main_before
    assert (Path(admin) if Path(admin).is_absolute() else world["repo"] / admin).is_dir()
    assert "changed.txt" in git(world["repo"], "show", "--stat", "agent-team/t1")


def test_a_name_allowed_by_a_wildcard_may_not_lead_to_an_internal_address() -> None:
    assert resolve_target("localhost", 80, exact=True) in {("127.0.0.1", 80), ("::1", 80)}
    refused = resolve_target("localhost", 80, exact=False)
    assert isinstance(refused, str) and "internal address" in refused


def test_a_builds_cgroup_is_removed_and_a_killed_daemons_leftovers_are_swept(
    world: dict[str, Path],
) -> None:
    if not cgroup_support():
        pytest.skip("no cgroup this process may make here: rlimits only")
    before = {p.name for p in Path("/sys/fs/cgroup").rglob("agent-team-*") if p.is_dir()}
    build(world, "echo built > out.txt")
    after = {p.name for p in Path("/sys/fs/cgroup").rglob("agent-team-*") if p.is_dir()}
    assert after <= before  # the build's own cgroups went with it

    left = open_cgroup("agent-team-left-by-a-killed-daemon", Limits())  # empty, as after kill -9
    assert left is not None
    swept = sweep_cgroups()
    assert {p.name for p in swept} == {"agent-team-left-by-a-killed-daemon"}
    assert not any(folder.exists() for folder in left.dirs)


def test_a_program_right_in_the_hosts_tmp_is_bound_alone_never_all_of_tmp(
    world: dict[str, Path],
) -> None:
    handle, name = tempfile.mkstemp(prefix="agent-team-cli-", dir="/tmp")
    os.close(handle)
    program = Path(name)
    try:
        program.write_text("#!/bin/sh\necho RAN-FROM-TMP\n")
        program.chmod(0o755)
        worktree = prepare_worktree(
            BuildTask("t-bin", "x"), repo_path=world["repo"], state_dir=world["state"]
        )
        with sandbox_for(world).enter(
            worktree, builder="x", env={}, binaries=[str(program)]
        ) as jail:
            binds = list(zip(jail.prefix, jail.prefix[1:], jail.prefix[2:], strict=False))
            assert ("--ro-bind", "/tmp", "/tmp") not in binds
            assert ("--ro-bind", str(program), str(program)) in binds
            done = subprocess.run(
                jail.argv([str(program)]), env=jail.env, capture_output=True, text=True, check=False
            )
        assert "RAN-FROM-TMP" in done.stdout, done.stderr
    finally:
        program.unlink(missing_ok=True)
