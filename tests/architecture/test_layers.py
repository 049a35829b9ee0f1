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
    assert ("agent_team.service.doctor", "agent_team.integrations.registry") in edges
    assert ("agent_team.integrations.base", "agent_team.coordinator") in edges
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


def test_the_architecture_map_names_every_package_and_top_level_module() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    top = sorted(
        path.name
        for path in PACKAGE.iterdir()
        if (path.is_dir() and (path / "__init__.py").exists())
        or (path.suffix == ".py" and path.name != "__init__.py")
    )
    missing = [name for name in top if not re.search(rf"\b{re.escape(name)}\b", text)]
    assert not missing, f"docs/architecture.md §7 does not name: {missing}"


def test_the_architecture_map_lists_the_layers_in_this_order() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text[text.index("## 8.") :]
    positions = [section.find(f"`{entries[0]}`") for entries in LAYERS]
    assert all(p >= 0 for p in positions), "docs/architecture.md §8 must name every layer"
    assert positions[1:] == sorted(positions[1:]), "§8 lists the layers out of order"


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
