"""GitHub's OAuth web flow, the client side: where to send a browser, and who came back.

The wire format is GitHub's documented one (docs.github.com, "Authorizing
OAuth apps", and "Troubleshooting OAuth app access token request errors"):

1. The browser goes to `<web host>/login/oauth/authorize?client_id&redirect_uri
   &state&scope`; GitHub sends it back to `redirect_uri` with `code` and `state`,
   or with `error` (`access_denied` when the person said no).
2. `POST <web host>/login/oauth/access_token` (form: client_id, client_secret,
   code, redirect_uri; `Accept: application/json`) answers `{"access_token",
   "token_type", "scope"}`, or, still with HTTP 200, `{"error",
   "error_description"}` (`bad_verification_code`, `incorrect_client_credentials`,
   `redirect_uri_mismatch`, ...).
3. `GET <API>/user` with `Authorization: Bearer <token>` names the account.

The web host is `AGENT_TEAM_GITHUB_OAUTH_URL` and the API
`AGENT_TEAM_GITHUB_API_URL`, so GitHub Enterprise (`https://HOST` and
`https://HOST/api/v3`) works the same. The token is used for that one read and
dropped. What a refusal says comes from our own words: GitHub's error code at
most, never its text, the code, the token or the secret, which only ever go in
a request body or header (never a URL).
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import httpx

from agent_team.common.bounded_json import BadJson, loads_bounded
from agent_team.exceptions import SignInRefusedError

if TYPE_CHECKING:
    from agent_team.config import Settings

__all__ = ["SCOPE", "TIMEOUT_S", "GitHubOAuth"]

log = logging.getLogger(__name__)

SCOPE = "read:user"
TIMEOUT_S = 10.0
API_VERSION = "2022-11-28"
_ERROR_CODE = re.compile(r"^[a-z_]{1,60}$")
_LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}$")
_MAX_BODY = 65_536
_AGAIN = "try signing in again"
# Our words for GitHub's documented token errors (its own text is not shown).
_TOKEN_ERRORS = {
    "bad_verification_code": "GitHub refused the sign-in code (wrong, expired or used "
    f"already); {_AGAIN}",
    "incorrect_client_credentials": "GitHub refused this dashboard's OAuth app credentials; "
    "the operator should check AGENT_TEAM_GITHUB_OAUTH_CLIENT_ID and "
    "AGENT_TEAM_GITHUB_OAUTH_CLIENT_SECRET",
    "redirect_uri_mismatch": "GitHub says this dashboard's callback URL is not the one the "
    "OAuth app has registered; the operator should register it (or set "
    "AGENT_TEAM_DASHBOARD_URL)",
    "unverified_user_email": "GitHub wants the account's primary email verified first",
}
_AUTHORIZE_ERRORS = {
    "access_denied": "you did not authorize the sign-in on GitHub",
    "redirect_uri_mismatch": _TOKEN_ERRORS["redirect_uri_mismatch"],
    "application_suspended": "GitHub has suspended this dashboard's OAuth app; tell the operator",
}


class GitHubOAuth:
    """One OAuth app on one GitHub (or GitHub Enterprise) host."""

    def __init__(
        self,
        *,
        client_id: str,
        client_secret: str,
        web_url: str,
        api_url: str,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout_s: float = TIMEOUT_S,
    ) -> None:
        """Args:
        transport: for tests (httpx's mock transport); the loopback fake needs none.
        """
        self.client_id = client_id
        self._secret = client_secret
        self.web_url = web_url.rstrip("/")
        self.api_url = api_url.rstrip("/")
        self._transport = transport
        self._timeout = httpx.Timeout(timeout_s)

    @classmethod
    def from_settings(cls, settings: Settings) -> GitHubOAuth | None:
        """The app the settings name, or None when Sign in with GitHub is off."""
        secret = settings.github_oauth_client_secret
        if not settings.github_sign_in or settings.github_oauth_client_id is None or not secret:
            return None
        return cls(
            client_id=settings.github_oauth_client_id.strip(),
            client_secret=secret.get_secret_value().strip(),
            web_url=settings.github_oauth_url,
            api_url=settings.github_api_url,
        )

    def secrets(self) -> tuple[str, ...]:
        """What must never be shown (for the redaction of pages and logs)."""
        return (self._secret,)

    def authorize_url(self, *, state: str, redirect_uri: str) -> str:
        """Where the browser goes to ask GitHub who it is (the secret is not in it)."""
        query = urlencode(
            {
                "client_id": self.client_id,
                "redirect_uri": redirect_uri,
                "state": state,
                "scope": SCOPE,
                "allow_signup": "false",
            }
        )
        return f"{self.web_url}/login/oauth/authorize?{query}"

    @staticmethod
    def authorize_refusal(error: str) -> str:
        """Our words for the `error` GitHub sent the browser back with."""
        if error in _AUTHORIZE_ERRORS:
            return _AUTHORIZE_ERRORS[error]
        shown = error if _ERROR_CODE.match(error) else "an unknown error"
        return f"GitHub did not sign you in ({shown}); {_AGAIN}"

    async def login_of(self, code: str, *, redirect_uri: str) -> str:
        """The GitHub login the `code` GitHub sent back belongs to.

        Raises:
            SignInRefusedError: GitHub refused the code, failed, or answered something that
                is not its wire format; the message says which, in our words.
        """
        async with httpx.AsyncClient(
            transport=self._transport, timeout=self._timeout, follow_redirects=False
        ) as client:
            token = await self._exchange(client, code, redirect_uri)
            return await self._user(client, token)

    async def _exchange(self, client: httpx.AsyncClient, code: str, redirect_uri: str) -> str:
        what = "the sign-in code's exchange"
        form = {
            "client_id": self.client_id,
            "client_secret": self._secret,
            "code": code,
            "redirect_uri": redirect_uri,
        }
        response = await _send(
            client,
            what,
            "POST",
            f"{self.web_url}/login/oauth/access_token",
            data=form,
            headers={"Accept": "application/json"},
        )
        body = _json_object(response, what)
        error = body.get("error")
        if error is not None:
            code_name = error if isinstance(error, str) and _ERROR_CODE.match(error) else "?"
            log.warning("GitHub sign-in: GitHub refused %s (%s)", what, code_name)
            raise SignInRefusedError(
                _TOKEN_ERRORS.get(code_name, f"GitHub refused the sign-in ({code_name}); {_AGAIN}")
            )
        token, kind = body.get("access_token"), body.get("token_type")
        if not isinstance(token, str) or not token.strip() or len(token) > 1000:
            raise _unusable(what, "no access token")
        if not isinstance(kind, str) or kind.lower() != "bearer":
            raise _unusable(what, "not a bearer token")
        return token.strip()

    async def _user(self, client: httpx.AsyncClient, token: str) -> str:
        what = "GitHub's user endpoint"
        response = await _send(
            client,
            what,
            "GET",
            f"{self.api_url}/user",
            headers={
                "Accept": "application/vnd.github+json",
                "Authorization": f"Bearer {token}",
                "X-GitHub-Api-Version": API_VERSION,
            },
        )
        login = _json_object(response, what).get("login")
        if not isinstance(login, str) or not _LOGIN.match(login):
            raise _unusable(what, "no login")
        return login


async def _send(
    client: httpx.AsyncClient, what: str, method: str, url: str, **kwargs: Any
) -> httpx.Response:
    try:
        response = await client.request(method, url, **kwargs)
    except httpx.HTTPError as exc:
        # The exception's text can hold the URL but never the body; the class name is enough.
        log.warning("GitHub sign-in: %s failed: %s", what, type(exc).__name__)
        raise SignInRefusedError(
            f"GitHub could not be reached for {what} ({type(exc).__name__}); {_AGAIN}"
        ) from None
    if response.status_code != 200:
        log.warning("GitHub sign-in: %s answered HTTP %d", what, response.status_code)
        raise SignInRefusedError(f"{what} answered HTTP {response.status_code}; {_AGAIN}")
    return response


def _json_object(response: httpx.Response, what: str) -> dict[str, Any]:
    if len(response.content) > _MAX_BODY:
        raise _unusable(what, "an over-long answer")
    try:
        body = loads_bounded(response.content)
    except BadJson:
        raise _unusable(what, "not JSON") from None
    if not isinstance(body, dict):
        raise _unusable(what, "not a JSON object")
    return body


def _unusable(what: str, why: str) -> SignInRefusedError:
    log.warning("GitHub sign-in: %s answered %s", what, why)
    return SignInRefusedError(f"{what} answered something unusable ({why}); {_AGAIN}")
