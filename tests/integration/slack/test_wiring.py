"""How Slack is wired in: settings, the registry, Socket Mode, doctor, and the whole daemon."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import httpx
import pytest
from slack_bolt.adapter.socket_mode import SocketModeHandler
from starlette.applications import Starlette

from agent_team import db
from agent_team.exceptions import ConfigError
from agent_team.integrations.slack.ingress import SlackListener
from agent_team.integrations.slack.settings import SlackSettings
from agent_team.integrations.slack.transport import SlackTransport
from agent_team.service.daemon import Daemon
from agent_team.service.doctor import run_checks
from agent_team.service.transport_choice import make_transport
from tests.fakes.slack_api import FakeSlack
from tests.integration.pipeline.conftest import LONG_BODY
from tests.integration.slack.conftest import (
    ALICE,
    CHANNEL,
    Server,
    block_action,
    form_body,
    sign,
    slack_settings,
)
from tests.waiting import wait_for

APP_TOKEN = "xapp-1-A000-0000-test"


def test_transport_slack_without_its_settings_names_the_missing_variables(
    tmp_path: Path, fake: FakeSlack
) -> None:
    settings = slack_settings(
        tmp_path, fake, slack_bot_token=None, slack_channel=None, slack_signing_secret=None
    )
    with pytest.raises(ConfigError) as caught:
        make_transport(settings)
    message = str(caught.value)
    for variable in (
        "AGENT_TEAM_SLACK_BOT_TOKEN",
        "AGENT_TEAM_SLACK_CHANNEL",
        "AGENT_TEAM_SLACK_SIGNING_SECRET",
    ):
        assert variable in message
    with_app_token = slack_settings(
        tmp_path, fake, slack_signing_secret=None, slack_app_token=APP_TOKEN
    )
    assert isinstance(make_transport(with_app_token), SlackTransport)
    assert make_transport(slack_settings(tmp_path, fake, transport="local")).name == "local"


def test_socket_mode_is_wired_without_touching_the_network(tmp_path: Path, fake: FakeSlack) -> None:
    settings = slack_settings(tmp_path, fake, slack_signing_secret=None, slack_app_token=APP_TOKEN)
    slack = SlackSettings.from_settings(settings)
    transport = SlackTransport(slack)
    listener = SlackListener(slack, transport)
    try:
        handler = listener.socket_mode_handler()
        assert isinstance(handler, SocketModeHandler)
        assert handler.app is listener.app
        assert handler.client.app_token == APP_TOKEN
        assert handler.client.web_client.base_url == fake.base_url
        assert listener.socket_mode
        assert fake.calls == [], "building the handler connects nothing"

        daemon = Daemon(settings.model_copy(update={"dashboard_port": 0}))
        try:
            names = [loop.name for loop in daemon.loops]
            assert names == [
                "worker",
                "budget-outbox",
                "heartbeat",
                "slack-socket",
                "slack-reminders",
            ]
            assert not daemon.routes, "no HTTP route in Socket Mode"
            assert daemon.health.facts()["slack"] == "socket mode"
        finally:
            daemon.close()
    finally:
        listener.close()
        transport.close()


def test_doctor_checks_the_token_and_warns_about_an_empty_allow_list(
    tmp_path: Path, fake: FakeSlack
) -> None:
    results = {r.name: r for r in run_checks(slack_settings(tmp_path, fake))}
    assert results["slack"].ok and "UBOT00001" in results["slack"].detail
    assert results["slack allowed users"].ok

    empty = {r.name: r for r in run_checks(slack_settings(tmp_path, fake, slack_allowed_users=[]))}
    assert not empty["slack allowed users"].ok
    assert "AGENT_TEAM_SLACK_ALLOWED_USERS" in empty["slack allowed users"].fix

    bad = {
        r.name: r
        for r in run_checks(slack_settings(tmp_path, fake, slack_bot_token="xoxb-wrong-token-1"))
    }
    assert not bad["slack"].ok and "invalid_auth" in bad["slack"].detail
    assert "xoxb-wrong" not in bad["slack"].detail

    missing = {r.name: r for r in run_checks(slack_settings(tmp_path, fake, slack_channel=None))}
    assert not missing["slack"].ok and "AGENT_TEAM_SLACK_CHANNEL" in missing["slack"].detail


def test_the_daemon_posts_takes_a_button_answer_and_finishes(
    tmp_path: Path, fake: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    settings = slack_settings(tmp_path, fake, dashboard_port=0, poll_s=0.1)
    daemon = Daemon(settings)
    assert [route.path for route in daemon.routes] == ["/slack/events"]  # type: ignore[attr-defined]
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(daemon.run()), daemon=True)
    with caplog.at_level(logging.INFO):
        thread.start()
        try:
            wait_for(lambda: daemon.bound is not None, "the HTTP server", timeout_s=30)
            task_id = daemon.coordinator.start_task(title="Remember the email", body=LONG_BODY)
            wait_for(lambda: bool(fake.of("chat.postMessage")), "the question post", timeout_s=30)
            (question,) = db.list_questions(daemon.coordinator.ledger, thread_id=task_id)
            wait_for(
                lambda: (
                    db.get_question(daemon.coordinator.ledger, question.question_id).channel_ref
                    is not None
                ),
                "the delivery record",
                timeout_s=30,
            )
            posted = db.get_question(daemon.coordinator.ledger, question.question_id)
            assert posted is not None and posted.channel_ref is not None
            ref = posted.channel_ref
            assert ref.startswith(f"{CHANNEL}:")
            body, headers = form_body(
                block_action(ref, ALICE, "agent_team.approve", question.question_id)
            )
            response = httpx.post(
                daemon.url + "slack/events",
                content=body,
                headers={**headers, **sign(body)},
                timeout=10,
            )
            assert response.status_code == 200

            def done() -> bool:
                task = db.get_task(daemon.coordinator.ledger, task_id)
                return task is not None and task.status == "done"

            wait_for(done, "the task to finish", timeout_s=30)
            wait_for(lambda: len(fake.of("chat.update")) == 1, "the question redrawn", timeout_s=30)
            wait_for(
                lambda: any(
                    "is done" in str(c.params.get("text")) for c in fake.of("chat.postMessage")
                ),
                "the done notice",
                timeout_s=30,
            )
            health = httpx.get(daemon.url + "healthz", timeout=10)
            assert "slack-reminders" in health.text
        finally:
            daemon.request_stop()
            thread.join(timeout=60)
    assert codes == [0]
    (update,) = fake.of("chat.update")
    assert "Approved" in update.params["text"]
    assert "xoxb-" not in caplog.text, "no token in the log"
    assert "slack chat.postMessage C0QUESTIONS -> ok" in caplog.text


@pytest.mark.slow
def test_failed_socket_mode_connects_do_not_leak_threads(tmp_path: Path, fake: FakeSlack) -> None:
    """The supervisor restarts a failed loop; each failed connect must close its handler.

    The fake refuses the app token at `apps.connections.open`, so `connect()`
    fails at once, on loopback, with no WebSocket ever opened.
    """
    settings = slack_settings(tmp_path, fake, slack_signing_secret=None, slack_app_token=APP_TOKEN)
    slack = SlackSettings.from_settings(settings)
    transport = SlackTransport(slack)
    listener = SlackListener(slack, transport)
    stop = threading.Event()
    try:
        before = threading.active_count()
        for _ in range(6):
            with pytest.raises(Exception):  # noqa: B017  # whatever slack-sdk raises for it
                listener.run_socket_mode(stop, lambda: None)
        assert len(fake.of("apps.connections.open", ok=False)) == 6
        wait_for(
            lambda: threading.active_count() <= before + 2,
            f"the handlers' threads to stop ({threading.active_count()} alive, {before} before)",
            timeout_s=10,
        )
    finally:
        listener.close()
        transport.close()


def test_the_daemon_checks_the_bot_token_at_start_not_on_the_first_answer(
    tmp_path: Path, fake: FakeSlack
) -> None:
    """Bolt's lazy `auth.test` on the first request acks it and drops it if the call fails.

    The daemon checks the token while it is built (before READY), so a bad token
    stops the start with a clear error, and a blip of `auth.test` later cannot
    swallow an answer.
    """
    fake.fail("auth.test", "invalid_auth")
    with pytest.raises(ConfigError) as caught:
        Daemon(slack_settings(tmp_path, fake, dashboard_port=0))
    message = str(caught.value)
    assert "AGENT_TEAM_SLACK_BOT_TOKEN" in message and "invalid_auth" in message
    assert "xoxb-" not in message

    daemon = Daemon(slack_settings(tmp_path, fake, dashboard_port=0))
    server = Server(Starlette(routes=daemon.routes))
    try:
        assert len(fake.of("auth.test")) == 1, "checked while the daemon was built"
        task_id = daemon.coordinator.start_task(title="Remember the email", body=LONG_BODY)
        daemon.coordinator.tick(until_idle=True, timeout_s=60)
        (question,) = db.list_questions(daemon.coordinator.ledger, thread_id=task_id)
        assert question.channel_ref is not None
        fake.fail("auth.test", "fatal_error")  # would be the lazy check's answer
        body, headers = form_body(
            block_action(question.channel_ref, ALICE, "agent_team.approve", question.question_id)
        )
        response = httpx.post(server.url, content=body, headers={**headers, **sign(body)})
        assert response.status_code == 200
        answered = db.get_question(daemon.coordinator.ledger, question.question_id)
        assert answered is not None and answered.status == "answered"
        assert len(fake.of("auth.test", ok=None)) == 2, "the refused start, then one check"
    finally:
        server.stop()
        daemon.close()
