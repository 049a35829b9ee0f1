"""The lane through the real `agent-team` CLI in subprocesses, killed mid-write.

`AGENT_TEAM_CRASH_AT=conf_write:<point>` makes the process exit like `kill -9`:
`sending` (effect recorded as pending, nothing sent), `sent` (the PUT landed,
its result not yet recorded) and `after` (recorded, checkpoint not yet
saved). After a clean restart the page holds exactly one PUT with version + 1.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent_team import db
from agent_team.requests import inbox
from tests.e2e.conftest import LONG_BODY, Cli
from tests.fakes import confluence_api as fc

CRASHED = 137
FIXTURES = Path(__file__).parents[2] / "fixtures" / "adf"


@pytest.fixture
def fake() -> Iterator[fc.FakeConfluence]:
    with fc.fake_confluence() as server:
        yield server


def lane_cli(tmp_path: Path, fake: fc.FakeConfluence, *, dry_run: bool) -> Cli:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_TEAM_")}
    env.update(
        {
            "AGENT_TEAM_STATE_DIR": str(tmp_path / "state"),
            "AGENT_TEAM_LOG_LEVEL": "warning",
            "AGENT_TEAM_CONFLUENCE_ENABLED": "true",
            "AGENT_TEAM_CONFLUENCE_BASE_URL": fake.base_url,
            "AGENT_TEAM_CONFLUENCE_SPACE_ID": "1001",
            "AGENT_TEAM_CONFLUENCE_EMAIL": fc.EMAIL,
            "AGENT_TEAM_CONFLUENCE_API_TOKEN": fc.API_TOKEN,
            "AGENT_TEAM_CONFLUENCE_DRY_RUN": "true" if dry_run else "false",
        }
    )
    return Cli(home=tmp_path, env=env)


def submit_docs(cli: Cli, body: str) -> str:
    return cli.run(
        "submit", "--kind", "confluence", "--title", "Login docs", "--body", body
    ).stdout.strip()


def tick(cli: Cli, crash_at: str | None = None) -> int:
    env = {"AGENT_TEAM_CRASH_AT": crash_at} if crash_at else {}
    return cli.run("tick", "--until-idle", "--timeout", "60", check=False, extra_env=env).returncode


@pytest.mark.parametrize(
    ("crash_at", "puts_at_crash"),
    [("conf_write:sending", 0), ("conf_write:sent", 1), ("conf_write:after", 1)],
)
@pytest.mark.slow
def test_a_crash_mid_write_never_puts_twice(
    tmp_path: Path, fake: fc.FakeConfluence, crash_at: str, puts_at_crash: int
) -> None:
    page_id = fake.add_page(
        "Architecture", (FIXTURES / "mixed_macros.json").read_text(encoding="utf-8"), version=3
    )
    cli = lane_cli(tmp_path, fake, dry_run=False)
    db.init_db(cli.db_path)
    conn = db.open_ledger(cli.db_path)
    try:
        # Submitting and answering are ledger writes (the CLI's own path is tested below);
        # every graph run is a real `agent-team tick` process.
        task_id = inbox.submit_task(
            conn,
            title="Login docs",
            body=f"{LONG_BODY}\nconfluence-page: {page_id}",
            kind="confluence",
            confluence_enabled=True,
        )
        assert tick(cli) == 0
        (question,) = db.list_questions(conn, status="open", thread_id=task_id)
        assert question.kind == "confluence_approval"
        inbox.submit_answer(
            conn, question.question_id, "publish", via="cli:test", now=datetime.now(UTC)
        )

        assert tick(cli, crash_at) == CRASHED
        assert len(fake.writes()) == puts_at_crash
        assert tick(cli) == 0

        (put,) = fake.writes()
        assert put.body["version"]["number"] == 4
        assert fake.pages[page_id].version == 4
        found = db.get_task(conn, task_id)
        assert found is not None and found.status == "done"
        (effect,) = db.list_effects(conn, task_id=task_id, kind="confluence_write")
    finally:
        conn.close()
    assert effect.state == "done" and effect.result["version"] == 4
    assert effect.result["recovered"] is (crash_at == "conf_write:sent")


@pytest.mark.slow
def test_cli_dry_run_sends_nothing_and_records_the_request(
    tmp_path: Path, fake: fc.FakeConfluence
) -> None:
    cli = lane_cli(tmp_path, fake, dry_run=True)
    task_id = submit_docs(cli, LONG_BODY)
    assert tick(cli) == 0
    question = cli.open_question(task_id)
    assert "DRY RUN" in question["payload"]["text"]
    cli.answer(question["question_id"], "publish")
    assert tick(cli) == 0
    assert fake.writes() == []
    conn = db.open_ledger(cli.db_path)
    try:
        found = db.get_task(conn, task_id)
        assert found is not None and found.status == "done"
        (effect,) = db.list_effects(conn, task_id=task_id, kind="confluence_write")
    finally:
        conn.close()
    assert effect.result["dry_run"] is True
    assert effect.request["method"] == "POST" and effect.request["json"]["spaceId"] == "1001"


def test_cli_refuses_a_confluence_task_while_the_lane_is_off(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_TEAM_")}
    cli = Cli(home=tmp_path, env=env)
    result = cli.run("submit", "--kind", "confluence", "--title", "Docs", check=False)
    assert result.returncode != 0
    assert "documentation lane, which is off" in result.stdout + result.stderr
