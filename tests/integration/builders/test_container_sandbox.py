"""The container sandbox (podman, docker): its flags, its environment and its lifecycle.

No container can run on these machines (see tests/fakes/container_runtime.py),
so the runtime's client is a fake that records what it is asked and runs the
command on the host; the flags are the runtime's documented ones.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from agent_team.builders import BuildTask, run_build
from agent_team.builders.command import CommandBuilder
from agent_team.builders.proc import stop_tagged
from agent_team.builders.sandbox import SandboxPolicy
from agent_team.builders.sandbox_choice import make_sandbox
from agent_team.builders.sandbox_container import ContainerSandbox
from agent_team.builders.sandbox_limits import Limits
from agent_team.common.stops import forget_stop
from agent_team.exceptions import ConfigError, TaskStoppedError
from tests.fakes.container_runtime import install_fake_runtime, runtime_calls
from tests.integration.builders.helpers import git, make_repo, processes_with
from tests.waiting import wait_for

SECRET = "ghp_" + "C" * 36


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake `podman` first on PATH; returns the folder of its records."""
    records = tmp_path / "runtime"
    install_fake_runtime(tmp_path / "bin", records)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    return records


def container(tmp_path: Path, **policy: object) -> ContainerSandbox:
    made = make_sandbox(
        "podman",
        SandboxPolicy(state_dir=tmp_path / "state", **policy),  # type: ignore[arg-type]
        runs_processes=True,
        image="registry.example/builder:1",
    )
    assert isinstance(made, ContainerSandbox)
    return made


def runs(records: Path) -> list[list[str]]:
    return [call["argv"] for call in runtime_calls(records) if call["argv"][0] == "run"]


def test_a_container_build_gets_the_sandbox_flags_and_only_named_variables(
    tmp_path: Path, runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", SECRET)
    monkeypatch.setenv("EXTRA_KEY", "handed-in-by-name")
    repo = make_repo(tmp_path / "repo")
    sandbox = container(
        tmp_path, env_names=("EXTRA_KEY",), limits=Limits(max_procs=64, max_memory_mb=512)
    )
    builder = CommandBuilder("env; echo built > out.txt", 60, sandbox=sandbox)

    result = run_build(
        builder, BuildTask("c1", "boxed"), "plan", repo_path=repo, state_dir=tmp_path / "state"
    )

    assert git(repo, "show", "agent-team/c1:out.txt") == "built"
    assert "EXTRA_KEY=handed-in-by-name" in result.output and SECRET not in result.output
    assert "GITHUB_TOKEN" not in result.output
    (argv,) = runs(runtime)
    text = " ".join(argv)
    for flag in (
        "--rm",
        "--network none",
        "--read-only",
        "--cap-drop ALL",
        "--security-opt no-new-privileges",
        "--pids-limit 64",
        "--memory 512m",
        "--tmpfs /tmp",
        "--env EXTRA_KEY",
    ):
        assert flag in text, flag
    worktree = tmp_path / "state" / "worktrees" / "c1"
    assert f"--volume {worktree}:{worktree}:rw" in text
    assert f"--volume {repo / '.git'}:{repo / '.git'}:ro" in text
    assert "handed-in-by-name" not in text and SECRET not in text  # values never in argv
    assert argv[argv.index("registry.example/builder:1") + 1 :] == [
        "/bin/sh",
        "-c",
        "env; echo built > out.txt",
    ]
    name = argv[argv.index("--name") + 1]
    assert name.startswith("agent-team-c1-")
    assert ["rm", "-f", name] in [call["argv"] for call in runtime_calls(runtime)]
    assert not list((runtime / "containers").iterdir())


def test_a_stopped_container_build_is_killed_and_removed(tmp_path: Path, runtime: Path) -> None:
    marker = "600.6161"
    repo = make_repo(tmp_path / "repo")
    builder = CommandBuilder(f"sleep {marker}", 600, sandbox=container(tmp_path))
    errors: list[BaseException] = []

    def build() -> None:
        try:
            run_build(
                builder, BuildTask("c2", "boxed"), "p", repo_path=repo, state_dir=tmp_path / "state"
            )
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=build)
    thread.start()
    try:
        wait_for(lambda: any((runtime / "containers").glob("*.json")), "the container to run", 30)
        stop_tagged("c2", "cancelled")
        thread.join(timeout=30)
    finally:
        forget_stop("c2")
    assert not thread.is_alive()
    (error,) = errors
    assert isinstance(error, TaskStoppedError) and error.reason == "cancelled"
    (argv,) = runs(runtime)
    name = argv[argv.index("--name") + 1]
    assert ["rm", "-f", name] in [call["argv"] for call in runtime_calls(runtime)]
    wait_for(lambda: not processes_with(marker), "the container's command to be gone", 10)


def test_the_sweep_removes_this_state_folders_leftovers_only(tmp_path: Path, runtime: Path) -> None:
    ours = container(tmp_path)
    theirs = container(tmp_path / "elsewhere")
    (runtime / "containers").mkdir(exist_ok=True)
    for name, owner in (("agent-team-a-1", ours), ("agent-team-b-2", theirs)):
        (runtime / "containers" / f"{name}.json").write_text(
            json.dumps({"label": owner.label, "pid": None})
        )

    assert ours.sweep() == ["agent-team-a-1"]
    assert [p.stem for p in (runtime / "containers").iterdir()] == ["agent-team-b-2"]


def test_container_settings_that_cannot_work_stop_the_start_with_one_line(
    tmp_path: Path, runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = SandboxPolicy(state_dir=tmp_path / "state")
    with pytest.raises(ConfigError, match="needs AGENT_TEAM_SANDBOX_IMAGE"):
        make_sandbox("podman", policy, runs_processes=True)
    with pytest.raises(ConfigError, match="an image needs a container runtime"):
        make_sandbox("bwrap", policy, runs_processes=True, image="x:1")
    (runtime / "engine-down").touch()
    with pytest.raises(ConfigError, match=r"does not answer.*Cannot connect to the engine"):
        make_sandbox("podman", policy, runs_processes=True, image="x:1")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ConfigError, match=r"apt install docker\.io"):
        make_sandbox("docker", policy, runs_processes=True, image="x:1")
