"""What the Confluence lane does with pages, apart from the graph.

Which page a task names, the checks made before the model is paid for, the
edit a draft becomes, the exact request a write sends, and the one-line
outcome for the task's final note. The graph's nodes
(`agent_team.nodes.confluence_writer`) call these; nothing here touches the
ledger or the graph's state, so the rules live next to the client they
depend on.
"""

from __future__ import annotations

import re
from typing import Any

from agent_team.exceptions import ConfluenceRefusedError
from agent_team.integrations.confluence import adf, mermaid
from agent_team.integrations.confluence.client import Page, create_request, update_request
from agent_team.integrations.confluence.lane import ConfluenceLane
from agent_team.models.schemas import ConfluenceDraft

__all__ = [
    "PAGE_LINE",
    "check_parent",
    "check_space",
    "edit_ops",
    "names_task",
    "page_id_from",
    "page_result",
    "read_page",
    "request_for",
    "version_message",
]

PAGE_LINE = re.compile(r"^\s*confluence-page:\s*(\S+)\s*$", re.IGNORECASE | re.MULTILINE)


def page_id_from(body: str) -> str | None:
    """The page a task names with a `confluence-page: <id>` line, if any.

    Raises:
        ConfluenceRefusedError: the line is there but the id is not numeric.
    """
    match = PAGE_LINE.search(body or "")
    if match is None:
        return None
    page_id = match.group(1)
    if not page_id.isdigit():
        raise ConfluenceRefusedError(
            f"`confluence-page: {page_id[:40]}` is not a page id; page ids are numbers "
            "(the digits after /pages/ in the page's URL). Fix the line and submit again"
        )
    return page_id


def version_message(task_id: str, title: str) -> str:
    """The version message of an update; it names the task, which recovery looks for."""
    return f"agent-team task {task_id}: {' '.join(title.split())[:120]}"


def names_task(page: Page, task_id: str) -> bool:
    """Whether the page's last version was written by this task (see `version_message`)."""
    return page.version_message.startswith(f"agent-team task {task_id}:")


def read_page(lane: ConfluenceLane, page_id: str) -> Page:
    """The page to update; refused when it lies outside the configured space."""
    page = lane.client(f"updating page {page_id}").get_page(page_id)
    if lane.space_id and page.space_id != lane.space_id:
        raise ConfluenceRefusedError(
            f"page {page_id} is in space {page.space_id}, not in AGENT_TEAM_CONFLUENCE_SPACE_ID "
            f"({lane.space_id}); fix the page id or the space id. Nothing was written"
        )
    return page


def check_space(lane: ConfluenceLane) -> str:
    """The space a new page goes to, checked to exist before the model is paid."""
    if not lane.space_id:
        raise ConfluenceRefusedError(
            "a new Confluence page needs a space: set AGENT_TEAM_CONFLUENCE_SPACE_ID, or name "
            "an existing page with a `confluence-page: <id>` line in the task"
        )
    if lane.has_client() and not lane.client("checking the space").space_exists(lane.space_id):
        raise ConfluenceRefusedError(
            f"Confluence space {lane.space_id} does not exist (or the account cannot see it); "
            "fix AGENT_TEAM_CONFLUENCE_SPACE_ID (the space's numeric id). Nothing was written"
        )
    if lane.parent_id and lane.has_client():
        check_parent(lane, lane.parent_id, lane.space_id)
    return lane.space_id


def check_parent(lane: ConfluenceLane, parent_id: str, space_id: str) -> None:
    """The new page's parent must be a page of the space (checked before the model is paid)."""
    fix = "fix AGENT_TEAM_CONFLUENCE_PARENT_ID (a page id of that space) or unset it"
    if not parent_id.isdigit():
        raise ConfluenceRefusedError(
            f"the parent page {parent_id[:40]!r} is not a page id (page ids are numbers); "
            f"{fix}. Nothing was written"
        )
    parent_space = lane.client("checking the parent page").page_space(parent_id)
    if parent_space is None:
        raise ConfluenceRefusedError(
            f"the parent page {parent_id} does not exist (or the account cannot see it); "
            f"{fix}. Nothing was written"
        )
    if parent_space != space_id:
        raise ConfluenceRefusedError(
            f"the parent page {parent_id} is in space {parent_space}, not in "
            f"AGENT_TEAM_CONFLUENCE_SPACE_ID ({space_id}); {fix}. Nothing was written"
        )


def edit_ops(page: Page, draft: ConfluenceDraft, keys: tuple[str, ...]) -> list[dict[str, Any]]:
    """The Mermaid editor's ops for a draft: replace the first diagram, else insert one."""
    diagrams = mermaid.find_diagrams(page.doc, keys)
    editable = [d for d in diagrams if d.fmt != "external"]
    if editable:
        first = editable[0]
        return [
            {"op": "replace", "index": first.index, "source": draft.mermaid, "expect": first.source}
        ]
    headings = [h for _, n in adf.iter_nodes(page.doc) if (h := adf.heading_text(n))]
    heading = draft.heading if draft.heading in headings else (headings[0] if headings else None)
    if heading is None:
        raise ConfluenceRefusedError(
            f"page {page.id} has no Mermaid diagram to update and no heading to put a new one "
            "after; add a heading (or a diagram) to the page and submit the task again"
        )
    return [{"op": "insert_after_heading", "heading": heading, "source": draft.mermaid}]


def request_for(task_id: str, draft: dict[str, Any], version: int | None = None) -> dict[str, Any]:
    """The exact request a write sends: method, path and JSON body."""
    if draft["mode"] == "update":
        number = version if version is not None else int(draft["base_version"]) + 1
        return {
            "method": "PUT",
            "path": f"/api/v2/pages/{draft['page_id']}",
            "json": update_request(
                page_id=str(draft["page_id"]),
                title=str(draft["title"]),
                doc_text=str(draft["doc"]),
                version=number,
                message=version_message(task_id, str(draft["title"])),
            ),
        }
    return {
        "method": "POST",
        "path": "/api/v2/pages",
        "json": create_request(
            space_id=str(draft["space_id"]),
            parent_id=draft.get("parent_id"),
            title=str(draft["title"]),
            doc_text=str(draft["doc"]),
        ),
    }


def page_result(page: Page, *, recovered: bool = False) -> dict[str, Any]:
    """What a real write leaves in the task's state (`recovered`: it had landed before)."""
    return {
        "dry_run": False,
        "page_id": page.id,
        "version": page.version,
        "title": page.title,
        "url": page.url,
        "recovered": recovered,
    }
