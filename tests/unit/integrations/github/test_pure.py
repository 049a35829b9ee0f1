"""Pure pieces of the GitHub intake: signatures, ids, URLs, validation, the push environment."""

from __future__ import annotations

import base64
import os

import pytest
from pydantic import ValidationError

from agent_team.db.records import Task
from agent_team.integrations.github.intake import (
    BODY_LIMIT,
    GitHubIssue,
    issue_source,
    legacy_task_id_for,
    parse_issue_url,
    task_id_for,
)
from agent_team.integrations.github.pr import auth_env, git_host_url
from agent_team.integrations.github.status import comment_body, marker
from agent_team.integrations.github.webhook import sign, verify_signature

# https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
VECTOR_SECRET = "It's a Secret to Everybody"
VECTOR_PAYLOAD = b"Hello, World!"
VECTOR_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


def test_githubs_published_test_vector() -> None:
    assert sign(VECTOR_SECRET, VECTOR_PAYLOAD) == VECTOR_SIGNATURE
    assert verify_signature(VECTOR_SECRET, VECTOR_PAYLOAD, VECTOR_SIGNATURE)


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        VECTOR_SIGNATURE.replace("sha256=", "sha1="),
        VECTOR_SIGNATURE[:-1] + "0",
        VECTOR_SIGNATURE.upper(),
        "sha256=" + "é" * 64,
    ],
)
def test_anything_but_the_right_signature_is_refused(header: str | None) -> None:
    assert not verify_signature(VECTOR_SECRET, VECTOR_PAYLOAD, header)


def test_a_signature_over_another_body_or_secret_is_refused() -> None:
    assert not verify_signature(VECTOR_SECRET, b"Hello, World?", VECTOR_SIGNATURE)
    assert not verify_signature("another secret", VECTOR_PAYLOAD, VECTOR_SIGNATURE)


def test_task_ids_and_sources_are_deterministic_and_ignore_case() -> None:
    assert task_id_for("Acme/App", 12) == task_id_for("acme/app", 12) == "gh-acme--app-12"
    assert task_id_for("a-b/c_d.e", 1) == "gh-a-b--c_d.e-1"
    assert issue_source("Acme/App") == "github:acme/app"
    # The scheme before owner and repo were told apart; kept to find older tasks.
    assert legacy_task_id_for("Acme/App", 12) == "gh-acme-app-12"


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("acme-corp/api", "acme/corp-api"),
        ("a/b-c-d", "a-b/c-d"),
        ("a-b/c--d", "a/b--c-d"),  # repository names may hold `--`; owners cannot
    ],
)
def test_task_ids_of_different_repositories_differ(one: str, other: str) -> None:
    assert task_id_for(one, 7) != task_id_for(other, 7)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://github.com/acme/app/issues/12", ("acme/app", 12)),
        ("https://ghe.example.com/Acme/App/issues/7/", ("Acme/App", 7)),
        ("https://github.com/acme/app/pull/12", None),
        ("not a url", None),
        (None, None),
    ],
)
def test_issue_urls(url: str | None, expected: tuple[str, int] | None) -> None:
    assert parse_issue_url(url) == expected


def test_issue_validation_and_the_body_cap() -> None:
    issue = GitHubIssue.model_validate(
        {
            "number": 3,
            "title": "  Fix   the\nthing ",
            "body": None,
            "html_url": "https://github.com/a/b/issues/3",
            "labels": [{"name": "agent-team"}, "plain"],
            "extra": {"ignored": True},
        }
    )
    assert issue.task_title() == "Fix the thing"
    assert issue.task_body() == ""
    assert issue.label_names() == {"agent-team", "plain"}
    huge = issue.model_copy(update={"body": "x" * 1_000_000})
    body = huge.task_body()
    assert body.startswith("x" * BODY_LIMIT) and len(body) < BODY_LIMIT + 200
    assert f"{1_000_000 - BODY_LIMIT} more characters cut" in body and issue.html_url in body
    for bad in ({"number": 0}, {"number": "seven"}, {"title": " "}, {"html_url": ""}):
        with pytest.raises(ValidationError):
            GitHubIssue.model_validate({**issue.model_dump(), **bad})


def test_the_push_gets_the_token_through_the_environment_only_for_the_git_host() -> None:
    token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
    env = auth_env(token, "https://github.com/")
    assert env["GIT_CONFIG_KEY_0"] == "http.https://github.com/.extraHeader"
    scheme, value = env["GIT_CONFIG_VALUE_0"].removeprefix("Authorization: ").split(" ")
    assert scheme == "Basic"
    assert base64.b64decode(value).decode() == f"x-access-token:{token}"
    assert env["GIT_TERMINAL_PROMPT"] == "0"
    assert env["GIT_CONFIG_NOSYSTEM"] == "1" and env["GIT_CONFIG_GLOBAL"] == os.devnull
    assert "GIT_CONFIG_COUNT" not in auth_env(None, "https://github.com/")


@pytest.mark.parametrize(
    ("api_url", "host"),
    [
        ("https://api.github.com", "https://github.com/"),
        ("https://api.github.com/", "https://github.com/"),
        ("https://ghe.example.com/api/v3", "https://ghe.example.com/"),
        ("https://ghe.example.com/api/v3/", "https://ghe.example.com/"),
        ("http://127.0.0.1:8123", "http://127.0.0.1:8123/"),
        ("https://api.octo.ghe.com", "https://octo.ghe.com/"),
    ],
)
def test_the_git_host_comes_from_the_api_url(api_url: str, host: str) -> None:
    assert git_host_url(api_url) == host


def test_the_comment_body_carries_the_marker_and_a_bounded_text() -> None:
    task = Task(
        id="gh-a-b-1",
        kind="code",
        source="github",
        source_ref="https://github.com/a/b/issues/1",
        title="t",
        body="",
        status="waiting",
        phase="plan_review",
        parked_reason=None,
        created_at="",
        updated_at="",
    )
    body = comment_body(task, "waiting", "waiting on a person: plan_decision " * 500, None)
    assert body.startswith(marker("gh-a-b-1"))
    assert "**waiting on a person**" in body and len(body) < 4200
    assert "Details:" not in body
    linked = comment_body(task, "done", "done", "https://at.example/")
    assert linked.endswith("https://at.example/task/gh-a-b-1")
