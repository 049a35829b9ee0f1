"""How `agent-team --help` reads: the commands in groups, in the order people need them.

Why: typer lists commands in the order they were registered and every
option's type after it, so the help began with `inbox` and `migrate`, showed
`<bool>` after each flag (a flag takes no value) and cut a long list of
choices mid-word. Here, in one table, each top-level command has its group
and its place (`PANELS`); `OrderedGroup` applies it, and `hide_flag_types`
leaves a flag's type out. Choices too long for the type column are spelled
out in the option's help instead (see `tasks --status`).
"""

from __future__ import annotations

from typing import Any

import typer.core

__all__ = ["PANELS", "OrderedGroup", "hide_flag_types"]

# Group -> its commands, in the order they are shown; the groups in this order too.
PANELS: dict[str, tuple[str, ...]] = {
    "Tasks": (
        "submit",
        "tasks",
        "show",
        "questions",
        "answer",
        "inbox",
        "note",
        "retry",
        "cancel",
        "reopen",
    ),
    "Running agent-team": ("daemon", "daemons", "tick", "doctor", "budget", "intake"),
    "People, automations and the audit log": ("people", "key", "automation", "audit"),
    "The ledger": ("migrate", "backup", "ledger", "schema", "migrate-to-postgres"),
}
_PLACE = {
    name: (panel, index) for panel, names in PANELS.items() for index, name in enumerate(names)
}
_PANEL_ORDER = {panel: index for index, panel in enumerate(PANELS)}


class OrderedGroup(typer.core.TyperGroup):
    """The root command group: commands listed by `PANELS`, each in its panel."""

    def list_commands(self, ctx: Any) -> list[str]:  # typer's own (vendored) click Context
        names = super().list_commands(ctx)
        for name in names:
            place = _PLACE.get(name)
            command = self.commands.get(name)
            if place is not None and command is not None:
                command.rich_help_panel = place[0]  # type: ignore[attr-defined]

        def key(name: str) -> tuple[int, int, str]:
            panel, index = _PLACE.get(name, ("", len(_PLACE)))
            return (_PANEL_ORDER.get(panel, len(PANELS)), index, name)

        return sorted(names, key=key)


_shown_type = typer.core.TyperOption.display_type_rich


def _type_unless_flag(self: typer.core.TyperOption, ctx: Any) -> str | None:
    """An option's type for the help, or None for a flag (it takes no value to type)."""
    if self.is_flag and self.metavar is None:
        return None
    return _shown_type(self, ctx)


def hide_flag_types() -> None:
    """Leave `<bool>` out after flags in every help page (typer shows one for each)."""
    typer.core.TyperOption.display_type_rich = _type_unless_flag  # type: ignore[method-assign]
