"""The sandbox's allow-list: what an entry may be, and what it matches."""

from __future__ import annotations

import pytest

from agent_team.common.hostnames import host_allowed, parse_allow_hosts


def test_entries_are_host_names_or_a_wildcard_domain() -> None:
    assert parse_allow_hosts([" API.Anthropic.com ", "*.pypi.org", "", "pypi.org."]) == (
        "api.anthropic.com",
        "*.pypi.org",
        "pypi.org",
    )


@pytest.mark.parametrize(
    "entry",
    ["https://pypi.org", "pypi.org:443", "pypi.org/simple", "*", "*.", "a..b", "-x.org", "x_y.org"],
)
def test_anything_else_is_refused_naming_the_entry(entry: str) -> None:
    with pytest.raises(ValueError, match="is not a host name"):
        parse_allow_hosts([entry])


def test_a_wildcard_over_a_whole_top_level_domain_is_refused() -> None:
    with pytest.raises(ValueError, match="whole top-level domain"):
        parse_allow_hosts(["*.com"])


def test_a_wildcard_matches_names_under_the_domain_not_the_domain() -> None:
    allowed = ("*.githubusercontent.com", "pypi.org")
    assert host_allowed("raw.githubusercontent.com", allowed)
    assert host_allowed("a.b.githubusercontent.com", allowed)
    assert not host_allowed("githubusercontent.com", allowed)
    assert not host_allowed("evilgithubusercontent.com", allowed)
    assert host_allowed("PyPI.org.", allowed)
    assert not host_allowed("files.pypi.org", allowed)
    assert not host_allowed("pypi.org.evil.com", allowed)
