"""Which repository a task names: the forms taken, the ones refused (one line each), how stored."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_team.common.git_host import GitHost, auth_env, git_host_url
from agent_team.common.repo_spec import LocalRepo, RemoteRepo, checked_repo, parse_repo
from agent_team.exceptions import InvalidRepoError, TaskRefusedError

HOST = "https://ghe.example/"


@pytest.mark.parametrize(
    ("text", "url", "name", "stored"),
    [
        ("acme/widgets", "https://ghe.example/acme/widgets.git", "acme/widgets", "acme/widgets"),
        (
            "acme/widgets.git",
            "https://ghe.example/acme/widgets.git",
            "acme/widgets",
            "acme/widgets",
        ),
        (
            "https://GitLab.example/group/sub/tool.git/",
            "https://gitlab.example/group/sub/tool.git",
            "sub/tool",
            "https://gitlab.example/group/sub/tool.git",
        ),
        (
            "http://127.0.0.1:8080/acme/widgets",
            "http://127.0.0.1:8080/acme/widgets",
            "acme/widgets",
            "http://127.0.0.1:8080/acme/widgets",
        ),
        (
            "git@github.com:acme/widgets.git",
            "git@github.com:acme/widgets.git",
            "acme/widgets",
            "git@github.com:acme/widgets.git",
        ),
    ],
)
def test_remote_forms_are_taken(text: str, url: str, name: str, stored: str) -> None:
    spec = parse_repo(f"  {text} ", github_host=HOST)
    assert spec == RemoteRepo(url=url, name=name, text=stored)


@pytest.mark.parametrize("text", ["/srv/clones/app", "./acme/widgets", "~/app", "app", "a/b/c"])
def test_paths_are_local(text: str) -> None:
    assert parse_repo(text) == LocalRepo(Path(text))


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("file:///srv/x", "give the folder's path itself"),
        ("FILE:x", "give the folder's path itself"),
        ("ssh://h/x", "write it as git@host:owner/name.git"),
        ("git+ssh://h/o/n", "write it as git@host:owner/name.git"),
        ("ftp://h/o/n", "ftp:// URLs are not taken"),
        ("https://h/only", "its path must be owner/name"),
        ("https://h/o/n?x=1", "no query or fragment"),
        ("https://h/o/../n", "its path must be owner/name"),
        ("https://h_h/o/n", "not a host name"),
        ("git@h:/abs/n.git", "write the path after `:`"),
        ("host:owner/name", "reads as host:path"),
        ("", "the repository is empty"),
        ("acme/\x07bell", "control characters"),
    ],
)
def test_other_forms_are_refused_in_one_line_saying_what_to_do(text: str, says: str) -> None:
    with pytest.raises(InvalidRepoError) as refused:
        parse_repo(text)
    message = str(refused.value)
    assert says in message and "\n" not in message
    assert isinstance(refused.value, TaskRefusedError) and isinstance(refused.value, ValueError)


@pytest.mark.parametrize(
    "text", ["https://user:hunter2@h/o/n", "https://hunter2@h/o/n.git", "http://u:hunter2@h/o/n"]
)
def test_a_url_with_user_info_is_refused_without_repeating_it(text: str) -> None:
    with pytest.raises(InvalidRepoError, match="user name or password") as refused:
        parse_repo(text)
    assert "hunter2" not in str(refused.value)


def test_a_submit_stores_paths_absolute_and_checks_they_are_folders(tmp_path: Path) -> None:
    (tmp_path / "clone").mkdir()
    assert checked_repo(str(tmp_path / "clone")) == str(tmp_path / "clone")
    assert checked_repo("clone", cwd=tmp_path) == str(tmp_path / "clone")
    assert checked_repo("acme/widgets", cwd=tmp_path) == "acme/widgets"
    with pytest.raises(InvalidRepoError, match="give an absolute path"):
        checked_repo("clone")
    with pytest.raises(InvalidRepoError, match="is not a folder here"):
        checked_repo(str(tmp_path / "missing"))
    with pytest.raises(InvalidRepoError, match="cannot be named here"):
        checked_repo(str(tmp_path / "clone"), local_paths=False)
    assert checked_repo("git@h:o/n.git", local_paths=False) == "git@h:o/n.git"


def test_the_token_goes_to_the_github_host_alone() -> None:
    host = GitHost.of("http://127.0.0.1:9/", "secret")
    assert host.url == "http://127.0.0.1:9/"
    assert host.env_for("http://127.0.0.1:9/acme/app.git")["GIT_CONFIG_KEY_0"] == (
        "http.http://127.0.0.1:9/.extraHeader"
    )
    for elsewhere in ("http://localhost:9/acme/app.git", "https://127.0.0.1:9/a/b", "git@h:a/b"):
        assert "GIT_CONFIG_COUNT" not in host.env_for(elsewhere)
    assert "secret" not in repr(host)
    assert auth_env(None, host.url) == host.env_for("http://other/a/b")
    assert git_host_url("https://api.github.com") == "https://github.com/"
    assert git_host_url("https://ghe.example/api/v3") == "https://ghe.example/"


def test_a_base_branch_follows_a_hash() -> None:
    named = parse_repo("acme/widgets#develop")
    assert isinstance(named, RemoteRepo)
    assert (named.branch, named.text, named.url) == (
        "develop",
        "acme/widgets#develop",
        "https://github.com/acme/widgets.git",
    )
    url = parse_repo("https://git.example/acme/widgets.git#release/2.1")
    assert isinstance(url, RemoteRepo) and url.branch == "release/2.1"
    assert url.text == "https://git.example/acme/widgets.git#release/2.1"
    local = parse_repo("/srv/clones/app#hotfix")
    assert isinstance(local, LocalRepo) and (local.path, local.branch) == (
        Path("/srv/clones/app"),
        "hotfix",
    )
    assert parse_repo("acme/widgets").branch is None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "bad",
    ["acme/widgets#", "acme/widgets#-x", "acme/widgets#a..b", "acme/widgets#x.lock", "o/n#a b"],
)
def test_a_branch_git_would_refuse_is_refused_at_submit(bad: str) -> None:
    with pytest.raises(InvalidRepoError, match="branch name"):
        parse_repo(bad)


def test_a_checked_local_path_keeps_its_base_branch(tmp_path: Path) -> None:
    assert checked_repo(f"{tmp_path}#main") == f"{tmp_path.resolve()}#main"
