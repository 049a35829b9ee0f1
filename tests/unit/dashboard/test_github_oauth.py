"""GitHub's OAuth web flow, client side: what goes to GitHub, and what a refusal says.

The whole flow runs against the loopback GitHub in
`tests/integration/dashboard/test_github_signin.py`; here httpx's mock transport
plays GitHub for the answers a live server rarely gives.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from agent_team.config import load_settings
from agent_team.dashboard.github_oauth import GitHubOAuth
from agent_team.exceptions import SignInRefusedError

SECRET = "unit-oauth-secret-0c9d"
TOKEN = "gho_unitTokenValue0123456789abcdefABCDEF"


def _oauth(answer: Callable[[httpx.Request], httpx.Response]) -> GitHubOAuth:
    return GitHubOAuth(
        client_id="Iv1.unit",
        client_secret=SECRET,
        web_url="https://ghe.example/",
        api_url="https://ghe.example/api/v3",
        transport=httpx.MockTransport(answer),
    )


def _github(token_answer: object, user_answer: object = None) -> Callable[..., httpx.Response]:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/login/oauth/access_token":
            return httpx.Response(200, json=token_answer)
        return httpx.Response(200, json=user_answer)

    return answer


def _refusal(oauth: GitHubOAuth) -> str:
    with pytest.raises(SignInRefusedError) as info:
        asyncio.run(oauth.login_of("c0de", redirect_uri="https://team.example/cb"))
    message = str(info.value)
    assert SECRET not in message and TOKEN not in message and "c0de" not in message
    return message


def test_the_authorize_url_names_the_app_and_never_the_secret() -> None:
    url = _oauth(_github({})).authorize_url(state="st4te", redirect_uri="https://t.example/cb")

    parts = urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == (
        "https://ghe.example/login/oauth/authorize"
    )
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    assert query == {
        "client_id": "Iv1.unit",
        "redirect_uri": "https://t.example/cb",
        "state": "st4te",
        "scope": "read:user",
        "allow_signup": "false",
    }
    assert SECRET not in url


def test_a_good_exchange_reads_the_login_with_the_token_once() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return _github(
            {"access_token": TOKEN, "token_type": "bearer", "scope": "read:user"},
            {"login": "Ada-L", "id": 1},
        )(request)

    login = asyncio.run(_oauth(answer).login_of("c0de", redirect_uri="https://t.example/cb"))

    assert login == "Ada-L"
    exchange, user = seen
    assert exchange.method == "POST" and not exchange.url.query
    assert parse_qs(exchange.content.decode())["client_secret"] == [SECRET]
    assert str(user.url) == "https://ghe.example/api/v3/user"
    assert user.headers["Authorization"] == f"Bearer {TOKEN}"


@pytest.mark.parametrize(
    ("token_answer", "user_answer", "said"),
    [
        ({"error": "bad_verification_code", "error_description": SECRET}, None, "sign-in code"),
        ({"error": "something_new"}, None, "(something_new)"),
        ({"error": "<script>"}, None, "(?)"),
        ({"access_token": TOKEN, "token_type": "mac"}, None, "not a bearer token"),
        ({"access_token": "", "token_type": "bearer"}, None, "no access token"),
        ([TOKEN], None, "not a JSON object"),
        ({"access_token": TOKEN, "token_type": "bearer"}, {"login": "not a login!"}, "no login"),
        ({"access_token": TOKEN, "token_type": "bearer"}, [{"login": "ada"}], "not a JSON"),
    ],
)
def test_what_github_answers_wrongly_is_refused_in_our_words(
    token_answer: object, user_answer: object, said: str
) -> None:
    assert said in _refusal(_oauth(_github(token_answer, user_answer)))


def test_github_out_of_reach_is_named_by_what_failed() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    assert "could not be reached" in _refusal(_oauth(answer))
    assert "ReadTimeout" in _refusal(_oauth(answer))


def test_an_over_long_answer_is_refused() -> None:
    huge = {"access_token": TOKEN, "token_type": "bearer", "pad": "x" * 100_000}
    assert "over-long" in _refusal(_oauth(_github(huge)))


@pytest.mark.parametrize(
    ("error", "said"),
    [
        ("access_denied", "did not authorize"),
        ("application_suspended", "suspended"),
        ("new_thing", "(new_thing)"),
        ("<b>x</b>", "(an unknown error)"),
    ],
)
def test_an_error_github_sent_the_browser_back_with_is_in_our_words(error: str, said: str) -> None:
    assert said in GitHubOAuth.authorize_refusal(error)


@pytest.mark.usefixtures("isolated_env")
def test_the_settings_name_the_app_only_when_both_halves_are_set() -> None:
    assert GitHubOAuth.from_settings(load_settings()) is None
    on = load_settings(
        github_oauth_client_id="Iv1.x",
        github_oauth_client_secret=SECRET,
        github_oauth_url="https://ghe.example",
        github_api_url="https://ghe.example/api/v3",
    )
    app = GitHubOAuth.from_settings(on)
    assert app is not None and app.secrets() == (SECRET,)
    assert json.dumps(app.authorize_url(state="s", redirect_uri="r")).find(SECRET) == -1
