"""The daily Slack digest: due at the local time, posted once a day across daemons and restarts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agent_team import db
from agent_team.health.status import Health
from agent_team.integrations.slack.digest import STALE_AFTER
from agent_team.integrations.slack.integration import SlackIntegration
from tests.integration.slack.conftest import CHANNEL, SlackWorld

# 08:59 in Berlin (winter: UTC+1): a minute before the digest.
BEFORE = datetime(2026, 12, 7, 7, 59, tzinfo=UTC)


def digests(world: SlackWorld) -> list[str]:
    return [
        str(call.params["text"])
        for call in world.fake.of("chat.postMessage")
        if "thing(s) need a person" in str(call.params.get("text"))
        or "nothing needs a person" in str(call.params.get("text"))
    ]


def daemon(world: SlackWorld) -> SlackIntegration:
    """Another daemon's Slack integration on the same ledger and Slack app."""
    settings = world.settings.model_copy(update={"slack_digest_at": "09:00 Europe/Berlin"})
    return SlackIntegration(settings, world.coordinator)


def test_the_digest_is_posted_once_a_day_whoever_looks(world: SlackWorld) -> None:
    question = world.waiting_question()
    first, second = daemon(world), daemon(world)
    assert first.digest is not None and second.digest is not None
    assert "slack-digest" in [loop.name for loop in first.loops(Health())]

    world.clock.now = BEFORE
    assert not first.digest.maybe_post()
    assert digests(world) == []

    world.clock.now = BEFORE + timedelta(minutes=1, seconds=30)
    assert first.digest.maybe_post()
    assert not second.digest.maybe_post(), "another daemon finds today's claimed"
    assert not daemon(world).digest.maybe_post(), "so does a restarted one"  # type: ignore[union-attr]
    (text,) = digests(world)
    assert text.startswith("*agent-team, 2026-12-07*: 1 thing(s) need a person")
    assert f"<http://dash.test/task/{question.thread_id}|Remember the email>" in text
    assert f"agent-team answer {question.question_id}" in text
    assert "<http://dash.test/inbox|Open the inbox>" in text
    posted = [c for c in world.fake.of("chat.postMessage") if c.params.get("text") == text]
    assert posted[0].params["channel"] == CHANNEL
    effect = db.get_effect(world.conn, "slack:digest:2026-12-07")
    assert effect is not None and effect.state == "done" and effect.result_ref

    world.clock.now = BEFORE + timedelta(days=1, minutes=2)
    assert second.digest.maybe_post(), "the next day's is due"
    assert len(digests(world)) == 2


def test_a_daemon_that_dies_before_posting_delays_the_digest_not_loses_it(
    world: SlackWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = daemon(world), daemon(world)
    assert first.digest is not None and second.digest is not None
    world.clock.now = BEFORE + timedelta(minutes=2)

    def dies(_text: str) -> Any:
        raise ConnectionError("Slack did not answer")

    monkeypatch.setattr(first.digest, "post", dies)
    assert not first.digest.maybe_post()
    assert not second.digest.maybe_post(), "the claim is fresh"
    assert digests(world) == []

    world.clock.now = BEFORE + timedelta(minutes=2) + STALE_AFTER - timedelta(seconds=1)
    assert not second.digest.maybe_post(), "not stale yet"
    world.clock.now += timedelta(seconds=2)
    assert second.digest.maybe_post(), "the dead daemon's claim is taken over"
    (text,) = digests(world)
    assert "nothing needs a person today" in text


def test_a_bad_digest_time_is_refused_at_start(world: SlackWorld) -> None:
    from agent_team.config import load_settings
    from agent_team.exceptions import ConfigError

    for bad in ("9am", "24:00", "09:00 Mars/Base"):
        with pytest.raises(ConfigError, match="AGENT_TEAM_SLACK_DIGEST_AT"):
            load_settings(slack_digest_at=bad)
