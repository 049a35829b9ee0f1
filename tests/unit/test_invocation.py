"""The command every hint names: the one that works from the person's folder."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from agent_team.cli.help_format import PANELS, OrderedGroup
from agent_team.cli.main import app
from agent_team.common.invocation import COMMANDS, command, localize


@pytest.fixture
def script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    exe = tmp_path / "checkout" / ".venv" / "bin" / "agent-team"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n", encoding="utf-8")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    return exe


def test_the_path_as_typed_relative_to_the_folder_or_in_full(script: Path) -> None:
    checkout = script.parents[2]
    assert command(".venv/bin/agent-team", cwd=checkout) == ".venv/bin/agent-team"
    assert command(str(script), cwd=checkout) == ".venv/bin/agent-team"
    assert command(str(script), cwd=checkout.parent) == "checkout/.venv/bin/agent-team"
    assert command(str(script), cwd=script.parent.parent.parent.parent / "x") == str(script)


def test_the_plain_name_when_path_finds_it_or_it_was_not_started_as_agent_team(
    script: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(script.parent))
    assert command(str(script), cwd=script.parent) == "agent-team"
    assert command("/usr/bin/pytest") == "agent-team"
    assert command("") == "agent-team"


def test_localize_rewrites_only_backticked_commands() -> None:
    text = "run `agent-team migrate --db x`; the agent-team daemon; pip install 'agent-team[x]'"
    assert localize(text, ".venv/bin/agent-team") == (
        "run `.venv/bin/agent-team migrate --db x`; the agent-team daemon; "
        "pip install 'agent-team[x]'"
    )
    assert localize(text, "agent-team") == text


def test_bare_commands_are_rewritten_only_where_one_of_ours_follows() -> None:
    # #31 (11): the inbox printed bare `agent-team ...`, not the command that runs here.
    text = (
        "see why: agent-team show t1; fix it, then: agent-team retry t1 "
        "(written by the agent-team offline builder on agent-team/t1)"
    )
    assert localize(text, ".venv/bin/agent-team", bare=True) == (
        "see why: .venv/bin/agent-team show t1; fix it, then: .venv/bin/agent-team retry t1 "
        "(written by the agent-team offline builder on agent-team/t1)"
    )
    assert localize(text, ".venv/bin/agent-team") == text  # backticks only, by default


def test_the_bare_hint_commands_are_the_apps_commands() -> None:
    click_app = typer.main.get_command(app)
    assert isinstance(click_app, OrderedGroup)
    assert set(click_app.commands) == COMMANDS
    # and each has its place in `--help` (cli/help_format.PANELS)
    assert {name for names in PANELS.values() for name in names} == COMMANDS
