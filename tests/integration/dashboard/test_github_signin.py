"""Sign in with GitHub against a loopback GitHub: the flow, and every way it must refuse.

The dashboard here has no token at all: GitHub is the only way in, so a write
that works proves the person's session carries it. Each refusal is a 400
(403 for a login nobody holds) with its reason, nobody signed in and nothing
stored; the client secret, the code and the token never show up in a page, a
redirect or a log line.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from agent_team import db
from agent_team.dashboard import DashboardContext, access_log, create_app
from agent_team.dashboard.auth import SESSION_COOKIE
from agent_team.dashboard.github_login import STATE_COOKIE
from agent_team.requests.actors import INTERNAL
from agent_team.requests.people import PeopleRequests
from tests.fakes.github_oauth import FakeGitHubOAuth
from tests.integration.dashboard.conftest import (
    NOW,
    FakeCoordinator,
    Seeded,
    csrf_of,
    make_settings,
)
from tests.ledger_rows import REQUEST_TABLES, stored_rows

CLIENT_ID = "Iv1.0123456789abcdef"
SECRET = "oauth-client-secret-7f3a9c1e5b"
BASE = "http://localhost"
CALLBACK = f"{BASE}/login/github/callback"
WATCHED = (*REQUEST_TABLES, "people", "api_keys")


@dataclass
class Clock:
    now: datetime = NOW

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Dashboard:
    client: TestClient
    github: FakeGitHubOAuth
    coordinator: FakeCoordinator
    clock: Clock
    pages: list[str] = field(default_factory=list)

    def rows(self, *tables: str) -> dict[str, list[tuple[str, ...]]]:
        return stored_rows(self.coordinator.ledger, (*WATCHED, *tables))

    def get(self, url: str) -> httpx.Response:
        response = self.client.get(url, follow_redirects=False)
        self.pages.append(response.text)
        self.pages.extend(value for key, value in response.headers.multi_items())
        return response

    def begin(self, next_path: str = "/task/tB") -> str:
        """`/login/github`: the URL of GitHub's authorize page it sends the browser to."""
        response = self.get(f"/login/github?next={next_path}")
        assert response.status_code == 303, response.text
        return response.headers["location"]

    def authorize(self, authorize_url: str) -> str:
        """GitHub approves (the fake, as the account it is signed in as): the callback's
        path and query GitHub sends the browser back to."""
        back = httpx.get(authorize_url, follow_redirects=False)
        assert back.status_code == 302, back.text
        parts = urlsplit(back.headers["location"])
        assert f"{parts.scheme}://{parts.netloc}{parts.path}" == CALLBACK
        return f"{parts.path}?{parts.query}"

    def sign_in(self, next_path: str = "/task/tB") -> httpx.Response:
        return self.get(self.authorize(self.begin(next_path)))


def _query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def _with(url: str, **changes: str) -> str:
    parts = urlsplit(url)
    query = {**_query(url), **changes}
    return parts.path + "?" + "&".join(f"{k}={v}" for k, v in query.items())


@pytest.fixture
def github() -> Iterator[FakeGitHubOAuth]:
    with FakeGitHubOAuth(
        client_id=CLIENT_ID, client_secret=SECRET, callback_url=CALLBACK, signed_in_as="Ada-L"
    ) as fake:
        yield fake


def _dashboard(
    seeded: Seeded, coordinator: FakeCoordinator, github: FakeGitHubOAuth, **overrides: Any
) -> Dashboard:
    settings = make_settings(
        seeded.path,
        token=None,
        github_oauth_client_id=CLIENT_ID,
        github_oauth_client_secret=SECRET,
        github_oauth_url=github.url,
        github_api_url=github.api_url,
        **overrides,
    )
    clock = Clock()
    ctx = DashboardContext(settings, coordinator=coordinator, clock=clock)  # type: ignore[arg-type]
    return Dashboard(TestClient(create_app(ctx), base_url=BASE), github, coordinator, clock)


@pytest.fixture
def team(coordinator: FakeCoordinator) -> PeopleRequests:
    people = PeopleRequests(coordinator.ledger)
    people.add("root", "owner", actor=INTERNAL)
    people.add("ada", "maintainer", github_login="ada-l", actor=INTERNAL)
    return people


@pytest.fixture
def dash(
    seeded: Seeded, coordinator: FakeCoordinator, github: FakeGitHubOAuth, team: PeopleRequests
) -> Iterator[Dashboard]:
    made = _dashboard(seeded, coordinator, github)
    with made.client:
        yield made


def _session(response: httpx.Response) -> str | None:
    for key, value in response.headers.multi_items():
        if key == "set-cookie" and value.startswith(f"{SESSION_COOKIE}="):
            return value
    return None


def _refused(dash: Dashboard, response: httpx.Response, status: int, reason: str) -> None:
    assert response.status_code == status, response.text
    assert reason in response.text, response.text
    assert _session(response) is None
    assert "signed in as" not in dash.client.get("/").text


# --- the flow ----------------------------------------------------------------------------


def test_signing_in_with_github_names_the_person_and_their_writes_count(
    dash: Dashboard,
) -> None:
    authorize = dash.begin("/task/tB")
    query = _query(authorize)
    assert authorize.startswith(f"{dash.github.url}/login/oauth/authorize?")
    assert query["client_id"] == CLIENT_ID
    assert query["redirect_uri"] == CALLBACK
    assert query["scope"] == "read:user"
    assert dash.client.cookies.get(STATE_COOKIE) == query["state"]

    landed = dash.get(dash.authorize(authorize))

    assert landed.status_code == 200, landed.text
    assert '<meta http-equiv="refresh" content="0; url=/task/tB">' in landed.text
    cookie = _session(landed)
    assert cookie is not None
    flags = [part.strip().lower() for part in cookie.split(";")]
    assert "httponly" in flags and "samesite=strict" in flags and "path=/" in flags
    assert STATE_COOKIE not in dash.client.cookies  # spent, and forgotten by the browser
    page = dash.client.get("/task/tB").text
    assert "signed in as <strong>ada</strong>" in page

    # The exchange as GitHub documents it: the secret in the body, JSON asked for.
    (exchange,) = dash.github.seen("POST", "/login/oauth/access_token")
    assert parse_qs(exchange.body)["client_secret"] == [SECRET]
    assert parse_qs(exchange.body)["redirect_uri"] == [CALLBACK]
    assert "application/json" in exchange.headers["Accept"]
    (user,) = dash.github.seen("GET", "/api/v3/user")
    (token,) = dash.github.tokens
    assert user.headers["Authorization"] == f"Bearer {token}"

    # No token is configured: the session alone carries the write, as ada.
    made = dash.client.post(
        "/api/tasks", json={"title": "From GitHub"}, headers={"X-CSRF-Token": csrf_of(page)}
    )
    assert made.status_code == 201, made.text
    (audit,) = [row for row in db.list_audit(dash.coordinator.ledger) if row.action == "submit"]
    assert (audit.actor, audit.via) == ("ada", "dashboard")


def test_the_callback_url_follows_the_dashboards_public_url(
    seeded: Seeded, coordinator: FakeCoordinator, github: FakeGitHubOAuth, team: PeopleRequests
) -> None:
    public = "https://team.example/agent"
    made = _dashboard(seeded, coordinator, github, dashboard_url=public)
    with made.client:
        authorize = made.begin("/")
    assert _query(authorize)["redirect_uri"] == f"{public}/login/github/callback"


def test_the_login_page_offers_github_and_keeps_where_you_were_going(dash: Dashboard) -> None:
    page = dash.client.get("/login?next=/task/tB").text

    assert 'href="/login/github?next=/task/tB"' in page and "Sign in with GitHub" in page
    assert 'name="token"' not in page  # no token is configured: GitHub is the way in


def test_without_the_oauth_app_there_is_no_github_sign_in(
    seeded: Seeded, coordinator: FakeCoordinator
) -> None:
    with TestClient(
        create_app(DashboardContext(make_settings(seeded.path), coordinator=coordinator))  # type: ignore[arg-type]
    ) as client:
        assert "Sign in with GitHub" not in client.get("/login").text
        assert client.get("/login/github", follow_redirects=False).status_code == 404


def test_github_sign_in_is_open_when_reads_need_a_sign_in(
    seeded: Seeded, coordinator: FakeCoordinator, github: FakeGitHubOAuth, team: PeopleRequests
) -> None:
    made = _dashboard(seeded, coordinator, github, dashboard_reads="token")
    with made.client:
        assert made.client.get("/", follow_redirects=False).status_code == 303
        assert made.sign_in("/").status_code == 200
        assert made.client.get("/").status_code == 200


# --- the state ---------------------------------------------------------------------------


def test_a_forged_state_signs_nobody_in_and_stores_nothing(dash: Dashboard) -> None:
    callback = dash.authorize(dash.begin())
    before = dash.rows("oauth_states")
    forged = "f" * 43
    dash.client.cookies.clear()
    dash.client.cookies.set(STATE_COOKIE, forged, path="/login/github")

    response = dash.get(_with(callback, state=forged))

    _refused(dash, response, 400, "never began that sign-in")
    assert dash.rows("oauth_states") == before
    assert not dash.github.seen("POST", "/login/oauth/access_token")  # GitHub never asked


def test_a_state_from_another_browser_is_refused_and_stays_unspent(dash: Dashboard) -> None:
    """Login CSRF: someone else's finished sign-in pushed into this browser."""
    callback = dash.authorize(dash.begin())
    theirs = dash.client.cookies.get(STATE_COOKIE)
    before = dash.rows("oauth_states")

    dash.client.cookies.clear()
    _refused(dash, dash.get(callback), 400, "browser did not begin that sign-in")
    dash.client.cookies.set(STATE_COOKIE, "another-browsers-state", path="/login/github")
    _refused(dash, dash.get(callback), 400, "not the one this browser was given")
    assert dash.rows("oauth_states") == before

    dash.client.cookies.clear()
    dash.client.cookies.set(STATE_COOKIE, str(theirs), path="/login/github")
    assert dash.get(callback).status_code == 200  # its own browser still finishes it


def test_an_expired_state_is_refused(dash: Dashboard) -> None:
    callback = dash.authorize(dash.begin())
    dash.clock.now = NOW + db.OAUTH_STATE_LIFETIME
    before = dash.rows("oauth_states")

    _refused(dash, dash.get(callback), 400, "took longer than 10 minutes")
    assert dash.rows("oauth_states") == before
    assert not dash.github.seen("POST", "/login/oauth/access_token")


def test_a_replayed_callback_is_refused(dash: Dashboard) -> None:
    callback = dash.authorize(dash.begin())
    state = dash.client.cookies.get(STATE_COOKIE)
    assert dash.get(callback).status_code == 200
    dash.client.cookies.clear()  # the replay comes without the session it made
    dash.client.cookies.set(STATE_COOKIE, str(state), path="/login/github")
    before = dash.rows("oauth_states")

    _refused(dash, dash.get(callback), 400, "finished already")
    assert dash.rows("oauth_states") == before
    assert len(dash.github.seen("POST", "/login/oauth/access_token")) == 1


def test_two_daemons_on_one_ledger_agree_on_the_state(
    dash: Dashboard, seeded: Seeded, github: FakeGitHubOAuth
) -> None:
    """Begun on one daemon, finished on another (a load balancer), replayed on the first."""
    other_daemon = FakeCoordinator(seeded.path)  # its own connection to the same ledger
    other = _dashboard(seeded, other_daemon, github)
    try:
        with other.client:
            callback = dash.authorize(dash.begin())
            state = str(dash.client.cookies.get(STATE_COOKIE))
            other.client.cookies.set(STATE_COOKIE, state, path="/login/github")
            assert other.get(callback).status_code == 200
            assert "signed in as <strong>ada</strong>" in other.client.get("/").text

            _refused(dash, dash.get(callback), 400, "finished already")
    finally:
        other_daemon.ledger.close()


# --- GitHub's answers --------------------------------------------------------------------


def test_a_code_github_refuses_is_a_400(dash: Dashboard) -> None:
    callback = dash.authorize(dash.begin())
    before = dash.rows()

    _refused(dash, dash.get(_with(callback, code="0" * 20)), 400, "GitHub refused the sign-in code")
    assert dash.rows() == before


def test_wrong_client_credentials_are_named_but_never_shown(
    seeded: Seeded, coordinator: FakeCoordinator, github: FakeGitHubOAuth, team: PeopleRequests
) -> None:
    github.client_secret = "the-secret-github-has-now"
    made = _dashboard(seeded, coordinator, github)
    with made.client:
        response = made.sign_in()
        _refused(made, response, 400, "AGENT_TEAM_GITHUB_OAUTH_CLIENT_SECRET")
    assert SECRET not in response.text


def test_the_person_saying_no_on_github_is_a_400(
    seeded: Seeded, coordinator: FakeCoordinator, github: FakeGitHubOAuth, team: PeopleRequests
) -> None:
    github.approval = "page"
    made = _dashboard(seeded, coordinator, github)
    with made.client:
        authorize = made.begin()
        page = httpx.get(authorize)
        assert "Authorize" in page.text and "Cancel" in page.text
        back = httpx.post(
            f"{github.url}/login/oauth/authorize",
            data={**_query(authorize), "decision": "cancel"},
            follow_redirects=False,
        )
        parts = urlsplit(back.headers["location"])
        response = made.get(f"{parts.path}?{parts.query}")
    _refused(made, response, 400, "did not authorize the sign-in on GitHub")


@pytest.mark.parametrize(
    ("path", "status", "body", "reason"),
    [
        ("/api/v3/user", 500, b'{"message": "Server Error"}', "user endpoint answered HTTP 500"),
        ("/api/v3/user", 200, b"<html>not json</html>", "user endpoint answered something"),
        ("/api/v3/user", 200, b'{"id": 1}', "(no login)"),
        ("/api/v3/user", 401, b'{"message": "Bad credentials"}', "answered HTTP 401"),
        ("/login/oauth/access_token", 502, b"Bad Gateway", "exchange answered HTTP 502"),
        ("/login/oauth/access_token", 200, b"access_token=x", "(not JSON)"),
    ],
)
def test_github_failing_is_a_400_with_the_reason(
    dash: Dashboard, path: str, status: int, body: bytes, reason: str
) -> None:
    callback = dash.authorize(dash.begin())
    dash.github.fail(path, status, body)
    before = dash.rows()

    _refused(dash, dash.get(callback), 400, reason)
    assert dash.rows() == before


def test_github_out_of_reach_is_a_400(
    seeded: Seeded, coordinator: FakeCoordinator, github: FakeGitHubOAuth, team: PeopleRequests
) -> None:
    made = _dashboard(seeded, coordinator, github)
    with made.client:
        callback = made.authorize(made.begin())
        github.__exit__()  # GitHub goes away between the authorize page and the callback
        _refused(made, made.get(callback), 400, "GitHub could not be reached")


# --- who the login is --------------------------------------------------------------------


def test_a_login_nobody_holds_is_refused_and_nobody_is_added(dash: Dashboard) -> None:
    dash.github.signed_in_as = "mallory"
    before = dash.rows()

    response = dash.sign_in()

    _refused(dash, response, 403, "not one of this team&#39;s people")
    assert "agent-team people add NAME --role ROLE --github mallory" in response.text
    assert dash.rows() == before


def test_a_default_role_adds_a_login_nobody_holds(
    seeded: Seeded, coordinator: FakeCoordinator, github: FakeGitHubOAuth, team: PeopleRequests
) -> None:
    github.signed_in_as = "New-Person"
    made = _dashboard(seeded, coordinator, github, github_signin_default_role="contributor")
    with made.client:
        assert "joins as a contributor" in made.client.get("/login").text
        assert made.sign_in("/").status_code == 200
        assert "signed in as <strong>new-person</strong>" in made.client.get("/").text

        person = db.person_by_github(coordinator.ledger, "new-person")
        assert person is not None
        assert (person.name, person.role, person.github_login) == (
            "new-person",
            "contributor",
            "new-person",
        )
        (added,) = [r for r in db.list_audit(coordinator.ledger) if r.target == "new-person"]
        assert (added.actor, added.via, added.target) == ("new-person", "github", "new-person")

        # A second sign-in finds the person; nobody is added twice.
        made.client.cookies.clear()
        assert made.sign_in("/").status_code == 200
        assert len(db.list_people(coordinator.ledger)) == 3


def test_a_default_role_never_takes_another_persons_name(
    seeded: Seeded, coordinator: FakeCoordinator, github: FakeGitHubOAuth, team: PeopleRequests
) -> None:
    github.signed_in_as = "root"  # the owner's name, but not their GitHub login
    made = _dashboard(seeded, coordinator, github, github_signin_default_role="viewer")
    with made.client:
        before = made.rows()
        _refused(made, made.sign_in(), 403, "is someone else&#39;s already")
        assert made.rows() == before


def test_a_default_role_adds_nobody_before_the_team_has_an_owner(
    seeded: Seeded, coordinator: FakeCoordinator, github: FakeGitHubOAuth
) -> None:
    github.signed_in_as = "First-Comer"
    made = _dashboard(seeded, coordinator, github, github_signin_default_role="maintainer")
    with made.client:
        before = made.rows()
        _refused(made, made.sign_in(), 403, "once the team has an owner")
        assert made.rows() == before
        assert db.list_people(coordinator.ledger) == []  # roles stay off


@pytest.mark.parametrize("change", ["remove", "relogin", "readd"])
def test_removing_the_person_or_their_login_ends_the_session_at_once(
    dash: Dashboard, team: PeopleRequests, change: str
) -> None:
    assert dash.sign_in().status_code == 200
    assert "signed in as <strong>ada</strong>" in dash.client.get("/").text

    if change == "remove":
        team.remove("ada", actor=INTERNAL)
    elif change == "readd":  # removed and added again: an old sign-in does not come back
        team.remove("ada", actor=INTERNAL)
        team.add("ada", "maintainer", github_login="ada-l", actor=INTERNAL)
    else:
        team.remove("ada", actor=INTERNAL)
        team.add("ada", "maintainer", github_login="someone-else", actor=INTERNAL)

    assert "signed in as" not in dash.client.get("/").text
    refused = dash.client.post("/api/tasks", json={"title": "x"})
    assert refused.status_code == 401


# --- what never shows --------------------------------------------------------------------


def test_the_secret_code_and_token_never_reach_a_page_a_redirect_or_a_log(
    dash: Dashboard, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    callback = dash.authorize(dash.begin())
    code, state = _query(callback)["code"], _query(callback)["state"]
    assert dash.get(callback).status_code == 200
    dash.github.fail("/api/v3/user", 500, b"{}")
    failed = dash.authorize(dash.begin())
    assert dash.get(failed).status_code == 400
    dash.github.heal("/api/v3/user")
    assert dash.get(_with(dash.authorize(dash.begin()), code="0" * 20)).status_code == 400
    assert access_log.flush()

    (token, *_) = dash.github.tokens
    lines = [f"{record.getMessage()} {getattr(record, 'http', '')}" for record in caplog.records]
    logged = "\n".join(lines)
    shown = "\n".join(dash.pages)
    for secret in (SECRET, token):
        assert secret not in logged and secret not in shown
    # httpx and httpcore log the URLs the test's own "browser" asks for, which carry the
    # code and state by GitHub's design; the daemon's own lines are the rest. What the
    # daemon sends GitHub never carries them in a URL (the code goes in the POST body).
    ours = "\n".join(
        line
        for line, record in zip(lines, caplog.records, strict=True)
        if not record.name.startswith(("httpx", "httpcore"))
    )
    for value in (code, state, _query(failed)["code"]):
        assert value not in ours, [line for line in ours.splitlines() if value in line]
    sent = [r for r in dash.github.requests if r.path != "/login/oauth/authorize"]
    assert sent and all(not r.query for r in sent)
    assert "/login/github/callback?code=*&state=* 200" in logged  # the access log's line
    assert "ada signed in with GitHub" in logged


def test_failed_callbacks_count_against_the_address(
    seeded: Seeded, coordinator: FakeCoordinator, github: FakeGitHubOAuth, team: PeopleRequests
) -> None:
    made = _dashboard(seeded, coordinator, github, limit_logins_per_min=3)
    with made.client:
        for _ in range(2):  # right sign-ins give their place back
            made.client.cookies.clear()
            assert made.sign_in().status_code == 200
        for _ in range(3):
            assert made.get("/login/github/callback?code=x&state=y").status_code == 400
        over = made.get("/login/github/callback?code=x&state=y")
        assert over.status_code == 429 and "Retry-After" in over.headers
        assert made.sign_in().status_code == 429  # the right one waits too


@pytest.fixture
def unlimited(
    seeded: Seeded, coordinator: FakeCoordinator, github: FakeGitHubOAuth, team: PeopleRequests
) -> Iterator[Dashboard]:
    """No sign-in limit: the fuzz test below sends many failing callbacks from one address."""
    made = _dashboard(seeded, coordinator, github, limit_logins_per_min=0)
    with made.client:
        yield made


_ODD = st.one_of(
    st.sampled_from(["", "\x00", "\ud800", "\u202eevil", "x" * 5000, "%00", "🎉", "access_denied"]),
    st.text(max_size=40),
)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    query=st.dictionaries(st.sampled_from(["code", "state", "error"]), _ODD, max_size=3),
    cookie=st.one_of(st.none(), _ODD.filter(lambda v: v.isascii() and v.isprintable())),
)
def test_no_callback_is_a_server_error_or_signs_anyone_in(
    unlimited: Dashboard, query: dict[str, str], cookie: str | None
) -> None:
    dash = unlimited
    dash.client.cookies.clear()
    if cookie:
        dash.client.cookies.set(STATE_COOKIE, quote(cookie), path="/login/github")
    before = dash.rows("oauth_states")
    encoded = urlencode({k: v.encode("utf-8", "surrogatepass") for k, v in query.items()})

    response = dash.client.get(f"/login/github/callback?{encoded}", follow_redirects=False)

    assert response.status_code == 400, response.text[:300]
    assert _session(response) is None
    assert dash.rows("oauth_states") == before


def test_beginning_sign_ins_counts_per_address_whatever_cookie_comes_along(
    seeded: Seeded, coordinator: FakeCoordinator, github: FakeGitHubOAuth
) -> None:
    made = _dashboard(seeded, coordinator, github, limit_writes_per_min=3)
    with made.client:
        statuses = [
            made.client.get(
                "/login/github",
                headers={"Cookie": f"{SESSION_COOKIE}=made-up-{n}"},
                follow_redirects=False,
            ).status_code
            for n in range(5)
        ]
    assert statuses == [303, 303, 303, 429, 429], statuses
