"""The dashboard's signed-in form, its JSON API with keys, and the LangGraph API, for every role.

One app (the dashboard with the LangGraph API mounted, as the daemon serves
them) over one ledger for the module; each attempt acts on a task, question or
automation of its own, so the attempts do not depend on each other's order.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest
from starlette.testclient import TestClient

from agent_team import db
from agent_team.automations.runner import runner_for
from agent_team.config import Settings
from agent_team.dashboard import DashboardContext, create_app
from agent_team.integrations.langgraph_api.integration import PREFIX, LangGraphApiIntegration
from agent_team.task_model import QuestionKind, Role
from tests.integration.dashboard.conftest import (
    NOW,
    FakeCoordinator,
    auth,
    csrf_of,
    make_settings,
    sign_in,
)
from tests.integration.roles.conftest import (
    ANSWERS,
    BODY,
    Team,
    Verdict,
    Who,
    automation,
    cases,
    fresh,
    judged,
    module_env,
    open_question,
    status_of,
)


class Reply(Protocol):
    """What is read of a test client's response (httpx's or httpx2's, as Starlette picks)."""

    @property
    def status_code(self) -> int: ...
    @property
    def text(self) -> str: ...
    def json(self) -> Any: ...


class TeamCoordinator(FakeCoordinator):
    """The dashboard's fake coordinator, with the automations runner `run-now` uses."""

    def __init__(self, path: Path, settings: Settings) -> None:
        super().__init__(path)
        self.automations = runner_for(self.ledger, settings, clock=lambda: NOW, owner="roles")


@dataclass
class Http:
    team: Team
    ledger: db.Ledger
    client: TestClient  # keys in headers: `Authorization: Bearer`, `x-api-key`
    browsers: dict[Role, tuple[TestClient, str]]  # signed in with the person's key; CSRF token


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Http]:
    home = tmp_path_factory.mktemp("roles-http")
    with module_env(home), ExitStack() as stack:
        path = home / "agent-team.db"
        db.init_db(path)
        # No configured token: people's keys are the only way in. No rate limits: they are
        # not what is tried here, and the module makes more writes a minute than a person.
        settings = make_settings(path, token=None, langgraph_api=True, limit_writes_per_min=0)
        coordinator = TeamCoordinator(path, settings)
        stack.callback(coordinator.ledger.close)
        team = Team(coordinator.ledger)
        ctx = DashboardContext(settings, coordinator=coordinator, clock=lambda: NOW)  # type: ignore[arg-type]
        langgraph = LangGraphApiIntegration.create(settings, coordinator)  # type: ignore[arg-type]
        app = create_app(ctx, extra_routes=langgraph.routes())
        client = stack.enter_context(TestClient(app))
        browsers: dict[Role, tuple[TestClient, str]] = {}
        for role, member in team.members.items():
            browser = stack.enter_context(TestClient(app))
            assert sign_in(browser, member.key).status_code == 303
            page = browser.get("/")
            assert f"signed in as <strong>{member.name}</strong>" in page.text
            browsers[role] = (browser, csrf_of(page.text))
        yield Http(team, coordinator.ledger, client, browsers)


def refused_as_json(response: Reply, verdict: Verdict, action: str) -> None:
    """The dashboard API's refusal: 403 naming the role needed, in a field and in words."""
    assert response.status_code == 403, response.text
    body = response.json()
    assert body["needed_role"] == verdict.needed.value
    assert f"{action} needs {verdict.needed.value} or above" in body["error"]


# --- the dashboard's form: signed in, with the session's CSRF token --------------------------


@pytest.mark.parametrize(("op", "action", "role"), cases("dashboard form"))
def test_the_signed_in_form(http: Http, op: str, action: str, role: Role) -> None:
    browser, csrf = http.browsers[role]
    who = Who(http.team[role].name, "dashboard", role)
    headers = {"X-CSRF-Token": csrf}
    if action == "submit":
        title = fresh("Submitted on the form ")
        with judged(http.ledger, who, action, done="submit") as verdict:
            response = browser.post("/api/tasks", json={"title": title}, headers=headers)
            _submitted(http.ledger, response, verdict, action, title)
        return
    kind = action.removeprefix("answer:")
    question = open_question(http.ledger, kind)
    path = f"/api/questions/{question.question_id}/answer"
    with judged(http.ledger, who, action, done="answer") as verdict:
        response = browser.post(path, json={"answer": ANSWERS[kind]}, headers=headers)
        _answered(http.ledger, response, verdict, action, question, f"dashboard:{who.actor}")


def _submitted(
    ledger: db.Ledger, response: Reply, verdict: Verdict, action: str, title: str
) -> None:
    titles = [task.title for task in db.list_tasks(ledger, limit=1000)]
    if verdict.allowed:
        assert response.status_code == 201, response.text
        task = db.get_task(ledger, response.json()["task_id"])
        assert task is not None and task.title == title
    else:
        refused_as_json(response, verdict, action)
        assert title not in titles


def _answered(
    ledger: db.Ledger,
    response: Reply,
    verdict: Verdict,
    action: str,
    question: db.Question,
    via: str,
) -> None:
    found = db.get_question(ledger, question.question_id)
    assert found is not None
    if verdict.allowed:
        assert response.status_code == 200, response.text
        assert (found.status, found.answered_via) == ("answered", via)
    else:
        refused_as_json(response, verdict, action)
        assert (found.status, found.answer_json) == ("open", None)


# --- the JSON API with a person's key --------------------------------------------------------

_STATUS_VERBS = {"pause": "paused", "resume": "active", "cancel": "cancelled"}


@pytest.mark.parametrize(("op", "action", "role"), cases("json api"))
def test_the_json_api_with_keys(http: Http, op: str, action: str, role: Role) -> None:
    member = http.team[role]
    who = Who(member.name, "dashboard", role)
    key = auth(member.key)
    client, ledger = http.client, http.ledger
    if action == "submit":
        title = fresh("Submitted with a key ")
        with judged(ledger, who, action, done="submit") as verdict:
            response = client.post("/api/tasks", json={"title": title}, headers=key)
            _submitted(ledger, response, verdict, action, title)
    elif action.startswith("answer:"):
        kind = action.removeprefix("answer:")
        question = open_question(ledger, kind)
        path = f"/api/questions/{question.question_id}/answer"
        with judged(ledger, who, action, done="answer") as verdict:
            response = client.post(path, json={"answer": ANSWERS[kind]}, headers=key)
            _answered(ledger, response, verdict, action, question, f"dashboard:{who.actor}")
    elif op == "automation create":
        name = fresh("made-by-key-")
        spec = {"name": name, "title": "Review bumps", "body": BODY, "every": "1d"}
        with judged(ledger, who, action, done="automation.create") as verdict:
            response = client.post("/api/automations", json=spec, headers=key)
            if verdict.allowed:
                assert response.status_code == 201, response.text
                made = db.get_automation(ledger, name)
                assert made is not None and made.created_by == f"dashboard:{member.name}"
            else:
                refused_as_json(response, verdict, action)
                assert db.get_automation(ledger, name) is None
    elif op == "automation update":
        was = automation(ledger)
        path = f"/api/automations/{was.automation_id}"
        with judged(ledger, who, action, done="automation.update") as verdict:
            response = client.patch(path, json={"title": "Review the bumps"}, headers=key)
            _automation_after(ledger, response, verdict, action, was, title="Review the bumps")
    elif op in ("automation pause", "automation resume", "automation cancel"):
        verb = op.removeprefix("automation ")
        was = automation(ledger, status="paused" if verb == "resume" else "active")
        path = f"/api/automations/{was.automation_id}/{verb}"
        with judged(ledger, who, action, done=f"automation.{verb}") as verdict:
            response = client.post(path, headers=key)
            _automation_after(ledger, response, verdict, action, was, status=_STATUS_VERBS[verb])
    elif op == "automation run-now":
        was = automation(ledger)
        path = f"/api/automations/{was.automation_id}/run-now"
        with judged(ledger, who, action, done="automation.run_now") as verdict:
            response = client.post(path, headers=key)
            runs = db.list_runs(ledger, was.automation_id)
            if verdict.allowed:
                assert response.status_code == 201, response.text
                assert [(v.run.status, v.run.manual) for v in runs] == [("created", 1)]
            else:
                refused_as_json(response, verdict, action)
                assert runs == []
    else:
        assert op == "audit read", op
        with judged(ledger, who, action, done=None) as verdict:
            response = client.get("/api/audit", headers=key)
            if verdict.allowed:
                assert response.status_code == 200, response.text
                assert response.json()["rows"], "the audit log has rows by now"
            else:
                refused_as_json(response, verdict, action)
                assert "rows" not in response.json()


def _automation_after(
    ledger: db.Ledger,
    response: Reply,
    verdict: Verdict,
    action: str,
    was: db.Automation,
    **changed: str,
) -> None:
    now = db.get_automation(ledger, was.automation_id)
    assert now is not None
    if verdict.allowed:
        assert response.status_code == 200, response.text
        assert {field: getattr(now, field) for field in changed} == changed
    else:
        refused_as_json(response, verdict, action)
        assert now == was


# --- the LangGraph API with a person's key as x-api-key --------------------------------------

# What Agent Inbox sends to answer each kind (`integrations/langgraph_api/human.py`).
_RESUMES: dict[str, Any] = {
    QuestionKind.CLARIFY.value: [{"type": "response", "args": ANSWERS["clarify"]}],
    QuestionKind.PLAN_DECISION.value: [{"type": "accept", "args": None}],
    QuestionKind.CONFLUENCE_APPROVAL.value: [{"type": "accept", "args": None}],
    QuestionKind.PR_DECISION.value: [{"type": "accept", "args": None}],
}


@pytest.mark.parametrize(("op", "action", "role"), cases("langgraph api"))
def test_the_langgraph_api_with_keys(http: Http, op: str, action: str, role: Role) -> None:
    member = http.team[role]
    who = Who(member.name, "langgraph-api", role)
    kind = action.removeprefix("answer:")
    question = open_question(http.ledger, kind)
    run = {"assistant_id": "agent-team", "command": {"resume": _RESUMES[kind]}}
    path = f"{PREFIX}/threads/{question.thread_id}/runs"
    with judged(http.ledger, who, action, done="answer") as verdict:
        response = http.client.post(path, json=run, headers={"x-api-key": member.key})
        if verdict.allowed:
            assert response.status_code == 200, response.text
            found = db.get_question(http.ledger, question.question_id)
            assert found is not None
            assert (found.status, found.answered_via) == ("answered", f"langgraph-api:{who.actor}")
        else:
            assert response.status_code == 403, response.text
            detail = response.json()["detail"]
            assert f"{action} needs {verdict.needed.value} or above" in detail
            assert status_of(http.ledger, question.question_id) == "open"
