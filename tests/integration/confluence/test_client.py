"""The Confluence v2 client against the loopback fake: auth, reads, writes, retries, errors."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr

from agent_team.config import load_settings
from agent_team.exceptions import ConfigError, ConfluenceError, ConfluenceRefusedError
from agent_team.integrations.confluence import adf
from agent_team.integrations.confluence.client import (
    BasicAuth,
    ConfluenceClient,
    OAuthClientCredentials,
    StaleVersionError,
    create_request,
    update_request,
)
from agent_team.integrations.confluence.settings import ConfluenceSettings
from tests.fakes import confluence_api as fc

FIXTURES = Path(__file__).parents[2] / "fixtures" / "adf"


@pytest.fixture
def fake() -> Iterator[fc.FakeConfluence]:
    with fc.fake_confluence() as server:
        yield server


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def basic(fake: fc.FakeConfluence, sleeps: Sleeps | None = None, **kw: float) -> ConfluenceClient:
    return ConfluenceClient(
        fake.base_url,
        BasicAuth(fc.EMAIL, SecretStr(fc.API_TOKEN)),
        sleep=sleeps if sleeps is not None else Sleeps(),
        **kw,  # type: ignore[arg-type]
    )


def test_reads_a_page_with_its_adf_body_and_version(fake: fc.FakeConfluence) -> None:
    raw = (FIXTURES / "mixed_macros.json").read_text(encoding="utf-8")
    page_id = fake.add_page("Architecture", raw, version=4)
    client = basic(fake)
    page = client.get_page(page_id)
    assert (page.id, page.title, page.space_id, page.version) == (
        page_id,
        "Architecture",
        "1001",
        4,
    )
    assert page.body_text == raw and adf.dumps(page.doc) == raw
    assert page.url == f"{fake.base_url}/spaces/S1001/pages/{page_id}"
    (request,) = fake.requests
    assert request.auth == "basic"
    assert request.query == {"body-format": ["atlas_doc_format"]}


def test_missing_page_and_bad_ids_are_refused(fake: fc.FakeConfluence) -> None:
    client = basic(fake)
    with pytest.raises(ConfluenceRefusedError, match="page 999 does not exist"):
        client.get_page("999")
    with pytest.raises(ConfluenceRefusedError, match="page ids are numbers"):
        client.get_page("../spaces")
    assert client.space_exists("1001") and not client.space_exists("4242")


def test_a_page_whose_body_is_not_adf_is_refused(fake: fc.FakeConfluence) -> None:
    page_id = fake.add_page("Broken", (FIXTURES / "not_json.txt").read_text())
    with pytest.raises(ConfluenceRefusedError, match="not valid JSON"):
        basic(fake).get_page(page_id)
    other = fake.add_page("Para", (FIXTURES / "not_a_doc.json").read_text())
    with pytest.raises(ConfluenceRefusedError, match="not an ADF `doc`"):
        basic(fake).get_page(other)


def test_create_and_update_send_the_v2_shapes(fake: fc.FakeConfluence) -> None:
    client = basic(fake)
    doc_text = adf.dumps({"type": "doc", "version": 1, "content": [adf.paragraph("hi")]})
    created = client.create_page(
        create_request(space_id="1001", parent_id="77", title="New", doc_text=doc_text)
    )
    assert created.version == 1 and fake.pages[created.id].body == doc_text
    post = fake.writes()[0]
    assert post.body == {
        "spaceId": "1001",
        "status": "current",
        "title": "New",
        "parentId": "77",
        "body": {"representation": "atlas_doc_format", "value": doc_text},
    }
    first = update_request(
        page_id=created.id,
        title="New",
        doc_text=doc_text,
        version=2,
        message="agent-team task t1: x",
    )
    updated = client.update_page(first)
    assert updated.version == 2 and fake.pages[created.id].message == "agent-team task t1: x"
    with pytest.raises(StaleVersionError, match="409"):
        client.update_page({**first, "version": {"number": 2, "message": "again"}})
    assert fake.pages[created.id].version == 2


def test_429_once_honours_retry_after(fake: fc.FakeConfluence) -> None:
    page_id = fake.add_page("P", (FIXTURES / "no_diagram.json").read_text())
    fake.fail_next[("GET", "/wiki/api/v2/pages/")] = [(429, {"Retry-After": "7"})]
    sleeps = Sleeps()
    page = basic(fake, sleeps, backoff_s=0.01).get_page(page_id)
    assert page.id == page_id
    assert len(sleeps) == 1 and 7 <= sleeps[0] <= 7.01
    assert [r.method for r in fake.requests] == ["GET", "GET"]


def test_retry_after_is_capped_and_503_backs_off(fake: fc.FakeConfluence) -> None:
    page_id = fake.add_page("P", (FIXTURES / "no_diagram.json").read_text())
    fake.fail_next[("GET", "/wiki/api/v2/pages/")] = [
        (429, {"Retry-After": "3600"}),
        (503, {}),
        (503, {}),
    ]
    sleeps = Sleeps()
    basic(fake, sleeps, retry_cap_s=5.0, backoff_s=0.5).get_page(page_id)
    assert sleeps[0] == 5.0  # an hour asked, the cap wins
    assert 1.0 <= sleeps[1] <= 1.5 and 2.0 <= sleeps[2] <= 2.5  # jittered exponential backoff


def test_retries_give_up_with_a_clear_error(fake: fc.FakeConfluence) -> None:
    page_id = fake.add_page("P", (FIXTURES / "no_diagram.json").read_text())
    fake.fail_next[("GET", "/wiki/api/v2/pages/")] = [(503, {})] * 4
    with pytest.raises(ConfluenceError, match="answered 503"):
        basic(fake, max_attempts=4).get_page(page_id)


def test_wrong_credentials_never_leak_into_the_error(fake: fc.FakeConfluence) -> None:
    page_id = fake.add_page("P", (FIXTURES / "no_diagram.json").read_text())
    client = ConfluenceClient(
        fake.base_url, BasicAuth(fc.EMAIL, SecretStr("wrong-token-value")), sleep=Sleeps()
    )
    with pytest.raises(ConfluenceError) as caught:
        client.get_page(page_id)
    assert "401" in str(caught.value) and "credentials" in str(caught.value)
    assert "wrong-token-value" not in str(caught.value)
    assert fake.requests[0].auth == "bad"


def test_oauth_client_credentials_token_is_cached_until_it_expires(
    fake: fc.FakeConfluence,
) -> None:
    page_id = fake.add_page("P", (FIXTURES / "no_diagram.json").read_text())
    now = [1000.0]
    auth = OAuthClientCredentials(
        fc.CLIENT_ID, SecretStr(fc.CLIENT_SECRET), fake.token_url, clock=lambda: now[0]
    )
    client = ConfluenceClient(fake.base_url, auth, sleep=Sleeps())
    client.get_page(page_id)
    client.get_page(page_id)
    assert auth.fetched == 1
    assert [r.auth for r in fake.requests if r.path != "/oauth/token"] == ["bearer", "bearer"]
    token_request = next(r for r in fake.requests if r.path == "/oauth/token")
    assert token_request.body["grant_type"] == "client_credentials"
    now[0] += fake.token_lifetime_s  # past expiry: a new token
    client.get_page(page_id)
    assert auth.fetched == 2


def test_oauth_refused_says_which_settings_to_check(fake: fc.FakeConfluence) -> None:
    auth = OAuthClientCredentials(fc.CLIENT_ID, SecretStr("nope-secret"), fake.token_url)
    client = ConfluenceClient(fake.base_url, auth, sleep=Sleeps())
    with pytest.raises(ConfluenceError, match="CLIENT_SECRET") as caught:
        client.get_page("1")
    assert "nope-secret" not in str(caught.value)


def test_from_settings_picks_the_auth_and_refuses_half_configs(
    fake: fc.FakeConfluence, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    oauth = load_settings(
        confluence_base_url=fake.base_url,
        confluence_client_id=fc.CLIENT_ID,
        confluence_client_secret=fc.CLIENT_SECRET,
        confluence_token_url=fake.token_url,
    )
    assert isinstance(
        ConfluenceClient.from_settings(ConfluenceSettings.from_settings(oauth)).auth,
        OAuthClientCredentials,
    )
    basic_settings = load_settings(
        confluence_base_url=fake.base_url,
        confluence_email=fc.EMAIL,
        confluence_api_token=fc.API_TOKEN,
    )
    assert isinstance(
        ConfluenceClient.from_settings(ConfluenceSettings.from_settings(basic_settings)).auth,
        BasicAuth,
    )
    with pytest.raises(ConfigError, match="credentials are missing"):
        ConfluenceClient.from_settings(
            ConfluenceSettings.from_settings(load_settings(confluence_base_url=fake.base_url))
        )
    with pytest.raises(ConfigError, match="BASE_URL"):
        ConfluenceClient.from_settings(ConfluenceSettings.from_settings(load_settings()))


def test_fake_records_json_bodies(fake: fc.FakeConfluence) -> None:
    # The recorded body is what went over the wire, parsed: the ADF stays a JSON *string*.
    client = basic(fake)
    doc_text = json.dumps({"type": "doc", "version": 1, "content": []})
    client.create_page(
        create_request(space_id="1001", parent_id=None, title="T", doc_text=doc_text)
    )
    assert isinstance(fake.writes()[0].body["body"]["value"], str)
    assert "parentId" not in fake.writes()[0].body


def test_one_oauth_token_for_many_threads(fake: fc.FakeConfluence) -> None:
    page_id = fake.add_page("P", (FIXTURES / "no_diagram.json").read_text())
    auth = OAuthClientCredentials(fc.CLIENT_ID, SecretStr(fc.CLIENT_SECRET), fake.token_url)
    client = ConfluenceClient(fake.base_url, auth, sleep=Sleeps())
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def read() -> None:
        try:
            start.wait(timeout=10)
            client.get_page(page_id)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []
    assert auth.fetched == 1
    assert sum(1 for r in fake.requests if r.path == "/oauth/token") == 1


# -- a write whose response is lost is never sent again ---------------------------------------


def _update(page_id: str, version: int) -> dict[str, object]:
    doc_text = adf.dumps({"type": "doc", "version": 1, "content": [adf.paragraph("new")]})
    return update_request(
        page_id=page_id,
        title="P",
        doc_text=doc_text,
        version=version,
        message="agent-team task t1: P",
    )


@pytest.mark.parametrize("how", ["drop", "stall"])
def test_a_write_whose_response_is_lost_is_not_retried(fake: fc.FakeConfluence, how: str) -> None:
    page_id = fake.add_page("P", (FIXTURES / "no_diagram.json").read_text(), version=3)
    fake.lose_response[("PUT", "/wiki/api/v2/pages/")] = [how]
    client = basic(fake, timeout_s=0.5)
    with pytest.raises(ConfluenceError, match="may have landed") as caught:
        client.update_page(_update(page_id, 4))
    assert not isinstance(caught.value, ConfluenceRefusedError)
    assert [w.method for w in fake.writes()] == ["PUT"]  # sent once, never again
    assert fake.pages[page_id].version == 4
    fake.lose_response[("POST", "/wiki/api/v2/pages")] = [how]
    with pytest.raises(ConfluenceError, match="may have landed"):
        client.create_page(
            create_request(
                space_id="1001", parent_id=None, title="N", doc_text=fake.pages[page_id].body
            )
        )
    assert [w.method for w in fake.writes()] == ["PUT", "POST"]


class _RefuseFirstConnect(httpx.BaseTransport):
    """Fails the first request before it leaves (ConnectError), then sends for real."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.refused = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.refused == 0:
            self.refused += 1
            raise httpx.ConnectError("connection refused", request=request)
        return self.inner.handle_request(request)


def test_a_write_that_never_left_is_retried(fake: fc.FakeConfluence) -> None:
    page_id = fake.add_page("P", (FIXTURES / "no_diagram.json").read_text(), version=3)
    transport = _RefuseFirstConnect()
    sleeps = Sleeps()
    client = ConfluenceClient(
        fake.base_url,
        BasicAuth(fc.EMAIL, SecretStr(fc.API_TOKEN)),
        transport=transport,
        sleep=sleeps,
    )
    assert client.update_page(_update(page_id, 4)).version == 4
    assert transport.refused == 1 and len(sleeps) == 1
    assert [w.method for w in fake.writes()] == ["PUT"]


def test_a_read_is_still_retried_after_a_lost_response(fake: fc.FakeConfluence) -> None:
    page_id = fake.add_page("P", (FIXTURES / "no_diagram.json").read_text())
    fake.lose_response[("GET", "/wiki/api/v2/pages/")] = ["drop"]
    assert basic(fake).get_page(page_id).id == page_id


def test_only_confluence_errors_about_the_space_blame_the_space_id(
    fake: fc.FakeConfluence,
) -> None:
    client = basic(fake)
    doc_text = adf.dumps({"type": "doc", "version": 1, "content": []})
    client.create_page(
        create_request(space_id="1001", parent_id=None, title="Namespace layout", doc_text=doc_text)
    )
    with pytest.raises(ConfluenceError) as caught:  # a duplicate title, not a wrong space
        client.create_page(
            create_request(
                space_id="1001", parent_id=None, title="Namespace layout", doc_text=doc_text
            )
        )
    assert "already exists" in str(caught.value) and "space id" not in str(caught.value)
    assert not isinstance(caught.value, ConfluenceRefusedError)
    with pytest.raises(ConfluenceRefusedError, match="check the space id"):
        client.create_page(
            create_request(space_id="4242", parent_id=None, title="Other", doc_text=doc_text)
        )


@pytest.mark.parametrize(
    ("header", "low", "high"),
    [
        ("Wed, 02 Dec 2026 16:00:07 GMT", 7.0, 7.01),  # seven seconds after "now"
        ("Wed, 02 Dec 2026 17:00:00 GMT", 10.0, 10.0),  # an hour: the cap wins
        ("Wed, 02 Dec 2026 15:59:00 GMT", 0.0, 0.01),  # already past: retry now
        ("soon", 0.01, 0.03),  # unreadable: backoff
    ],
)
def test_retry_after_as_an_http_date(
    fake: fc.FakeConfluence, header: str, low: float, high: float
) -> None:
    page_id = fake.add_page("P", (FIXTURES / "no_diagram.json").read_text())
    fake.fail_next[("GET", "/wiki/api/v2/pages/")] = [(503, {"Retry-After": header})]
    sleeps = Sleeps()
    client = ConfluenceClient(
        fake.base_url,
        BasicAuth(fc.EMAIL, SecretStr(fc.API_TOKEN)),
        sleep=sleeps,
        retry_cap_s=10.0,
        backoff_s=0.01,
        wall_clock=lambda: datetime(2026, 12, 2, 16, 0, 0, tzinfo=UTC),
    )
    client.get_page(page_id)
    assert len(sleeps) == 1 and low <= sleeps[0] <= high
