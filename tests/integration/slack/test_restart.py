"""After a restart, questions answered while the daemon was down are redrawn at start-up.

Issue #17 item 7: the redraw must not wait for the 30 s timer. Each test posts
a question with one daemon (built, never run: no listener, no timer), records
an answer the way it would arrive with no daemon listening (the CLI's path,
or a Slack answer whose follow-up died with the process), then runs a second
daemon on the same ledger and waits a few seconds, far below the timer's
period, for the `chat.update` on the loopback Slack.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from agent_team import db
from agent_team.common.testhooks import wall_clock
from agent_team.integrations.slack.followups import TIMERS_S
from agent_team.requests import inbox
from agent_team.service.daemon import Daemon
from tests.fakes.slack_api import FakeSlack
from tests.integration.pipeline.conftest import LONG_BODY
from tests.integration.slack.conftest import ALICE, slack_settings

PROMPT_S = 10.0  # "at start-up": well inside the timer loop's period
assert PROMPT_S < TIMERS_S / 2


def posted_question(tmp_path: Path, fake: FakeSlack) -> db.Question:
    """A plan question posted to Slack by a daemon that then went away without running."""
    daemon = Daemon(slack_settings(tmp_path, fake, dashboard_port=0))
    try:
        task_id = daemon.coordinator.start_task(title="Remember the email", body=LONG_BODY)
        daemon.coordinator.tick(until_idle=True, timeout_s=60)
        (question,) = db.list_questions(daemon.coordinator.ledger, thread_id=task_id)
    finally:
        daemon.close()
    assert question.status == "open" and question.channel_ref is not None
    assert not fake.of("chat.update")
    return question


def answer_while_down(tmp_path: Path, question: db.Question, via: str) -> None:
    """`agent-team answer`'s own path, on a ledger no daemon holds."""
    ledger = db.open_ledger(tmp_path / "agent-team.db")
    try:
        inbox.submit_answer(ledger, question.question_id, "approve", via=via, now=wall_clock())
    finally:
        ledger.close()


def redrawn_soon_after_start(tmp_path: Path, fake: FakeSlack, question: db.Question) -> float:
    """Run a daemon until the question's message is redrawn; the seconds it took."""
    daemon = Daemon(slack_settings(tmp_path, fake, dashboard_port=0, poll_s=0.1))
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(daemon.run()), daemon=True)
    started = time.monotonic()
    thread.start()
    ts = (question.channel_ref or "").split(":")[1]
    try:
        fake.wait_for(
            lambda f: any(c.params.get("ts") == ts for c in f.of("chat.update")), PROMPT_S
        )
        took = time.monotonic() - started
    finally:
        daemon.request_stop()
        thread.join(timeout=60)
    assert codes == [0]
    return took


def test_an_answer_given_in_the_cli_while_the_daemon_was_down_is_redrawn_at_start(
    tmp_path: Path, fake: FakeSlack
) -> None:
    question = posted_question(tmp_path, fake)
    answer_while_down(tmp_path, question, via="cli:ada")

    redrawn_soon_after_start(tmp_path, fake, question)
    (update,) = fake.of("chat.update")
    assert "Approved via cli:ada" in update.params["text"]
    assert not [b for b in update.params["blocks"] if b["type"] == "actions"], "buttons gone"


def test_a_slack_answer_whose_redraw_died_with_the_process_is_redrawn_at_start(
    tmp_path: Path, fake: FakeSlack
) -> None:
    """The answer was committed and acked, then `kill -9` before the follow-up ran.

    While a listener runs, a fresh Slack answer is left to it for a minute
    (`OUTCOME_GRACE`); a daemon that just started has no listener with
    anything in hand, so it redraws the message in its first pass.
    """
    question = posted_question(tmp_path, fake)
    answer_while_down(tmp_path, question, via=f"slack:{ALICE}")

    redrawn_soon_after_start(tmp_path, fake, question)
    (update,) = fake.of("chat.update")
    assert f"Approved by <@{ALICE}>" in update.params["text"]
    thread_acks = [
        c
        for c in fake.of("chat.postMessage")
        if c.params.get("thread_ts") == (question.channel_ref or "").split(":")[1]
        and "Resuming" in str(c.params.get("text"))
    ]
    assert len(thread_acks) == 1, "one thread ack with the redraw"
