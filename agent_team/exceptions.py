"""Every error agent-team raises on purpose, in one tree.

Each message says what went wrong *and what to do*, because it is shown to an
operator as one line with no traceback.

    AgentTeamError
    ├── ConfigError                 invalid settings (CLI exit code 2)
    └── LedgerError                 anything about the SQLite ledger
        ├── SchemaTooNewError       the ledger was written by a newer agent-team
        ├── LedgerNotReadyError     a table or column the app needs is missing
        ├── LedgerBusyError         the database stayed locked past our retries
        └── LedgerInputError        bad input to a ledger call; nothing was stored
                                    (also a ValueError)

This module imports nothing of ours so that every layer, `db/` included, can
raise these without creating an import cycle.
"""

from __future__ import annotations

__all__ = [
    "AgentTeamError",
    "ConfigError",
    "LedgerBusyError",
    "LedgerError",
    "LedgerInputError",
    "LedgerNotReadyError",
    "SchemaTooNewError",
]


class AgentTeamError(Exception):
    """Base of every error raised on purpose by agent-team."""


class ConfigError(AgentTeamError):
    """Settings failed validation; the message names the variable and what is allowed."""


class LedgerError(AgentTeamError):
    """A problem with the ledger database."""


class SchemaTooNewError(LedgerError):
    """The ledger's schema_version is newer than this code understands."""


class LedgerNotReadyError(LedgerError):
    """The ledger lacks a table or column the app needs (run `agent-team migrate`)."""


class LedgerBusyError(LedgerError):
    """A write could not get the database lock within the bounded retries."""


class LedgerInputError(LedgerError, ValueError):
    """A ledger call got input it must refuse; the stored rows are unchanged."""
