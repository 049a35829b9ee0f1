"""Where the ledger is: a SQLite file (a path or `sqlite:///path`) or a `postgresql://` URL.

One parser, so every entry (the settings, `open_ledger`, `init_db`) picks the
backend the same way, and one redaction, so a password in a URL never reaches
a message or a log line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from agent_team.exceptions import ConfigError

__all__ = [
    "DATABASE_URL_VARIABLE",
    "LedgerTarget",
    "is_postgres_url",
    "parse_target",
    "redact_url",
]

DATABASE_URL_VARIABLE = "AGENT_TEAM_DATABASE_URL"
_POSTGRES_SCHEMES = ("postgresql", "postgres")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


@dataclass(frozen=True, slots=True)
class LedgerTarget:
    """A parsed location: exactly one of `path` (SQLite) and `url` (PostgreSQL) is set."""

    path: Path | None = None
    url: str | None = None

    @property
    def is_postgres(self) -> bool:
        return self.url is not None


def is_postgres_url(value: object) -> bool:
    return isinstance(value, str) and value.split("://", 1)[0].lower() in _POSTGRES_SCHEMES


def parse_target(value: str | Path) -> LedgerTarget:
    """Read a path, `sqlite:///path` or `postgresql://user@host/db`.

    Raises:
        ConfigError: an unknown scheme, a `sqlite://` URL without a path, or a
            PostgreSQL URL without a database name; the message never holds the password.
    """
    if isinstance(value, Path):
        return LedgerTarget(path=value)
    text = value.strip()
    match = _SCHEME.match(text)
    if match is None:
        if not text:
            raise ConfigError(f"{DATABASE_URL_VARIABLE}: is empty; give a path or a URL")
        return LedgerTarget(path=Path(text))
    scheme = match.group(1).lower()
    if scheme == "sqlite":
        rest = text[len(match.group(0)) :]
        if not rest.startswith("/") or rest == "/":
            raise ConfigError(
                f"{DATABASE_URL_VARIABLE}: a SQLite URL needs a path, "
                "e.g. sqlite:///var/lib/agent-team/agent-team.db (three slashes, then the path)"
            )
        # sqlite:///relative.db is relative, sqlite:////abs.db absolute (as SQLAlchemy reads it)
        return LedgerTarget(path=Path(unquote(rest[1:])))
    if scheme in _POSTGRES_SCHEMES:
        try:
            parts = urlsplit(text)
            parts.port  # noqa: B018 - raises on a port that is not a number
        except ValueError:
            raise ConfigError(
                f"{DATABASE_URL_VARIABLE}: {redact_url(text)} is not a valid URL "
                "(check the host and port)"
            ) from None
        if not parts.path.strip("/"):
            raise ConfigError(
                f"{DATABASE_URL_VARIABLE}: {redact_url(text)} names no database; "
                "use postgresql://user@host/dbname"
            )
        return LedgerTarget(url=text)
    raise ConfigError(
        f"{DATABASE_URL_VARIABLE}: unknown scheme {scheme!r}; use a path, sqlite:///path "
        "or postgresql://user@host/dbname"
    )


def redact_url(url: str) -> str:
    """The URL with any password (in the authority or a `password=` parameter) replaced by ***."""
    try:
        parts = urlsplit(url)
    except ValueError:  # unparseable: keep only what follows the last "@" of the authority
        match = _SCHEME.match(url)
        return (match.group(0) if match else "") + "***@" + url.rsplit("@", 1)[-1]
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:***@{host}" if ":" in userinfo else f"{user}@{host}"
    query = re.sub(r"(?i)(^|&)(password)=[^&]*", r"\1\2=***", parts.query)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def password_of(url: str) -> str | None:
    """The password in a URL, to scrub from a driver's error text."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.password:
        return unquote(parts.password)
    found = re.search(r"(?i)(?:^|&)password=([^&]*)", parts.query)
    return unquote(found.group(1)) if found else None
