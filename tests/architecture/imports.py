"""Every import of `agent_team` read from the source with `ast`, and the layers they must follow.

Why read the source and not `sys.modules`: an import inside a function or under
`TYPE_CHECKING` runs late or never, yet it is still a dependency a reader must
follow and a cycle waiting for the first caller. So every `import` statement
counts, wherever it stands.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = [
    "LAYERS",
    "Import",
    "cycles",
    "layer_of",
    "module_files",
    "read_imports",
]

PACKAGE = Path(__file__).resolve().parents[2] / "agent_team"

# Bottom to top (docs/architecture.md §8): a module may import its own layer or any below.
# An entry names a module or a package (with everything under it); the longest entry that
# names a module decides its layer.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("agent_team", "agent_team.exceptions", "agent_team.task_model"),
    ("agent_team.common",),
    ("agent_team.db",),
    ("agent_team.config",),
    ("agent_team.health",),
    (
        "agent_team.models",
        "agent_team.builders",
        "agent_team.transports",
        # The Confluence lane's service modules: the lane's nodes write pages through them.
        "agent_team.integrations.confluence.adf",
        "agent_team.integrations.confluence.client",
        "agent_team.integrations.confluence.lane",
        "agent_team.integrations.confluence.mermaid",
        "agent_team.integrations.confluence.pages",
        "agent_team.integrations.confluence.settings",
    ),
    ("agent_team.requests",),
    ("agent_team.reports",),
    ("agent_team.nodes", "agent_team.graph", "agent_team.automations"),
    ("agent_team.coordinator",),
    ("agent_team.integrations", "agent_team.dashboard"),
    ("agent_team.service",),
    ("agent_team.cli",),
)


@dataclass(frozen=True)
class Import:
    """One edge: `importer` names `imported` at `line` of its file."""

    importer: str
    imported: str
    line: int

    def where(self) -> str:
        return f"{module_files()[self.importer].relative_to(PACKAGE.parent)}:{self.line}"


@cache
def module_files() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its `__init__.py`), read once."""
    found: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _target(name: str, modules: dict[str, Path]) -> str:
    # `from agent_team.db import Ledger` names the package; `... import schema` a module.
    while name not in modules:
        name = name.rpartition(".")[0]
    return name


def _imported_names(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    if node.level:
        base = module.split(".")
        if path.name != "__init__.py":
            base.pop()
        base = base[: len(base) - (node.level - 1)]
        source = ".".join([*base, *([node.module] if node.module else [])])
    else:
        source = node.module or ""
    # `from pkg import sub` depends on the module `pkg.sub`; `from mod import name` on `mod`.
    yield from (f"{source}.{alias.name}" for alias in node.names)


@cache
def read_imports() -> tuple[Import, ...]:
    """Every edge between two of our modules, imports in functions and `TYPE_CHECKING` included.

    Parsed once per test session: every rule reads the same edges.
    """
    modules = module_files()
    edges: dict[tuple[str, str], int] = {}
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for name in _imported_names(module, path, node):
                if name.split(".")[0] != "agent_team":
                    continue
                target = _target(name, modules)
                if target != module:
                    edges.setdefault((module, target), node.lineno)
    return tuple(Import(a, b, line) for (a, b), line in sorted(edges.items()))


def layer_of(module: str) -> int:
    """The index in `LAYERS` of the longest entry that names `module` or a package above it."""
    best: tuple[int, int] | None = None
    for index, entries in enumerate(LAYERS):
        for entry in entries:
            names_it = module == entry or (entry != "agent_team" and module.startswith(entry + "."))
            if names_it and (best is None or len(entry) > best[0]):
                best = (len(entry), index)
    if best is None:
        raise LookupError(f"{module} is in no layer: add it to LAYERS and docs/architecture.md §8")
    return best[1]


def cycles(edges: Sequence[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    graph: dict[str, list[str]] = {}
    for edge in edges:
        graph.setdefault(edge.importer, []).append(edge.imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found
