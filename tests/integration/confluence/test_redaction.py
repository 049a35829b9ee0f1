"""A token pasted into a task never reaches Confluence, and what is approved is what is written.

Issue #17 item 6: one redaction rule where text leaves the process. The lane
applies it when it drafts, so the approval question shows the very text that
is written; the client applies it again to every body it sends (a no-op for
a clean draft). Each test checks the loopback Confluence's recorded requests;
`test_lane.py` runs a lost create with a token in the task too.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import SecretStr

from agent_team.common.redact import MASK
from agent_team.coordinator import thread_config
from agent_team.integrations.confluence import adf
from agent_team.integrations.confluence.client import BasicAuth, ConfluenceClient
from tests.fakes import confluence_api as fc
from tests.integration.confluence.conftest import MakeLaneCoordinator, fixture_text
from tests.integration.confluence.test_lane import (
    PAT,
    TOKEN_BODY,
    answer,
    open_question,
    submit_docs,
    task,
)

BOT = "xoxb-1234567890-abcdefghijkl"


def sent(fake: fc.FakeConfluence) -> str:
    """Everything the loopback Confluence received, as one text."""
    return json.dumps([(r.method, r.path, r.query, r.body) for r in fake.requests])


def approved_draft(coordinator: Any, task_id: str) -> dict[str, Any]:
    values = coordinator.graph.get_state(thread_config(task_id)).values
    draft: dict[str, Any] = values["confluence"]["draft"]
    return draft


def test_a_new_page_is_drafted_shown_and_written_without_the_token(
    make_lane: MakeLaneCoordinator, fake: fc.FakeConfluence
) -> None:
    coordinator = make_lane(confluence_dry_run=False)
    task_id = submit_docs(coordinator, body=TOKEN_BODY, title=f"Login {BOT}")
    question = open_question(coordinator, task_id)
    shown = json.dumps(question.payload)
    assert PAT not in shown and BOT not in shown, "the approval shows no token"
    assert MASK in question.payload["preview"]

    answer(coordinator, task_id, "publish")

    assert task(coordinator, task_id).status == "done"
    assert PAT not in sent(fake) and BOT not in sent(fake)
    (page,) = fake.pages.values()
    assert page.title == f"Design: Login {MASK}"
    draft = approved_draft(coordinator, task_id)
    assert page.body == draft["doc"], "the page is exactly the draft that was approved"
    assert f"Rotate {MASK} after the release" in page.body


def test_an_update_shows_and_writes_the_page_without_any_token(
    make_lane: MakeLaneCoordinator, fake: fc.FakeConfluence
) -> None:
    """The new diagram carries the task's token; the page itself held one already.

    Both leave as `[redacted]`: the approval question says so, the PUT sends
    exactly the approved document, and the rest of the page is untouched.
    """
    doc = adf.parse(fixture_text("no_diagram.json"))
    doc["content"].append(
        {"type": "paragraph", "content": [{"type": "text", "text": f"deploy key {BOT}"}]}
    )
    page_id = fake.add_page("Notes", doc, version=2)
    coordinator = make_lane(confluence_dry_run=False)
    task_id = submit_docs(coordinator, body=f"{TOKEN_BODY}\nconfluence-page: {page_id}")
    question = open_question(coordinator, task_id)
    shown = json.dumps(question.payload)
    assert PAT not in shown and BOT not in shown
    assert "credential-shaped text already on the page" in question.payload["diff"]

    answer(coordinator, task_id, "publish")

    assert task(coordinator, task_id).status == "done"
    (put,) = fake.writes()
    assert PAT not in sent(fake) and BOT not in sent(fake)
    written = fake.pages[page_id].body
    assert written == approved_draft(coordinator, task_id)["doc"]
    after = adf.parse(written)
    assert after["content"][-1]["content"][0]["text"] == f"deploy key {MASK}"
    assert put.body["version"]["number"] == 3


def test_the_client_redacts_every_body_it_sends(fake: fc.FakeConfluence) -> None:
    """The seam itself, for callers that bring their own body: title, message and ADF."""
    page_id = fake.add_page("Notes", fixture_text("no_diagram.json"))
    client = ConfluenceClient(fake.base_url, BasicAuth(fc.EMAIL, SecretStr(fc.API_TOKEN)))
    try:
        body = adf.dumps(
            {
                "type": "doc",
                "version": 1,
                "content": [
                    {"type": "paragraph", "content": [{"type": "text", "text": f"key {PAT}"}]}
                ],
            }
        )
        client.update_page(
            {
                "id": page_id,
                "status": "current",
                "title": f"Notes {BOT}",
                "body": {"representation": "atlas_doc_format", "value": body},
                "version": {"number": 2, "message": f"rotated {PAT}"},
            }
        )
    finally:
        client.close()
    assert PAT not in sent(fake) and BOT not in sent(fake)
    page = fake.pages[page_id]
    assert page.title == f"Notes {MASK}" and page.message == f"rotated {MASK}"
    assert adf.parse(page.body)["content"][0]["content"][0]["text"] == f"key {MASK}"
