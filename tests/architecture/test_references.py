"""Every name of ours that the tests, the benchmarks and the entry points import resolves.

Why: moving a module leaves its old name in places no type checker reads (an
import inside a benchmark's function, a `monkeypatch.setattr("agent_team....")`
string), and they fail only when that one path runs.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
READERS = [
    *sorted((ROOT / "tests").rglob("*.py")),
    *sorted((ROOT / "bench").rglob("*.py")),
    ROOT / "daemon.py",
]
_PATCHERS = {"patch", "setattr", "delattr"}


def _resolves(dotted: str) -> bool:
    """Whether `dotted` is a module of ours, or an attribute reachable from one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                try:
                    found = importlib.import_module(f"{found.__name__}.{name}")  # type: ignore[attr-defined]
                except (ModuleNotFoundError, AttributeError):
                    return False
            else:
                found = getattr(found, name)
        return True
    return False


def _references(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "agent_team":
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and not node.level:
            module = node.module or ""
            if module.split(".")[0] == "agent_team":
                for alias in node.names:
                    yield node.lineno, f"{module}.{alias.name}"
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            in _PATCHERS
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and node.args[0].value.startswith("agent_team.")
        ):
            yield node.lineno, node.args[0].value


def test_the_reader_finds_imports_and_patch_targets() -> None:
    found = {name for _, name in _references(ROOT / "tests" / "architecture" / "imports.py")}
    assert found == set()  # it imports nothing of ours: the checker reads text
    assert _resolves("agent_team.requests.task_requests.TaskRequests")
    assert not _resolves("agent_team.inbox.submit_task")  # a module that moved


def test_every_reference_to_our_code_resolves() -> None:
    stale = [
        f"  {path.relative_to(ROOT)}:{line}: {name}"
        for path in READERS
        for line, name in _references(path)
        if not _resolves(name)
    ]
    assert not stale, "names that do not exist (moved or removed?):\n" + "\n".join(stale)
