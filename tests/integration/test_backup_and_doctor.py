"""`agent-team backup` and `agent-team doctor`."""

from __future__ import annotations

import json
import socket
import sqlite3
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_team import db
from agent_team.cli.main import app
from agent_team.config import load_settings
from agent_team.requests.actors import INTERNAL
from agent_team.requests.people import PeopleRequests
from agent_team.service.doctor import check_budget_outbox, check_model, check_people, run_checks


def test_backup_is_consistent_while_writing_and_keeps_n(ledger_file: Path, tmp_path: Path) -> None:
    conn = db.open_ledger(ledger_file)
    stop = threading.Event()

    def write() -> None:
        n = 0
        while not stop.is_set():
            db.record_usage(
                conn,
                thread_id=f"t{n}",
                stage="plan",
                model="m",
                billing_mode="api",
                input_tokens=1,
                output_tokens=1,
                usd_cost=0.01,
            )
            n += 1

    writer = threading.Thread(target=write)
    writer.start()
    out = tmp_path / "backups"
    start = datetime(2026, 12, 1, tzinfo=UTC)
    try:
        made = [
            db.backup_ledger(ledger_file, out, keep=3, now=start + timedelta(minutes=i))[0]
            for i in range(5)
        ]
    finally:
        stop.set()
        writer.join()
        conn.close()
    assert db.list_backups(out) == made[-3:]
    for path in made[-3:]:
        copy = sqlite3.connect(path)
        assert copy.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert (
            copy.execute("SELECT schema_version FROM schema_meta").fetchone()[0]
            == db.SCHEMA_VERSION
        )
        copy.close()
    assert not list(out.glob("*.partial"))
    with pytest.raises(ValueError):
        db.backup_ledger(ledger_file, out, keep=0)


def test_backup_command(ledger_file: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["--db", str(ledger_file), "backup", "--out", str(tmp_path / "b"), "--keep", "2"]
    )
    assert result.exit_code == 0, result.output
    assert len(db.list_backups(tmp_path / "b")) == 1


def test_backup_without_out_goes_to_backups_in_the_working_folder(
    ledger_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["--db", str(ledger_file), "backup"])
    assert result.exit_code == 0, result.output
    (made,) = db.list_backups(tmp_path / "backups")
    assert made.name in "".join(result.output.split())  # Rich may wrap the long path


def test_doctor_flags_a_busy_port_and_a_missing_builder(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        settings = load_settings(
            db_path=tmp_path / "x.db",
            dashboard_port=port,
            builder="claude-code",
            claude_bin=str(tmp_path / "no-claude"),
        )
        results = {r.name: r for r in run_checks(settings)}
    assert not results["dashboard port"].ok
    assert "AGENT_TEAM_DASHBOARD_PORT" in results["dashboard port"].fix
    assert not results["builder"].ok and "AGENT_TEAM_CLAUDE_BIN" in results["builder"].fix
    assert results["ledger"].ok and "does not exist yet" in results["ledger"].detail
    assert results["model"].ok and results["budget cap"].ok


def test_doctor_command_exit_codes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules: the anthropic extra looks uninstalled (it is a dev dependency).
    monkeypatch.setitem(sys.modules, "langchain_anthropic", None)
    runner = CliRunner()
    ok = runner.invoke(
        app, ["--db", str(tmp_path / "x.db"), "doctor"], env={"AGENT_TEAM_DASHBOARD_PORT": "0"}
    )
    assert ok.exit_code == 0, ok.output
    assert "✗" not in ok.output and "✓" in ok.output
    bad = runner.invoke(
        app,
        ["--db", str(tmp_path / "x.db"), "doctor"],
        env={"AGENT_TEAM_DASHBOARD_PORT": "0", "AGENT_TEAM_MODEL": "anthropic:claude-sonnet-4-5"},
    )
    assert bad.exit_code == 1
    assert "agent-team[anthropic]" in bad.output


def test_doctor_lists_every_model_and_endpoint_without_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Anthropic's endpoint must be the client's default, whatever this machine has set:
    # the providers' own variables are read as endpoints, and so are ours.
    for provider, variable in [
        ("ANTHROPIC", "ANTHROPIC_BASE_URL"),
        ("OPENAI", "OPENAI_BASE_URL"),
        ("OLLAMA", "OLLAMA_HOST"),
    ]:
        monkeypatch.delenv(variable, raising=False)
        monkeypatch.delenv(f"AGENT_TEAM_{provider}_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    monkeypatch.setitem(sys.modules, "langchain_ollama", None)
    settings = load_settings(
        db_path=tmp_path / "agent-team.db",
        model="anthropic:claude-sonnet-4-5",
        model_plan="anthropic:claude-opus-4-5",
        model_fallbacks=["openai:gpt-5-mini", "ollama:llama3.1"],
        openai_base_url="https://gateway:s3cret-pass@llm.example.com/v1?key=s3cret-key",
    )

    result = check_model(settings)

    assert not result.ok and result.fix == "pip install 'agent-team[ollama]'"
    assert result.detail.startswith(
        "clarify anthropic:claude-sonnet-4-5, plan anthropic:claude-opus-4-5, docs "
        "anthropic:claude-sonnet-4-5; fallbacks openai:gpt-5-mini, ollama:llama3.1"
    )
    assert "openai at https://llm.example.com/v1" in result.detail
    assert "anthropic at https://api.anthropic.com (the client's default)" in result.detail
    assert "ollama:llama3.1 needs the langchain_ollama package" in result.detail
    assert "s3cret" not in result.detail and "gateway" not in result.detail


def test_doctor_says_how_many_spend_rows_wait_in_the_outbox(tmp_path: Path) -> None:
    settings = load_settings(db_path=tmp_path / "agent-team.db")
    assert check_budget_outbox(settings).ok
    row = {
        "thread_id": "t",
        "stage": "plan",
        "model": "offline",
        "billing_mode": "api",
        "input_tokens": 1,
        "output_tokens": 1,
        "usd_cost": 0.0,
        "recorded_at": "2030-01-01T00:00:00.000000Z",
        "day_bucket": "2030-01-01",
    }
    (tmp_path / db.OUTBOX_FILENAME).write_text((json.dumps(row) + "\n") * 2)
    result = check_budget_outbox(settings)
    assert not result.ok and "2 spend row(s)" in result.detail and "ledger replay" in result.fix


def test_doctor_says_who_may_act_and_warns_about_tokens_outside_the_ledger(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent-team.db"
    db.init_db(path)
    plain = load_settings(db_path=path)
    nobody = check_people(plain)
    assert nobody.ok and not nobody.warn and "nobody is set up" in nobody.detail
    assert nobody.fix == "agent-team people add NAME --role owner"
    with db.open_ledger(path) as ledger:
        people = PeopleRequests(ledger)
        people.add("ada", "owner", actor=INTERNAL)
        people.add("bo", "maintainer", actor=INTERNAL)
        people.add("cy", "maintainer", actor=INTERNAL)
    team = check_people(plain)
    assert team.ok and not team.warn and team.detail == "3 people: 1 owner, 2 maintainer"
    legacy = load_settings(db_path=path, dashboard_tokens="ada:legacy-token-one-9f2")
    warned = check_people(legacy)
    assert warned.ok and warned.warn  # doctor still passes: the tokens work for this release
    assert "1 named token(s)" in warned.detail and "people import" in warned.fix
    assert "legacy-token-one-9f2" not in warned.detail + warned.fix
    runner = CliRunner()
    shown = runner.invoke(
        app,
        ["--db", str(path), "doctor"],
        env={"AGENT_TEAM_DASHBOARD_PORT": "0", "AGENT_TEAM_DASHBOARD_TOKENS": "ada:legacy-9f2e1"},
    )
    assert shown.exit_code == 0, shown.output
    marks = {
        line.split()[1]: line.split()[3]
        for line in shown.output.splitlines()
        if line.startswith("│ ") and len(line.split()) > 3 and line.split()[1] in "!✓✗"
    }
    assert marks.get("!") == "people", shown.output
