"""Sign in with GitHub, as requests: issue a one-time state, spend it, find the person.

The dashboard's routes (`dashboard/github_login.py`) talk to GitHub; what the
ledger learns from a sign-in is decided here:

- A state is 32 random bytes, handed to the browser and to GitHub; the
  ledger keeps its SHA-256 for 10 minutes (`db.OAUTH_STATE_LIFETIME`), and
  spending it is one compare-and-set, so a forged, expired or replayed state
  signs nobody in, on any daemon of the ledger.
- A GitHub login signs in the person who holds it (logins are case-blind, so
  they are compared in lower case). A login nobody holds is refused unless
  `AGENT_TEAM_GITHUB_SIGNIN_DEFAULT_ROLE` names a role: then a person named
  after the login is added with it, audited as done by that GitHub account.
  The setting cannot be `owner` (`config.py`): an account nobody added never
  becomes an owner by signing in; and nobody is added before the team has an
  owner, since the first person switches roles on for every surface.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Callable
from datetime import datetime

from agent_team import db
from agent_team.exceptions import LedgerInputError, SignInRefusedError
from agent_team.requests.actors import Actor
from agent_team.task_model import Role

__all__ = ["GitHubSignIns", "state_hash"]

log = logging.getLogger(__name__)

_SPENT_REASONS = {
    "unknown": "this dashboard never began that sign-in (its state is unknown: forged, or "
    "begun on another dashboard)",
    "used": "that sign-in was finished already (its state was used once; a reload or a "
    "copied link cannot use it again)",
    "expired": "the sign-in took longer than 10 minutes",
}


def state_hash(state: str) -> str:
    """What the ledger keeps of a state."""
    return hashlib.sha256(state.encode("utf-8")).hexdigest()


def _hint(login: str) -> str:
    return f"agent-team people add NAME --role ROLE --github {login}"


class GitHubSignIns:
    """The ledger's side of Sign in with GitHub, for one dashboard."""

    def __init__(
        self,
        ledger: db.Ledger,
        *,
        default_role: str | None,
        clock: Callable[[], datetime],
    ) -> None:
        self.ledger = ledger
        self.default_role = default_role
        self.clock = clock

    def begin(self, next_path: str) -> str:
        """A new state for a sign-in that goes to `next_path` afterwards (stored as a hash)."""
        state = secrets.token_urlsafe(32)
        db.save_oauth_state(self.ledger, state_hash(state), next_path=next_path, now=self.clock())
        return state

    def spend(self, state: str) -> str:
        """Spend `state` once; where the sign-in goes next.

        Raises:
            SignInRefusedError: 400, the state is unknown, used already or expired.
        """
        if not state or len(state) > 200:
            raise SignInRefusedError("GitHub's answer carries no usable state; start again")
        found = db.spend_oauth_state(self.ledger, state_hash(state), now=self.clock())
        if found.outcome != "ok":
            raise SignInRefusedError(f"{_SPENT_REASONS[found.outcome]}; start again")
        return found.next_path

    def person_for(self, login: str) -> db.Person:
        """The person holding GitHub login `login`, added first when the setting allows.

        Raises:
            SignInRefusedError: 403, nobody holds the login and no default role is set, or
                the name the login would get is another person's.
        """
        person = db.person_by_github(self.ledger, login)
        if person is not None:
            return person
        if self.default_role is None:
            raise SignInRefusedError(
                f"the GitHub account {login} is not one of this team's people; ask an owner "
                f"to add you: {_hint(login)}",
                status=403,
            )
        if not any(p.role == Role.OWNER.value for p in db.list_people(self.ledger)):
            # The first person would switch roles on for every surface; an owner decides that.
            raise SignInRefusedError(
                f"the GitHub account {login} is not one of this team's people, and people are "
                "added on their first sign-in only once the team has an owner; ask the "
                f"operator to set one up first (agent-team people add NAME --role owner), or "
                f"to add you: {_hint(login)}",
                status=403,
            )
        name = login.lower()
        actor = Actor(name, "github")
        try:
            person = db.add_person(
                self.ledger,
                name=name,
                role=self.default_role,
                github_login=login,
                audit=actor.entry(
                    "person_add", name, {"role": self.default_role, "how": "github sign-in"}
                ),
            )
        except LedgerInputError:
            again = db.person_by_github(self.ledger, login)
            if again is not None:  # a sign-in racing this one added them first
                return again
            raise SignInRefusedError(
                f"the GitHub account {login} is not one of this team's people, and the name "
                f"{name} is someone else's already; ask an owner to add you under another "
                f"name: {_hint(login)}",
                status=403,
            ) from None
        log.info("people: added %s (%s) on their first GitHub sign-in", name, self.default_role)
        return person
