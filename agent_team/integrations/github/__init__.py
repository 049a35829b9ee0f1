"""GitHub: issues by label become tasks (by poll or by webhook); status comments, draft PRs.

Intake stays thin (docs/architecture.md §8): parse, validate, claim the issue in the
ledger, then start the task through the coordinator. Everything it must not
repeat (a claim, a status comment, a pull request) is recorded in the ledger
first, so a restart picks up where the last process stopped.
"""

from __future__ import annotations

__all__: list[str] = []
