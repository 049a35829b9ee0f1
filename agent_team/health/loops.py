"""The daemon's unit of supervised work, shared by the daemon and the integrations.

It lives apart from `service/daemon.py` so an integration can hand the daemon its
loops without importing the daemon (which imports every integration).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Loop"]


@dataclass
class Loop:
    """A supervised loop: `run(stop, first)` works until `stop` is set.

    `first` is False when the supervisor restarts the loop after a crash.
    """

    name: str
    run: Callable[[threading.Event, bool], None]
