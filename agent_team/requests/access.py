"""Who may write through the dashboard: its tokens, where they come from, and matching them.

One rule decides where the tokens come from, so a restart never changes it
silently (the README's "Signing in" says the same):

1. Tokens the operator configured: `AGENT_TEAM_DASHBOARD_TOKENS` (named,
   `name:token,...`), `AGENT_TEAM_DASHBOARD_TOKENS_FILE` (named, one
   `name:token` a line) and `AGENT_TEAM_DASHBOARD_TOKEN` (one unnamed token,
   kept for scripts older than named tokens). If any is set, these are all
   the tokens there are.
2. Otherwise the demo token file, `<state folder>/dashboard-token`, if it
   exists, whether or not this start was given `--demo`.
3. Otherwise none, and dashboard writes are off. `agent-team daemon --demo`
   creates the demo file when rule 1 gives nothing and the file is missing.

Files are re-read when they change, so deleting a line revokes that token,
and every sign-in made with it, without a restart. A token is a secret: it
is compared in constant time and never logged or named in an error (errors
point at the entry or line number instead).
"""

from __future__ import annotations

import hmac
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from agent_team import db
from agent_team.config import parse_named_tokens
from agent_team.exceptions import ConfigError
from agent_team.requests.people import imported_key_id, verify_key

if TYPE_CHECKING:
    from agent_team.config import Settings

__all__ = [
    "DEMO_TOKEN_FILE",
    "DashboardToken",
    "DashboardTokens",
    "create_secret_file",
    "demo_token_path",
    "ensure_demo_token",
]

log = logging.getLogger(__name__)

_T = TypeVar("_T")
# Opens one short read of the ledger (the dashboard's `DashboardContext.read`).
KeyReader = Callable[[], AbstractContextManager[db.Reader]]

DEMO_TOKEN_FILE = "dashboard-token"
TOUCH_EVERY_S = 600.0  # how often a key's last use is written down
_TOKENS_SETTING = "AGENT_TEAM_DASHBOARD_TOKENS"
_TOKENS_FILE_SETTING = "AGENT_TEAM_DASHBOARD_TOKENS_FILE"
_TOKEN_SETTING = "AGENT_TEAM_DASHBOARD_TOKEN"


@dataclass(frozen=True, slots=True)
class DashboardToken:
    """One token; `name` is None for the unnamed one (the single setting or the demo file)."""

    name: str | None
    secret: str = field(repr=False)

    def tag(self, key: bytes) -> str:
        """A keyed digest of the secret, for binding a sign-in to this exact token."""
        return hmac.new(key, b"token:" + self.secret.encode("utf-8"), "sha256").hexdigest()[:32]


def demo_token_path(settings: Settings) -> Path:
    return settings.state_folder() / DEMO_TOKEN_FILE


def _configured(settings: Settings) -> bool:
    single = settings.dashboard_token
    return bool(
        settings.dashboard_tokens is not None
        or settings.dashboard_tokens_file is not None
        or (single is not None and single.get_secret_value().strip())
    )


def create_secret_file(path: Path, value: str) -> bool:
    """Write `value` to a new file only its owner can read; False if the file exists.

    `O_EXCL` makes two starts racing for the same file agree on one value.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(value + "\n")
    return True


def ensure_demo_token(settings: Settings) -> str | None:
    """`--demo`: create the demo token file when no token is configured and it is missing.

    Returns:
        The token if it was created now (so it can be shown once), else None.
    """
    if _configured(settings):
        return None
    token = secrets.token_urlsafe(24)
    return token if create_secret_file(demo_token_path(settings), token) else None


@dataclass
class _Watched:
    """A token file, parsed again whenever its size or modification time changes."""

    path: Path
    setting: str
    named: bool
    _seen: tuple[int, int] | None = None
    _tokens: tuple[DashboardToken, ...] = ()

    def read(self, *, strict: bool) -> tuple[DashboardToken, ...]:
        try:
            info = self.path.stat()
            signature = (info.st_mtime_ns, info.st_size)
            if signature == self._seen:
                return self._tokens
            text = self.path.read_text(encoding="utf-8")
            tokens = self._parse(text)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            problem = _problem(exc)
            message = f"{self.setting} ({self.path}): {problem}"
            if strict:
                raise ConfigError(message) from None
            if self._seen != (-1, -1):
                log.error(
                    "dashboard tokens: %s; signing in with it is refused until fixed", message
                )
            self._seen, self._tokens = (-1, -1), ()  # fail closed
            return ()
        self._seen, self._tokens = signature, tokens
        return tokens

    def _parse(self, text: str) -> tuple[DashboardToken, ...]:
        if not self.named:
            token = text.strip()
            if not token or any(ch.isspace() for ch in token):
                raise ValueError("it must hold one token on one line")
            return (DashboardToken(None, token),)
        return tuple(DashboardToken(n, t) for n, t in parse_named_tokens(text, unit="line"))


def _problem(exc: Exception) -> str:
    if isinstance(exc, FileNotFoundError):
        return "the file does not exist"
    if isinstance(exc, PermissionError):
        return "the file is not readable by this user"
    if isinstance(exc, UnicodeDecodeError):
        return "the file is not UTF-8 text"
    if isinstance(exc, OSError):
        return f"cannot read the file ({exc.strerror})"
    return str(exc)


class DashboardTokens:
    """The dashboard's tokens by the rule in the module docstring, current at every call.

    Besides them, the keys people hold in the ledger (`agent-team key add`, issue #30):
    a presented `atk_...` key (or a token imported with `agent-team people import`) is
    checked against its stored hash, and a sign-in made with one is bound to that hash,
    so rotating or revoking the key ends it at once.
    Such a token's `secret` is the key's hash (the key itself is never kept).
    """

    def __init__(
        self,
        settings: Settings,
        keys: KeyReader | None = None,
        touch: Callable[[str], None] | None = None,
    ) -> None:
        """Apply the rule once; a bad setting or token file stops the start here.

        Args:
            keys: how to read the ledger for people's keys (one short read per check);
                None: configured tokens only.
            touch: notes a key's use (`db.touch_key`); called at most every
                `TOUCH_EVERY_S` per key, so a busy script costs no write per request.

        Raises:
            ConfigError: a tokens file that is missing, unreadable or malformed, or the
                unnamed token repeating a named one.
        """
        self._fixed: list[DashboardToken] = []
        self._files: list[_Watched] = []
        self.demo_file: Path | None = None  # set when rule 2 applies
        if settings.dashboard_tokens is not None:
            pairs = parse_named_tokens(settings.dashboard_tokens.get_secret_value(), unit="entry")
            self._fixed.extend(DashboardToken(name, token) for name, token in pairs)
        if settings.dashboard_tokens_file is not None:
            watched = _Watched(settings.dashboard_tokens_file, _TOKENS_FILE_SETTING, named=True)
            self._files.append(watched)
            watched.read(strict=True)
        single = settings.dashboard_token
        if single is not None and single.get_secret_value().strip():
            self._fixed.append(DashboardToken(None, single.get_secret_value().strip()))
        if not _configured(settings):
            path = demo_token_path(settings)
            if path.exists():
                self.demo_file = path
                watched = _Watched(path, "the demo token file", named=False)
                self._files.append(watched)
                watched.read(strict=True)
        self._check_unique(self.current())
        self._describe_sources = self._sources(settings)
        self._keys = keys
        self._touch = touch
        self._touched: dict[str, float] = {}
        self._touched_lock = threading.Lock()

    @staticmethod
    def _check_unique(tokens: Sequence[DashboardToken]) -> None:
        names = [t.name for t in tokens if t.name is not None]
        if len(names) != len(set(names)):
            raise ConfigError(
                f"{_TOKENS_SETTING} and {_TOKENS_FILE_SETTING} name the same person twice; "
                "keep one token per name"
            )
        if len({t.secret for t in tokens}) != len(tokens):
            raise ConfigError(
                "the same dashboard token is configured twice (under two names, or as "
                f"{_TOKEN_SETTING} too); give each person their own"
            )

    def current(self) -> tuple[DashboardToken, ...]:
        """Every token valid right now (files re-read if they changed; a broken file: none)."""
        found = list(self._fixed)
        for watched in self._files:
            found.extend(watched.read(strict=False))
        return tuple(found)

    @property
    def enabled(self) -> bool:
        return bool(self._fixed or self._files) or self._ledger_has_keys()

    def _read_keys(self, read: Callable[[db.Reader], _T], empty: _T) -> _T:
        if self._keys is None:
            return empty
        try:
            with self._keys() as reader:
                return read(reader)
        except Exception as exc:  # no ledger yet, or it cannot be read: no keys (fail closed)
            log.debug("dashboard keys: the ledger could not be read: %s", exc)
            return empty

    def _ledger_has_keys(self) -> bool:
        return self._read_keys(lambda r: db.any_live_key(r), False)

    def match(self, given: str) -> DashboardToken | None:
        """The token equal to `given`, comparing against every one in constant time."""
        given_bytes = given.encode("utf-8")
        found: DashboardToken | None = None
        for token in self.current():
            if hmac.compare_digest(given_bytes, token.secret.encode("utf-8")):
                found = token
        if found is not None and self._revoked_in_ledger(found):
            return None
        if found is None and given.strip():  # a minted key, or a token imported into the ledger

            def person_of(reader: db.Reader) -> tuple[DashboardToken, str] | None:
                hit = verify_key(reader, given)
                if hit is None:
                    return None
                return DashboardToken(hit[1].name, hit[0].key_hash), hit[0].key_id

            from_ledger = self._read_keys(person_of, None)
            if from_ledger is not None:
                found, key_id = from_ledger
                self._used(key_id)
        return found

    def by_tag(self, name: str | None, tag: str, key: bytes) -> DashboardToken | None:
        """The current token a sign-in was made with (same name, same secret), if any."""
        found: DashboardToken | None = None
        for token in self.current():
            if token.name == name and hmac.compare_digest(token.tag(key), tag):
                found = token
        if found is not None and self._revoked_in_ledger(found):
            return None
        if found is None and name is not None:

            def live(reader: db.Reader) -> list[tuple[DashboardToken, str]]:
                return [
                    (DashboardToken(name, k.key_hash), k.key_id)
                    for k in db.list_keys(reader, name)
                    if k.revoked_at is None
                ]

            nothing: list[tuple[DashboardToken, str]] = []
            for token, key_id in self._read_keys(live, nothing):
                if hmac.compare_digest(token.tag(key), tag):
                    found = token
                    self._used(key_id)
        return found

    def _used(self, key_id: str) -> None:
        """Keep the key's `last_used_at` (at most every `TOUCH_EVERY_S`; never fails a check)."""
        if self._touch is None:
            return
        now = time.monotonic()
        with self._touched_lock:
            last = self._touched.get(key_id)
            if last is not None and now - last < TOUCH_EVERY_S:
                return
            self._touched[key_id] = now
        try:
            self._touch(key_id)
        except Exception as exc:  # a busy or read-only ledger: the use is simply not noted
            log.debug("dashboard keys: last use of %s not noted: %s", key_id, exc)

    def _revoked_in_ledger(self, token: DashboardToken) -> bool:
        """A configured token imported into the ledger and revoked (or rotated away) there:
        the copy still in the environment or the file must not bring it back."""

        def revoked(reader: db.Reader) -> bool:
            row = db.get_key(reader, imported_key_id(token.secret))
            return row is not None and row.revoked_at is not None

        return self._read_keys(revoked, False)

    def outside_ledger(self) -> tuple[DashboardToken, ...]:
        """The named tokens an operator configured (the setting and the file), which
        `agent-team people import` moves into the ledger; not the demo token."""
        return tuple(t for t in self.current() if t.name is not None)  # the demo's is unnamed

    def legacy_warning(self) -> str | None:
        """Say that tokens outside the ledger are on their way out (doctor and the start)."""
        outside = self.outside_ledger()
        unnamed = any(t.name is None for t in self._fixed)
        if not outside and not unnamed:
            return None
        what = [f"{len(outside)} named token(s)"] if outside else []
        what += [f"the unnamed {_TOKEN_SETTING}"] if unnamed else []
        return (
            f"{' and '.join(what)} from the environment or a file: tokens outside the ledger "
            "work for this release only; move them with `agent-team people import --role "
            "ROLE` (the same tokens keep working) and remove the setting"
        )

    def secrets(self) -> tuple[str, ...]:
        """Every token's value, for scrubbing text that is shown."""
        return tuple(token.secret for token in self.current())

    def _sources(self, settings: Settings) -> str:
        parts: list[str] = []
        named = sum(1 for t in self._fixed if t.name is not None)
        if named:
            parts.append(f"{named} named from {_TOKENS_SETTING}")
        if settings.dashboard_tokens_file is not None:
            parts.append(f"named from {settings.dashboard_tokens_file}")
        if any(t.name is None for t in self._fixed):
            parts.append(f"one unnamed from {_TOKEN_SETTING}")
        if self.demo_file is not None:
            parts.append(f"the demo token in {self.demo_file}")
        return ", ".join(parts)

    def describe(self) -> str:
        """One line for the start banner and doctor: where the tokens come from, never them."""
        if not self.enabled:
            return (
                f"dashboard writes are off: no token (set {_TOKENS_SETTING}, or start once "
                "with --demo)"
            )
        return f"dashboard writes are on: {self._describe_sources}"
