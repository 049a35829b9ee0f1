"""The ADF Mermaid editor: finds every format, edits only what it names, guards refuse the rest."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_team.config import DEFAULT_MERMAID_MACROS
from agent_team.exceptions import ConfluenceRefusedError, ParkingError
from agent_team.integrations.confluence import adf, mermaid
from agent_team.integrations.confluence.mermaid import MermaidGuardError

FIXTURES = Path(__file__).parents[3] / "fixtures" / "adf"
KEYS = DEFAULT_MERMAID_MACROS


def load(name: str) -> tuple[str, dict[str, Any]]:
    raw = (FIXTURES / name).read_text(encoding="utf-8")
    return raw, adf.parse(raw)


def test_finds_every_marketplace_format_and_skips_unrelated_macros() -> None:
    _, doc = load("mixed_macros.json")
    found = mermaid.find_diagrams(doc, KEYS)
    assert [(d.fmt, d.local_id) for d in found] == [
        ("macro_param", "mermaid-connect"),
        ("nested_code_block", "mermaid-bodied"),
        ("forge_param", "mermaid-forge"),
        ("indexed", "mermaid-indexed"),
        ("code_block", "code-mermaid"),
        ("external", "mermaid-attachment"),
    ]
    assert found[0].source == "graph TD\n  A-->B"
    assert found[2].extension_key is not None and found[2].extension_key.endswith(
        "/mermaid-diagram"
    )
    assert found[3].source == "flowchart LR\n  X-->Y\n  Y-->Z"
    # the python code block inside the info panel, the toc and the jira macro are not diagrams
    assert mermaid.find_diagrams(doc, ["toc"])[0].local_id == "toc-local"
    # with no macro keys only the mermaid code blocks count (the bare one and the nested one)
    assert [d.fmt for d in mermaid.find_diagrams(doc, [])] == ["code_block", "code_block"]


def test_fixture_round_trips_byte_for_byte() -> None:
    raw, doc = load("mixed_macros.json")
    assert adf.dumps(doc) == raw


@pytest.mark.parametrize("index", [0, 1, 2, 3, 4])
def test_replace_changes_only_that_diagram_byte_for_byte(index: int) -> None:
    raw, doc = load("mixed_macros.json")
    before = mermaid.find_diagrams(doc, KEYS)
    new_source = 'flowchart TD\n  new["ünïcode ✓"] --> done'
    op = {"op": "replace", "index": index, "source": new_source, "expect": before[index].source}
    result = mermaid.safe_edit(doc, [op], KEYS)

    after = mermaid.find_diagrams(result.doc, KEYS)
    assert [d.source for d in after] == [
        new_source if d.index == index else d.source for d in before
    ]
    assert [d.local_id for d in after] == [d.local_id for d in before]
    assert adf.dumps(doc) == raw, "the original document is never changed"
    # every top-level node other than the edited one serialises to the same bytes
    top = before[index].path[0]
    for position, (old, new) in enumerate(zip(doc["content"], result.doc["content"], strict=True)):
        if position != top:
            assert adf.dumps(new) == adf.dumps(old)
    assert adf.dumps(mermaid.revert(result.doc, result.undo)) == raw


def test_indexed_source_is_rechunked_in_place_keeping_other_params() -> None:
    _, doc = load("mixed_macros.json")
    long_source = "flowchart LR\n" + "\n".join(f"  n{i} --> n{i + 1}" for i in range(10))
    result = mermaid.safe_edit(doc, [{"op": "replace", "index": 3, "source": long_source}], KEYS)
    params = adf.node_at(result.doc, mermaid.find_diagrams(doc, KEYS)[3].path)["attrs"][
        "parameters"
    ]["macroParams"]
    numbered = [k for k in params if k.isdigit()]
    assert numbered == [str(i) for i in range(len(numbered))] and len(numbered) > 3
    assert list(params)[-1] == "title" and params["title"] == {"value": "chunked"}
    assert mermaid.find_diagrams(result.doc, KEYS)[3].source == long_source


def test_insert_after_heading_adds_one_diagram() -> None:
    raw, doc = load("no_diagram.json")
    result = mermaid.safe_edit(
        doc,
        [{"op": "insert_after_heading", "heading": "  overview ", "source": "graph TD\nA"}],
        KEYS,
    )
    assert result.inserts == 1
    assert result.doc["content"][1] == {
        "type": "codeBlock",
        "attrs": {"language": "mermaid"},
        "content": [{"type": "text", "text": "graph TD\nA"}],
    }
    assert adf.dumps(mermaid.revert(result.doc, result.undo)) == raw


def test_guard_refuses_a_dropped_macro() -> None:
    _, doc = load("mixed_macros.json")
    result = mermaid.apply_ops(doc, [{"op": "replace", "index": 0, "source": "graph LR\nQ"}], KEYS)
    lossy = copy.deepcopy(result.doc)
    del lossy["content"][8]  # the Forge macro vanishes from the proposed page
    with pytest.raises(MermaidGuardError, match=r"macro-count guard.*had 6.*has 5"):
        mermaid.check_guards(doc, lossy, result.undo, result.inserts, KEYS)


def test_guard_refuses_a_lossy_edit() -> None:
    _, doc = load("mixed_macros.json")
    result = mermaid.apply_ops(doc, [{"op": "replace", "index": 4, "source": "pie\n  b: 2"}], KEYS)
    lossy = copy.deepcopy(result.doc)
    del lossy["content"][1]["attrs"]["localId"]  # an unrelated paragraph loses its localId
    with pytest.raises(MermaidGuardError, match=r"revert-diff guard.*content\[1\]\.attrs"):
        mermaid.check_guards(doc, lossy, result.undo, result.inserts, KEYS)
    reworded = copy.deepcopy(result.doc)
    reworded["content"][-1]["content"][0]["text"] = "The end!"
    with pytest.raises(MermaidGuardError, match="revert-diff guard"):
        mermaid.check_guards(doc, reworded, result.undo, result.inserts, KEYS)


def test_refusals_park_the_task_with_a_reason() -> None:
    _, doc = load("mixed_macros.json")
    cases = [
        ({"op": "replace", "index": 9, "source": "x"}, "no Mermaid diagram number 9"),
        ({"op": "replace", "index": 5, "source": "x"}, "outside the page"),
        ({"op": "replace", "index": 0, "source": "x", "expect": "old"}, "changed since"),
        ({"op": "insert_after_heading", "heading": "Nope", "source": "x"}, "no heading 'Nope'"),
        ({"op": "delete", "source": "x"}, "unknown Mermaid operation"),
    ]
    for op, reason in cases:
        with pytest.raises(MermaidGuardError, match=reason) as caught:
            mermaid.safe_edit(doc, [op], KEYS)
        assert isinstance(caught.value, ParkingError)
        assert caught.value.parked_reason == "confluence_refused"


def test_describe_ops_reads_like_a_diff() -> None:
    _, doc = load("mixed_macros.json")
    text = mermaid.describe_ops(
        doc, [{"op": "replace", "index": 0, "source": "graph TD\n  A-->C"}], KEYS
    )
    assert "replace the source of diagram 1 (macro mermaid-macro, localId mermaid-connect)" in text
    assert "-  A-->B" in text and "+  A-->C" in text


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"type": "doc", "content": [', "not valid JSON"),
        ('{"type": "paragraph", "content": []}', "not an ADF `doc`"),
        ('{"type": "doc", "content": {}}', "no `content` list"),
        ('{"type": "doc", "content": [{"content": []}]}', "without a string `type`"),
        ('{"type": "doc", "content": [{"type": "p", "content": 3}]}', "is not a list"),
    ],
)
def test_invalid_adf_is_refused(text: str, reason: str) -> None:
    with pytest.raises(ConfluenceRefusedError, match=reason):
        adf.parse(text)


# -- property: replace-then-revert gives back the original -------------------------------------

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)
_local_id = st.uuids().map(str)


def _leaf() -> st.SearchStrategy[dict[str, Any]]:
    text_node = st.builds(lambda s: {"type": "text", "text": s}, _text)
    paragraph = st.builds(
        lambda parts, lid: {"type": "paragraph", "attrs": {"localId": lid}, "content": parts},
        st.lists(text_node, max_size=3),
        _local_id,
    )
    heading = st.builds(
        lambda s, level: {
            "type": "heading",
            "attrs": {"level": level},
            "content": [{"type": "text", "text": s}],
        },
        _text,
        st.integers(1, 6),
    )
    other_code = st.builds(
        lambda s, lang: {
            "type": "codeBlock",
            "attrs": {"language": lang},
            "content": [{"type": "text", "text": s}],
        },
        _text,
        st.sampled_from(["python", "sql", "text"]),
    )
    mermaid_code = st.builds(
        lambda s, lid: {
            "type": "codeBlock",
            "attrs": {"language": "mermaid", "localId": lid},
            "content": [{"type": "text", "text": s}],
        },
        _text,
        _local_id,
    )
    connect = st.builds(
        lambda s, key, lid: {
            "type": "extension",
            "attrs": {
                "extensionKey": key,
                "extensionType": "com.atlassian.confluence.macro.core",
                "parameters": {"macroParams": {"code": {"value": s}, "z": {"value": "1"}}},
                "localId": lid,
            },
        },
        _text,
        st.sampled_from(list(KEYS)),
        _local_id,
    )
    forge = st.builds(
        lambda s, lid: {
            "type": "extension",
            "attrs": {
                "extensionKey": "app/env/static/mermaid-diagram",
                "parameters": {"guestParams": {"source": s}, "localId": lid},
                "localId": lid,
            },
        },
        _text,
        _local_id,
    )
    indexed = st.builds(
        lambda parts, lid: {
            "type": "extension",
            "attrs": {
                "extensionKey": "mermaid",
                "parameters": {
                    "macroParams": {
                        **{str(i): {"value": p} for i, p in enumerate(parts)},
                        "t": {"value": "x"},
                    }
                },
                "localId": lid,
            },
        },
        st.lists(_text, min_size=1, max_size=3),
        _local_id,
    )
    unrelated = st.builds(
        lambda lid: {
            "type": "extension",
            "attrs": {"extensionKey": "toc", "localId": lid, "parameters": {"macroParams": {}}},
        },
        _local_id,
    )
    return st.one_of(
        paragraph, heading, other_code, mermaid_code, connect, forge, indexed, unrelated
    )


def _nested(children: st.SearchStrategy[list[dict[str, Any]]]) -> st.SearchStrategy[Any]:
    bodied_mermaid = st.builds(
        lambda s, lid: {
            "type": "bodiedExtension",
            "attrs": {"extensionKey": "mermaid-cloud", "localId": lid},
            "content": [
                {
                    "type": "codeBlock",
                    "attrs": {"language": "mermaid"},
                    "content": [{"type": "text", "text": s}],
                }
            ],
        },
        _text,
        _local_id,
    )
    panel = st.builds(
        lambda content, lid: {
            "type": "bodiedExtension",
            "attrs": {"extensionKey": "info", "localId": lid},
            "content": content,
        },
        children,
        _local_id,
    )
    quote = st.builds(lambda content: {"type": "blockquote", "content": content}, children)
    return st.one_of(bodied_mermaid, panel, quote)


_blocks = st.recursive(_leaf(), lambda inner: _nested(st.lists(inner, max_size=4)), max_leaves=25)
_docs = st.builds(
    lambda content: {"type": "doc", "version": 1, "content": content},
    st.lists(_blocks, max_size=8),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=_docs, data=st.data())
def test_replace_then_revert_returns_the_original(doc: dict[str, Any], data: st.DataObject) -> None:
    raw = adf.dumps(doc)
    diagrams = mermaid.find_diagrams(doc, KEYS)
    ops = [
        {"op": "replace", "index": d.index, "source": data.draw(st.text(max_size=40))}
        for d in diagrams
        if data.draw(st.booleans())
    ]
    result = mermaid.safe_edit(doc, ops, KEYS)  # both guards pass
    assert adf.dumps(doc) == raw
    assert adf.dumps(mermaid.revert(result.doc, result.undo)) == raw
    assert json.loads(adf.dumps(mermaid.revert(result.doc, result.undo))) == doc
    after = mermaid.find_diagrams(result.doc, KEYS)
    assert len(after) == len(diagrams)
    changed = {int(op["index"]): op["source"] for op in ops}
    assert [d.source for d in after] == [changed.get(d.index, d.source) for d in diagrams]


# -- the revert-diff guard looks inside the edited node -----------------------------------------


def _lossy(drop: Any) -> Any:
    """A `_replaced` that edits the source but also loses something else of the node."""
    real = mermaid._replaced

    def replaced(node: dict[str, Any], diagram: mermaid.Diagram, source: str) -> dict[str, Any]:
        new = real(node, diagram, source)
        drop(new)
        return new

    return replaced


@pytest.mark.parametrize(
    ("index", "drop", "where"),
    [
        (0, lambda n: n["attrs"].pop("localId"), "localId"),  # Connect macro
        (0, lambda n: n["attrs"]["parameters"]["macroParams"].pop("theme"), "macroParams"),
        (0, lambda n: n["attrs"]["parameters"].pop("macroMetadata"), "parameters"),
        (1, lambda n: n["attrs"].update(layout="default"), "layout"),  # bodied, nested code
        (2, lambda n: n["attrs"]["parameters"].pop("localId"), "parameters"),  # Forge
        (3, lambda n: n["attrs"]["parameters"]["macroParams"].pop("title"), "macroParams"),
        (4, lambda n: n["attrs"].pop("localId"), "localId"),  # code block
        (4, lambda n: n.update(attrs=dict(reversed(n["attrs"].items()))), "attrs"),  # key order
    ],
)
def test_guard_refuses_a_lossy_replace_inside_the_edited_node(
    monkeypatch: pytest.MonkeyPatch, index: int, drop: Any, where: str
) -> None:
    _, doc = load("mixed_macros.json")
    monkeypatch.setattr(mermaid, "_replaced", _lossy(drop))
    op = {"op": "replace", "index": index, "source": "graph LR\n  Q-->R"}
    with pytest.raises(MermaidGuardError, match=rf"revert-diff guard.*{where}"):
        mermaid.safe_edit(doc, [op], KEYS)


def _indexed_doc(params: dict[str, Any]) -> dict[str, Any]:
    attrs = {"extensionKey": "mermaid", "parameters": {"macroParams": params}, "localId": "ix"}
    return {"type": "doc", "version": 1, "content": [{"type": "extension", "attrs": attrs}]}


@pytest.mark.parametrize(
    ("source", "keys"),
    [
        ("aaaabbbbcccc", ["width", "0", "title", "1", "2", "theme"]),  # more chunks
        ("aaaabbbb", ["width", "0", "title", "1", "theme"]),  # as many
        ("aaa", ["width", "0", "title", "1", "theme"]),  # fewer: the slots stay, empty
    ],
)
def test_indexed_chunks_go_where_the_digit_keys_were(source: str, keys: list[str]) -> None:
    params = {
        "width": {"value": "600"},
        "0": {"value": "flow"},
        "title": {"value": "t"},
        "1": {"value": "char"},
        "theme": {"value": "dark"},
    }
    doc = _indexed_doc(params)
    result = mermaid.safe_edit(doc, [{"op": "replace", "index": 0, "source": source}], KEYS)
    new = result.doc["content"][0]["attrs"]["parameters"]["macroParams"]
    assert list(new) == keys
    assert {k: new[k] for k in ("width", "title", "theme")} == {
        k: params[k] for k in ("width", "title", "theme")
    }
    assert mermaid.find_diagrams(result.doc, KEYS)[0].source == source
    assert adf.dumps(mermaid.revert(result.doc, result.undo)) == adf.dumps(doc)
