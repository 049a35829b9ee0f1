"""One path for state-changing requests (docs/architecture.md §8): `TaskRequests`.

Every surface submits, answers, reopens, retries and cancels through
`requests.task_requests.TaskRequests`; the ledger functions behind it
(`requests.inbox`) are the request side's own, and only the coordinator (which
builds the `TaskRequests` of the daemon) sets the worker's wake-up.
"""

from __future__ import annotations

import ast

from tests.architecture.imports import PACKAGE, module_files, read_imports

INBOX = "agent_team.requests.inbox"


def test_only_the_request_side_writes_requests_to_the_ledger() -> None:
    outside = [
        edge
        for edge in read_imports()
        if edge.imported == INBOX and not edge.importer.startswith("agent_team.requests.")
    ]
    assert not outside, "go through TaskRequests, not requests.inbox:\n" + "\n".join(
        f"  {edge.where()}: {edge.importer}" for edge in outside
    )


def _wakes(tree: ast.AST) -> list[int]:
    """Lines of `<something>.wake.set()` calls."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "set"
        and isinstance(node.func.value, ast.Attribute)
        and node.func.value.attr == "wake"
    ]


def test_the_reader_finds_the_coordinators_own_wake_ups() -> None:
    facade = module_files()["agent_team.coordinator.facade"]
    assert _wakes(ast.parse(facade.read_text(encoding="utf-8")))


def test_nothing_outside_the_coordinator_wakes_the_worker() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}"
        for module, path in module_files().items()
        if not module.startswith("agent_team.coordinator")
        for line in _wakes(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not found, "wake the worker through TaskRequests or the coordinator:\n" + "\n".join(
        f"  {where}" for where in found
    )


# The ledger writes behind the requests: only `requests.inbox` (and `db` itself) calls them.
_REQUEST_WRITES = {"create_task", "answer_question", "reopen_for_task", "requeue_task"}


def test_no_surface_writes_a_request_to_the_ledger_around_task_requests() -> None:
    found = [
        f"  {path.relative_to(PACKAGE.parent)}:{node.lineno}: {node.func.attr}"
        for module, path in module_files().items()
        if not module.startswith(("agent_team.db", "agent_team.requests."))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _REQUEST_WRITES
    ]
    assert not found, "go through TaskRequests:\n" + "\n".join(found)
