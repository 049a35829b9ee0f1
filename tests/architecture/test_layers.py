"""The layer rules of docs/architecture.md §8, checked on every import of the package.

No allow-list: an import that breaks a rule is fixed by moving a name to where it
belongs, never by listing it here.
"""

from __future__ import annotations

import re

from tests.architecture.imports import (
    LAYERS,
    PACKAGE,
    Import,
    cycles,
    layer_of,
    module_files,
    read_imports,
)

ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"


def _layer_name(index: int) -> str:
    return f"{index} ({', '.join(LAYERS[index])})"


def test_the_reader_sees_imports_inside_functions_and_under_type_checking() -> None:
    # The parts this test leans on: a late import and a TYPE_CHECKING import are edges.
    edges = {(edge.importer, edge.imported) for edge in read_imports()}
    assert ("agent_team.cli.main", "agent_team.service.wiring") in edges  # inside `daemon()`
    assert ("agent_team.integrations.base", "agent_team.coordinator") in edges  # TYPE_CHECKING
    assert ("agent_team.cli.main", "agent_team.db") in edges


def test_every_module_is_in_a_layer_and_every_layer_entry_names_a_module() -> None:
    modules = module_files()
    for module in modules:
        layer_of(module)
    stale = [
        entry
        for entries in LAYERS
        for entry in entries
        if not any(m == entry or m.startswith(entry + ".") for m in modules)
    ]
    assert not stale, f"LAYERS names modules that do not exist: {stale}"


def test_no_import_runs_against_the_layers() -> None:
    upward = [edge for edge in read_imports() if layer_of(edge.imported) > layer_of(edge.importer)]
    assert not upward, "imports against the layers (docs/architecture.md §8):\n" + "\n".join(
        f"  {edge.where()}: {edge.importer} (layer {_layer_name(layer_of(edge.importer))}) "
        f"imports {edge.imported} (layer {_layer_name(layer_of(edge.imported))})"
        for edge in upward
    )


def test_no_import_cycle_between_modules() -> None:
    edges = read_imports()
    found = cycles(edges)

    def _explain(component: list[str]) -> str:
        inside = set(component)
        return "\n".join(
            f"    {edge.where()}: {edge.importer} -> {edge.imported}"
            for edge in edges
            if edge.importer in inside and edge.imported in inside
        )

    assert not found, "import cycles:\n" + "\n".join(
        f"  {' <-> '.join(component)}\n{_explain(component)}" for component in found
    )


def _is_private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split(".")[1:])


def _package(module: str) -> str:
    return module.rpartition(".")[0]


def test_no_private_module_is_imported_from_another_package() -> None:
    leaks: list[Import] = [
        edge
        for edge in read_imports()
        if _is_private(edge.imported) and _package(edge.imported) != _package(edge.importer)
    ]
    assert not leaks, "private modules used from outside their package:\n" + "\n".join(
        f"  {edge.where()}: {edge.importer} imports {edge.imported}" for edge in leaks
    )


def _section(number: int) -> str:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    start = text.index(f"\n## {number}.")
    return text[start : text.index(f"\n## {number + 1}.", start)]


def test_the_architecture_map_names_every_package_and_top_level_module() -> None:
    layout = _section(7)
    named = [
        f"{path.name}/" if path.is_dir() else path.name
        for path in sorted(PACKAGE.iterdir())
        if (path.is_dir() and (path / "__init__.py").exists())
        or (path.suffix == ".py" and path.name != "__init__.py")
    ]
    missing = [name for name in named if not re.search(rf"^\s+{re.escape(name)}", layout, re.M)]
    assert not missing, f"docs/architecture.md §7 does not list: {missing}"


def test_the_architecture_map_lists_the_layers_in_this_order() -> None:
    layers = _section(8)
    positions = [layers.find(f"`{entries[0]}`") for entries in LAYERS]
    missing = [LAYERS[i][0] for i, at in enumerate(positions) if at < 0]
    assert not missing, f"docs/architecture.md §8 does not name the layers of {missing}"
    assert positions == sorted(positions), "docs/architecture.md §8 lists the layers out of order"


def test_no_package_init_that_imports_runs_against_the_layers() -> None:
    # Importing `a.b.c` runs `a/__init__.py` and `a/b/__init__.py` first. An empty one is
    # harmless (integrations/ and confluence/ stay empty so nodes may use the lane's
    # client); one that imports our modules must sit at or below every importer.
    modules = module_files()
    importing_inits = {
        module
        for module, path in modules.items()
        if path.name == "__init__.py" and any(e.importer == module for e in read_imports())
    }
    upward = []
    for edge in read_imports():
        parts = edge.imported.split(".")
        for depth in range(2, len(parts)):
            parent = ".".join(parts[:depth])
            if parent == edge.importer or edge.importer.startswith(parent + "."):
                continue
            if parent in importing_inits and layer_of(parent) > layer_of(edge.importer):
                upward.append(f"  {edge.where()}: {edge.importer} runs {parent}/__init__.py")
    assert not upward, "package inits that import against the layers:\n" + "\n".join(upward)


def test_the_top_level_reads_at_a_glance() -> None:
    modules = [p for p in PACKAGE.glob("*.py") if p.name != "__init__.py"]
    assert len(modules) <= 5, f"agent_team/ has {len(modules)} loose modules: find them a room"


def test_each_package_says_what_lives_there() -> None:
    silent = [
        str(init.parent.relative_to(PACKAGE.parent))
        for init in PACKAGE.rglob("__init__.py")
        if not init.read_text(encoding="utf-8").lstrip().startswith(('"""', "'''"))
    ]
    assert not silent, f"packages without a docstring: {silent}"
