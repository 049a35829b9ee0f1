"""The local transport: questions wait in the ledger, people answer with the CLI or dashboard."""

from __future__ import annotations

import logging

from agent_team.common.invocation import command
from agent_team.db import Question, Task
from agent_team.task_model import QuestionKind

__all__ = ["LocalTransport"]

log = logging.getLogger(__name__)


class LocalTransport:
    """Nothing to post: the ledger row *is* the question; `channel_ref` names it."""

    name = "local"
    posts = False  # the ledger row is the question; nothing leaves the process

    def deliver(self, question: Question, task: Task) -> str:
        if question.kind == QuestionKind.PULL_REQUEST:
            # Nobody answers the PR gate: "answer with ..." would send people to a refusal.
            url = question.payload.get("url") if isinstance(question.payload, dict) else None
            log.info(
                "task %s waits on GitHub: pull request %s (%s); the watcher answers it",
                task.id,
                url or "?",
                question.question_id,
            )
            return f"local:{question.question_id}"
        log.info(
            "task %s asks (%s) %s; answer with `%s answer %s <text>`",
            task.id,
            question.kind,
            question.question_id,
            command(),
            question.question_id,
        )
        return f"local:{question.question_id}"

    def notify(self, task: Task, event: str, text: str) -> None:
        log.info("task %s %s: %s", task.id, event, text)
