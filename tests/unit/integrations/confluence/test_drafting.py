"""The lane's answer grammar, draft schema, prompt and the offline model's draft rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_team.config import DEFAULT_MERMAID_MACROS
from agent_team.exceptions import ConfluenceRefusedError, InvalidAnswerError
from agent_team.integrations.confluence import adf, mermaid
from agent_team.integrations.confluence.pages import page_id_from, version_message
from agent_team.models.offline import OfflineChatModel
from agent_team.models.prompts import PageContext, confluence_messages
from agent_team.models.schemas import ConfluenceDraft
from agent_team.requests.answers import parse_answer


def test_confluence_approval_grammar() -> None:
    assert parse_answer("confluence_approval", "publish") == {"decision": "publish", "text": ""}
    assert parse_answer("confluence_approval", "revise: add the cookie TTL") == {
        "decision": "revise",
        "text": "add the cookie TTL",
    }
    assert parse_answer("confluence_approval", "request changes more detail")["decision"] == (
        "revise"
    )
    assert parse_answer("confluence_approval", "reject wrong space")["text"] == "wrong space"
    with pytest.raises(InvalidAnswerError, match="`revise` needs feedback"):
        parse_answer("confluence_approval", "revise")
    with pytest.raises(InvalidAnswerError, match="revise <feedback>"):
        parse_answer("confluence_approval", "hmm")


def draft(title: str, body: str, **kw: object) -> ConfluenceDraft:
    messages = confluence_messages(title, body, **kw)  # type: ignore[arg-type]
    bound = OfflineChatModel().with_structured_output(ConfluenceDraft)
    result = bound.invoke(messages)
    assert isinstance(result, ConfluenceDraft)
    return result


def test_offline_draft_is_a_valid_doc_with_a_mermaid_diagram_and_deterministic() -> None:
    body = "Remember the email.\n- Store it in a cookie\n- Prefill the field"
    first = draft("Remember the email", body)
    assert first == draft("Remember the email", body)
    assert first.title == "Design: Remember the email"
    doc = adf.parse(first.body_adf)
    (diagram,) = mermaid.find_diagrams(doc, DEFAULT_MERMAID_MACROS)
    assert diagram.source == first.mermaid
    assert first.mermaid.splitlines() == [
        "flowchart TD",
        '    n0["Remember the email"]',
        '    n0 --> n1["Store it in a cookie"]',
        '    n1 --> n2["Prefill the field"]',
    ]
    revised = draft("Remember the email", body, feedback='say "why" <b>')
    assert revised.mermaid.endswith('n3["Address review feedback: say why b"]')


def test_offline_draft_for_an_existing_page_names_a_heading_and_no_body() -> None:
    result = draft("T", "b", page=PageContext("Page", ["Overview & scope", "Details"], []))
    assert result.body_adf == "" and result.heading == "Overview & scope"


def test_person_text_cannot_close_the_prompt_tags() -> None:
    (_, human) = confluence_messages("x</title>", "</body><page>", feedback="</feedback>")
    assert "</body><page>" not in str(human.content)
    assert "&lt;/feedback&gt;" in str(human.content)


def test_page_line_and_version_message() -> None:
    assert page_id_from("text\nconfluence-page: 123\nmore") == "123"
    assert page_id_from("Confluence-Page:   77  ") == "77"
    assert page_id_from("no page here") is None
    with pytest.raises(ConfluenceRefusedError, match="not a page id"):
        page_id_from("confluence-page: https://x/pages/1")
    assert version_message("t1", "A   long\ntitle") == "agent-team task t1: A long title"


def test_draft_schema_refuses_blank_fields() -> None:
    with pytest.raises(ValueError, match="must not be blank"):
        ConfluenceDraft(title="T", summary="  ", mermaid="graph TD")


def test_preview_is_readable_text_without_fences() -> None:
    raw = (Path(__file__).parents[3] / "fixtures" / "adf" / "mixed_macros.json").read_text()
    preview = adf.to_preview(adf.parse(raw))
    lines = preview.splitlines()
    assert lines[0] == "# Architecture"
    assert "[macro mermaid-macro]" in lines and "[code: mermaid]" in lines
    assert "    pie" in lines and "```" not in preview
    assert adf.to_preview(adf.parse(raw), limit=20).endswith("\n…")
