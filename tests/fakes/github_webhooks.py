"""Signed GitHub webhook deliveries built from the loopback GitHub's state.

Why from the fake's state: a delivery and the REST API then agree (same ids,
same head sha, same review state), as they do on GitHub, so a test can drive
the daemon by webhook and let it read the rest back by REST.

Each builder returns a `Delivery`: the event name, a GUID, the JSON body as
bytes and GitHub's headers (`X-GitHub-Event`, `X-GitHub-Delivery`,
`X-GitHub-Hook-ID`, `X-GitHub-Hook-Installation-Target-*`, `X-Hub-Signature`
(SHA-1) and `X-Hub-Signature-256` (HMAC-SHA256 of the body with the secret),
`User-Agent: GitHub-Hookshot/...`). `send(url)` posts it; sending the same
`Delivery` again is a redelivery (GitHub keeps the GUID), `tampered()` is the
same headers over a changed body. The signature is computed here with `hmac`,
not with agent-team's own `sign`, so a test of `verify_signature` is a real check.

Payload shapes follow GitHub's documented examples (octokit/webhooks
`payload-examples/api.github.com`), including where webhooks differ from
REST: a review's `state` is lower case (`changes_requested`), an
`issue_comment` on a pull request has `issue.pull_request` set, a `status`
event has no `action`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from dataclasses import dataclass, replace
from typing import Any

import httpx

from tests.fakes.github_api import FakeGitHub, FakeRepo

__all__ = ["Delivery", "GitHubWebhooks"]


@dataclass(frozen=True)
class Delivery:
    event: str
    guid: str
    payload: dict[str, Any]
    body: bytes
    headers: dict[str, str]

    def send(self, url: str, *, timeout_s: float = 10.0) -> httpx.Response:
        """POST it as GitHub does; call again for a redelivery (same GUID, same signature)."""
        return httpx.post(url, content=self.body, headers=self.headers, timeout=timeout_s)

    def tampered(self) -> Delivery:
        """The same headers (signature included) over a body changed after signing."""
        changed = {**self.payload, "tampered": True}
        return replace(self, payload=changed, body=_encode(changed))


def _encode(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


class GitHubWebhooks:
    """Builds deliveries for one repository hook of `fake`, signed with `secret`.

    `secret=None` sends no signature headers, as GitHub does for a hook without one.
    """

    def __init__(self, fake: FakeGitHub, secret: str | None, *, hook_id: int = 424242) -> None:
        self.fake = fake
        self.secret = secret
        self.hook_id = hook_id
        self.sent: list[tuple[Delivery, int]] = []  # what `deliver` sent and the status it got

    # -- the envelope ---------------------------------------------------------------------

    def delivery(self, event: str, full_name: str, payload: dict[str, Any]) -> Delivery:
        """Sign `payload` as `event` for `full_name`'s hook."""
        body = _encode(payload)
        repo = self.fake.repos[full_name.lower()]
        guid = str(uuid.uuid4())
        headers = {
            "Content-Type": "application/json",
            "Accept": "*/*",
            "User-Agent": "GitHub-Hookshot/"
            + hashlib.sha1(str(self.hook_id).encode()).hexdigest()[:7],
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": guid,
            "X-GitHub-Hook-ID": str(self.hook_id),
            "X-GitHub-Hook-Installation-Target-Type": "repository",
            "X-GitHub-Hook-Installation-Target-ID": str(repo.id),
        }
        if self.secret is not None:
            key = self.secret.encode()
            headers["X-Hub-Signature"] = "sha1=" + hmac.new(key, body, hashlib.sha1).hexdigest()
            headers["X-Hub-Signature-256"] = (
                "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()
            )
        return Delivery(event, guid, payload, body, headers)

    def deliver(self, delivery: Delivery, url: str) -> httpx.Response:
        """Send and remember the status (a test can assert what the receiver said)."""
        response = delivery.send(url)
        self.sent.append((delivery, response.status_code))
        return response

    def _common(self, full_name: str, sender: str) -> dict[str, Any]:
        return {
            "repository": self.fake.repo_json(full_name),
            "sender": self.fake.user_json(sender),
        }

    # -- events ---------------------------------------------------------------------------

    def ping(self, full_name: str) -> Delivery:
        payload = {
            "zen": "Keep it logically awesome.",
            "hook_id": self.hook_id,
            "hook": {
                "type": "Repository",
                "id": self.hook_id,
                "active": True,
                "events": ["*"],
                "config": {"content_type": "json", "insecure_ssl": "0"},
            },
            **self._common(full_name, "someone"),
        }
        return self.delivery("ping", full_name, payload)

    def pull_request(
        self,
        full_name: str,
        number: int,
        action: str,
        *,
        sender: str | None = None,
        before: str | None = None,
        after: str | None = None,
    ) -> Delivery:
        """`opened`, `closed` (its `merged` says which), `synchronize` (`before`/`after`:
        the previous and the current head unless given), `ready_for_review`, `reopened`...
        """
        with self.fake.lock:
            pull = self.fake.pull_json(full_name, number)
            stored = self._stored_pull(full_name, number)
            payload: dict[str, Any] = {"action": action, "number": number, "pull_request": pull}
            if action == "synchronize":
                previous = stored["_heads"][-1] if stored["_heads"] else None
                payload["before"] = before or previous
                payload["after"] = after or pull["head"]["sha"]
            who = sender or (pull["merged_by"] or pull["user"])["login"]
            payload.update(self._common(full_name, who))
            return self.delivery("pull_request", full_name, payload)

    def pull_request_review(
        self, full_name: str, number: int, review_id: int, action: str = "submitted"
    ) -> Delivery:
        with self.fake.lock:
            repo = self._repo(full_name)
            review = self.fake.review_json(repo, repo.reviews[review_id])
            review["state"] = review["state"].lower()  # webhooks say "changes_requested"
            payload = {
                "action": action,
                "review": review,
                "pull_request": self.fake.pull_json(full_name, number, full=False),
                **self._common(full_name, review["user"]["login"]),
            }
            return self.delivery("pull_request_review", full_name, payload)

    def pull_request_review_comment(
        self, full_name: str, number: int, comment_id: int, action: str = "created"
    ) -> Delivery:
        with self.fake.lock:
            repo = self._repo(full_name)
            comment = self.fake.review_comment_json(repo, repo.review_comments[comment_id])
            payload = {
                "action": action,
                "comment": comment,
                "pull_request": self.fake.pull_json(full_name, number, full=False),
                **self._common(full_name, comment["user"]["login"]),
            }
            return self.delivery("pull_request_review_comment", full_name, payload)

    def issue_comment(
        self, full_name: str, number: int, comment_id: int, action: str = "created"
    ) -> Delivery:
        """On a pull request, `issue.pull_request` is set (that is how a PR comment is told)."""
        with self.fake.lock:
            repo = self._repo(full_name)
            found = self.fake.comments[comment_id]
            comment = {k: v for k, v in found.items() if not k.startswith("_")}
            issue = {k: v for k, v in repo.issues[number].items() if not k.startswith("_")}
            api = f"{self.fake.url}/repos/{repo.full_name}"
            issue.update(
                url=f"{api}/issues/{number}",
                repository_url=api,
                comments_url=f"{api}/issues/{number}/comments",
                node_id=f"I_kwDO{issue['id']}",
                locked=False,
                comments=len(self.fake.comments_on(full_name, number)),
                user=self.fake.user_json(issue["user"]["login"]),
            )
            payload = {
                "action": action,
                "issue": issue,
                "comment": comment,
                **self._common(full_name, comment["user"]["login"]),
            }
            return self.delivery("issue_comment", full_name, payload)

    def check_run(self, full_name: str, check_run_id: int, action: str = "completed") -> Delivery:
        """The run with its whole `check_suite` inside, as GitHub sends it."""
        with self.fake.lock:
            repo = self._repo(full_name)
            self.fake.refresh_heads(repo)
            record = repo.check_runs[check_run_id]
            run = self.fake.check_run_json(repo, record)
            suite = self.fake.check_suite_json(repo, repo.check_suites[record["_suite"]])
            run["check_suite"] = {k: v for k, v in suite.items() if k != "repository"}
            payload = {"action": action, "check_run": run, **self._common(full_name, "someone")}
            return self.delivery("check_run", full_name, payload)

    def check_suite(self, full_name: str, suite_id: int, action: str = "completed") -> Delivery:
        with self.fake.lock:
            repo = self._repo(full_name)
            self.fake.refresh_heads(repo)
            suite = self.fake.check_suite_json(repo, repo.check_suites[suite_id])
            suite.pop("repository")
            payload = {"action": action, "check_suite": suite, **self._common(full_name, "someone")}
            return self.delivery("check_suite", full_name, payload)

    def status(self, full_name: str, status_id: int) -> Delivery:
        """A commit status event: flat, with no `action`."""
        with self.fake.lock:
            repo = self._repo(full_name)
            self.fake.refresh_heads(repo)
            record = next(s for s in repo.statuses if s["id"] == status_id)
            branch = self.fake.branch_of(repo, record["sha"])
            payload = {
                "id": record["id"],
                "sha": record["sha"],
                "name": repo.full_name,
                "target_url": record["target_url"],
                "context": record["context"],
                "description": record["description"],
                "state": record["state"],
                "commit": {
                    "sha": record["sha"],
                    "url": f"{self.fake.url}/repos/{repo.full_name}/commits/{record['sha']}",
                },
                "branches": (
                    []
                    if branch is None
                    else [{"name": branch, "commit": {"sha": record["sha"]}, "protected": False}]
                ),
                "created_at": record["created_at"],
                "updated_at": record["updated_at"],
                **self._common(full_name, record["creator"]),
            }
            return self.delivery("status", full_name, payload)

    def workflow_run(self, full_name: str, run_id: int, action: str = "completed") -> Delivery:
        with self.fake.lock:
            repo = self._repo(full_name)
            self.fake.refresh_heads(repo)
            run = self.fake.workflow_run_json(repo, repo.workflow_runs[run_id])
            payload = {
                "action": action,
                "workflow_run": run,
                "workflow": {
                    "id": run["workflow_id"],
                    "name": run["name"],
                    "path": run["path"],
                    "state": "active",
                    "url": run["workflow_url"],
                },
                **self._common(full_name, run["actor"]["login"]),
            }
            return self.delivery("workflow_run", full_name, payload)

    # -- helpers --------------------------------------------------------------------------

    def _repo(self, full_name: str) -> FakeRepo:
        return self.fake.repos[full_name.lower()]

    def _stored_pull(self, full_name: str, number: int) -> dict[str, Any]:
        found = self.fake.find_pull(self._repo(full_name), number)
        assert found is not None, f"{full_name} has no pull request #{number}"
        return found
