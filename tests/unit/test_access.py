"""Where the dashboard's tokens come from (one rule), and how bad token settings are reported."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from agent_team.config import Settings, load_settings, parse_named_tokens
from agent_team.exceptions import ConfigError
from agent_team.requests.access import DashboardTokens, ensure_demo_token

SECRET = "zq9-very-secret-value"


@pytest.fixture(autouse=True)
def clean_env(isolated_env: Path) -> Path:
    return isolated_env


def settings(tmp_path: Path, **overrides: object) -> Settings:
    return load_settings(db_path=tmp_path / "agent-team.db", **overrides)


# --- the named-token format ---------------------------------------------------------------------


def test_named_tokens_parse_with_spaces_around_them() -> None:
    assert parse_named_tokens(" ada : tok-a , bob:tok-b", unit="entry") == [
        ("ada", "tok-a"),
        ("bob", "tok-b"),
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (f"ada {SECRET}", "entry 1 has no ':' between the name and the token"),
        (f"ada:{SECRET},bob", "entry 2 has no ':'"),
        ("ada:", "entry 1 has an empty token"),
        (f":{SECRET}", "entry 1 has no name"),
        (f"ada:{SECRET},,bob:x", "entry 2 is empty"),
        (f"ada:{SECRET},ada:other", "entries 1 and 2 have the same name"),
        (f"ada:{SECRET},bob:{SECRET}", "entries 1 and 2 have the same token"),
        (f"a,b:{SECRET}", "entry 1 has no ':'"),
        (f"ada:{SECRET} more", "entry 1: the token must be one word"),
        (f"<b>:{SECRET}", "entry 1: the name must be letters"),
    ],
)
def test_a_malformed_setting_names_the_setting_and_entry_never_the_token(
    tmp_path: Path, text: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as info:
        settings(tmp_path, dashboard_tokens=text)
    message = str(info.value)
    assert "AGENT_TEAM_DASHBOARD_TOKENS" in message and problem in message
    assert SECRET not in message


def test_a_malformed_tokens_file_names_the_setting_the_file_and_the_line(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text(f"# who may answer\nada:{SECRET}\n\nbob {SECRET}x\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        DashboardTokens(settings(tmp_path, dashboard_tokens_file=path))
    message = str(info.value)
    assert message.startswith(f"AGENT_TEAM_DASHBOARD_TOKENS_FILE ({path}): line 4 has no ':'")
    assert SECRET not in message


def test_a_missing_tokens_file_stops_the_start(tmp_path: Path) -> None:
    path = tmp_path / "nope"
    with pytest.raises(ConfigError, match=r"AGENT_TEAM_DASHBOARD_TOKENS_FILE .*does not exist"):
        DashboardTokens(settings(tmp_path, dashboard_tokens_file=path))


def test_the_unnamed_token_may_not_repeat_a_named_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="configured twice") as info:
        DashboardTokens(
            settings(tmp_path, dashboard_tokens=f"ada:{SECRET}", dashboard_token=SECRET)
        )
    assert SECRET not in str(info.value)


# --- the one rule --------------------------------------------------------------------------------


def test_configured_tokens_are_all_the_tokens(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "dashboard-token").write_text("demo-token\n", encoding="utf-8")
    path = tmp_path / "tokens"
    path.write_text("carol:tok-c\n", encoding="utf-8")
    tokens = DashboardTokens(
        settings(
            tmp_path,
            dashboard_tokens="ada:tok-a,bob:tok-b",
            dashboard_tokens_file=path,
            dashboard_token="tok-shared",
        )
    )
    assert sorted((t.name or "", t.secret) for t in tokens.current()) == [
        ("", "tok-shared"),
        ("ada", "tok-a"),
        ("bob", "tok-b"),
        ("carol", "tok-c"),
    ]
    assert tokens.match("demo-token") is None  # the demo file is not used beside them
    assert tokens.demo_file is None
    assert tokens.describe() == (
        "dashboard writes are on: 2 named from AGENT_TEAM_DASHBOARD_TOKENS, "
        f"named from {path}, one unnamed from AGENT_TEAM_DASHBOARD_TOKEN"
    )


def test_without_configured_tokens_the_demo_file_is_used_with_or_without_demo(
    tmp_path: Path,
) -> None:
    config = settings(tmp_path, state_dir=tmp_path / "elsewhere")
    assert not DashboardTokens(config).enabled
    assert DashboardTokens(config).describe().startswith("dashboard writes are off")
    created = ensure_demo_token(config)
    path = tmp_path / "elsewhere" / "dashboard-token"
    assert created is not None and path.read_text(encoding="utf-8") == created + "\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert ensure_demo_token(config) is None  # made once; the next --demo start reuses it
    tokens = DashboardTokens(config)  # a start without --demo: the same token still works
    assert tokens.match(created) is not None and tokens.match(created).name is None  # type: ignore[union-attr]
    assert tokens.describe() == f"dashboard writes are on: the demo token in {path}"
    assert created not in tokens.describe()


def test_demo_makes_no_token_when_one_is_configured(tmp_path: Path) -> None:
    assert ensure_demo_token(settings(tmp_path, dashboard_tokens="ada:tok-a")) is None
    assert not (tmp_path / "state" / "dashboard-token").exists()


def test_a_tokens_file_is_read_again_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text("ada:tok-a\nbob:tok-b\n", encoding="utf-8")
    tokens = DashboardTokens(settings(tmp_path, dashboard_tokens_file=path))
    assert tokens.match("tok-b") is not None
    path.write_text("ada:tok-a\n", encoding="utf-8")
    os.utime(path, ns=(1, 1))  # a different mtime even on a coarse clock
    assert tokens.match("tok-b") is None
    assert tokens.match("tok-a") is not None
    path.write_text("ada tok-a\n", encoding="utf-8")  # broken: no token is valid
    os.utime(path, ns=(2, 2))
    assert tokens.match("tok-a") is None and tokens.current() == ()


def test_match_finds_the_exact_token(tmp_path: Path) -> None:
    tokens = DashboardTokens(settings(tmp_path, dashboard_tokens="ada:tok-a,bob:tok-ab"))
    found = tokens.match("tok-ab")
    assert found is not None and found.name == "bob"
    assert tokens.match("tok-a ") is None and tokens.match("tok") is None
    assert tokens.match("") is None
