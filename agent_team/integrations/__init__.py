"""The outside services agent-team talks to, one package each (Slack, GitHub, Confluence).

Package `__init__` modules stay empty of imports: nodes import the low-level
parts (a client, the ADF helpers) while the integration objects import the
coordinator, so loading a package must not pull in either side.
"""

from __future__ import annotations

__all__: list[str] = []
