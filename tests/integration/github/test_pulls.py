"""`PullRequests`: a task's pull request read from the loopback GitHub, checked and typed.

The PR gate and the CI watcher of issue #29 read pull requests only through it,
so what it promises is tested on the wire: the state through merge and close
(with the ETag's free 304), reviews with REST's upper-case states, review
comments with their threads, check runs from a wrapped list across pages, and
a malformed reply refused with a message naming the field.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_team.integrations.github.intake import GitHubClient, GitHubError
from agent_team.integrations.github.pulls import PullRequests
from tests.fakes.github_api import FakeGitHub
from tests.git_server import make_remote

APP = "acme/app"
BRANCH = "agent-team/t1"
TOKEN = "ghp_" + "a" * 36


@pytest.fixture
def stand(tmp_path: Path) -> Iterator[tuple[FakeGitHub, PullRequests, int]]:
    with FakeGitHub(token=TOKEN) as fake:
        fake.add_repo(APP, remote=make_remote(tmp_path / "remotes", APP))
        fake.push(APP, BRANCH, {"app.py": "print('hi')\n"}, "the build")
        client = GitHubClient(fake.url, TOKEN)
        number = fake.open_pull(APP, BRANCH, title="Remember the email")
        try:
            yield fake, PullRequests(client), number
        finally:
            client.close()


def test_the_state_follows_the_pull_request_to_merged(
    stand: tuple[FakeGitHub, PullRequests, int],
) -> None:
    fake, pulls, number = stand
    state, etag = pulls.get(APP, number)
    assert state is not None and etag
    assert (state.outcome, state.draft, state.head_ref, state.base_ref) == (
        "open",
        True,
        BRANCH,
        "main",
    )
    assert state.node_id and state.url.endswith(f"/pull/{number}")

    assert pulls.get(APP, number, etag=etag) == (None, etag)  # unchanged: a free 304

    head = fake.push(APP, BRANCH, {"app.py": "print('hello')\n"})
    moved, _ = pulls.get(APP, number, etag=etag)
    assert moved is not None and moved.head_sha == head  # a push moves the head

    fake.merge_pull(APP, number)
    merged, _ = pulls.get(APP, number)
    assert merged is not None and (merged.state, merged.merged, merged.outcome) == (
        "closed",
        True,
        "merged",
    )


def test_a_pull_request_closed_unmerged_is_closed(
    stand: tuple[FakeGitHub, PullRequests, int],
) -> None:
    fake, pulls, number = stand
    fake.close_pull(APP, number)
    state, _ = pulls.get(APP, number)
    assert state is not None and state.outcome == "closed"


def test_reviews_and_review_comments_with_their_threads(
    stand: tuple[FakeGitHub, PullRequests, int],
) -> None:
    fake, pulls, number = stand
    fake.submit_review(
        APP,
        number,
        user="alice",
        state="REQUEST_CHANGES",
        body="Two things.",
        comments=[
            {"path": "app.py", "line": 1, "body": "Say hello, not hi."},
            {"path": "app.py", "line": 1, "body": "And add a test."},
        ],
    )
    (review,) = pulls.reviews(APP, number)
    assert (review.user, review.state, review.body) == ("alice", "CHANGES_REQUESTED", "Two things.")

    first, second = pulls.review_comments(APP, number)
    assert [c.body for c in (first, second)] == ["Say hello, not hi.", "And add a test."]
    assert first.starts_thread and second.starts_thread  # no in_reply_to_id on the wire
    assert first.review_id == review.id and first.path == "app.py" and first.user == "alice"

    fake.reply_as(APP, number, first.id, "Done in the next commit.", user="agent-team[bot]")
    replies = [c for c in pulls.review_comments(APP, number) if not c.starts_thread]
    assert [(c.in_reply_to_id, c.body) for c in replies] == [(first.id, "Done in the next commit.")]


def test_check_runs_of_a_head_across_pages(
    stand: tuple[FakeGitHub, PullRequests, int],
) -> None:
    fake, pulls, number = stand
    state, _ = pulls.get(APP, number)
    assert state is not None
    fake.page_cap = 2  # the fake pages wrapped lists by `Link` as GitHub does
    results = {"lint": "success", "unit": "failure", "e2e": "timed_out", "docs": "in_progress"}
    fake.set_checks(APP, state.head_sha, results)

    runs = pulls.check_runs(APP, state.head_sha)

    assert {run.name: (run.status, run.conclusion) for run in runs} == {
        "lint": ("completed", "success"),
        "unit": ("completed", "failure"),
        "e2e": ("completed", "timed_out"),
        "docs": ("in_progress", None),
    }
    assert sorted(run.name for run in runs if run.failed) == ["e2e", "unit"]
    assert all(run.head_sha == state.head_sha for run in runs)
    pages = fake.seen("GET", f"/repos/{APP}/commits/{state.head_sha}/check-runs")
    assert len(pages) == 2  # four runs, two a page: the `Link` was followed


def test_a_malformed_reply_is_refused_naming_the_field(
    stand: tuple[FakeGitHub, PullRequests, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake, pulls, number = stand
    real = pulls.client.request

    def without_head(method: str, url: str, **kwargs: Any) -> Any:
        response = real(method, url, **kwargs)
        data = response.json()
        data.pop("head", None)
        response._content = json.dumps(data).encode()
        return response

    monkeypatch.setattr(pulls.client, "request", without_head)
    with pytest.raises(GitHubError, match=r"malformed pull request acme/app#\d+ \(bad head\)"):
        pulls.get(APP, number)


def test_a_pull_request_that_does_not_exist_is_a_clear_error(
    stand: tuple[FakeGitHub, PullRequests, int],
) -> None:
    _fake, pulls, _number = stand
    with pytest.raises(GitHubError) as raised:
        pulls.get(APP, 999)
    assert raised.value.status == 404 and "check the repository name" in str(raised.value)
    assert TOKEN not in str(raised.value)
