"""Slack: questions posted to a channel, answers by thread reply, button or modal.

`transport` is the outbound half (posts, redraws, reminders); `ingress` is
the inbound half (Events API / interactivity over HTTP or Socket Mode).
"""

from __future__ import annotations

__all__: list[str] = []
