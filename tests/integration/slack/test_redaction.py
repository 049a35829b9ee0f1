"""A token pasted into a task never reaches Slack, whatever message carries it.

Issue #17 item 6: one redaction rule where text leaves the process. Every
Web API call goes through `SlackTransport.call`, which applies it; these tests
drive each kind of message (question post, redraw, thread ack, bad-answer
reply, reminder, notice, digest, private note) with a task holding secrets and
search every request the loopback Slack recorded.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from agent_team import db
from agent_team.common.redact import MASK
from agent_team.integrations.slack.integration import SlackIntegration
from tests.integration.pipeline.conftest import LONG_BODY
from tests.integration.slack.conftest import (
    ALICE,
    MALLORY,
    SECRET,
    SlackWorld,
    block_action,
    message_event,
)

PAT = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
KEY = "sk-ant-" + "api03-AbCdEfGhIjKlMnOpQrSt"
LEAKS = (PAT, KEY, SECRET)


def everything_sent(world: SlackWorld) -> str:
    return json.dumps([(call.method, call.params) for call in world.fake.calls])


def test_no_message_to_slack_carries_a_token_from_the_task(world: SlackWorld) -> None:
    # The signing secret too: known values are redacted, not only token-shaped ones.
    body = f"{LONG_BODY}- Rotate {PAT} and {KEY} after the release\n- Check {SECRET}\n"
    task_id = world.coordinator.start_task(title=f"Rotate {PAT}", body=body)
    world.coordinator.tick(until_idle=True, timeout_s=60)
    (question,) = db.list_questions(world.conn, status="open", thread_id=task_id)
    ref = question.channel_ref or ""
    assert question.payload is not None and PAT in json.dumps(question.payload), (
        "the ledger keeps what was asked; only what leaves is redacted"
    )
    (post,) = world.fake.of("chat.postMessage")
    assert MASK in json.dumps(post.params["blocks"])

    world.clock.advance(hours=40)
    assert world.transport.remind_due() == 1
    assert world.send(message_event(ref, ALICE, f"maybe {PAT}")).status_code == 200
    assert world.send(message_event(ref, MALLORY, "approve")).status_code == 200
    button = block_action(ref, ALICE, "agent_team.approve", question.question_id)
    assert world.send(button, form=True).status_code == 200
    assert world.send(button, form=True).status_code == 200  # late: a private note
    world.settle()
    world.coordinator.tick(until_idle=True, timeout_s=60)
    task = db.get_task(world.conn, task_id)
    assert task is not None and task.status == "done"
    world.transport.notify(task, "failed", f"push failed: https://bot:{PAT}@github.com/o/r")
    digest_settings = world.settings.model_copy(update={"slack_digest_at": "09:00 UTC"})
    digest = SlackIntegration(digest_settings, world.coordinator).digest
    assert digest is not None
    world.coordinator.start_task(title=f"Waiting {PAT}", body=body)
    world.coordinator.tick(until_idle=True, timeout_s=60)
    world.clock.now = datetime.now(UTC).replace(hour=9, minute=1) + timedelta(days=1)
    assert digest.maybe_post()
    world.settle()

    methods = set(world.fake.methods())
    assert {"chat.postMessage", "chat.update", "chat.postEphemeral"} <= methods
    sent = everything_sent(world)
    for leak in LEAKS:
        assert leak not in sent, leak
    texts = [str(c.params.get("text")) for c in world.fake.of("chat.postMessage")]
    assert any(text.startswith("*agent-team, ") and MASK in text for text in texts), "digest"
    assert any("failed" in text and f"https://{MASK}@github.com" in text for text in texts)


def test_a_modal_and_its_fallback_carry_no_token(world: SlackWorld) -> None:
    """`views.open` and every other method go through the same call."""
    world.transport.call("views.open", trigger_id="trig.1", view={"title": f"key {PAT}"})
    world.transport.post("C0OTHER", f"see {KEY}", thread_ts="1.2", blocks=[{"text": PAT}])
    sent = everything_sent(world)
    assert PAT not in sent and KEY not in sent
    (modal,) = world.fake.of("views.open")
    assert modal.params["view"] == {"title": f"key {MASK}"}
