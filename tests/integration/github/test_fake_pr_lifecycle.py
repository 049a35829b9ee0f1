"""The loopback GitHub speaks the pull request's life in GitHub's documented wire format.

Issue #29 makes the pull request a gate; before any product code the fake
must know pull requests, reviews, review comments and replies, review
requests, CI (check runs and suites, statuses, workflow runs, job logs,
reruns), the GraphQL mutations and signed webhooks. Each test drives it over
HTTP, with httpx and with agent-team's own `GitHubClient`, and checks the
shapes a client relies on.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_team.integrations.github.intake import GitHubClient
from agent_team.integrations.github.webhook import verify_signature
from tests.fakes.github_api import ACTIONS_APP, FakeGitHub
from tests.fakes.github_webhooks import GitHubWebhooks
from tests.fakes.http_body import read_body
from tests.git_server import git, make_remote

TOKEN = "ghp_" + "PrLifecycle0" * 3
APP = "acme/app"
BRANCH = "agent-team/gh-acme--app-7"
SECRET = "webhook-secret"

THREADS_QUERY = """
query Threads($owner: String!, $name: String!, $number: Int!) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      id
      isDraft
      reviewThreads(first: 50) {
        totalCount
        nodes { id isResolved comments(first: 20) { nodes { databaseId } } }
      }
    }
  }
}
"""
RESOLVE = """
mutation Resolve($threadId: ID!) {
  resolveReviewThread(input: {threadId: $threadId}) { thread { id isResolved } }
}
"""
READY = """
mutation($id: ID!) {
  markPullRequestReadyForReview(input: {pullRequestId: $id}) {
    pullRequest { isDraft number }
  }
}
"""


@dataclass
class Stand:
    fake: FakeGitHub
    bare: Path
    client: GitHubClient
    http: httpx.Client
    first_head: str

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.http.get(f"/repos/{APP}/{path}", **kwargs)

    def post(self, path: str, body: Any) -> httpx.Response:
        return self.http.post(f"/repos/{APP}/{path}", json=body)

    def graphql(self, query: str, **variables: Any) -> dict[str, Any]:
        response = self.http.post("/graphql", json={"query": query, "variables": variables})
        assert response.status_code == 200, response.text  # GraphQL errors are still 200
        answer: dict[str, Any] = response.json()
        return answer


@pytest.fixture
def stand(tmp_path: Path) -> Iterator[Stand]:
    bare = make_remote(tmp_path / "remotes", APP)
    with FakeGitHub(token=TOKEN) as fake:
        fake.add_repo(APP, remote=bare)
        head = fake.push(APP, BRANCH, {"app.py": "print('hi')\n"}, "the build")
        client = GitHubClient(fake.url, TOKEN)
        headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/vnd.github+json"}
        with httpx.Client(base_url=fake.url, headers=headers, timeout=10) as http:
            yield Stand(fake, bare, client, http, head)
        client.close()


def open_draft(stand: Stand) -> dict[str, Any]:
    body = {"title": "Remember the email", "head": BRANCH, "base": "main", "draft": True}
    created: dict[str, Any] = stand.client.json("POST", f"repos/{APP}/pulls", ok=(201,), json=body)
    return created


def test_a_pull_request_moves_with_its_branch_and_ends_merged_or_closed(stand: Stand) -> None:
    fake, client = stand.fake, stand.client
    created = open_draft(stand)
    number = created["number"]
    assert created["draft"] is True and created["node_id"].startswith("PR_")
    assert created["head"] == {**created["head"], "ref": BRANCH, "sha": stand.first_head}
    assert created["user"]["login"] == fake.login  # the token's identity opened it

    # The full object (GET one) and the simple one (GET list) differ as on GitHub.
    pull = client.json("GET", f"repos/{APP}/pulls/{number}")
    assert (pull["state"], pull["merged"], pull["merged_at"]) == ("open", False, None)
    assert pull["mergeable_state"] == "draft" and pull["base"]["ref"] == "main"
    assert pull["html_url"].endswith(f"/{APP}/pull/{number}")
    (listed,) = client.json("GET", f"repos/{APP}/pulls", params={"head": f"acme:{BRANCH}"})
    assert listed["number"] == number and "merged" not in listed
    assert "mergeable_state" not in listed

    # ETag / 304 on a GET, free of the rate limit.
    first = stand.get(f"pulls/{number}")
    again = stand.get(f"pulls/{number}", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304
    assert again.headers["x-ratelimit-remaining"] == first.headers["x-ratelimit-remaining"]

    # A push to the branch in the bare remote moves head.sha (and changes the ETag).
    second_head = fake.push(APP, BRANCH, {"app.py": "print('hello')\n"})
    assert second_head == git(stand.bare, "rev-parse", BRANCH)
    moved = stand.get(f"pulls/{number}", headers={"If-None-Match": first.headers["etag"]})
    assert moved.status_code == 200 and moved.json()["head"]["sha"] == second_head

    # A pull request is an issue: PR comments are issue comments on its number.
    posted = stand.post(f"issues/{number}/comments", {"body": "Working on it."})
    assert posted.status_code == 201 and posted.json()["user"]["login"] == fake.login
    fake.add_issue_comment(APP, number, "@agent-team fix the typo", user="alice")
    comments = [
        c["body"] for page in client.pages(f"repos/{APP}/issues/{number}/comments") for c in page
    ]
    assert comments == ["Working on it.", "@agent-team fix the typo"]
    issue = client.get_issue(APP, number)
    assert issue["pull_request"]["merged_at"] is None

    # Merge: a real merge commit on main; the PR and its issue say so.
    merge_commit = fake.merge_pull(APP, number, by="maintainer")
    assert git(stand.bare, "rev-parse", "main") == merge_commit
    merged = client.json("GET", f"repos/{APP}/pulls/{number}")
    assert (merged["state"], merged["merged"], merged["merge_commit_sha"]) == (
        "closed",
        True,
        merge_commit,
    )
    assert merged["merged_at"] and merged["merged_by"]["login"] == "maintainer"
    assert merged["head"]["sha"] == second_head  # frozen at the merge
    assert client.get_issue(APP, number)["state"] == "closed"
    assert client.json("GET", f"repos/{APP}/pulls") == []  # state=open by default
    closed = client.json("GET", f"repos/{APP}/pulls", params={"state": "closed"})
    assert [p["number"] for p in closed] == [number]

    # Another branch, closed unmerged: merged is false, merged_at null.
    fake.push(APP, "other", {"b.py": "x = 1\n"})
    other = fake.open_pull(APP, "other", draft=False)
    fake.close_pull(APP, other)
    unmerged = client.json("GET", f"repos/{APP}/pulls/{other}")
    assert (unmerged["state"], unmerged["merged"], unmerged["merged_at"]) == (
        "closed",
        False,
        None,
    )
    assert stand.get("pulls/999").status_code == 404


def test_reviews_comments_replies_and_review_requests(stand: Stand) -> None:
    fake, client = stand.fake, stand.client
    number = open_draft(stand)["number"]

    requested = stand.post(f"pulls/{number}/requested_reviewers", {"reviewers": ["alice"]})
    assert requested.status_code == 201
    assert [u["login"] for u in requested.json()["requested_reviewers"]] == ["alice"]
    own = stand.post(f"pulls/{number}/requested_reviewers", {"reviewers": [fake.login]})
    assert own.status_code == 422
    assert stand.get(f"pulls/{number}/requested_reviewers").json() == {
        "users": [fake.user_json("alice")],
        "teams": [],
    }

    review = fake.submit_review(
        APP,
        number,
        user="alice",
        state="REQUEST_CHANGES",
        body="Two things.",
        comments=[
            {"path": "app.py", "line": 1, "body": "Use logging."},
            {"path": "app.py", "line": 1, "body": "Add a test."},
        ],
    )
    assert review["state"] == "CHANGES_REQUESTED"
    # Answering the request takes alice off it, as GitHub does.
    assert stand.get(f"pulls/{number}/requested_reviewers").json()["users"] == []

    (listed,) = client.json("GET", f"repos/{APP}/pulls/{number}/reviews")
    assert {k: listed[k] for k in ("id", "state", "body", "commit_id")} == {
        "id": review["id"],
        "state": "CHANGES_REQUESTED",
        "body": "Two things.",
        "commit_id": stand.first_head,
    }
    assert listed["user"]["login"] == "alice" and listed["node_id"].startswith("PRR_")
    assert listed["submitted_at"].endswith("Z")

    fake.page_cap = 1  # one comment a page: the list must be followed by its Link
    pages = list(client.pages(f"repos/{APP}/pulls/{number}/comments"))
    fake.page_cap = 100
    assert [len(page) for page in pages] == [1, 1]
    first, second = (page[0] for page in pages)
    assert (first["path"], first["line"], first["body"]) == ("app.py", 1, "Use logging.")
    assert first["pull_request_review_id"] == review["id"] == second["pull_request_review_id"]
    assert first["commit_id"] == stand.first_head and first["user"]["login"] == "alice"
    assert "in_reply_to_id" not in first  # GitHub leaves it out on a thread's first comment
    assert first["node_id"].startswith("PRRC_")

    # Two ways to reply; a reply to a reply is refused.
    by_route = stand.post(f"pulls/{number}/comments/{first['id']}/replies", {"body": "Done."})
    by_field = stand.post(
        f"pulls/{number}/comments", {"body": "Added.", "in_reply_to": second["id"]}
    )
    assert by_route.status_code == by_field.status_code == 201
    assert by_route.json()["in_reply_to_id"] == first["id"]
    assert by_field.json()["in_reply_to_id"] == second["id"]
    assert by_route.json()["user"]["login"] == fake.login
    nested = stand.post(f"pulls/{number}/comments/{by_route.json()['id']}/replies", {"body": "x"})
    assert nested.status_code == 422
    assert stand.post(f"pulls/{number}/comments/1/replies", {"body": "x"}).status_code == 404

    # GitHub files each reply as a COMMENTED review by its author: a client must skip its own.
    reviews = client.json("GET", f"repos/{APP}/pulls/{number}/reviews")
    assert [(r["user"]["login"], r["state"]) for r in reviews] == [
        ("alice", "CHANGES_REQUESTED"),
        (fake.login, "COMMENTED"),
        (fake.login, "COMMENTED"),
    ]
    threads = fake.threads_on(APP, number)
    assert [t["comments"] for t in threads] == [
        [first["id"], by_route.json()["id"]],
        [second["id"], by_field.json()["id"]],
    ]
    assert len(fake.seen("POST", f"/repos/{APP}/pulls/{number}/comments")) == 1

    # Re-requesting review after the round.
    again = stand.post(f"pulls/{number}/requested_reviewers", {"reviewers": ["alice"]})
    assert again.status_code == 201


def test_check_runs_suites_and_statuses_follow_the_head_sha(stand: Stand) -> None:
    fake, client = stand.fake, stand.client
    pull = open_draft(stand)
    number, head = pull["number"], pull["head"]["sha"]
    fake.set_draft(APP, number, False)

    ids = fake.set_checks(APP, head, {"lint": "success", "test": "failure"})
    runs = client.json("GET", f"repos/{APP}/commits/{head}/check-runs")
    assert runs["total_count"] == 2
    by_name = {r["name"]: r for r in runs["check_runs"]}
    assert by_name["test"]["id"] == ids["test"]
    assert (by_name["test"]["status"], by_name["test"]["conclusion"]) == ("completed", "failure")
    assert by_name["test"]["head_sha"] == head and by_name["test"]["app"]["slug"] == "ci"
    assert by_name["test"]["pull_requests"][0]["number"] == number
    suite_id = by_name["test"]["check_suite"]["id"]
    # The branch name is a ref too.
    assert client.json("GET", f"repos/{APP}/commits/{BRANCH}/check-runs") == runs

    (suite,) = client.json("GET", f"repos/{APP}/commits/{head}/check-suites")["check_suites"]
    assert suite["id"] == suite_id and suite["head_branch"] == BRANCH
    assert (suite["status"], suite["conclusion"], suite["latest_check_runs_count"]) == (
        "completed",
        "failure",
        2,
    )
    assert client.json("GET", f"repos/{APP}/pulls/{number}")["mergeable_state"] == "unstable"

    # The CI runs the test again: the newer run hides the older one unless filter=all.
    fake.set_check_run(APP, head, "test", conclusion="success")
    latest = client.json("GET", f"repos/{APP}/commits/{head}/check-runs")
    assert {r["name"]: r["conclusion"] for r in latest["check_runs"]} == {
        "lint": "success",
        "test": "success",
    }
    every = client.json("GET", f"repos/{APP}/commits/{head}/check-runs", params={"filter": "all"})
    assert every["total_count"] == 3

    # Commit statuses: the latest per context decides the combined state.
    assert (
        stand.post(f"statuses/{head}", {"state": "pending", "context": "ci/x"}).status_code == 201
    )
    combined = client.json("GET", f"repos/{APP}/commits/{head}/status")
    assert (combined["state"], combined["total_count"], combined["sha"]) == ("pending", 1, head)
    made = stand.post(
        f"statuses/{head}",
        {"state": "success", "context": "ci/x", "target_url": "https://ci.example/1"},
    )
    assert made.json()["creator"]["login"] == fake.login
    fake.set_status(APP, head, "deploy/preview", "failure", description="boom")
    combined = client.json("GET", f"repos/{APP}/commits/{head}/status")
    assert combined["state"] == "failure"
    assert {s["context"]: s["state"] for s in combined["statuses"]} == {
        "ci/x": "success",
        "deploy/preview": "failure",
    }
    assert stand.post(f"statuses/{'0' * 40}", {"state": "success"}).status_code == 422
    assert stand.post(f"statuses/{head}", {"state": "green"}).status_code == 422

    # A new head after a push starts with no checks and a pending (empty) combined status.
    new_head = fake.push(APP, BRANCH)
    assert client.json("GET", f"repos/{APP}/pulls/{number}")["head"]["sha"] == new_head
    empty = client.json("GET", f"repos/{APP}/commits/{new_head}/check-runs")
    assert empty == {"total_count": 0, "check_runs": []}
    assert client.json("GET", f"repos/{APP}/commits/{new_head}/status")["state"] == "pending"
    fake.set_checks(APP, new_head, {"lint": "success", "test": "success"})
    assert client.json("GET", f"repos/{APP}/pulls/{number}")["mergeable_state"] == "clean"
    assert stand.get("commits/no-such-branch/check-runs").status_code == 422


def test_a_failed_workflow_job_its_log_and_a_rerun_that_turns_green(stand: Stand) -> None:
    fake, client = stand.fake, stand.client
    head = open_draft(stand)["head"]["sha"]
    log = "2024-05-01T10:00:00Z Run pytest\nE   httpx.ConnectTimeout: timed out\n"
    run_id = fake.add_workflow_run(
        APP, head, {"lint": "success", "test": "failure"}, logs={"test": log}
    )

    runs = client.json("GET", f"repos/{APP}/actions/runs", params={"head_sha": head})
    (run,) = runs["workflow_runs"]
    assert runs["total_count"] == 1 and run["id"] == run_id
    assert (run["status"], run["conclusion"], run["run_attempt"]) == ("completed", "failure", 1)
    assert run["head_sha"] == head and run["head_branch"] == BRANCH
    assert run["pull_requests"][0]["number"] == 1
    assert client.json("GET", f"repos/{APP}/actions/runs", params={"head_sha": "f" * 40}) == {
        "total_count": 0,
        "workflow_runs": [],
    }

    jobs = client.json("GET", f"repos/{APP}/actions/runs/{run_id}/jobs")["jobs"]
    failed = next(j for j in jobs if j["conclusion"] == "failure")
    assert (failed["name"], failed["run_id"], failed["run_attempt"]) == ("test", run_id, 1)
    # A job is a check run of the run's suite, under the same id.
    check = client.json("GET", f"repos/{APP}/check-runs/{failed['id']}")
    assert check["check_suite"]["id"] == run["check_suite_id"]
    assert check["app"]["slug"] == ACTIONS_APP

    # The log: a 302 to a URL that needs no token (GitHub's is pre-signed, elsewhere).
    redirect = client.request("GET", f"repos/{APP}/actions/jobs/{failed['id']}/logs")
    assert redirect.status_code == 302
    location = redirect.headers["location"]
    text = httpx.get(location)
    assert text.status_code == 200 and text.text == log
    assert text.headers["content-type"].startswith("text/plain")
    assert "authorization" not in fake.seen("GET", httpx.URL(location).path)[0].headers
    assert httpx.get(location.split("?")[0] + "?sig=forged").status_code == 403

    # A running workflow cannot be rerun; a finished one with a failed job can.
    busy = fake.add_workflow_run(APP, head, {"slow": "in_progress"}, name="Slow")
    assert stand.post(f"actions/runs/{busy}/rerun-failed-jobs", None).status_code == 403
    fake.script_rerun(APP, run_id, "success", logs={"test": "1 passed\n"})
    rerun = stand.post(f"actions/runs/{run_id}/rerun-failed-jobs", None)
    assert (rerun.status_code, rerun.json()) == (201, {})
    (made,) = fake.reruns
    assert (made.run_id, made.attempt, made.jobs) == (run_id, 2, ("test",))

    again = client.json("GET", f"repos/{APP}/actions/runs/{run_id}")
    assert (again["status"], again["conclusion"], again["run_attempt"]) == (
        "completed",
        "success",
        2,
    )
    assert again["previous_attempt_url"].endswith(f"/actions/runs/{run_id}/attempts/1")
    latest = client.json("GET", f"repos/{APP}/actions/runs/{run_id}/jobs")["jobs"]
    assert {j["name"]: (j["conclusion"], j["run_attempt"]) for j in latest} == {
        "lint": ("success", 1),
        "test": ("success", 2),
    }
    every = client.json("GET", f"repos/{APP}/actions/runs/{run_id}/jobs", params={"filter": "all"})
    assert every["total_count"] == 3
    checks = client.json("GET", f"repos/{APP}/commits/{head}/check-runs")["check_runs"]
    assert {(c["name"], c["conclusion"]) for c in checks} >= {("test", "success")}
    # Nothing failed any more: another rerun of failed jobs is refused.
    assert stand.post(f"actions/runs/{run_id}/rerun-failed-jobs", None).status_code == 403
    assert len(fake.reruns) == 1


def test_graphql_threads_resolve_and_ready_for_review(stand: Stand) -> None:
    fake = stand.fake
    pull = open_draft(stand)
    number = pull["number"]
    fake.submit_review(
        APP,
        number,
        user="alice",
        comments=[
            {"path": "app.py", "line": 1, "body": "a"},
            {"path": "app.py", "line": 1, "body": "b"},
        ],
    )
    first = fake.review_comments_on(APP, number)[0]
    stand.post(f"pulls/{number}/comments/{first['id']}/replies", {"body": "Done."})

    answer = stand.graphql(THREADS_QUERY, owner="acme", name="app", number=number)
    assert "errors" not in answer
    found = answer["data"]["repository"]["pullRequest"]
    assert found["id"] == pull["node_id"] and found["isDraft"] is True
    threads = found["reviewThreads"]
    assert threads["totalCount"] == 2
    rest_ids = [c["id"] for c in fake.review_comments_on(APP, number)]
    assert [[c["databaseId"] for c in t["comments"]["nodes"]] for t in threads["nodes"]] == [
        [rest_ids[0], rest_ids[2]],
        [rest_ids[1]],
    ]
    assert not any(t["isResolved"] for t in threads["nodes"])

    for thread in threads["nodes"]:
        resolved = stand.graphql(RESOLVE, threadId=thread["id"])
        assert resolved == {
            "data": {"resolveReviewThread": {"thread": {"id": thread["id"], "isResolved": True}}}
        }
    assert [t["resolved_by"] for t in fake.threads_on(APP, number)] == [fake.login] * 2
    assert len(fake.graphql("resolveReviewThread")) == 2

    ready = stand.graphql(READY, id=pull["node_id"])
    assert ready["data"]["markPullRequestReadyForReview"]["pullRequest"] == {
        "isDraft": False,
        "number": number,
    }
    assert stand.client.json("GET", f"repos/{APP}/pulls/{number}")["draft"] is False

    # GitHub's error shapes: NOT_FOUND beside a null field; validation errors with no data.
    missing = stand.graphql(RESOLVE, threadId="PRRT_nope")
    assert missing["data"] == {"resolveReviewThread": None}
    (error,) = missing["errors"]
    assert (error["type"], error["path"]) == ("NOT_FOUND", ["resolveReviewThread"])
    assert error["locations"][0]["line"] == 3
    undefined = stand.graphql("{ viewer { login nickname } }")
    assert "data" not in undefined
    assert undefined["errors"][0]["extensions"]["code"] == "undefinedField"
    unbounded = stand.graphql(
        'query { repository(owner: "acme", name: "app") '
        "{ pullRequest(number: 1) { reviewThreads { totalCount } } } }"
    )
    assert unbounded["errors"][0]["type"] == "MISSING_PAGINATION_BOUNDARIES"
    assert stand.graphql("{ viewer { login }") == {
        "errors": [
            {"message": "Unexpected end of document", "locations": [{"line": 1, "column": 19}]}
        ]
    }
    assert 'Parse error on "}" (RCURLY)' in stand.graphql("{ viewer }}")["errors"][0]["message"]
    no_var = stand.graphql(RESOLVE)
    assert "data" not in no_var and "$threadId" in no_var["errors"][0]["message"]
    # Aliases, fragments and __typename come back as asked.
    shaped = stand.graphql(
        'query { me: viewer { ...who } repo: repository(owner: "acme", name: "app") '
        "{ __typename nameWithOwner } } fragment who on User { login }"
    )
    assert shaped == {
        "data": {
            "me": {"login": fake.login},
            "repo": {"__typename": "Repository", "nameWithOwner": APP},
        }
    }
    assert (
        stand.http.post(
            "/graphql",
            json={"query": "{ viewer { login } }"},
            headers={"Authorization": "Bearer wrong"},
        ).status_code
        == 401
    )


@dataclass
class Receiver:
    """A webhook endpoint that checks signatures with agent-team's `verify_signature`."""

    url: str = ""
    received: list[tuple[dict[str, str], bytes, int]] = field(default_factory=list)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = read_body(self)
            headers = {k.lower(): v for k, v in self.headers.items()}
            status = (
                204 if verify_signature(SECRET, body, headers.get("x-hub-signature-256")) else 401
            )
            found.received.append((headers, body, status))
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    found.url = f"http://127.0.0.1:{server.server_address[1]}/github/webhook"
    yield found
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_signed_webhook_deliveries_replays_and_a_tampered_body(
    stand: Stand, receiver: Receiver
) -> None:
    fake = stand.fake
    hooks = GitHubWebhooks(fake, SECRET)
    number = open_draft(stand)["number"]
    deliveries = {"opened": hooks.pull_request(APP, number, "opened")}
    review = fake.submit_review(
        APP, number, user="alice", comments=[{"path": "app.py", "line": 1, "body": "Rename."}]
    )
    (comment,) = fake.review_comments_on(APP, number)
    talk = fake.add_issue_comment(APP, number, "/agent-team fix please", user="alice")
    head = fake.pull_json(APP, number)["head"]["sha"]
    check_id = fake.set_check_run(APP, head, "test", conclusion="failure")
    suite_id = fake.repos[APP].check_runs[check_id]["_suite"]
    status_id = fake.set_status(APP, head, "ci/x", "success")
    run_id = fake.add_workflow_run(APP, head, {"test": "failure"})
    deliveries |= {
        "review": hooks.pull_request_review(APP, number, review["id"]),
        "review_comment": hooks.pull_request_review_comment(APP, number, comment["id"]),
        "issue_comment": hooks.issue_comment(APP, number, talk["id"]),
        "check_run": hooks.check_run(APP, check_id),
        "check_suite": hooks.check_suite(APP, suite_id),
        "status": hooks.status(APP, status_id),
        "workflow_run": hooks.workflow_run(APP, run_id),
    }
    new_head = fake.push(APP, BRANCH)
    deliveries["synchronize"] = hooks.pull_request(APP, number, "synchronize")
    fake.set_draft(APP, number, False)
    deliveries["ready"] = hooks.pull_request(APP, number, "ready_for_review")
    for delivery in deliveries.values():
        assert hooks.deliver(delivery, receiver.url).status_code == 204

    headers, _body, _status = receiver.received[0]
    assert headers["x-github-event"] == "pull_request"
    assert headers["x-github-delivery"] == deliveries["opened"].guid
    assert headers["user-agent"].startswith("GitHub-Hookshot/")
    assert headers["x-hub-signature-256"].startswith("sha256=")
    assert headers["x-hub-signature"].startswith("sha1=")
    assert headers["content-type"] == "application/json"

    p = {name: d.payload for name, d in deliveries.items()}
    assert p["opened"]["pull_request"]["draft"] is True and p["opened"]["number"] == number
    assert p["opened"]["repository"]["full_name"] == APP
    assert p["review"]["review"]["state"] == "changes_requested"  # lower case in webhooks
    assert p["review_comment"]["comment"]["id"] == comment["id"]
    assert p["issue_comment"]["issue"]["pull_request"]["url"].endswith(f"/pulls/{number}")
    assert p["issue_comment"]["comment"]["user"]["login"] == "alice"
    assert p["check_run"]["check_run"]["conclusion"] == "failure"
    assert p["check_run"]["check_run"]["check_suite"]["head_branch"] == BRANCH
    assert p["check_suite"]["check_suite"]["conclusion"] == "failure"
    assert (p["status"]["state"], p["status"]["sha"], "action" in p["status"]) == (
        "success",
        head,
        False,
    )
    assert p["workflow_run"]["workflow_run"]["conclusion"] == "failure"
    assert (p["synchronize"]["before"], p["synchronize"]["after"]) == (head, new_head)
    assert p["ready"]["pull_request"]["draft"] is False

    # Merge and close unmerged: `closed` with merged true / false.
    fake.merge_pull(APP, number)
    merged = hooks.pull_request(APP, number, "closed")
    assert merged.payload["pull_request"]["merged"] is True
    assert merged.payload["sender"]["login"] == "maintainer"
    fake.push(APP, "other", {"b.py": "x = 1\n"})
    other = fake.open_pull(APP, "other")
    fake.close_pull(APP, other)
    assert hooks.pull_request(APP, other, "closed").payload["pull_request"]["merged"] is False

    # A redelivery is the same delivery again; a changed body fails the signature.
    replay = deliveries["review"]
    assert hooks.deliver(replay, receiver.url).status_code == 204
    guids = [h["x-github-delivery"] for h, _b, _s in receiver.received]
    assert guids.count(replay.guid) == 2 and receiver.received[-1][1] == replay.body
    assert hooks.deliver(replay.tampered(), receiver.url).status_code == 401
    assert not verify_signature("other-secret", replay.body, replay.headers["X-Hub-Signature-256"])
    unsigned = GitHubWebhooks(fake, None).ping(APP)
    assert "X-Hub-Signature-256" not in unsigned.headers
    assert unsigned.send(receiver.url).status_code == 401
