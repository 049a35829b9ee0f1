"""Who may answer in Slack: the team's people with a Slack id, else the configured allow-list.

Once any person is set up (`agent-team people add`), the people are the
allow-list: a Slack user id no person holds is refused, and what each person
may answer is their role's business (`requests.roles`, checked when the answer
is recorded). `AGENT_TEAM_SLACK_ALLOWED_USERS` then no longer counts; `doctor`
says so. Before anyone is set up it works as it always did. Both fail closed:
nobody listed, nobody answers. Read on every event, so a person added or
removed counts at once, without a restart.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_team import db
from agent_team.requests.roles import needed_role

__all__ = ["SlackAnswerers"]

LIST_HINT = "ask an operator to add you to AGENT_TEAM_SLACK_ALLOWED_USERS"


class SlackAnswerers:
    def __init__(self, ledger: db.Reader, configured: Sequence[str]) -> None:
        self.ledger = ledger
        self.configured = frozenset(configured)
        self._configured_order = tuple(configured)

    def people_decide(self) -> bool:
        return db.list_people_exist(self.ledger)

    def may_answer(self, user: str) -> bool:
        """Whether `user` may answer at all (their role is checked with the answer)."""
        if self.people_decide():
            return db.person_by_slack(self.ledger, user) is not None
        return user in self.configured

    def for_kind(self, kind: str) -> tuple[str, ...]:
        """The Slack ids a reminder about a question of `kind` mentions."""
        if not self.people_decide():
            return self._configured_order
        need = needed_role(f"answer:{kind}")
        return tuple(
            p.slack_id
            for p in db.list_people(self.ledger)
            if p.slack_id is not None and p.rank >= need.rank
        )

    def hint(self, user: str = "ID") -> str:
        """How someone refused (`user`) gets added, by the rule in force."""
        if self.people_decide():
            return f"ask an owner to add you: agent-team people add NAME --role ROLE --slack {user}"
        return LIST_HINT
