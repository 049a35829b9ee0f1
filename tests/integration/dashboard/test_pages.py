"""The HTML pages over the seeded ledger (see conftest.py for the story and its times).

These read the rendered HTML the way a person would see it: which tasks and
questions are listed, what the timeline draws, what the plan says, and that
untrusted text can never become markup.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from agent_team import db
from agent_team.dashboard import DashboardContext, create_app
from agent_team.requests.task_requests import TaskRequests
from tests.integration.dashboard.conftest import (
    NOW,
    TA_JOURNEY,
    TOKEN,
    Seeded,
    at,
    iso,
    make_settings,
    sign_in,
)

PLAN_V1 = "# Plan\n\nFirst try.\n\n## Steps\n\n1. Old step\n"
PLAN_V2 = (
    "# Plan\n\nRemember the **email** <img src=x onerror=alert(1)>.\n\n## Steps\n\n"
    "1. Store it in a cookie\n2. Prefill the field\n\n## Risks\n\n- <script>alert(2)</script>\n"
)
EVIL_TITLE = "Fix <script>alert(1)</script> login"


def _add_plan_task(path: Path, *, second_open: bool) -> str:
    """tP: a task with an untrusted title and two plan questions (the second open or answered)."""
    conn = db.open_ledger(path)
    try:
        db.create_task(conn, task_id="tP", kind="code", title=EVIL_TITLE, body="Body <b>bold</b>")
        db.record_transition(conn, thread_id="tP", to_phase="plan_review", status="waiting")
        db.set_task_status(conn, "tP", "waiting", phase="plan_review")
        for turn, plan in ((1, PLAN_V1), (2, PLAN_V2)):
            question_id = f"tP:q{turn}"
            db.ensure_question(
                conn,
                question_id=question_id,
                thread_id="tP",
                turn=turn,
                kind="plan_decision",
                transport="local",
                deadline_at=NOW + timedelta(hours=3),
                payload_json=json.dumps(
                    {
                        "text": "Review the plan for: " + EVIL_TITLE,
                        "plan_markdown": plan,
                        "help": "answer with one of: `approve [comment]`, `reject [reason]`",
                    }
                ),
            )
            if turn == 1 or not second_open:
                assert db.answer_question(
                    conn,
                    question_id=question_id,
                    answer_json='{"decision": "revise", "text": "<i>more</i>"}',
                    answered_via="dashboard:bob",
                    answered_at=NOW - timedelta(minutes=5),
                )
        # Pin the times the db functions stamped with the wall clock to the story's clock.
        conn.execute(
            "UPDATE tasks SET created_at = ?, updated_at = ? WHERE id = 'tP'",
            (iso(6500), iso(6500)),
        )
        conn.execute(
            "UPDATE task_transitions SET entered_at = ? WHERE thread_id = 'tP'", (iso(6500),)
        )
    finally:
        conn.close()
    return "tP"


def _grows(html: str) -> list[float]:
    return [float(g) for g in re.findall(r'class="seg [^"]*" data-grow="([0-9.]+)"', html)]


def _prose(plan: str) -> str:
    """The rendered plan itself, without its diff or the list of versions."""
    start = plan.index('class="prose plan"')
    return plan[start : plan.index("</div>", start)]


def _live_region(html: str, name: str) -> str:
    """The HTML of one `data-live` region (up to the next region or the end of main)."""
    start = html.index(f'data-live="{name}"')
    ends = [i for i in (html.find("data-live=", start + 10), html.find("</main>", start)) if i > 0]
    return html[start : min(ends)]


# ---- overview ------------------------------------------------------------------------------


def test_overview_lists_every_task_with_status_phase_age_and_cost(client: TestClient) -> None:
    response = client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    html = response.text
    table = html[html.index('id="h-tasks"') :]
    rows = re.findall(r'<a class="task-title" href="/task/(\w+)">', table)
    assert rows == ["tC", "tB", "tA", "tD"]  # newest first
    assert 'class="chip chip-done">done<' in table
    assert 'class="chip chip-failed">failed<' in table
    assert 'class="chip chip-queued">queued<' in table
    # tA: $0.25 + $0.50 + $0.0625 + $0.125 + $1.00 = $1.9375; created 2 h before NOW.
    row_a = table[table.index('href="/task/tA"') : table.index('href="/task/tD"')]
    assert "$1.94" in row_a
    assert ">2h 00m<" in row_a
    assert ">plan_review<" not in row_a and ">done<" in row_a
    # Counts by status, over all tasks.
    assert "1 waiting" in html and "1 done" in html and "1 failed" in html and "1 queued" in html


def test_overview_lists_open_questions_with_a_live_deadline(client: TestClient) -> None:
    html = client.get("/").text
    questions = html[html.index('id="h-questions"') : html.index('id="h-tasks"')]
    assert "Which login page?" in questions
    assert 'href="/task/tB#q-tB:q1"' in questions
    # The countdown JS reads the deadline from this attribute; the server renders a start value.
    deadline = db.to_iso(at(5020 + 24 * 3600))
    assert f'data-deadline="{deadline}"' in questions
    assert "in 23h 23m" in questions  # 5020 s + 24 h - 7200 s from NOW = 84220 s
    # Answered questions of tA are not listed.
    assert "tA:q" not in questions


def test_overview_budget_counts_tokens_when_the_model_has_no_price(client: TestClient) -> None:
    budget = _live_region(client.get("/").text, "overview")
    budget = budget[budget.index('id="h-budget"') :]
    # api-mode rows recorded on NOW's day: 150 + 300 + 16 + 50 (tA) + 25 (tB) tokens.
    assert "541" in budget and "of 10,000 tokens" in budget
    assert 'data-width-pct="5.4"' in budget
    assert "no price known" in budget


def test_overview_budget_is_in_usd_for_a_priced_model_in_api_mode(seeded: Seeded) -> None:
    settings = make_settings(seeded.path, prices={"offline": (1.0, 2.0)})
    with TestClient(create_app(DashboardContext(settings=settings, clock=lambda: NOW))) as client:
        html = client.get("/").text
    budget = html[html.index('id="h-budget"') :]
    # $0.25 + $0.50 + $0.0625 + $0.125 + $0.03125 of a $5 cap; subscription dollars are not capped.
    assert "$0.97" in budget and "of $5.00" in budget
    assert 'data-width-pct="19.4"' in budget
    assert "bar-fill ok" in budget


def test_pages_mark_their_live_regions_and_link_versioned_assets(client: TestClient) -> None:
    overview = client.get("/").text
    assert 'data-live="overview"' in overview
    match = re.search(r'href="(/static/dashboard\.css\?v=[0-9a-f]{10})"', overview)
    assert match is not None
    assert client.get(match.group(1)).status_code == 200
    assert client.get("/static/dashboard.js").status_code == 200
    task = client.get("/task/tB").text
    for region in ("task-head", "timeline", "plan", "questions"):
        assert f'data-live="{region}"' in task


# ---- task page -----------------------------------------------------------------------------


# tA's journey as steps: a gate's running/waiting/running rows are one step.
TA_STEPS = [
    ("intake", 10),
    ("clarify", 60),
    ("plan", 60),
    ("plan_review", 1802),
    ("plan", 60),
    ("plan_review", 1802),
    ("build", 600),
    ("done", 0),
]


def _step_rows(timeline: str) -> list[tuple[str, str, str]]:
    """(step, outcome chip, outcome words) of each row of the step table."""
    rows = re.findall(
        r'<td class="step">.*?</span>(\w+)</td>\s*<td class="outcome">'
        r'<span class="chip chip-(\w+)">\w+</span>(?: <span class="detail">(.*?)</span>)?</td>',
        timeline,
    )
    return [(step, chip, detail) for step, chip, detail in rows]


def test_task_page_draws_the_timeline_to_scale_with_durations_and_cost(client: TestClient) -> None:
    html = client.get("/task/tA").text
    timeline = _live_region(html, "timeline")
    total = sum(seconds for _, seconds in TA_STEPS)
    assert total == TA_JOURNEY[-1][2]
    # flex-grow as each step's share of the whole: widths proportional to time.
    assert _grows(timeline) == pytest.approx([100 * s / total for _, s in TA_STEPS], abs=1e-4)
    # Each review step was mostly a wait on a person: striped.
    assert timeline.count('class="seg ph-plan_review st-answered waited"') == 2
    steps = re.findall(r"</span>(\w+)(?:<div class=\"note\">.*?</div>)?</td>", timeline)
    assert steps == [phase for phase, _ in TA_STEPS]
    assert timeline.count(">30m 02s<") == 2  # each review step, its wait on a person included
    assert ">10m 00s<" in timeline  # the build
    # The first plan row's window holds the $0.50 call; the $0.0625 call at its exit is in no row.
    assert ">$0.50" in timeline and ">$1.00" in timeline
    assert "$0.06 of spend falls in no step" in timeline
    assert "branch agent-team/tA at 0123456789" in timeline


def test_task_page_gives_each_step_its_own_outcome_and_folds_a_gate(client: TestClient) -> None:
    timeline = _live_region(client.get("/task/tA").text, "timeline")
    assert _step_rows(timeline) == [
        ("intake", "done", ""),
        ("clarify", "done", ""),
        ("plan", "done", ""),
        ("plan_review", "answered", "waited 30m 00s · answered by alice via cli: revise"),
        ("plan", "done", ""),
        ("plan_review", "answered", "waited 30m 00s · answered by U2 via slack: approve"),
        ("build", "done", ""),
        ("done", "done", ""),
    ]
    assert "chip-running" not in timeline and "st-running" not in timeline
    assert "8 steps" in timeline


def test_only_the_step_a_task_is_in_now_is_waiting(client: TestClient) -> None:
    timeline = _live_region(client.get("/task/tB").text, "timeline")
    assert _step_rows(timeline) == [
        ("intake", "done", ""),
        ("clarify", "waiting", "waiting for an answer"),
    ]
    assert timeline.count('class="seg ph-clarify st-waiting waited open"') == 1
    assert timeline.count('<span class="sofar">so far</span>') == 1


def test_task_page_shows_answers_with_who_and_when(client: TestClient) -> None:
    questions = _live_region(client.get("/task/tA").text, "questions")
    assert "<strong>revise</strong>: add tests" in questions
    assert "answered by alice via cli" in questions
    assert "answered by U2 via slack" in questions
    assert db.to_iso(at(1900)) in questions
    assert "<form" not in questions  # nothing is open on a finished task


def test_task_page_shows_the_open_plan_escaped_with_an_answer_form(
    seeded: Seeded, client: TestClient
) -> None:
    _add_plan_task(seeded.path, second_open=True)
    response = client.get("/task/tP")
    assert response.status_code == 200
    html = response.text
    # The title is untrusted issue text: escaped everywhere, never markup.
    assert "<script>alert" not in html
    assert html.count("Fix &lt;script&gt;alert(1)&lt;/script&gt; login") >= 3  # title, h1, question
    plan = _live_region(html, "plan")
    assert "from question tP:q2 (open)" in plan
    assert "<strong>email</strong>" in plan
    assert "<li>Store it in a cookie</li>" in plan and "<li>Prefill the field</li>" in plan
    assert "&lt;img src=x onerror=alert(1)&gt;" in plan and "<img" not in plan
    assert "Old step" not in _prose(plan)  # only in the diff against plan 1
    assert "<i>" not in html and "&lt;i&gt;more&lt;/i&gt;" in html  # the answer text too
    form = _live_region(html, "questions")
    form = form[form.index('id="q-tP:q2"') :]
    # Not signed in: a way to sign in (coming back here), and the help; no form.
    assert 'href="/login?next=/task/tP">Sign in to answer</a>' in form
    assert 'name="answer"' not in form
    assert "<code>approve [comment]</code>" in form  # help text rendered, still escaped
    # Signed in with the unnamed token: the form, asking for a name but never a token.
    assert sign_in(client, next_path="/task/tP").status_code == 303
    form = _live_region(client.get("/task/tP").text, "questions")
    form = form[form.index('id="q-tP:q2"') :]
    assert 'data-action="/api/questions/tP%3Aq2/answer"' in form
    assert 'name="answer"' in form and 'name="name"' in form
    assert 'name="token"' not in form
    assert 'data-fill="approve"' in form


def test_task_page_falls_back_to_the_last_plan_asked(seeded: Seeded, client: TestClient) -> None:
    _add_plan_task(seeded.path, second_open=False)
    plan = _live_region(client.get("/task/tP").text, "plan")
    assert "from question tP:q2 (answered)" in plan
    assert "Prefill the field" in _prose(plan) and "Old step" not in _prose(plan)


def test_after_a_revise_the_task_page_shows_what_changed_and_every_plan(
    seeded: Seeded, client: TestClient
) -> None:
    _add_plan_task(seeded.path, second_open=True)
    plan = _live_region(client.get("/task/tP").text, "plan")

    assert "2 of 2, from question tP:q2 (open)" in plan
    changes = plan[plan.index('class="plan-changes"') : plan.index('class="prose plan"')]
    assert "Changed since plan 1" in changes
    assert "revise by bob via dashboard: &lt;i&gt;more&lt;/i&gt;" in changes  # the feedback
    lines = re.findall(r'<li class="d-(\w+)">(.*?)</li>', changes)
    text = [(kind, re.sub(r"<[^>]+>", "", line)) for kind, line in lines]
    # Marked by a visible sign and by <ins>/<del>, not by colour alone.
    assert ("del", "\N{MINUS SIGN} 1. Old step") in text
    assert ("add", "+ 1. Store it in a cookie") in text
    assert ("same", " ## Steps") in text
    assert '<del><span class="mark">\N{MINUS SIGN}</span> 1. Old step</del>' in changes
    assert '<ins><span class="mark">+</span> 2. Prefill the field</ins>' in changes
    assert "<img" not in changes and "&lt;img src=x" in changes  # still escaped text
    # Every plan stays reachable: plan 1 is a link, plan 2 is the one shown.
    versions = plan[plan.index('class="plan-versions"') :]
    assert '<a href="/task/tP?plan=1#h-plan">plan 1</a>' in versions
    assert '<strong aria-current="page">plan 2</strong>' in versions


def test_an_earlier_plan_version_is_one_link_away(seeded: Seeded, client: TestClient) -> None:
    _add_plan_task(seeded.path, second_open=True)
    response = client.get("/task/tP?plan=1")
    assert response.status_code == 200
    plan = _live_region(response.text, "plan")
    assert "1 of 2, from question tP:q1 (answered)" in plan
    assert "Old step" in _prose(plan) and "Prefill the field" not in _prose(plan)
    assert "This is an earlier plan." in plan
    assert 'href="/task/tP?plan=2#h-plan"' in plan
    assert "Changed since" not in plan  # the first plan revises nothing
    # The answer form still belongs to the open question.
    assert 'id="q-tP:q2"' in _live_region(response.text, "questions")


@pytest.mark.parametrize(
    ("query", "status", "message"),
    [
        ("plan=3", 404, "this task has plans 1 to 2; there is no plan 3"),
        ("plan=0", 404, "there is no plan 0"),
        ("plan=two", 400, "plan must be a plan number from 1 to 2, not &#39;two&#39;"),
    ],
)
def test_a_plan_version_the_task_does_not_have_is_a_short_error_page(
    seeded: Seeded, client: TestClient, query: str, status: int, message: str
) -> None:
    _add_plan_task(seeded.path, second_open=True)
    response = client.get(f"/task/tP?{query}")
    assert response.status_code == status
    assert "No such plan" in response.text and message in response.text
    assert client.get("/task/tB?plan=1").status_code == 404  # no plan at all yet


def test_task_page_without_a_plan_says_so(client: TestClient) -> None:
    plan = _live_region(client.get("/task/tB").text, "plan")
    assert "No plan yet." in plan


def test_unknown_task_is_a_404_page(client: TestClient) -> None:
    response = client.get("/task/no-such-task")
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("text/html")
    assert "No such task" in response.text
    assert 'href="/"' in response.text


# ---- never a secret or a traceback ---------------------------------------------------------


def test_pages_never_show_the_token_or_credential_shaped_text(
    seeded: Seeded, client: TestClient
) -> None:
    conn = db.open_ledger(seeded.path)
    try:
        db.create_task(
            conn,
            task_id="tS",
            kind="code",
            title=f"Leaked {TOKEN} here",
            body="push with https://bot:ghp_abcdefghijklmnopqrstuvwxyz0123@github.com/x",
        )
    finally:
        conn.close()
    for url in ("/", "/task/tS"):
        html = client.get(url).text
        assert TOKEN not in html
        assert "ghp_abcdefghijklmnopqrstuvwxyz0123" not in html
        assert "Leaked [redacted] here" in html


def test_a_missing_ledger_is_a_short_503_page(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "agent-team.db"
    ctx = DashboardContext(settings=make_settings(missing), clock=lambda: NOW)
    with TestClient(create_app(ctx), raise_server_exceptions=False) as client:
        for url in ("/", "/task/tA"):
            response = client.get(url)
            assert response.status_code == 503
            assert "The ledger is not available" in response.text
            assert str(missing) not in response.text
            assert "Traceback" not in response.text


def test_an_unexpected_error_is_a_500_page_without_details(
    seeded: Seeded, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_team.dashboard import pages

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError(f"secret detail {TOKEN}")

    monkeypatch.setattr(pages, "read_task_report", boom)
    ctx = DashboardContext(settings=make_settings(seeded.path), clock=lambda: NOW)
    with TestClient(create_app(ctx), raise_server_exceptions=False) as client:
        response = client.get("/task/tA")
    assert response.status_code == 500
    assert "Something went wrong" in response.text
    assert "secret detail" not in response.text and "Traceback" not in response.text


def test_the_task_page_and_api_show_what_the_task_did_outside(
    seeded: Seeded, client: TestClient
) -> None:
    conn = db.open_ledger(seeded.path)
    try:
        db.begin_effect(conn, effect_id="github:pr:tA", task_id="tA", kind="github_pr")
        db.finish_effect(
            conn,
            effect_id="github:pr:tA",
            result_ref="7",
            result={"url": "https://github.com/acme/api/pull/7", "number": 7},
        )
        db.begin_effect(
            conn, effect_id="confluence:write:tA:3", task_id="tA", kind="confluence_write"
        )
        db.finish_effect(conn, effect_id="confluence:write:tA:3", result={"dry_run": True})
        db.begin_effect(conn, effect_id="evil", task_id="tA", kind="github_comment")
        db.finish_effect(conn, effect_id="evil", result={"url": "javascript:alert(1)"})
    finally:
        conn.close()

    effects = {e["effect_id"]: e for e in client.get("/api/task/tA").json()["effects"]}
    assert effects["github:pr:tA"]["url"] == "https://github.com/acme/api/pull/7"
    assert effects["confluence:write:tA:3"]["dry_run"] is True
    assert effects["evil"]["url"] is None

    page = client.get("/task/tA").text
    assert 'href="https://github.com/acme/api/pull/7"' in page
    assert "recorded (dry run)" in page
    assert "javascript:" not in page


def test_a_path_nobody_serves_is_a_page_for_people_and_json_for_the_api(
    client: TestClient,
) -> None:
    page = client.get("/no/such/page")
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    assert "Not found" in page.text and "<nav" in page.text  # the dashboard's own page
    api = client.get("/api/no-such-endpoint")
    assert api.status_code == 404 and api.json() == {"error": "no such endpoint"}
    wrong = client.delete("/api/tasks")
    assert wrong.status_code == 405 and "DELETE is not allowed" in wrong.json()["error"]


def test_the_favicon_is_served_and_linked(client: TestClient) -> None:
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
    assert "<svg" in icon.text
    assert 'rel="icon"' in client.get("/").text


def test_the_status_counts_link_to_the_tasks_of_that_status(client: TestClient) -> None:
    page = client.get("/").text
    assert re.search(r'<a class="chip chip-done" href="/\?status=done#h-tasks"', page), page


def test_a_rejected_plan_does_not_wear_the_green_answered_chip(
    seeded: Seeded, client: TestClient
) -> None:
    with db.open_ledger(seeded.path) as ledger:
        assert db.create_task(ledger, task_id="tR", kind="code", title="Rejected")
        db.ensure_question(
            ledger,
            question_id="tR:q1",
            thread_id="tR",
            turn=1,
            kind="plan_decision",
            transport="local",
            deadline_at=None,
            payload_json='{"text": "the plan"}',
        )
        TaskRequests(ledger).answer("tR:q1", "reject not now", via="cli:ada")
    page = client.get("/task/tR").text
    assert 'class="chip chip-rejected">rejected<' in page
    assert 'class="chip chip-answered"' not in page


def test_a_cancelled_task_lists_where_it_stopped(seeded: Seeded, client: TestClient) -> None:
    with db.open_ledger(seeded.path) as ledger:
        assert db.create_task(ledger, task_id="tX", kind="code", title="Cancelled midway")
        db.enter_phase(ledger, task_id="tX", phase="plan_review", status="waiting")
        db.finish_task(ledger, task_id="tX", status="cancelled", phase="done", note="cancelled")
    page = client.get("/?status=cancelled").text
    row = page[page.index("Cancelled midway") :][:800]
    assert "stopped in plan_review" in row
