"""Which buttons a page shows its viewer: the role table, asked without auditing.

Why: a page offers only what its viewer may do, so a viewer-role person does
not meet a Cancel button that can only refuse. The refusal itself still
comes from the request path (`TaskRequests` and `roles.authorize`, which
audits it): hiding a button is a courtesy, never the check.
"""

from __future__ import annotations

from collections.abc import Iterable

from agent_team import db
from agent_team.dashboard.auth import Caller, Viewer
from agent_team.requests.roles import allowed

__all__ = ["abilities"]


def abilities(reader: db.Reader, viewer: Viewer | None, actions: Iterable[str]) -> dict[str, bool]:
    """For each action (`roles.ACTIONS`' names), whether `viewer` may do it.

    Signed out: nothing. Signed in: the role table as the request path reads it
    (`roles.allowed`: no people yet, everyone; the shared token once people exist,
    nobody).
    """
    wanted = list(actions)
    if viewer is None:
        return dict.fromkeys(wanted, False)
    actor = Caller(name=viewer.name, how="session").actor()
    return {action: allowed(reader, actor, action) for action in wanted}
