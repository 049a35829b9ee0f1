"""Edit Mermaid diagrams inside an ADF document, touching nothing else.

Why an editor of its own (and never a Markdown round trip): a Confluence page
is full of macros, `localId`s and attributes that must survive an edit
untouched. This module finds the Mermaid diagrams, changes exactly the nodes
an operation names, and proves it with two guards before anything is sent.

Where a diagram lives (Marketplace apps differ, so all are recognised):

- `codeBlock` nodes with `attrs.language == "mermaid"` (`code_block`);
- `extension` / `bodiedExtension` nodes whose `attrs.extensionKey` (or, for
  Forge apps, its last `/` segment) is one of the configured macro keys, with
  the source in
  - `parameters.macroParams.<code|source|diagram|content|body|text|data>.value`
    (`macro_param`, Connect-style macros),
  - `parameters.guestParams.<same keys>` (`forge_param`, Forge macros),
  - numbered parameters `parameters.macroParams."0"`, `"1"`, ... whose values
    joined in index order are the source (`indexed`: apps that split a long
    diagram to stay under the per-parameter size limit),
  - a `codeBlock` nested in a `bodiedExtension`'s body (`nested_code_block`);
- a Mermaid macro whose source is none of these (an attachment, say) is
  counted by the guards but cannot be edited (`external`).

Operations (plain dicts, so they live in the task's checkpoint):

- `{"op": "replace", "index": n, "source": new, "expect": old}`: the n-th
  diagram (document order, from 0) gets `new`; `expect` (optional) must be its
  current source, so a stale edit is refused instead of overwriting someone;
- `{"op": "insert_after_heading", "heading": text, "source": new}`: a new
  Mermaid `codeBlock` right after the first heading whose text is `text`.

Guards (each refuses with a clear reason, see `check_guards`):

- macro-count: diagrams after == diagrams before + inserts;
- revert-diff: undoing the operations on the proposed document gives back the
  original document exactly (same serialisation), so nothing else changed; and
  each edited node equals its original byte for byte (key order included) once
  only the Mermaid source fields are masked, so an edit cannot lose a node's
  `localId` or parameters either (the undo restores whole nodes, so the first
  check alone would not see that).
"""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_team.exceptions import ConfluenceRefusedError
from agent_team.integrations.confluence import adf

__all__ = [
    "SOURCE_KEYS",
    "Diagram",
    "EditResult",
    "MermaidGuardError",
    "apply_ops",
    "check_guards",
    "describe_ops",
    "find_diagrams",
    "first_difference",
    "is_mermaid_macro",
    "revert",
    "safe_edit",
]

SOURCE_KEYS = ("code", "source", "diagram", "content", "body", "text", "data")
_DEFAULT_CHUNK = 1000
_MACRO_TYPES = frozenset({"extension", "bodiedExtension"})
_DIGITS = re.compile(r"^\d+$")


class MermaidGuardError(ConfluenceRefusedError):
    """A guard refused an edit (or an operation does not apply); nothing is sent."""


@dataclass(frozen=True)
class Diagram:
    """One Mermaid diagram found in a document."""

    index: int
    path: adf.Path
    fmt: str  # code_block | macro_param | forge_param | indexed | nested_code_block | external
    source: str
    extension_key: str | None = None
    local_id: str | None = None
    key: str | None = None  # the parameter name for macro_param / forge_param

    def label(self) -> str:
        what = "code block" if self.fmt == "code_block" else f"macro {self.extension_key}"
        local = f", localId {self.local_id}" if self.local_id else ""
        return f"diagram {self.index + 1} ({what}{local})"


@dataclass
class EditResult:
    """The proposed document and what it takes to undo the edit."""

    doc: dict[str, Any]
    undo: list[dict[str, Any]] = field(default_factory=list)
    inserts: int = 0


def _norm_keys(macro_keys: Iterable[str]) -> frozenset[str]:
    return frozenset(key.strip().lower() for key in macro_keys if key.strip())


def is_mermaid_macro(node: dict[str, Any], macro_keys: Iterable[str]) -> bool:
    """An extension node of one of the configured Mermaid apps."""
    if node.get("type") not in _MACRO_TYPES:
        return False
    key = (node.get("attrs") or {}).get("extensionKey")
    if not isinstance(key, str):
        return False
    keys = _norm_keys(macro_keys)
    lowered = key.lower()
    return lowered in keys or lowered.rsplit("/", 1)[-1] in keys


def _is_mermaid_code(node: dict[str, Any]) -> bool:
    attrs = node.get("attrs") or {}
    return (
        node.get("type") == "codeBlock"
        and isinstance(attrs, dict)
        and str(attrs.get("language") or "").lower() == "mermaid"
    )


def _params(node: dict[str, Any], name: str) -> dict[str, Any] | None:
    attrs = node.get("attrs")
    parameters = attrs.get("parameters") if isinstance(attrs, dict) else None
    found = parameters.get(name) if isinstance(parameters, dict) else None
    return found if isinstance(found, dict) else None


def _numbered(macro_params: dict[str, Any]) -> list[str] | None:
    keys = [key for key in macro_params if _DIGITS.match(key)]
    if not keys:
        return None
    values = []
    for key in sorted(keys, key=int):
        entry = macro_params[key]
        if not isinstance(entry, dict) or not isinstance(entry.get("value"), str):
            return None
        values.append(str(entry["value"]))
    return values


def _nested_code(node: dict[str, Any]) -> adf.Path | None:
    if node.get("type") != "bodiedExtension":
        return None
    for path, child in adf.iter_nodes({"content": node.get("content") or []}):
        if child.get("type") == "codeBlock":
            return path
    return None


def _macro_source(node: dict[str, Any]) -> tuple[str, str, str | None]:
    """(format, source, key) of a Mermaid macro."""
    macro_params = _params(node, "macroParams")
    if macro_params is not None:
        for key in SOURCE_KEYS:
            entry = macro_params.get(key)
            if isinstance(entry, dict) and isinstance(entry.get("value"), str):
                return "macro_param", str(entry["value"]), key
        chunks = _numbered(macro_params)
        if chunks is not None:
            return "indexed", "".join(chunks), None
    guest = _params(node, "guestParams")
    if guest is not None:
        for key in SOURCE_KEYS:
            if isinstance(guest.get(key), str):
                return "forge_param", str(guest[key]), key
    nested = _nested_code(node)
    if nested is not None:
        return "nested_code_block", adf.text_of(adf.node_at(node, nested)), None
    return "external", "", None


def find_diagrams(doc: dict[str, Any], macro_keys: Iterable[str]) -> list[Diagram]:
    """Every Mermaid diagram in document order (a macro's own body is not searched again)."""
    keys = _norm_keys(macro_keys)
    found: list[Diagram] = []

    def walk(nodes: list[Any], prefix: adf.Path) -> None:
        for index, node in enumerate(nodes):
            if not isinstance(node, dict):
                continue
            path = (*prefix, index)
            raw_attrs = node.get("attrs")
            attrs: dict[str, Any] = raw_attrs if isinstance(raw_attrs, dict) else {}
            local_id = attrs.get("localId") if isinstance(attrs.get("localId"), str) else None
            if is_mermaid_macro(node, keys):
                fmt, source, key = _macro_source(node)
                extension_key = str(attrs["extensionKey"])
                found.append(Diagram(len(found), path, fmt, source, extension_key, local_id, key))
                continue
            if _is_mermaid_code(node):
                found.append(
                    Diagram(len(found), path, "code_block", adf.text_of(node), None, local_id)
                )
                continue
            children = node.get("content")
            if isinstance(children, list):
                walk(children, path)

    walk(doc.get("content") or [], ())
    return found


def _code_content(old: list[Any] | None, source: str) -> list[Any]:
    """A codeBlock's new content: the first text node reused (keeping its keys) or a new one."""
    if not source:
        return []  # ADF forbids empty text nodes
    for child in old or []:
        if isinstance(child, dict) and child.get("type") == "text":
            reused = copy.deepcopy(child)
            reused["text"] = source
            return [reused]
    return [{"type": "text", "text": source}]


def _rechunked(params: dict[str, Any], source: str) -> dict[str, Any]:
    """`params` with `source` split over its numbered keys, each chunk where one was.

    Chunk n goes to the n-th numbered key (in number order) at that key's place;
    every other parameter keeps its place. A longer source continues in new
    numbers right after the last numbered key; a shorter one leaves the surplus
    numbered keys empty, so no key moves or vanishes.
    """
    chunks = _numbered(params) or []
    size = max((len(chunk) for chunk in chunks), default=0) or _DEFAULT_CHUNK
    pieces = [source[i : i + size] for i in range(0, len(source), size)]
    numbered = sorted((k for k in params if _DIGITS.match(k)), key=int)
    pieces += [""] * (len(numbered) - len(pieces))
    rank = {key: n for n, key in enumerate(numbered)}
    last_slot = max(i for i, k in enumerate(params) if _DIGITS.match(k))
    rebuilt: dict[str, Any] = {}
    for position, (key, value) in enumerate(params.items()):
        if key not in rank:
            rebuilt[key] = value
            continue
        entry = copy.deepcopy(value)
        entry["value"] = pieces[rank[key]]
        rebuilt[key] = entry
        if position == last_slot:  # the chunks beyond the old ones follow the last slot
            template = params[numbered[-1]]
            for offset, piece in enumerate(pieces[len(numbered) :], start=1):
                extra = copy.deepcopy(template)
                extra["value"] = piece
                rebuilt[str(int(numbered[-1]) + offset)] = extra
    return rebuilt


def _replaced(node: dict[str, Any], diagram: Diagram, source: str) -> dict[str, Any]:
    new = copy.deepcopy(node)
    if diagram.fmt == "code_block":
        new["content"] = _code_content(new.get("content"), source)
    elif diagram.fmt == "macro_param":
        new["attrs"]["parameters"]["macroParams"][diagram.key]["value"] = source
    elif diagram.fmt == "forge_param":
        new["attrs"]["parameters"]["guestParams"][diagram.key] = source
    elif diagram.fmt == "indexed":
        params = new["attrs"]["parameters"]["macroParams"]
        new["attrs"]["parameters"]["macroParams"] = _rechunked(params, source)
    elif diagram.fmt == "nested_code_block":
        inner = _nested_code(new)
        assert inner is not None
        code = adf.node_at(new, inner)
        code["content"] = _code_content(code.get("content"), source)
    else:
        raise MermaidGuardError(
            f"{diagram.label()} keeps its source outside the page (e.g. as an attachment); "
            "agent-team cannot edit it. Edit it in Confluence, or add the app's parameter "
            "format to agent-team"
        )
    return new


def _set_node(doc: dict[str, Any], path: adf.Path, node: dict[str, Any]) -> None:
    parent = adf.node_at(doc, path[:-1])
    parent["content"][path[-1]] = node


def _mermaid_code_block(source: str) -> dict[str, Any]:
    return {
        "type": "codeBlock",
        "attrs": {"language": "mermaid"},
        "content": _code_content(None, source),
    }


def _apply_one(
    doc: dict[str, Any], op: dict[str, Any], keys: frozenset[str], result: EditResult
) -> None:
    kind = op.get("op")
    source = op.get("source")
    if not isinstance(source, str):
        raise MermaidGuardError(f"operation {kind!r} has no `source` text")
    if kind == "replace":
        diagrams = find_diagrams(doc, keys)
        index = op.get("index")
        if not isinstance(index, int) or not 0 <= index < len(diagrams):
            raise MermaidGuardError(
                f"there is no Mermaid diagram number {index!r} to replace "
                f"(the page has {len(diagrams)}); nothing was written"
            )
        diagram = diagrams[index]
        expect = op.get("expect")
        if expect is not None and expect != diagram.source:
            raise MermaidGuardError(
                f"{diagram.label()} changed since the edit was drafted; the edit no longer "
                "applies cleanly. Revise the task so the change is drafted again"
            )
        original = adf.node_at(doc, diagram.path)
        _set_node(doc, diagram.path, _replaced(original, diagram, source))
        result.undo.append({"kind": "restore", "path": list(diagram.path), "node": original})
    elif kind == "insert_after_heading":
        wanted = " ".join(str(op.get("heading") or "").split()).lower()
        for path, node in adf.iter_nodes(doc):
            text = adf.heading_text(node)
            if text is not None and " ".join(text.split()).lower() == wanted:
                parent = adf.node_at(doc, path[:-1])
                parent["content"].insert(path[-1] + 1, _mermaid_code_block(source))
                result.undo.append(
                    {"kind": "remove", "parent": list(path[:-1]), "index": path[-1] + 1}
                )
                result.inserts += 1
                return
        raise MermaidGuardError(
            f"the page has no heading {op.get('heading')!r} to insert the diagram after; "
            "nothing was written"
        )
    else:
        raise MermaidGuardError(f"unknown Mermaid operation {kind!r}")


def apply_ops(
    doc: dict[str, Any], ops: Sequence[dict[str, Any]], macro_keys: Iterable[str]
) -> EditResult:
    """Apply operations to a copy of `doc` (the original is never changed)."""
    keys = _norm_keys(macro_keys)
    result = EditResult(doc=copy.deepcopy(doc))
    for op in ops:
        _apply_one(result.doc, op, keys, result)
    return result


def revert(doc: dict[str, Any], undo: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Undo an edit on a copy of `doc`, last operation first."""
    reverted = copy.deepcopy(doc)
    for step in reversed(undo):
        try:
            if step["kind"] == "restore":
                _set_node(reverted, tuple(step["path"]), copy.deepcopy(step["node"]))
            else:
                parent = adf.node_at(reverted, tuple(step["parent"]))
                del parent["content"][step["index"]]
        except (KeyError, IndexError, TypeError):
            break  # the proposed document lost the node: the comparison reports it
    return reverted


def first_difference(a: Any, b: Any, at: str = "doc") -> str | None:
    """Where two JSON values first differ (a readable path), or None if they are equal."""
    if type(a) is not type(b):
        return at
    if isinstance(a, dict):
        if list(a) != list(b):
            missing = [k for k in a if k not in b]
            extra = [k for k in b if k not in a]
            detail = f" (missing {missing})" if missing else f" (added {extra})" if extra else ""
            return f"{at} keys{detail or ' (order)'}"
        for key in a:
            found = first_difference(a[key], b[key], f"{at}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list):
        for index, (x, y) in enumerate(zip(a, b, strict=False)):
            found = first_difference(x, y, f"{at}[{index}]")
            if found:
                return found
        return f"{at} length {len(a)} -> {len(b)}" if len(a) != len(b) else None
    return None if a == b else at


_SOURCE = "<mermaid source>"


def _without_source(node: dict[str, Any], keys: frozenset[str]) -> dict[str, Any]:
    """A copy of a diagram node with only its Mermaid source fields set to a placeholder.

    Keys keep their places, so comparing two of these byte for byte (key order
    included) shows whether an edit changed anything but the source. Numbered
    chunks (`indexed`) may grow or shrink in number: each run of numbered keys
    becomes one placeholder, holding its entries without their values.
    """
    out = copy.deepcopy(node)
    if is_mermaid_macro(out, keys):
        fmt, _, key = _macro_source(out)
        if fmt == "macro_param":
            out["attrs"]["parameters"]["macroParams"][key]["value"] = _SOURCE
        elif fmt == "forge_param":
            out["attrs"]["parameters"]["guestParams"][key] = _SOURCE
        elif fmt == "indexed":
            params = out["attrs"]["parameters"]["macroParams"]
            normal: dict[str, Any] = {}
            run: list[Any] = []
            for name, value in params.items():
                if not _DIGITS.match(name):
                    run = []
                    normal[name] = value
                    continue
                entry = {k: v for k, v in value.items() if k != "value"}
                if not run:
                    normal[f"{_SOURCE} {len(normal)}"] = run
                if not run or run[-1] != entry:
                    run.append(entry)
            out["attrs"]["parameters"]["macroParams"] = normal
        elif fmt == "nested_code_block":
            inner = _nested_code(out)
            assert inner is not None
            adf.node_at(out, inner)["content"] = _SOURCE
    elif _is_mermaid_code(out):
        out["content"] = _SOURCE
    return out


def _lossy_edit(
    proposed: dict[str, Any], undo: Sequence[dict[str, Any]], keys: frozenset[str]
) -> str | None:
    """Where an edited node lost or changed more than its source, or None.

    The undo restores whole nodes, so the revert diff alone cannot see inside
    the edited node; this compares each edited node with its original, both
    with the source fields masked, undoing the steps last first as `revert` does.
    """
    doc = copy.deepcopy(proposed)
    for step in reversed(undo):
        try:
            if step["kind"] == "restore":
                path = tuple(step["path"])
                original = step["node"]
                edited = adf.node_at(doc, path)
                a, b = _without_source(original, keys), _without_source(edited, keys)
                if adf.dumps(a) != adf.dumps(b):
                    at = "doc" + "".join(f".content[{i}]" for i in path)
                    return first_difference(a, b, at) or f"{at} (serialisation)"
                _set_node(doc, path, copy.deepcopy(original))
            else:
                del adf.node_at(doc, tuple(step["parent"]))["content"][step["index"]]
        except (KeyError, IndexError, TypeError):
            return None  # the proposed document lost the node: the revert diff reports it
    return None


def check_guards(
    original: dict[str, Any],
    proposed: dict[str, Any],
    undo: Sequence[dict[str, Any]],
    inserts: int,
    macro_keys: Iterable[str],
) -> None:
    """Refuse `proposed` unless it is `original` plus exactly the recorded operations.

    Raises:
        MermaidGuardError: the macro count or the revert diff is wrong.
    """
    before = len(find_diagrams(original, macro_keys))
    after = len(find_diagrams(proposed, macro_keys))
    if after != before + inserts:
        raise MermaidGuardError(
            f"macro-count guard: the page had {before} Mermaid diagram(s) and the edit adds "
            f"{inserts}, but the result has {after}; a diagram would be lost or duplicated. "
            "Nothing was written"
        )
    reverted = revert(proposed, undo)
    where = _lossy_edit(proposed, undo, _norm_keys(macro_keys))
    if where is None and adf.dumps(reverted) != adf.dumps(original):
        where = first_difference(original, reverted) or "doc (serialisation)"
    if where is not None:
        raise MermaidGuardError(
            f"revert-diff guard: undoing the edit does not give back the original page "
            f"(first difference at {where}); the edit would change more than the diagram. "
            "Nothing was written"
        )


def safe_edit(
    doc: dict[str, Any], ops: Sequence[dict[str, Any]], macro_keys: Iterable[str]
) -> EditResult:
    """Apply `ops` and run both guards on the result."""
    keys = _norm_keys(macro_keys)
    result = apply_ops(doc, ops, keys)
    check_guards(doc, result.doc, result.undo, result.inserts, keys)
    return result


def describe_ops(
    doc: dict[str, Any], ops: Sequence[dict[str, Any]], macro_keys: Iterable[str]
) -> str:
    """A short diff summary of the operations for the approval question."""
    keys = _norm_keys(macro_keys)
    diagrams = find_diagrams(doc, keys)
    lines: list[str] = []
    for op in ops:
        new = str(op.get("source", "")).splitlines()
        if op.get("op") == "replace" and isinstance(op.get("index"), int):
            index = int(op["index"])
            label = diagrams[index].label() if index < len(diagrams) else f"diagram {index + 1}"
            old = diagrams[index].source.splitlines() if index < len(diagrams) else []
            lines.append(f"replace the source of {label}:")
            diff = difflib.unified_diff(old, new, "before", "after", lineterm="", n=1)
            lines += [f"    {line}" for line in diff]
        else:
            lines.append(
                f"insert a new Mermaid diagram ({len(new)} lines) after heading "
                f"{op.get('heading')!r}:"
            )
            lines += [f"    + {line}" for line in new]
    lines.append(f"everything else on the page is unchanged ({len(diagrams)} diagram(s) before)")
    return "\n".join(lines)
