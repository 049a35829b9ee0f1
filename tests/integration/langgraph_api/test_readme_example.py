"""README's Python example for the LangGraph SDK, run as written against a live daemon.

It once read `interrupt["value"]["description"]`, but the value is a list of one
Agent Inbox HumanInterrupt, so it failed for everyone who tried it (#31, 13).
Only the placeholders (the URL, the token, the thread id) are filled in.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from tests.integration.langgraph_api.conftest import ADA_KEY, Live

README = Path(__file__).resolve().parents[3] / "README.md"
PLACEHOLDERS = ("http://127.0.0.1:8765/langgraph", "<ada's token>", "<thread id>")


def python_example() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("**From Python**") :]
    start = section.index("```python\n") + len("```python\n")
    return section[start : section.index("\n```", start)]


def test_the_readme_python_example_lists_the_question_and_approves_the_plan(live: Live) -> None:
    task_id = live.submit(clarify=False)
    question = live.open_question(task_id)
    code = python_example()
    for placeholder in PLACEHOLDERS:
        assert placeholder in code, f"README's example no longer has {placeholder!r}"
    for placeholder, value in zip(PLACEHOLDERS, (live.url, ADA_KEY, task_id), strict=True):
        code = code.replace(placeholder, value)

    printed = io.StringIO()
    names: dict[str, object] = {}
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(code, str(README), "exec"), names)  # our own README
    finally:
        close = getattr(names.get("client"), "close", None)
        if close is not None:
            close()  # a script may leave its client open; a test may not

    assert printed.getvalue().startswith(f"{task_id} {question.question_id} ")
    assert "Review the plan" in printed.getvalue()
    assert live.task(task_id).status == "done"
