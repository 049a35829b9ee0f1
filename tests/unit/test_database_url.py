"""AGENT_TEAM_DATABASE_URL: which backend a value picks, and that no password is ever shown."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agent_team.config import load_settings
from agent_team.db.url import parse_target, password_of, redact_url
from agent_team.exceptions import ConfigError


@pytest.fixture(autouse=True)
def _isolated(isolated_env: Path) -> None:
    """Settings from the test alone."""


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ("ledger.db", Path("ledger.db")),
        ("/var/lib/agent-team/agent-team.db", Path("/var/lib/agent-team/agent-team.db")),
        ("sqlite:///ledger.db", Path("ledger.db")),
        ("sqlite:////var/lib/x.db", Path("/var/lib/x.db")),
    ],
)
def test_a_path_or_sqlite_url_is_the_sqlite_file(value: str, path: Path) -> None:
    target = parse_target(value)
    assert (target.path, target.url, target.is_postgres) == (path, None, False)


@pytest.mark.parametrize("scheme", ["postgresql", "postgres", "PostgreSQL"])
def test_a_postgresql_url_is_postgres(scheme: str) -> None:
    target = parse_target(f"{scheme}://app@db.internal:5432/agent_team")
    assert target.is_postgres and target.path is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("mysql://u:hunter2@h/db", "unknown scheme 'mysql'"),
        ("sqlite://", "needs a path"),
        ("postgresql://u:hunter2@h:5432", "names no database"),
        ("postgresql://u:hunter2@h:notaport/db", "not a valid URL"),
        ("   ", "is empty"),
    ],
)
def test_a_bad_value_names_the_variable_and_never_the_password(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        parse_target(value)
    assert str(caught.value).startswith("AGENT_TEAM_DATABASE_URL: ")
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://app:s3cr%40t@db:5432/x", "postgresql://app:***@db:5432/x"),
        ("postgresql://app@db/x", "postgresql://app@db/x"),
        ("postgresql://db/x?user=app&password=s3cr", "postgresql://db/x?user=app&password=***"),
    ],
)
def test_redact_url_hides_every_password(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert password_of(url) in {"s3cr@t", None, "s3cr"}


def test_settings_take_a_sqlite_url_as_the_db_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_TEAM_DATABASE_URL", "sqlite:///elsewhere/ledger.db")
    settings = load_settings()
    assert settings.db_path == Path("elsewhere/ledger.db")
    assert settings.ledger_target == Path("elsewhere/ledger.db")


def test_settings_default_is_todays_sqlite_file() -> None:
    settings = load_settings()
    assert settings.ledger_target == settings.db_path == Path("agent-team.db")


def test_settings_keep_a_postgresql_url_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    url = "postgresql://app:hunter2@db/agent_team"
    monkeypatch.setenv("AGENT_TEAM_DATABASE_URL", url)
    settings = load_settings()
    assert settings.ledger_target == url
    assert "hunter2" not in repr(settings)


def test_a_bad_url_in_settings_is_one_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_TEAM_DATABASE_URL", "mongodb://u:hunter2@h/db")
    with pytest.raises(ConfigError, match="AGENT_TEAM_DATABASE_URL") as caught:
        load_settings()
    assert "hunter2" not in str(caught.value)


def test_sqlite_runs_and_help_never_import_psycopg(tmp_path: Path) -> None:
    code = (
        "import sys; from agent_team import db; from agent_team.cli import main; "
        "from agent_team.service import wiring; "
        f"db.init_db({str(tmp_path / 'x.db')!r}); "
        "assert not [m for m in sys.modules "
        "if m.startswith(('psycopg', 'langgraph.checkpoint.postgres'))]"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
