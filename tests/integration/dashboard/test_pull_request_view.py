"""The pull request on the task page, in `/api/task` and in `/metrics`.

The seeded task `tA` gets the PR story of `tests/pr_story.py` (a review whose
body is a script tag among it); the seeded tasks have no PR otherwise.
"""

from __future__ import annotations

import re
from datetime import timedelta

from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from agent_team import db
from tests.integration.dashboard.conftest import T0, FakeCoordinator, at
from tests.pr_story import EVIL_BODY, HEAD1, PR_URL, write_pr_story


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_the_task_page_shows_the_timeline_with_review_text_escaped(
    client: TestClient, coordinator: FakeCoordinator
) -> None:
    write_pr_story(coordinator.ledger, "tA", T0, first_turn=3)
    html = client.get("/task/tA").text
    card = html[html.index('id="h-pull-request"') : html.index('id="h-plan"')]
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; please handle the empty list" in card
    assert f'<a href="{PR_URL}" rel="noopener noreferrer">acme/app#12</a>' in card
    assert "a person took over" in card and "chip-merged" in card
    assert "Round 0: opened" in card and "Round 1: follow-up round 1" in card
    assert (
        card.index("review by alice")
        < card.index("follow-up commit bbbbbbb")
        < (card.index("CI failed on bbbbbbb"))
    )
    assert f'href="{PR_URL}#pullrequestreview-11"' in card
    assert f'href="{PR_URL}/commits/{HEAD1}"' in card
    assert "decision tA:q5 (ci_failed): takeover by carol via dashboard" in card
    assert "labeled by dave on ccccccc" in card  # a kind the page does not know
    assert re.search(r"<dt>Open for</dt><dd>48m 20s", card)


def test_a_task_without_a_pull_request_has_no_card(client: TestClient) -> None:
    assert 'id="h-pull-request"' not in client.get("/task/tA").text


def test_api_task_carries_the_pull_request(
    client: TestClient, coordinator: FakeCoordinator
) -> None:
    assert client.get("/api/task/tB").json()["pull_request"] is None
    write_pr_story(coordinator.ledger, "tA", T0, first_turn=3)
    pull = client.get("/api/task/tA").json()["pull_request"]
    assert {key: pull[key] for key in ("url", "state", "rounds", "hands_off")} == {
        "url": PR_URL,
        "state": "merged",
        "rounds": 1,
        "hands_off": True,
    }
    assert pull["opened_at"] == db.to_iso(at(100)) and pull["merged_at"] == db.to_iso(at(3000))
    review = pull["timeline"][1]["entries"][0]
    assert (review["kind"], review["actor"], review["body"]) == ("review", "alice", EVIL_BODY)
    gates = [e for part in pull["timeline"] for e in part["entries"] if e["source"] == "question"]
    assert [(g["key"], g["detail"]["answered_via"]) for g in gates] == [
        ("tA:q3", "github:alice"),
        ("tA:q4", "github:acme/app"),
        ("tA:q5", "dashboard:carol"),
        ("tA:q6", "github:acme/app"),
    ]


def test_metrics_count_pull_requests_rounds_and_time_to_merge(
    client: TestClient, coordinator: FakeCoordinator
) -> None:
    ledger = coordinator.ledger
    write_pr_story(ledger, "tA", T0, first_turn=3)  # merged after 2900 s, 1 round
    for task_id, number in (("tB", 13), ("tC", 14), ("tD", 15)):
        db.watch_pull_request(
            ledger,
            task_id=task_id,
            repo="acme/app",
            number=number,
            url=f"https://github.com/acme/app/pull/{number}",
            head_sha=None,
            at=at(0),
        )
    assert db.note_pull_request(ledger, "tB", state="merged", rounds=3, closed_at=at(86400))
    assert db.note_pull_request(ledger, "tC", state="closed", rounds=0, closed_at=at(60))
    assert db.note_pull_request(ledger, "tD", rounds=2)  # open: in the state gauge only

    found = samples(client.get("/metrics").text)

    for state, count in {"open": 1, "merged": 2, "closed": 1}.items():
        assert found[("agent_team_pull_requests", (("state", state),))] == count, state
    rounds = "agent_team_pr_rounds"
    assert found[(f"{rounds}_bucket", (("le", "0.0"),))] == 1
    assert found[(f"{rounds}_bucket", (("le", "1.0"),))] == 2
    assert found[(f"{rounds}_bucket", (("le", "2.0"),))] == 2
    assert found[(f"{rounds}_bucket", (("le", "3.0"),))] == 3
    assert found[(f"{rounds}_bucket", (("le", "+Inf"),))] == 3
    assert found[(f"{rounds}_count", ())] == 3
    assert found[(f"{rounds}_sum", ())] == 4
    merge = "agent_team_pr_open_to_merge_seconds"
    assert found[(f"{merge}_bucket", (("le", "1800.0"),))] == 0
    assert found[(f"{merge}_bucket", (("le", "3600.0"),))] == 1
    assert found[(f"{merge}_bucket", (("le", "28800.0"),))] == 1
    assert found[(f"{merge}_bucket", (("le", "86400.0"),))] == 2
    assert found[(f"{merge}_bucket", (("le", "+Inf"),))] == 2
    assert found[(f"{merge}_count", ())] == 2
    assert found[(f"{merge}_sum", ())] == 2900 + 86400


def test_metrics_without_pull_requests_are_zero(client: TestClient) -> None:
    found = samples(client.get("/metrics").text)
    for state in db.PR_STATES:
        assert found[("agent_team_pull_requests", (("state", state),))] == 0
    assert found[("agent_team_pr_rounds_count", ())] == 0
    assert found[("agent_team_pr_open_to_merge_seconds_count", ())] == 0
    assert found[("agent_team_pr_open_to_merge_seconds_sum", ())] == 0


def test_open_for_counts_to_now_while_open(
    client: TestClient, coordinator: FakeCoordinator
) -> None:
    db.watch_pull_request(
        coordinator.ledger,
        task_id="tB",
        repo="acme/app",
        number=13,
        url=f"{PR_URL[:-2]}13",
        head_sha=None,
        at=at(7200) - timedelta(minutes=5),
    )
    card = client.get("/task/tB").text
    assert re.search(r"<dt>Open for</dt><dd>5m 00s <span class=\"sofar\">so far</span>", card)
