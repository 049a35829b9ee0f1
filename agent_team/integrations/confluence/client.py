"""A small Confluence Cloud REST v2 client (httpx): read, create and update pages in ADF.

Endpoints (https://developer.atlassian.com/cloud/confluence/rest/v2/):

- `GET  {base}/api/v2/pages/{id}?body-format=atlas_doc_format`: the page, its
  `version.number` and its ADF body as a JSON *string* in
  `body.atlas_doc_format.value`;
- `GET  {base}/api/v2/pages?space-id=..&title=..`: find a page by title (used to
  check whether a create was already done before a crash);
- `GET  {base}/api/v2/spaces/{id}`: does the space exist;
- `POST {base}/api/v2/pages` with `spaceId`, `status`, `title`, `parentId` and
  `body: {representation: atlas_doc_format, value: <json string>}`;
- `PUT  {base}/api/v2/pages/{id}` with `id`, `status`, `title`, `body` and
  `version: {number: current + 1, message}`.

Auth is Basic (account email + API token) or OAuth 2.0 client credentials of
a service account (the token is fetched from the token URL and cached until
shortly before it expires). 429 and 503 are retried, honouring `Retry-After`
(seconds or an HTTP-date) up to a cap, with jittered exponential backoff. A
write (POST/PUT) is resent after a transport error only when the request never
left (connect errors); otherwise `ConfluenceError` says it may have landed. A 409 (stale version) is
raised as `StaleVersionError` for the caller, who knows how to re-apply its
edit. Secrets never appear in errors: they are built from status codes and
Confluence's own error titles, then redacted. Every body sent goes through the one
redaction rule (`outgoing`), the ADF inside it included (issue #17).
"""

from __future__ import annotations

import base64
import email.utils
import json
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
from pydantic import SecretStr

from agent_team.common.redact import redact, redact_deep
from agent_team.exceptions import ConfigError, ConfluenceError, ConfluenceRefusedError
from agent_team.integrations.confluence import adf
from agent_team.integrations.confluence.settings import ConfluenceSettings

__all__ = [
    "BasicAuth",
    "ConfluenceClient",
    "OAuthClientCredentials",
    "Page",
    "StaleVersionError",
    "create_request",
    "outgoing",
    "update_request",
]

_RETRY_STATUSES = frozenset({429, 503})
# POST and PUT change the page: after most transport errors (a read timeout, a dropped
# connection) the write may have landed, so only errors raised before the request left
# are retried. https://www.python-httpx.org/exceptions/
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
_WRITES = frozenset({"POST", "PUT"})


class StaleVersionError(ConfluenceError):
    """409: the page's version moved on since we read it."""


@dataclass(frozen=True)
class Page:
    """A page as read: its ADF body parsed, and the exact text it came as."""

    id: str
    title: str
    space_id: str
    version: int
    version_message: str
    body_text: str
    doc: dict[str, Any]
    parent_id: str | None = None
    url: str | None = None


class BasicAuth:
    """Account email + API token (https://id.atlassian.com/manage-profile/security/api-tokens)."""

    kind = "basic"

    def __init__(self, email: str, token: SecretStr) -> None:
        pair = f"{email}:{token.get_secret_value()}".encode()
        self._header = "Basic " + base64.b64encode(pair).decode("ascii")
        self.secrets = [token.get_secret_value(), self._header.split()[1]]

    def apply(self, request: httpx.Request, client: httpx.Client) -> None:
        request.headers["Authorization"] = self._header


class OAuthClientCredentials:
    """OAuth 2.0 client credentials; the access token is cached until it expires."""

    kind = "oauth"

    def __init__(
        self,
        client_id: str,
        client_secret: SecretStr,
        token_url: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        audience: str = "api.atlassian.com",
    ) -> None:
        self.client_id = client_id
        self._secret = client_secret
        self.token_url = token_url
        self.audience = audience
        self._clock = clock
        self._token: str | None = None
        self._expires_at = 0.0
        self._lock = threading.Lock()
        self.secrets = [client_secret.get_secret_value()]
        self.fetched = 0  # tokens fetched (tests check the cache)

    def token(self, client: httpx.Client) -> str:
        with self._lock:
            if self._token is not None and self._clock() < self._expires_at:
                return self._token
            try:
                response = client.post(
                    self.token_url,
                    json={
                        "grant_type": "client_credentials",
                        "client_id": self.client_id,
                        "client_secret": self._secret.get_secret_value(),
                        "audience": self.audience,
                    },
                )
            except httpx.HTTPError as exc:
                raise ConfluenceError(
                    f"cannot reach the OAuth token URL {self.token_url}: {type(exc).__name__}; "
                    "check AGENT_TEAM_CONFLUENCE_TOKEN_URL and the network"
                ) from None
            if response.status_code != 200:
                raise ConfluenceError(
                    f"the OAuth token URL answered {response.status_code}; check "
                    "AGENT_TEAM_CONFLUENCE_CLIENT_ID and AGENT_TEAM_CONFLUENCE_CLIENT_SECRET"
                )
            try:
                data = response.json()
                token = str(data["access_token"])
                lifetime = float(data.get("expires_in", 3600))
            except (ValueError, KeyError, TypeError):
                raise ConfluenceError(
                    "the OAuth token URL answered without an access_token; check "
                    "AGENT_TEAM_CONFLUENCE_TOKEN_URL"
                ) from None
            self.fetched += 1
            self.secrets.append(token)
            self._token = token
            # Renew a minute early (or at half the lifetime for short tokens).
            self._expires_at = self._clock() + max(0.0, min(lifetime - 60.0, lifetime / 2))
            return token

    def forget(self) -> None:
        with self._lock:
            self._token = None

    def apply(self, request: httpx.Request, client: httpx.Client) -> None:
        request.headers["Authorization"] = f"Bearer {self.token(client)}"


Auth = BasicAuth | OAuthClientCredentials


def _body(doc_text: str) -> dict[str, str]:
    return {"representation": "atlas_doc_format", "value": doc_text}


def outgoing(payload: Any, secrets: list[str] | tuple[str, ...] = ()) -> Any:
    """A write's JSON body under the one redaction rule, the page's ADF included.

    The ADF travels as a JSON *string* (`body.value`): it is parsed and redacted
    value by value, never as text (a pattern run over JSON text could swallow a
    quote), and re-serialised with `adf.dumps` only when something was redacted,
    so a clean body is sent byte for byte as the lane drafted and compares it.
    """
    if not isinstance(payload, dict):
        return redact_deep(payload, secrets)
    cleaned: dict[str, Any] = redact_deep(payload, secrets)
    body = payload.get("body")
    if isinstance(body, dict) and isinstance(body.get("value"), str):
        cleaned["body"]["value"] = _outgoing_adf(body["value"], secrets)  # the text pass undone
    return cleaned


def _outgoing_adf(text: str, secrets: list[str] | tuple[str, ...]) -> str:
    try:
        doc = json.loads(text)
    except ValueError:
        return redact(text, secrets)  # not ours to parse; Confluence refuses it anyway
    clean = redact_deep(doc, secrets)
    return text if clean == doc else adf.dumps(clean)


def create_request(
    *, space_id: str, parent_id: str | None, title: str, doc_text: str
) -> dict[str, Any]:
    """The JSON body of `POST /api/v2/pages` (recorded as is in dry-run)."""
    payload: dict[str, Any] = {"spaceId": space_id, "status": "current", "title": title}
    if parent_id:
        payload["parentId"] = parent_id
    payload["body"] = _body(doc_text)
    return payload


def update_request(
    *, page_id: str, title: str, doc_text: str, version: int, message: str
) -> dict[str, Any]:
    """The JSON body of `PUT /api/v2/pages/{id}` (recorded as is in dry-run)."""
    return {
        "id": page_id,
        "status": "current",
        "title": title,
        "body": _body(doc_text),
        "version": {"number": version, "message": message},
    }


class ConfluenceClient:
    """Confluence Cloud REST v2, synchronous (the graph's nodes run in worker threads)."""

    def __init__(
        self,
        base_url: str,
        auth: Auth,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout_s: float = 30.0,
        max_attempts: int = 4,
        retry_cap_s: float = 30.0,
        backoff_s: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.auth = auth
        self.max_attempts = max(1, max_attempts)
        self.retry_cap_s = retry_cap_s
        self.backoff_s = backoff_s
        self._sleep = sleep
        self._wall_clock = wall_clock  # for Retry-After given as an HTTP-date
        self._http = httpx.Client(
            transport=transport,
            timeout=timeout_s,
            headers={"Accept": "application/json", "User-Agent": "agent-team"},
        )

    @classmethod
    def from_settings(cls, settings: ConfluenceSettings, **kwargs: Any) -> ConfluenceClient:
        """Build from the Confluence settings group; OAuth when a client id is set, else Basic.

        Raises:
            ConfigError: no base URL or no complete set of credentials.
        """
        if not settings.base_url:
            raise ConfigError(
                "AGENT_TEAM_CONFLUENCE_BASE_URL is not set (e.g. https://example.atlassian.net/wiki)"
            )
        auth: Auth
        if settings.client_id:
            if settings.client_secret is None:
                raise ConfigError(
                    "AGENT_TEAM_CONFLUENCE_CLIENT_ID is set but "
                    "AGENT_TEAM_CONFLUENCE_CLIENT_SECRET is not"
                )
            auth = OAuthClientCredentials(
                settings.client_id,
                settings.client_secret,
                settings.token_url,
            )
        elif settings.email and settings.api_token is not None:
            auth = BasicAuth(settings.email, settings.api_token)
        else:
            raise ConfigError(
                "Confluence credentials are missing: set AGENT_TEAM_CONFLUENCE_EMAIL and "
                "AGENT_TEAM_CONFLUENCE_API_TOKEN, or AGENT_TEAM_CONFLUENCE_CLIENT_ID and "
                "AGENT_TEAM_CONFLUENCE_CLIENT_SECRET"
            )
        return cls(settings.base_url, auth, **kwargs)

    def close(self) -> None:
        self._http.close()

    def url(self, path: str) -> str:
        return f"{self.base_url}{path}"

    # -- transport -----------------------------------------------------------------------

    def _retry_at(self, header: str) -> float | None:
        """Seconds until an HTTP-date `Retry-After` (RFC 9110 §10.2.3), or None if unreadable."""
        try:
            when = email.utils.parsedate_to_datetime(header)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # "-0000": UTC by RFC 5322
            when = when.replace(tzinfo=UTC)
        return max(0.0, (when - self._wall_clock()).total_seconds())

    def _delay(self, response: httpx.Response, attempt: int) -> float:
        header = response.headers.get("Retry-After", "").strip()
        wanted: float | None
        try:
            wanted = float(header) if header else None
        except ValueError:
            wanted = self._retry_at(header)
        if wanted is None or wanted < 0:
            wanted = self.backoff_s * (2**attempt)
        # Jitter spreads retries of parallel workers; never below what the server asked.
        return min(self.retry_cap_s, wanted + random.uniform(0, self.backoff_s))

    @staticmethod
    def _errors(response: httpx.Response) -> list[dict[str, Any]]:
        """Confluence's own error objects from the response body."""
        try:
            errors = response.json().get("errors") or []
            return [e for e in errors if isinstance(e, dict)]
        except (ValueError, AttributeError, TypeError):
            return []

    def _error(self, response: httpx.Response, what: str) -> str:
        errors = self._errors(response)
        title = "; ".join(str(e.get("title") or e.get("code") or "") for e in errors)
        detail = f": {title}" if title else ""
        return redact(
            f"{what}: Confluence answered {response.status_code}{detail}", self.auth.secrets
        )

    def _request(self, method: str, path: str, *, what: str, **kwargs: Any) -> httpx.Response:
        if "json" in kwargs:  # the one door every body leaves by
            kwargs["json"] = outgoing(kwargs["json"], self.auth.secrets)
        response: httpx.Response | None = None
        refreshed = False
        attempt = 0
        while attempt < self.max_attempts:
            request = self._http.build_request(method, self.url(path), **kwargs)
            self.auth.apply(request, self._http)
            try:
                response = self._http.send(request)
            except httpx.HTTPError as exc:
                if method in _WRITES and not isinstance(exc, _NOT_SENT):
                    # Never resend: the caller reads the page to learn whether it landed.
                    raise ConfluenceError(
                        f"{what}: the answer from Confluence was lost ({type(exc).__name__}); "
                        "the write may have landed; agent-team reads the page before it writes "
                        "again"
                    ) from None
                if attempt + 1 >= self.max_attempts:
                    raise ConfluenceError(
                        f"{what}: cannot reach Confluence at {self.base_url} "
                        f"({type(exc).__name__}); check AGENT_TEAM_CONFLUENCE_BASE_URL"
                    ) from None
                self._sleep(min(self.retry_cap_s, self.backoff_s * (2**attempt)))
                attempt += 1
                continue
            if (
                response.status_code == 401
                and isinstance(self.auth, OAuthClientCredentials)
                and not refreshed
            ):
                self.auth.forget()  # revoked or expired early: one fresh token, then give up
                refreshed = True
                continue
            if response.status_code in _RETRY_STATUSES and attempt + 1 < self.max_attempts:
                self._sleep(self._delay(response, attempt))
                attempt += 1
                continue
            return response
        assert response is not None
        return response

    def _json(self, response: httpx.Response, what: str) -> dict[str, Any]:
        if response.status_code in (401, 403):
            raise ConfluenceError(
                self._error(response, what) + "; check the Confluence credentials and that the "
                "account may read and edit the space"
            )
        if response.status_code >= 400:
            raise ConfluenceError(self._error(response, what))
        try:
            data = response.json()
        except ValueError:
            raise ConfluenceError(f"{what}: Confluence answered with invalid JSON") from None
        if not isinstance(data, dict):
            raise ConfluenceError(f"{what}: Confluence answered with an unexpected shape")
        return data

    def _page(self, data: dict[str, Any], what: str, *, need_body: bool = True) -> Page:
        try:
            body = (data.get("body") or {}).get("atlas_doc_format") or {}
            if need_body or "value" in body:
                body_text = str(body["value"])
                doc = adf.parse(body_text, where=f"the body of page {data['id']}")
            else:
                body_text, doc = "", {}
            version = data["version"]
            links = data.get("_links") or {}
            web = links.get("webui")
            return Page(
                id=str(data["id"]),
                title=str(data.get("title", "")),
                space_id=str(data.get("spaceId", "")),
                version=int(version["number"]),
                version_message=str(version.get("message") or ""),
                body_text=body_text,
                doc=doc,
                parent_id=str(data["parentId"]) if data.get("parentId") else None,
                url=f"{links.get('base') or self.base_url}{web}" if web else None,
            )
        except (KeyError, TypeError, ValueError):
            raise ConfluenceError(
                f"{what}: the page came back without an ADF body and version; is "
                "AGENT_TEAM_CONFLUENCE_BASE_URL a Confluence Cloud site (…/wiki)?"
            ) from None

    # -- API -----------------------------------------------------------------------------

    def get_page(self, page_id: str) -> Page:
        """Read a page with its ADF body and version.

        Raises:
            ConfluenceRefusedError: no such page (404) or an id that is not numeric.
            ConfluenceError: auth or server trouble.
        """
        if not page_id.isdigit():
            raise ConfluenceRefusedError(
                f"{page_id!r} is not a Confluence page id (page ids are numbers)"
            )
        what = f"reading page {page_id}"
        response = self._get_page(page_id, what)
        if response.status_code == 404:
            raise ConfluenceRefusedError(
                f"Confluence page {page_id} does not exist (or the account cannot see it); "
                "fix the `confluence-page:` line of the task and submit it again"
            )
        return self._page(self._json(response, what), what)

    def _get_page(self, page_id: str, what: str) -> httpx.Response:
        return self._request(
            "GET",
            f"/api/v2/pages/{page_id}",
            params={"body-format": "atlas_doc_format"},
            what=what,
        )

    def page_space(self, page_id: str) -> str | None:
        """The space id of a page, or None when there is no such page (its body is not parsed).

        Raises:
            ConfluenceError: auth or server trouble.
        """
        if not page_id.isdigit():
            return None
        what = f"reading page {page_id}"
        response = self._get_page(page_id, what)
        if response.status_code == 404:
            return None
        return str(self._json(response, what).get("spaceId") or "")

    def space_exists(self, space_id: str) -> bool:
        what = f"reading space {space_id}"
        if not space_id.isdigit():
            return False
        response = self._request("GET", f"/api/v2/spaces/{space_id}", what=what)
        if response.status_code == 404:
            return False
        self._json(response, what)
        return True

    def find_page(self, space_id: str, title: str) -> Page | None:
        """The current page titled `title` in the space, with its body, or None."""
        what = f"looking up page {title!r}"
        response = self._request(
            "GET",
            "/api/v2/pages",
            params={"space-id": space_id, "title": title, "body-format": "atlas_doc_format"},
            what=what,
        )
        results = self._json(response, what).get("results") or []
        for item in results:
            if isinstance(item, dict) and item.get("title") == title:
                return self._page(item, what)
        return None

    def create_page(self, payload: dict[str, Any]) -> Page:
        """POST a page built by `create_request`."""
        what = f"creating page {payload.get('title')!r}"
        response = self._request("POST", "/api/v2/pages", json=payload, what=what)
        # Only Confluence's error codes and titles decide (a page title like "Namespace ..."
        # in our own text must not).
        about_space = any(
            re.search(r"\bspace", str(e.get(field) or ""), re.IGNORECASE)
            for e in self._errors(response)
            for field in ("code", "title")
        )
        if response.status_code in (400, 404) and about_space:
            raise ConfluenceRefusedError(self._error(response, what) + "; check the space id")
        return self._page(self._json(response, what), what, need_body=False)

    def update_page(self, payload: dict[str, Any]) -> Page:
        """PUT a page built by `update_request`.

        Raises:
            StaleVersionError: 409, someone saved a newer version first.
        """
        page_id = str(payload["id"])
        what = f"updating page {page_id}"
        response = self._request("PUT", f"/api/v2/pages/{page_id}", json=payload, what=what)
        if response.status_code == 409:
            raise StaleVersionError(self._error(response, what))
        if response.status_code == 404:
            raise ConfluenceRefusedError(f"Confluence page {page_id} no longer exists")
        return self._page(self._json(response, what), what, need_body=False)
