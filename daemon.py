"""Thin entry for systemd: `python daemon.py [--config FILE]` runs `agent-team daemon`."""

from __future__ import annotations

import sys

from agent_team.cli.main import main

if __name__ == "__main__":
    main([*sys.argv[1:], "daemon"])
