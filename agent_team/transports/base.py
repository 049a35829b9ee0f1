"""The transport interface: the coordinator delivers, the transport posts.

Delivery happens outside the graph (docs/architecture.md §3), so a resumed node never
posts twice; the coordinator records the returned `channel_ref` with a
compare-and-set that only fills a missing one.
"""

from __future__ import annotations

from typing import Protocol

from agent_team.db import Question, Task

__all__ = ["Transport"]


class Transport(Protocol):
    """Posts questions and task notifications where people look."""

    name: str
    # Whether `deliver` posts outside the process (Slack: yes). A transport that does not
    # say is taken to post, so its deliveries are recorded with a flush.
    posts: bool

    def deliver(self, question: Question, task: Task) -> str:
        """Post `question` and return its `channel_ref` (the handle answers come back on)."""
        ...

    def notify(self, task: Task, event: str, text: str) -> None:
        """Tell the task's people what happened: parked, done, failed, expired, cancelled."""
        ...
