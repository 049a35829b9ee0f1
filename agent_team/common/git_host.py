"""The configured GitHub host as git sees it, and the token git may send there alone.

The builders fetch remote repositories (`agent_team.builders.repos`) and the
draft-PR publisher pushes to them (`agent_team.integrations.github.pr`); both
reach the host of `AGENT_TEAM_GITHUB_API_URL` with `AGENT_TEAM_GITHUB_TOKEN`.
The token travels only as an HTTP header that git is told about through the
environment (`GIT_CONFIG_COUNT/KEY_0/VALUE_0`), scoped to the host
(`http.<host>.extraHeader`): never in argv, a URL, a config file or a log,
and never sent to another server, whatever a redirect or a config says.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx

from agent_team.common.repo_spec import DEFAULT_GIT_HOST

__all__ = ["DEFAULT_GIT_HOST", "GitHost", "auth_env", "basic_credential", "git_host_url"]


def git_host_url(api_url: str) -> str:
    """The git host of a REST API URL, ending in `/`.

    `https://api.github.com` -> `https://github.com/`; Enterprise
    `https://ghe.example/api/v3` -> `https://ghe.example/`; `https://api.x.ghe.com`
    -> `https://x.ghe.com/`; any other URL (a loopback fake) -> the URL itself,
    which serves git as well.
    """
    url = httpx.URL(api_url)
    if url.host == "api.github.com":
        return DEFAULT_GIT_HOST
    if url.host.startswith("api.") and url.host.endswith(".ghe.com"):
        # GitHub Enterprise Cloud with data residency: api.<name>.ghe.com -> <name>.ghe.com
        return str(url.copy_with(host=url.host.removeprefix("api."), path="/", query=None))
    path = url.path.rstrip("/")
    path = path.removesuffix("/api/v3")
    return str(url.copy_with(path=path + "/", query=None, fragment=None))


def auth_env(token: str | None, host_url: str) -> dict[str, str]:
    """git configuration through the environment: the auth header, never in argv or a URL.

    The header is scoped to `host_url` (`http.<url>.extraHeader`), so git sends
    it to no other server, whatever a redirect or a config says.
    """
    env = {
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    if token:
        env |= {
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": f"http.{host_url}.extraHeader",
            "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic_credential(token)}",
        }
    return env


def basic_credential(token: str) -> str:
    """The Basic credential GitHub takes for a token over git's smart HTTP."""
    return base64.b64encode(f"x-access-token:{token}".encode()).decode("ascii")


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    default = {"https": 443, "http": 80}.get(parts.scheme.lower())
    return parts.scheme.lower(), (parts.hostname or "").lower(), port or default


@dataclass(frozen=True)
class GitHost:
    """The GitHub host's git URL (`git_host_url`) and the token for it, if any.

    Attributes:
        url: where `owner/name` repositories live: `<url><owner>/<name>.git`.
        token: `AGENT_TEAM_GITHUB_TOKEN`; sent to `url`'s host only.
    """

    url: str = DEFAULT_GIT_HOST
    token: str | None = field(default=None, repr=False)

    @classmethod
    def of(cls, api_url: str, token: str | None) -> GitHost:
        """The host of `AGENT_TEAM_GITHUB_API_URL`, with its token."""
        return cls(git_host_url(api_url), token or None)

    def serves(self, url: str) -> bool:
        """Whether `url` is on this host (same scheme, host and port)."""
        return _origin(url) == _origin(self.url)

    def env_for(self, url: str) -> dict[str, str]:
        """The environment of a git that talks to `url`: the token's header only for this host."""
        return auth_env(self.token if self.serves(url) else None, self.url)

    def secrets(self) -> tuple[str, ...]:
        """What must never appear in text we show: the token and its Basic form."""
        return (self.token, basic_credential(self.token)) if self.token else ()
