"""Host names an operator lists for the sandbox's egress (`AGENT_TEAM_SANDBOX_ALLOW_HOSTS`).

In `common` so the settings can check the list where they are read, and the
egress proxy can apply it, with one definition of what a listed name matches.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

__all__ = ["host_allowed", "parse_allow_hosts"]

# A DNS name (labels of letters, digits and hyphens), optionally `*.` in front.
_HOST = re.compile(
    r"^(\*\.)?(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
    r"(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$"
)


def parse_allow_hosts(entries: Iterable[str]) -> tuple[str, ...]:
    """Check `AGENT_TEAM_SANDBOX_ALLOW_HOSTS` entries: host names, or `*.` and a domain.

    Raises:
        ValueError: an entry is not a host name (a URL, a port, an address with a
            path, a bare `*`); the message names the entry.
    """
    hosts: list[str] = []
    for raw in entries:
        entry = raw.strip().lower().rstrip(".")
        if not entry:
            continue
        if not _HOST.match(entry):
            raise ValueError(
                f"{raw.strip()!r} is not a host name; list names such as api.anthropic.com or "
                "*.githubusercontent.com (no scheme, port or path)"
            )
        if entry.startswith("*.") and "." not in entry[2:]:
            raise ValueError(
                f"{raw.strip()!r} would open a whole top-level domain; name the domain "
                "(*.githubusercontent.com)"
            )
        hosts.append(entry)
    return tuple(dict.fromkeys(hosts))


def host_allowed(host: str, allowed: Sequence[str]) -> bool:
    """Whether `host` is listed: exactly, or under a `*.domain` entry (not the domain itself)."""
    name = host.strip().lower().rstrip(".")
    for entry in allowed:
        if entry.startswith("*."):
            if name.endswith(entry[1:]) and len(name) > len(entry) - 1:
                return True
        elif name == entry:
            return True
    return False
