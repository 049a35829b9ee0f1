"""Which `Host:` names the HTTP server answers to (DNS rebinding).

Why: the dashboard listens on loopback by default and reads need no token
there, so a page the operator visits could point a name it controls at
127.0.0.1 and read every task through the operator's browser. Such a request
carries the attacker's name in `Host:`; refusing every name not listed here
stops it. The list is the bind address, the loopback names, the host of
`AGENT_TEAM_DASHBOARD_URL`, and `AGENT_TEAM_DASHBOARD_HOSTS`.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from agent_team.config import Settings

__all__ = ["allowed_hosts"]

_LOOPBACK = ("localhost", "127.0.0.1", "::1", "[::1]")
_ANY = ("0.0.0.0", "::", "")


def allowed_hosts(settings: Settings) -> list[str]:
    """The names Starlette's `TrustedHostMiddleware` accepts (it compares without the port)."""
    hosts: list[str] = list(_LOOPBACK)
    bind = settings.dashboard_host.strip().lower()
    if bind not in _ANY:
        hosts += [bind, f"[{bind}]"] if ":" in bind else [bind]
    if settings.dashboard_url:
        try:
            public = urlsplit(settings.dashboard_url).hostname
        except ValueError:
            public = None
        if public:
            hosts += [public.lower(), f"[{public.lower()}]"] if ":" in public else [public.lower()]
    hosts += settings.dashboard_hosts
    return list(dict.fromkeys(hosts))
