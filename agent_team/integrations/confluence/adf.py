"""Atlassian Document Format (ADF) helpers: parse, validate, serialise, summarise.

Why we never convert ADF to Markdown and back: a page holds macros, `localId`s
and attributes that no Markdown dialect carries, and a round trip would drop
them silently. We parse the JSON into plain dicts and lists (Python keeps key
order), change only the nodes an edit names, and serialise with one fixed
`json.dumps` setting, so every node we did not touch comes out byte for byte
as it went in (when the input was written with the same setting) and always
structurally identical.

ADF reference: https://developer.atlassian.com/cloud/jira/platform/apis/document/structure/
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from agent_team.exceptions import ConfluenceRefusedError

__all__ = [
    "Path",
    "dumps",
    "heading_text",
    "iter_nodes",
    "node_at",
    "paragraph",
    "parse",
    "text_of",
    "to_preview",
    "validate_doc",
]

# A node's position: the indices into `content` lists from the doc down to it.
Path = tuple[int, ...]

_MAX_DEPTH = 100


def dumps(doc: Any) -> str:
    """The one serialisation we send and compare: compact, keys in their given order."""
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def validate_doc(doc: Any, *, where: str = "the ADF document") -> dict[str, Any]:
    """Check the shape every ADF document must have; return it typed.

    A doc is `{"type": "doc", "version": 1, "content": [...]}` and every node
    below is an object with a string `type` whose `content`, when present, is
    a list of nodes.

    Raises:
        ConfluenceRefusedError: the shape is wrong; the message says where.
    """
    if not isinstance(doc, dict) or doc.get("type") != "doc":
        raise ConfluenceRefusedError(
            f"{where} is not an ADF `doc` (its top level must be "
            '{"type": "doc", "version": 1, "content": [...]}); nothing was written'
        )
    if not isinstance(doc.get("content"), list):
        raise ConfluenceRefusedError(f"{where} has no `content` list; nothing was written")
    stack: list[tuple[Any, str, int]] = [
        (node, f"content[{i}]", 1) for i, node in enumerate(doc["content"])
    ]
    while stack:
        node, at, depth = stack.pop()
        if depth > _MAX_DEPTH:
            raise ConfluenceRefusedError(f"{where} nests deeper than {_MAX_DEPTH} levels at {at}")
        if not isinstance(node, dict) or not isinstance(node.get("type"), str):
            raise ConfluenceRefusedError(
                f"{where} has a node without a string `type` at {at}; nothing was written"
            )
        children = node.get("content")
        if children is None:
            continue
        if not isinstance(children, list):
            raise ConfluenceRefusedError(f"{where}: `content` of {at} is not a list")
        stack.extend((child, f"{at}.content[{i}]", depth + 1) for i, child in enumerate(children))
    return doc


def parse(text: str, *, where: str = "the ADF document") -> dict[str, Any]:
    """Parse ADF JSON text and validate it (see `validate_doc`).

    Raises:
        ConfluenceRefusedError: not JSON, or not an ADF doc.
    """
    try:
        doc = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise ConfluenceRefusedError(
            f"{where} is not valid JSON ({exc}); nothing was written"
        ) from None
    return validate_doc(doc, where=where)


def iter_nodes(doc: dict[str, Any]) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every node below the doc in document order, with its path."""

    def walk(nodes: list[Any], prefix: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
        for index, node in enumerate(nodes):
            if not isinstance(node, dict):
                continue
            path = (*prefix, index)
            yield path, node
            children = node.get("content")
            if isinstance(children, list):
                yield from walk(children, path)

    yield from walk(doc.get("content") or [], ())


def node_at(doc: dict[str, Any], path: Path) -> dict[str, Any]:
    """The node at `path` (raises KeyError/IndexError when the path is stale)."""
    node: dict[str, Any] = doc
    for index in path:
        node = node["content"][index]
    return node


def text_of(node: Any) -> str:
    """The plain text inside a node (text nodes joined, hard breaks as newlines)."""
    if not isinstance(node, dict):
        return ""
    if node.get("type") == "text":
        return str(node.get("text", ""))
    if node.get("type") == "hardBreak":
        return "\n"
    return "".join(text_of(child) for child in node.get("content") or [])


def heading_text(node: dict[str, Any]) -> str | None:
    """A heading's text, stripped; None for any other node."""
    return text_of(node).strip() if node.get("type") == "heading" else None


def paragraph(text: str) -> dict[str, Any]:
    """A paragraph node holding `text` (no empty text node: ADF forbids them)."""
    return {"type": "paragraph", "content": [{"type": "text", "text": text}] if text else []}


def _block_lines(node: dict[str, Any]) -> list[str]:
    kind = node.get("type")
    if kind == "heading":
        level = (node.get("attrs") or {}).get("level", 1)
        hashes = "#" * (level if isinstance(level, int) and 0 < level < 7 else 1)
        return [f"{hashes} {text_of(node)}"]
    if kind == "codeBlock":
        language = str((node.get("attrs") or {}).get("language") or "")
        # Indented, not fenced: the preview is shown inside a fenced block itself.
        return [
            f"[code: {language or 'text'}]",
            *(f"    {line}" for line in text_of(node).splitlines()),
        ]
    if kind in ("extension", "bodiedExtension", "inlineExtension"):
        key = str((node.get("attrs") or {}).get("extensionKey") or "?")
        return [f"[macro {key}]"]
    if kind in ("bulletList", "orderedList"):
        lines = []
        for number, item in enumerate(node.get("content") or [], start=1):
            marker = f"{number}." if kind == "orderedList" else "-"
            lines.append(f"{marker} {text_of(item).strip()}")
        return lines
    if kind == "rule":
        return ["---"]
    text = text_of(node).strip()
    return [text] if text else []


def to_preview(doc: dict[str, Any], *, limit: int = 4000) -> str:
    """A readable plain-text rendering of a doc for the approval question (not a converter)."""
    lines: list[str] = []
    for node in doc.get("content") or []:
        if isinstance(node, dict):
            lines.extend(_block_lines(node))
            lines.append("")
    text = "\n".join(lines).strip()
    return text if len(text) <= limit else text[:limit] + "\n…"
