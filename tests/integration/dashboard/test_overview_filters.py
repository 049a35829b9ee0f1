"""The overview's filter form and paging, over the seeded ledger of `conftest.py`.

The page takes the same parameters as `GET /api/tasks`, so each check here
compares what a person sees with what the API says for the same query.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from agent_team import db
from tests.integration.dashboard.conftest import Seeded, iso

DASH = "\u2013"  # the en dash between the first and last row shown


def _listed(page: str) -> list[str]:
    """Task ids in the task table, in order."""
    table = page[page.index('data-live="task-list"') :]
    return re.findall(r'<a class="task-title" href="/task/([^"]+)">', table)


def _selected(page: str, name: str) -> str | None:
    form = page[page.index("data-filter-form") : page.index("</form>")]
    select = form[form.index(f'<select name="{name}">') :]
    select = select[: select.index("</select>")]
    match = re.search(r'<option value="([^"]*)" selected>', select)
    return match.group(1) if match else None


def _add_tasks(path: Path, count: int, *, start: float = 7000) -> list[str]:
    """`count` more tasks, newer than the seed's, alternating kind; their ids newest first."""
    conn = db.open_ledger(path)
    try:
        ids = []
        for n in range(count):
            task_id = f"tN{n:03d}"
            db.create_task(
                conn,
                task_id=task_id,
                kind="code" if n % 2 == 0 else "confluence",
                title=f"Numbered task {n}",
            )
            conn.execute("UPDATE tasks SET created_at = ? WHERE id = ?", (iso(start + n), task_id))
            ids.append(task_id)
    finally:
        conn.close()
    return ids[::-1]


def test_the_filters_narrow_the_list_as_the_api_does(client: TestClient) -> None:
    for query, expected in [
        ("status=waiting", ["tB"]),
        ("kind=confluence", ["tC"]),
        ("source=github:acme/app", ["tA"]),
        ("q=k+TB", ["tB"]),
        ("kind=code&source=cli", ["tB", "tD"]),
        ("status=&kind=&source=&q=", ["tC", "tB", "tA", "tD"]),
    ]:
        page = client.get(f"/?{query}")
        assert page.status_code == 200, query
        api = [t["id"] for t in client.get(f"/api/tasks?{query}").json()["tasks"]]
        assert _listed(page.text) == api == expected, query


def test_the_form_shows_the_filters_in_force_and_offers_the_known_sources(
    client: TestClient,
) -> None:
    page = client.get("/?status=failed&source=cli&q=Task").text
    assert _selected(page, "status") == "failed"
    assert _selected(page, "kind") is None
    assert _selected(page, "source") == "cli"
    assert 'name="q" value="Task"' in page
    form = page[page.index('<form class="filters"') : page.index("</form>")]
    assert 'method="get"' in form
    sources = re.findall(r'<option value="([^"]+)"', form[form.index('name="source"') :])
    assert sources == ["cli", "github:acme/app"]
    assert f"showing 1{DASH}1 of 1 matching (4 in all)" in page
    assert 'href="/">Clear filters</a>' in form


def test_a_search_is_shown_escaped_and_matches_wildcards_literally(
    client: TestClient, seeded: Seeded
) -> None:
    conn = db.open_ledger(seeded.path)
    try:
        db.create_task(conn, task_id="tX", kind="code", title="Grow 100% <b>faster</b>")
    finally:
        conn.close()
    page = client.get("/", params={"q": "0% <b>"}).text
    assert _listed(page) == ["tX"]
    assert 'value="0% &lt;b&gt;"' in page
    assert _listed(client.get("/", params={"q": "k_t"}).text) == []
    # An unknown source is kept in the form, so the person sees what they asked for.
    page = client.get("/?source=slack").text
    assert _selected(page, "source") == "slack"


def test_no_match_says_so_with_a_link_that_clears_the_filters(client: TestClient) -> None:
    response = client.get("/?q=nothing+like+this&kind=code")
    assert response.status_code == 200
    region = response.text[response.text.index('data-live="task-list"') :]
    assert "No tasks match these filters." in region
    assert '<a href="/">Clear filters</a> to see all 4.' in region
    assert 'rel="next"' not in region and 'rel="prev"' not in region


def test_pages_of_fifty_with_newer_and_older_links_that_keep_the_filters(
    client: TestClient, seeded: Seeded
) -> None:
    added = _add_tasks(seeded.path, 120)
    everything = [*added, "tC", "tB", "tA", "tD"]  # 124, newest first
    first = client.get("/").text
    assert _listed(first) == everything[:50]
    assert f"showing 1{DASH}50 of 124<" in first
    assert 'rel="prev"' not in first
    assert 'href="/?offset=50">Older' in first

    second = client.get("/?offset=50").text
    assert _listed(second) == everything[50:100]
    assert f"showing 51{DASH}100 of 124<" in second
    assert 'rel="prev" href="/">' in second
    assert 'href="/?offset=100">Older' in second

    last = client.get("/?offset=100").text
    assert _listed(last) == everything[100:]
    assert f"showing 101{DASH}124 of 124<" in last
    assert 'rel="prev" href="/?offset=50">' in last and 'rel="next"' not in last

    code = client.get("/?kind=code&offset=50").text
    api = client.get("/api/tasks?kind=code&offset=50").json()
    assert _listed(code) == [t["id"] for t in api["tasks"]]
    assert f"showing 51{DASH}{api['total']} of {api['total']} matching" in code
    assert 'rel="prev" href="/?kind=code">' in code  # back to the first page

    beyond = client.get("/?offset=500").text
    assert _listed(beyond) == []
    assert "There is nothing on this page." in beyond
    assert 'rel="prev" href="/?offset=74">' in beyond  # the last full page


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("status=sleeping", "status: &#39;sleeping&#39; is not one of: queued"),
        ("kind=poem", "kind: &#39;poem&#39; is not one of"),
        ("offset=-1", "offset: -1 is out of range; use between 0 and 1000000000"),
        (
            "offset=9223372036854775808",
            "offset: 9223372036854775808 is out of range; use between 0 and 1000000000",
        ),
        ("limit=ten", "limit: &#39;ten&#39; is not a whole number"),
        ("limit=501", "limit: 501 is out of range; use between 1 and 500"),
        ("q=" + "x" * 301, "q: is longer than 300 characters"),
    ],
)
def test_a_bad_filter_is_a_400_page_saying_what_is_wrong(
    client: TestClient, query: str, says: str
) -> None:
    response = client.get(f"/?{query}")
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("text/html")
    assert "That filter cannot be used" in response.text
    assert says in response.text
    assert "Traceback" not in response.text
    assert 'href="/"' in response.text
