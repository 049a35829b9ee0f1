"""Signing in to the dashboard, and deciding who is behind a write.

A person signs in once on `/login` with their dashboard token and gets a
session cookie: signed with `itsdangerous`, HttpOnly, SameSite=Strict,
`Path=/`, Secure when the dashboard's URL is https. The cookie carries the
token's name and a keyed digest of the token, and every request checks both
against the tokens configured *now*, so a sign-in ends the moment its token
is removed or changed.

A sign-in with GitHub (`dashboard/github_login.py`) gets the same cookie,
bound to a person instead of a token: their name and GitHub login, checked
against the `people` table on every request, so removing the person or
changing their login ends it at once. Such a session works with no token
configured at all.

Every state-changing request made with the cookie also needs the session's
CSRF token (a form field, or the `X-CSRF-Token` header for `fetch`), derived
from the session with HMAC and compared in constant time. The sign-in form
itself is protected by a double-submit cookie, so no other site can sign a
browser in as someone else. Scripts keep using `Authorization: Bearer
<token>`: a bearer header cannot be sent cross-site, so it needs no CSRF
token.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import parse_qsl, quote, urlsplit

from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from agent_team import db
from agent_team.requests.access import (
    DashboardToken,
    DashboardTokens,
    KeyReader,
    create_secret_file,
)
from agent_team.requests.actors import Actor

if TYPE_CHECKING:
    from agent_team.config import Settings

__all__ = [
    "CSRF_FIELD",
    "CSRF_HEADER",
    "GITHUB_CALLBACK_PATH",
    "GITHUB_START_PATH",
    "LOGIN_CSRF_COOKIE",
    "SESSION_COOKIE",
    "TOKENS_HINT",
    "Auth",
    "AuthRefused",
    "Caller",
    "Viewer",
    "check_csrf",
    "login_path",
    "note_who",
    "read_form",
    "redirect",
    "safe_next",
    "who_of",
]

log = logging.getLogger(__name__)

SESSION_COOKIE = "agent_team_session"
# Sign in with GitHub (`github_login.py`): where it begins and where GitHub sends people back.
GITHUB_START_PATH = "/login/github"
GITHUB_CALLBACK_PATH = "/login/github/callback"
LOGIN_CSRF_COOKIE = "agent_team_login_csrf"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
SESSION_KEY_FILE = "dashboard-session-key"
MAX_FORM_BYTES = 16_384
_SALT = "agent-team.dashboard.session"
_GITHUB_KIND = "github"  # a session's kind marker: signed in with GitHub, bound to a person
TOKENS_HINT = (
    "set AGENT_TEAM_DASHBOARD_TOKENS (name:token,...) or start the daemon once with --demo"
)
BEARER_HINT = "sign in on the dashboard, or send `Authorization: Bearer <a dashboard token>`"


class AuthRefused(Exception):
    """A write refused before anything was read: `status`, a message safe to show, headers."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


@dataclass(frozen=True, slots=True)
class Caller:
    """Who a write comes from; `name` is None for the unnamed token."""

    name: str | None
    how: Literal["bearer", "session"]

    def actor(self) -> Actor:
        """As the audit log names it (the unnamed token is `token`)."""
        return Actor(self.name or "token", "dashboard")


@dataclass(frozen=True, slots=True)
class Viewer:
    """The signed-in person a page is rendered for, with the CSRF token its forms carry."""

    name: str | None
    csrf: str

    @property
    def label(self) -> str:
        return self.name or "the shared token"


# Where a request's scope keeps who it turned out to be from, for the access log.
_WHO = "agent_team_who"


def note_who(scope: MutableMapping[str, Any], name: str | None) -> None:
    """Remember whose key or session a request carried (the unnamed token is `token`)."""
    scope.setdefault("state", {})[_WHO] = name or "token"


def who_of(scope: Mapping[str, Any]) -> str | None:
    """Who `note_who` found behind the request, or None (nobody signed in or no key)."""
    found = scope.get("state", {}).get(_WHO)
    return found if isinstance(found, str) else None


def login_path(base: str, next_path: str) -> str:
    """The sign-in page's address, coming back to `next_path` (an app-relative path)."""
    return f"{base}/login?next={quote(next_path, safe='/')}"


def safe_next(raw: str | None) -> str:
    """Only a path on this site may be redirected to after signing in: no open redirect.

    `//evil.example` and `/\\evil.example` are taken as other hosts by browsers, so they are
    refused along with anything carrying a scheme or a host.
    """
    if not raw or len(raw) > 2000 or not raw.startswith("/") or raw.startswith("//"):
        return "/"
    if "\\" in raw or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in raw):
        return "/"
    parts = urlsplit(raw)
    if parts.scheme or parts.netloc:
        return "/"
    return raw


class Auth:
    """Tokens, the session key and the checks, for one dashboard."""

    def __init__(
        self,
        settings: Settings,
        keys: KeyReader | None = None,
        touch: Callable[[str], None] | None = None,
    ) -> None:
        """Raises ConfigError: a bad tokens file (see `DashboardTokens`).

        Args:
            keys: how to read people's keys and the people themselves from the ledger
                (None: configured tokens only, and no GitHub sign-in).
            touch: notes a key's last use (see `DashboardTokens`).
        """
        self.settings = settings
        self.tokens = DashboardTokens(settings, keys, touch)
        self._read = keys
        self._key: bytes | None = None

    @property
    def github_on(self) -> bool:
        """Whether people sign in with GitHub here (the OAuth app is configured)."""
        return self.settings.github_sign_in and self._read is not None

    @property
    def sign_in_on(self) -> bool:
        """Whether anyone can sign in at all: a token or key, or GitHub."""
        return self.github_on or self.tokens.enabled

    # -- keys ------------------------------------------------------------------------------

    def _session_key(self, *, create: bool) -> bytes | None:
        """The signing key: the setting, else a file in the state folder made on first sign-in."""
        if self._key is not None:
            return self._key
        configured = self.settings.dashboard_session_key
        if configured is not None and configured.get_secret_value().strip():
            self._key = configured.get_secret_value().strip().encode("utf-8")
            return self._key
        path = self.settings.state_folder() / SESSION_KEY_FILE
        if create:
            create_secret_file(path, secrets.token_urlsafe(32))
        try:
            text = path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None  # nobody has signed in yet, so no cookie can be valid
        if not text:
            return None
        self._key = text.encode("utf-8")
        return self._key

    def _serializer(self, key: bytes) -> URLSafeTimedSerializer:
        return URLSafeTimedSerializer(key, salt=_SALT)

    @staticmethod
    def _csrf_for(key: bytes, session_id: str) -> str:
        return hmac.new(key, b"csrf:" + session_id.encode("ascii"), hashlib.sha256).hexdigest()

    @property
    def max_age_s(self) -> int:
        return int(self.settings.dashboard_session_h * 3600)

    def secure_cookies(self, request: Request) -> bool:
        """Secure on https: the request's own scheme, or the https dashboard URL it came by.

        The host must match, so opening the same daemon on http://127.0.0.1 still signs in.
        """
        if request.url.scheme == "https":
            return True
        url = urlsplit(self.settings.dashboard_url or "")
        return url.scheme == "https" and url.hostname == request.url.hostname

    # -- sessions --------------------------------------------------------------------------

    def session_cookie(self, token: DashboardToken) -> str:
        key = self._session_key(create=True)
        assert key is not None
        payload = {"n": token.name, "t": token.tag(key), "s": secrets.token_urlsafe(16)}
        return str(self._serializer(key).dumps(payload))

    def person_session_cookie(self, person: db.Person, github_login: str) -> str:
        """A session for `person`, signed in with GitHub as `github_login`; bound to this
        very row (its `created_at`), so removing and adding them again ends it too."""
        key = self._session_key(create=True)
        assert key is not None
        payload = {
            "k": _GITHUB_KIND,
            "n": person.name,
            "g": github_login.lower(),
            "c": person.created_at,
            "s": secrets.token_urlsafe(16),
        }
        return str(self._serializer(key).dumps(payload))

    def session_subject(self, cookie: str) -> str | None:
        """Whose a session cookie is, by its signature only (the rate limits' key: cheap, no
        ledger read); None for a cookie this dashboard did not sign or that expired."""
        key = self._session_key(create=False)
        if key is None or len(cookie) > 4096:
            return None
        try:
            data = self._serializer(key).loads(cookie, max_age=self.max_age_s)
        except BadSignature:
            return None
        if not isinstance(data, dict):
            return None
        return f"{data.get('k', 'token')}:{data.get('n')}:{data.get('t') or data.get('g')}"

    def viewer(self, request: Request) -> Viewer | None:
        """The person signed in on this request, or None; checked once per request."""
        state = request.scope.setdefault("state", {})
        if "agent_team_viewer" not in state:
            state["agent_team_viewer"] = self._check_session(request.cookies.get(SESSION_COOKIE))
            if state["agent_team_viewer"] is not None:
                note_who(request.scope, state["agent_team_viewer"].name)
        found: Viewer | None = state["agent_team_viewer"]
        return found

    def _check_session(self, cookie: str | None) -> Viewer | None:
        if not cookie:
            return None
        key = self._session_key(create=False)
        if key is None:
            return None
        try:
            data = self._serializer(key).loads(cookie, max_age=self.max_age_s)
        except BadSignature:  # forged, altered or expired
            return None
        if not isinstance(data, dict):
            return None
        name, session_id = data.get("n"), data.get("s")
        if not isinstance(session_id, str) or not session_id.isascii():
            return None
        if data.get("k") == _GITHUB_KIND:
            login, since = data.get("g"), data.get("c")
            if not isinstance(name, str) or not isinstance(login, str):
                return None
            if not isinstance(since, str) or not self._person_holds(name, login, since):
                return None  # signed in with GitHub, but removed or given another login since
            return Viewer(name=name, csrf=self._csrf_for(key, session_id))
        tag = data.get("t")
        if not (name is None or isinstance(name, str)) or not isinstance(tag, str):
            return None
        if not self.tokens.enabled or self.tokens.by_tag(name, tag, key) is None:
            return None  # the token was removed or changed since
        return Viewer(name=name, csrf=self._csrf_for(key, session_id))

    def _person_holds(self, name: str, login: str, since: str) -> bool:
        """Whether GitHub sign-in is on and `name` is still the same person (the row made at
        `since`) with that login."""
        if not self.github_on or self._read is None:
            return False
        try:
            with self._read() as reader:
                person = db.get_person(reader, name)
        except Exception as exc:  # the ledger cannot be read: nobody is signed in (fail closed)
            log.debug("dashboard sessions: the ledger could not be read: %s", exc)
            return False
        return person is not None and person.github_login == login and person.created_at == since

    # -- reads -----------------------------------------------------------------------------

    def authorize_read(self, request: Request) -> Caller:
        """For `AGENT_TEAM_DASHBOARD_READS=token`: a bearer token or a session (a read changes
        nothing, so no CSRF token); else `AuthRefused`."""
        if not self.sign_in_on:
            raise AuthRefused(
                403, f"reading needs a token (AGENT_TEAM_DASHBOARD_READS=token): {TOKENS_HINT}"
            )
        header = request.headers.get("authorization")
        if header is not None:
            return self._bearer(request, header)
        viewer = self.viewer(request)
        if viewer is None:
            raise AuthRefused(
                401,
                f"not signed in; {BEARER_HINT}",
                headers={"WWW-Authenticate": 'Bearer realm="agent-team"'},
            )
        return Caller(name=viewer.name, how="session")

    # -- writes ----------------------------------------------------------------------------

    def authorize_write(self, request: Request) -> Caller:
        """A bearer token, or a session cookie with its CSRF token; else `AuthRefused`."""
        if not self.sign_in_on:
            raise AuthRefused(403, f"writes are disabled: {TOKENS_HINT}")
        header = request.headers.get("authorization")
        if header is not None:
            return self._bearer(request, header)
        viewer = self.viewer(request)
        if viewer is None:
            again = " again" if request.cookies.get(SESSION_COOKIE) else ""
            raise AuthRefused(
                401,
                f"not signed in{again}; {BEARER_HINT}",
                headers={"WWW-Authenticate": 'Bearer realm="agent-team"'},
            )
        check_csrf(viewer, request.headers.get(CSRF_HEADER))
        return Caller(name=viewer.name, how="session")

    def authorize_bearer(self, request: Request, what: str) -> Caller:
        """`Authorization: Bearer <a dashboard token>` and nothing else (monitors, scripts);
        `what` names what needs it in the refusal."""
        if not self.tokens.enabled:
            raise AuthRefused(403, f"{what} needs a dashboard token: {TOKENS_HINT}")
        hint = f"{what} needs `Authorization: Bearer <a dashboard token>`"
        return self._bearer(request, request.headers.get("authorization", ""), hint)

    def _bearer(self, request: Request, header: str, hint: str = BEARER_HINT) -> Caller:
        scheme, _, given = header.partition(" ")
        given = given.strip()
        if scheme.lower() != "bearer" or not given:
            raise AuthRefused(
                401,
                f"a bearer token is required; {hint}",
                headers={"WWW-Authenticate": 'Bearer realm="agent-team"'},
            )
        token = self.tokens.match(given)
        if token is None:
            raise AuthRefused(
                401,
                f"the bearer token is wrong; {hint}",
                headers={"WWW-Authenticate": 'Bearer realm="agent-team", error="invalid_token"'},
            )
        note_who(request.scope, token.name)
        return Caller(name=token.name, how="bearer")


def check_csrf(viewer: Viewer, given: str | None) -> None:
    if not given or not hmac.compare_digest(given.encode("utf-8"), viewer.csrf.encode("ascii")):
        raise AuthRefused(
            403,
            "CSRF check failed: this request did not carry the page's CSRF token; "
            "reload the page and try again",
        )


async def read_form(request: Request) -> dict[str, str]:
    """A small urlencoded form body (the sign-in and sign-out forms), size-capped."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise AuthRefused(413, f"the form is over {MAX_FORM_BYTES} bytes")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthRefused(400, "the form is not UTF-8") from None
    return dict(parse_qsl(text, keep_blank_values=True))


def redirect(to: str) -> Response:
    return RedirectResponse(to, status_code=303, headers={"Cache-Control": "no-store"})
