"""The audit log as a page: the CLI's filters, pages with `before`, and for owners only.

The page asks the same role table as `GET /api/audit` and `agent-team audit`
(`audit:read`, audited when refused); signed out it says how to sign in.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from agent_team import db
from agent_team.requests.actors import Actor
from tests.integration.dashboard.conftest import (
    FakeCoordinator,
    Seeded,
    auth,
    sign_in,
    team_client,
)

Team = tuple[TestClient, dict[str, str]]


@pytest.fixture
def team(seeded: Seeded, coordinator: FakeCoordinator) -> Iterator[Team]:
    roster = (("ada", "owner", None, None), ("vi", "viewer", None, None))
    with team_client(seeded, coordinator, roster) as made:
        for n in range(3):
            coordinator.requests.note("tB", f"note {n}", actor=Actor("bob", "cli"))
        coordinator.requests.cancel("tB", actor=Actor("bob", "cli"))
        yield made


def seqs(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'<td data-label="#" class="num">(\d+)</td>', html)]


def test_an_owner_reads_the_log_newest_first_with_links_to_tasks(team: Team) -> None:
    client, keys = team
    page = client.get("/audit", headers=auth(keys["ada"]))
    assert page.status_code == 200, page.text
    shown = seqs(page.text)
    assert shown == sorted(shown, reverse=True) and len(shown) >= 4
    assert '<a href="/task/tB">tB</a>' in page.text
    assert "text=note 2" in page.text


def test_the_filters_are_the_clis(team: Team, coordinator: FakeCoordinator) -> None:
    client, keys = team
    wanted = db.list_audit(coordinator.ledger, actor="bob", action="no")
    page = client.get("/audit?actor=bob&action=no&via=cli&since=1d", headers=auth(keys["ada"]))
    assert seqs(page.text) == [row.seq for row in wanted] and len(wanted) == 3
    cancel = client.get("/audit?target=tB&action=cancel", headers=auth(keys["ada"]))
    assert len(seqs(cancel.text)) == 1


def test_pages_go_back_with_before(team: Team) -> None:
    client, keys = team
    first = client.get("/audit?actor=bob&limit=2", headers=auth(keys["ada"])).text
    newest = seqs(first)
    assert len(newest) == 2
    older_link = re.search(r'href="/audit\?([^"]+)">Older', first)
    assert older_link is not None
    query = older_link.group(1).replace("&amp;", "&")
    assert f"before={newest[-1]}" in query and "actor=bob" in query
    second = client.get(f"/audit?{query}", headers=auth(keys["ada"])).text
    assert seqs(second) and max(seqs(second)) < min(newest)
    assert "Newest" in second


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ("since=soon", "since"),
        ("since=999999999d", "since"),  # before the calendar's first day
        ("limit=0", "limit"),
        ("limit=5000", "limit"),
        ("before=x", "before"),
    ],
)
def test_a_bad_filter_is_a_400_page_naming_it(team: Team, query: str, parameter: str) -> None:
    client, keys = team
    page = client.get(f"/audit?{query}", headers=auth(keys["ada"]))
    assert page.status_code == 400
    assert f"{parameter}:" in page.text


def test_the_api_refuses_a_since_before_the_calendar_too(team: Team) -> None:
    client, keys = team
    answer = client.get("/api/audit?since=999999999d", headers=auth(keys["ada"]))
    assert answer.status_code == 400 and "calendar" in answer.json()["error"]


def test_a_viewer_is_refused_with_the_role_it_needs_and_it_is_audited(
    team: Team, coordinator: FakeCoordinator
) -> None:
    client, keys = team
    sign_in(client, keys["vi"], "/audit")
    page = client.get("/audit")
    assert page.status_code == 403
    assert "needs owner" in page.text and "note 2" not in page.text
    (refusal,) = db.list_audit(coordinator.ledger, action="refused")
    assert (refusal.actor, refusal.via, refusal.detail_dict["action"]) == (
        "vi",
        "dashboard",
        "audit:read",
    )


def test_signed_out_the_page_says_how_to_sign_in(team: Team) -> None:
    client, _keys = team
    page = client.get("/audit")
    assert page.status_code == 401
    assert "Sign in to read the audit log" in page.text and 'href="/login?next=/audit"' in page.text
    wrong = client.get("/audit", headers=auth("atk_not-a-key"))
    assert wrong.status_code == 401


def test_with_no_way_to_sign_in_the_page_says_to_use_the_cli(
    seeded: Seeded, coordinator: FakeCoordinator
) -> None:
    from agent_team.dashboard import DashboardContext, create_app
    from tests.integration.dashboard.conftest import NOW, make_settings

    ctx = DashboardContext(
        make_settings(seeded.path, token=None),
        coordinator=coordinator,  # type: ignore[arg-type]
        clock=lambda: NOW,
    )
    with TestClient(create_app(ctx)) as client:
        page = client.get("/audit")
    assert page.status_code == 403 and "agent-team audit" in page.text


def test_before_people_exist_any_signed_in_writer_reads_it(client: TestClient) -> None:
    sign_in(client, next_path="/audit")
    page = client.get("/audit")
    assert page.status_code == 200
    assert "Audit log" in page.text
