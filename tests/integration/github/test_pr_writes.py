"""`PullRequestWrites`: the agent's writes after a review round land once on the loopback GitHub.

Issue #29: replies on review threads, resolved threads, a summary comment, a
review request and the draft marked ready. Each is an effect, so what is
promised is tested against the fake's state: one write landed, a second call
asks nothing, and a `kill -9` on either side of GitHub's answer (simulated by
raising where the process would die) never makes a second post. Then the
parts of each write: threads found across GraphQL pages, an already resolved
thread, review requests GitHub refuses, GraphQL's errors and its endpoint.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_team import db
from agent_team.integrations.github.intake import GitHubClient, GitHubError
from agent_team.integrations.github.pr_replies import PullRequestWrites
from agent_team.integrations.github.status import marker
from tests.fakes.github_api import FakeGitHub
from tests.git_server import make_remote

APP = "acme/app"
BRANCH = "agent-team/gh-acme--app-7"
TASK = "gh-acme--app-7"
TOKEN = "ghp_" + "PrWrites0000" * 3
REVIEWER = "alice"
RESOLVE = """
mutation($threadId: ID!) { resolveReviewThread(input: {threadId: $threadId}) { thread { id } } }
"""


@dataclass
class Stand:
    fake: FakeGitHub
    client: GitHubClient
    ledger: db.Ledger
    writes: PullRequestWrites
    number: int
    node_id: str
    threads: list[int]  # the first comment of each review thread

    def posts(self, path: str) -> int:
        return len(self.fake.seen("POST", f"/repos/{APP}/{path}"))


@pytest.fixture
def stand(tmp_path: Path, conn: db.Ledger) -> Iterator[Stand]:
    with FakeGitHub(token=TOKEN) as fake:
        fake.add_repo(APP, remote=make_remote(tmp_path / "remotes", APP))
        fake.push(APP, BRANCH, {"app.py": "print('hi')\n"}, "the build")
        number = fake.open_pull(APP, BRANCH, user=fake.login)  # the daemon's draft
        fake.submit_review(
            APP,
            number,
            user=REVIEWER,
            comments=[
                {"path": "app.py", "line": 1, "body": "Say hello, not hi."},
                {"path": "app.py", "line": 1, "body": "And add a test."},
            ],
        )
        threads = [c["id"] for c in fake.review_comments_on(APP, number)]
        client = GitHubClient(fake.url, TOKEN)
        node_id = fake.pull_json(APP, number)["node_id"]
        writes = PullRequestWrites(client, conn)
        try:
            yield Stand(fake, client, conn, writes, number, node_id, threads)
        finally:
            client.close()


# -- each write, once -------------------------------------------------------------------


@dataclass(frozen=True)
class Write:
    """One write: how to make it, how many times it went to GitHub, what it left there."""

    effect_id: str
    do: Callable[[Stand], Any]
    sent: Callable[[Stand], int]
    landed: Callable[[Stand], bool]


def _replies(s: Stand) -> list[dict[str, Any]]:
    return [c for c in s.fake.review_comments_on(APP, s.number) if c.get("in_reply_to_id")]


def _thread(s: Stand, first: int) -> dict[str, Any]:
    return next(t for t in s.fake.threads_on(APP, s.number) if t["comments"][0] == first)


WRITES = {
    "reply": Write(
        "github:reply:t:1",
        lambda s: s.writes.reply(
            TASK, APP, s.number, s.threads[0], "Fixed: it says hello.", effect_id="github:reply:t:1"
        ),
        lambda s: s.posts(f"pulls/{s.number}/comments/{s.threads[0]}/replies"),
        lambda s: (
            [(c["in_reply_to_id"], c["user"]["login"]) for c in _replies(s)]
            == [(s.threads[0], s.fake.login)]
        ),
    ),
    "resolve": Write(
        "github:resolve:t:1",
        lambda s: s.writes.resolve_thread(
            TASK, APP, s.number, s.threads[0], effect_id="github:resolve:t:1"
        ),
        lambda s: len(s.fake.graphql("resolveReviewThread")),
        lambda s: _thread(s, s.threads[0])["resolved"] and not _thread(s, s.threads[1])["resolved"],
    ),
    "comment": Write(
        "github:summary:t:1",
        lambda s: s.writes.comment(
            TASK, APP, s.number, "Round 1: two threads addressed.", effect_id="github:summary:t:1"
        ),
        lambda s: s.posts(f"issues/{s.number}/comments"),
        lambda s: len(s.fake.comments_on(APP, s.number)) == 1,
    ),
    "request_review": Write(
        "github:rereview:t:1",
        lambda s: s.writes.request_review(
            TASK, APP, s.number, [REVIEWER], effect_id="github:rereview:t:1"
        ),
        lambda s: s.posts(f"pulls/{s.number}/requested_reviewers"),
        lambda s: (
            [u["login"] for u in s.fake.pull_json(APP, s.number)["requested_reviewers"]]
            == [REVIEWER]
        ),
    ),
    "mark_ready": Write(
        "github:ready:t",
        lambda s: s.writes.mark_ready(TASK, APP, s.number, s.node_id, effect_id="github:ready:t"),
        lambda s: len(s.fake.graphql("markPullRequestReadyForReview")),
        lambda s: s.fake.pull_json(APP, s.number)["draft"] is False,
    ),
}
each_write = pytest.mark.parametrize("write", list(WRITES.values()), ids=list(WRITES))


class Killed(BaseException):
    """`kill -9`: nothing after it runs, no handler sees it."""


@contextmanager
def killed_after_the_write(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process dies once GitHub answered, before the ledger records `done`."""
    real = db.finish_effect

    def finish(ledger: db.Ledger, **kwargs: Any) -> bool:
        if kwargs.get("state", "done") == "done":
            raise Killed
        return real(ledger, **kwargs)

    with monkeypatch.context() as patch, pytest.raises(Killed):
        patch.setattr(db, "finish_effect", finish)
        yield


@contextmanager
def killed_before_the_write(stand: Stand, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process dies as it sends the write (the first POST: a first try looks nothing up)."""
    real = stand.client.request

    def request(method: str, url: str, **kwargs: Any) -> httpx.Response:
        if method == "POST":
            raise Killed
        return real(method, url, **kwargs)

    with monkeypatch.context() as patch, pytest.raises(Killed):
        patch.setattr(stand.client, "request", request)
        yield


@each_write
def test_a_write_lands_once_and_a_second_call_asks_nothing(stand: Stand, write: Write) -> None:
    first = write.do(stand)

    assert write.landed(stand) and write.sent(stand) == 1
    effect = db.get_effect(stand.ledger, write.effect_id)
    assert effect is not None and effect.state == "done" and effect.task_id == TASK
    asked = len(stand.fake.requests)
    assert write.do(stand) == first  # the recorded result
    assert len(stand.fake.requests) == asked


@each_write
def test_killed_after_github_answered_the_write_is_not_sent_again(
    stand: Stand, write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    with killed_after_the_write(monkeypatch):
        write.do(stand)
    effect = db.get_effect(stand.ledger, write.effect_id)
    assert effect is not None and effect.state == "pending" and effect.request["posting"]
    assert write.landed(stand)

    write.do(stand)  # the node re-run after the restart

    assert write.landed(stand) and write.sent(stand) == 1
    effect = db.get_effect(stand.ledger, write.effect_id)
    assert effect is not None and effect.state == "done"


@each_write
def test_killed_before_the_write_it_is_made_once_on_the_rerun(
    stand: Stand, write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    with killed_before_the_write(stand, monkeypatch):
        write.do(stand)
    assert write.sent(stand) == 0

    write.do(stand)

    assert write.landed(stand) and write.sent(stand) == 1


def test_a_reply_and_a_comment_carry_the_text_and_a_hidden_marker(stand: Stand) -> None:
    reply_id = WRITES["reply"].do(stand)
    comment_id = WRITES["comment"].do(stand)

    (reply,) = _replies(stand)
    assert reply["id"] == reply_id
    assert reply["body"] == f"Fixed: it says hello.\n\n{marker('github:reply:t:1')}"
    (comment,) = stand.fake.comments_on(APP, stand.number)
    assert comment["id"] == comment_id
    assert comment["body"].startswith("Round 1: two threads addressed.\n\n<!-- agent-team:")
    effect = db.get_effect(stand.ledger, "github:reply:t:1")
    assert effect is not None and effect.result_ref == str(reply_id)


# -- threads --------------------------------------------------------------------------------


def test_the_thread_is_found_on_a_later_page(stand: Stand) -> None:
    many = [{"path": "app.py", "line": 1, "body": f"nit {i}"} for i in range(120)]
    stand.fake.submit_review(APP, stand.number, user="bob", comments=many)
    last = max(c["id"] for c in stand.fake.review_comments_on(APP, stand.number))

    thread_id = stand.writes.resolve_thread(TASK, APP, stand.number, last, effect_id="r:last")

    assert thread_id == _thread(stand, last)["id"] and _thread(stand, last)["resolved"]
    assert len(stand.fake.graphql("repository")) == 2  # 122 threads, 100 a page


def test_a_thread_resolved_already_needs_no_mutation(stand: Stand) -> None:
    thread_id = _thread(stand, stand.threads[1])["id"]
    stand.client.graphql(RESOLVE, {"threadId": thread_id})  # a person resolved it first

    assert (
        stand.writes.resolve_thread(TASK, APP, stand.number, stand.threads[1], effect_id="r:2")
        == thread_id
    )
    assert len(stand.fake.graphql("resolveReviewThread")) == 1  # the person's alone
    effect = db.get_effect(stand.ledger, "r:2")
    assert effect is not None and effect.state == "done"


def test_no_such_thread_is_done_with_no_ref(stand: Stand) -> None:
    assert stand.writes.resolve_thread(TASK, APP, stand.number, 424242, effect_id="r:x") is None

    effect = db.get_effect(stand.ledger, "r:x")
    assert effect is not None and (effect.state, effect.result_ref) == ("done", None)
    asked = len(stand.fake.requests)
    assert stand.writes.resolve_thread(TASK, APP, stand.number, 424242, effect_id="r:x") is None
    assert len(stand.fake.requests) == asked


# -- review requests ------------------------------------------------------------------------


def _requested(s: Stand) -> list[str]:
    return [u["login"] for u in s.fake.pull_json(APP, s.number)["requested_reviewers"]]


def test_the_author_is_left_out_and_an_empty_list_does_nothing(stand: Stand) -> None:
    asked = len(stand.fake.requests)
    stand.writes.request_review(TASK, APP, stand.number, [], effect_id="q:0")
    login = stand.fake.login
    stand.writes.request_review(
        TASK, APP, stand.number, [login.upper()], effect_id="q:1", author=login
    )
    assert len(stand.fake.requests) == asked
    assert db.get_effect(stand.ledger, "q:0") is None and db.get_effect(stand.ledger, "q:1") is None

    stand.writes.request_review(
        TASK, APP, stand.number, [REVIEWER, login, REVIEWER], effect_id="q:2", author=login
    )

    (sent,) = stand.fake.seen("POST", f"/repos/{APP}/pulls/{stand.number}/requested_reviewers")
    assert sent.body == {"reviewers": [REVIEWER]} and _requested(stand) == [REVIEWER]


def test_the_author_unknown_to_the_caller_is_learned_from_github_s_refusal(stand: Stand) -> None:
    login = stand.fake.login
    stand.writes.request_review(TASK, APP, stand.number, [login, REVIEWER], effect_id="q:3")

    assert _requested(stand) == [REVIEWER]
    sent = stand.fake.seen("POST", f"/repos/{APP}/pulls/{stand.number}/requested_reviewers")
    assert [r.body["reviewers"] for r in sent] == [[login, REVIEWER], [REVIEWER]]
    effect = db.get_effect(stand.ledger, "q:3")
    assert effect is not None and effect.result == {"requested": [REVIEWER]}


def test_a_refused_review_request_is_a_logged_no_op(
    stand: Stand, caplog: pytest.LogCaptureFixture
) -> None:
    stand.fake.repos[APP].collaborators = {REVIEWER}
    stand.writes.request_review(TASK, APP, stand.number, ["mallory"], effect_id="q:m")

    assert _requested(stand) == []
    effect = db.get_effect(stand.ledger, "q:m")
    assert effect is not None and effect.state == "done"
    assert effect.result["requested"] == [] and "422" in effect.result["refused"]
    assert "review not requested" in caplog.text and TOKEN not in caplog.text
    asked = len(stand.fake.requests)
    stand.writes.request_review(TASK, APP, stand.number, ["mallory"], effect_id="q:m")
    assert len(stand.fake.requests) == asked


def test_any_other_refusal_of_a_review_request_is_raised(stand: Stand) -> None:
    stand.fake.force(f"/repos/{APP}/pulls/{stand.number}/requested_reviewers", 403)
    with pytest.raises(GitHubError, match="403"):
        stand.writes.request_review(TASK, APP, stand.number, [REVIEWER], effect_id="q:x")


# -- what GitHub answers -----------------------------------------------------------------


def test_a_malformed_answer_is_refused_naming_the_field(stand: Stand) -> None:
    path = f"/repos/{APP}/pulls/{stand.number}/comments/{stand.threads[0]}/replies"
    stand.fake.force(path, 201)  # a 201 whose body has no id

    with pytest.raises(GitHubError, match=r"malformed reply .*\(bad id\)"):
        WRITES["reply"].do(stand)


def test_graphql_errors_become_github_errors(stand: Stand) -> None:
    with pytest.raises(GitHubError, match="NOT_FOUND: Could not resolve to a node"):
        stand.writes.mark_ready(TASK, APP, stand.number, "PR_nothing", effect_id="m:x")
    with pytest.raises(GitHubError, match="ERROR: Unexpected end of document"):
        stand.client.graphql("query {", {})
    with pytest.raises(GitHubError, match="undefinedField"):
        stand.client.graphql("query { viewer { nickname } }", {})
    assert stand.fake.pull_json(APP, stand.number)["draft"] is True


def _graphql_host(answer: Any, seen: list[httpx.Request]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=answer)

    return httpx.MockTransport(handle)


@pytest.mark.parametrize(
    ("base", "endpoint"),
    [
        ("https://api.github.com", "https://api.github.com/graphql"),
        ("https://api.github.com/", "https://api.github.com/graphql"),
        ("https://ghe.example/api/v3", "https://ghe.example/api/graphql"),
        ("https://ghe.example/api/v3/", "https://ghe.example/api/graphql"),
        ("http://127.0.0.1:8123", "http://127.0.0.1:8123/graphql"),
    ],
)
def test_the_graphql_endpoint_beside_the_rest_root(base: str, endpoint: str) -> None:
    seen: list[httpx.Request] = []
    client = GitHubClient(base, TOKEN, transport=_graphql_host({"data": {"ok": 1}}, seen))

    assert client.graphql("query($n: Int) { ok }", {"n": 1}) == {"ok": 1}

    (request,) = seen
    assert str(request.url) == endpoint and request.method == "POST"
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert json.loads(request.content) == {"query": "query($n: Int) { ok }", "variables": {"n": 1}}


def test_a_graphql_error_never_carries_the_token() -> None:
    seen: list[httpx.Request] = []
    answer = {"errors": [{"type": "FORBIDDEN", "message": f"{TOKEN} may not resolve threads"}]}
    client = GitHubClient("https://api.github.com", TOKEN, transport=_graphql_host(answer, seen))

    with pytest.raises(GitHubError) as caught:
        client.graphql("query { ok }", {})

    assert "FORBIDDEN" in str(caught.value) and TOKEN not in str(caught.value)


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ({"data": None}, "without a `data` object"),
        ([1, 2], "without a `data` object"),
        ({"errors": ["boom"]}, "answered ERROR"),
    ],
)
def test_a_graphql_answer_without_data_is_an_error(answer: Any, error: str) -> None:
    seen: list[httpx.Request] = []
    client = GitHubClient("https://api.github.com", TOKEN, transport=_graphql_host(answer, seen))
    with pytest.raises(GitHubError, match=error):
        client.graphql("query { ok }", {})


def test_malformed_review_threads_are_refused_naming_the_field(conn: db.Ledger) -> None:
    seen: list[httpx.Request] = []
    threads = {"nodes": [{"id": "T1"}], "pageInfo": {"hasNextPage": False, "endCursor": None}}
    answer = {"data": {"repository": {"pullRequest": {"reviewThreads": threads}}}}
    client = GitHubClient("https://api.github.com", TOKEN, transport=_graphql_host(answer, seen))

    with pytest.raises(GitHubError, match=r"reviewThreads\.nodes\.0\.isResolved"):
        PullRequestWrites(client, conn).resolve_thread(TASK, APP, 1, 5, effect_id="r:bad")
