"""Where the task page links a branch, a commit and a pull request: only pushed work, only
http(s) addresses, the repository's page read from the PR, the submit or the GitHub issue."""

from __future__ import annotations

from agent_team.dashboard.task_links import Link, repo_web_url, work_links

GITHUB = "https://github.com/"


def test_a_repository_as_a_task_names_it_has_a_web_page() -> None:
    assert repo_web_url("acme/app", github_host=GITHUB) == "https://github.com/acme/app"
    assert repo_web_url("acme/app#develop", github_host=GITHUB) == "https://github.com/acme/app"
    ghe = "https://ghe.example/"
    assert repo_web_url("acme/app", github_host=ghe) == "https://ghe.example/acme/app"
    assert (
        repo_web_url("https://git.example/team/app.git", github_host=GITHUB)
        == "https://git.example/team/app"
    )
    assert (
        repo_web_url("git@gitlab.example:team/app.git", github_host=GITHUB)
        == "https://gitlab.example/team/app"
    )


def test_a_path_or_nonsense_has_no_web_page() -> None:
    for named in (None, "", "/srv/clones/app", "file:///srv/app", "javascript:alert(1)"):
        assert repo_web_url(named, github_host=GITHUB) is None


def test_pushed_work_is_linked_on_the_pull_requests_repository() -> None:
    links = work_links(
        branch="agent-team/t1",
        commit="0123456789abcdef0123",
        pull_url="https://github.com/acme/app/pull/12",
        pull_name="acme/app#12",
        pushed=True,
        repos=(None,),
        source="cli",
        github_host=GITHUB,
    )
    assert links == [
        Link("Branch", "agent-team/t1", "https://github.com/acme/app/tree/agent-team/t1"),
        Link(
            "Commit",
            "0123456789ab",
            "https://github.com/acme/app/commit/0123456789abcdef0123",
            "0123456789abcdef0123",
        ),
        Link("Pull request", "acme/app#12", "https://github.com/acme/app/pull/12"),
    ]


def test_work_not_pushed_is_text_and_only_http_urls_are_links() -> None:
    links = work_links(
        branch="agent-team/t1",
        commit="abc",
        pull_url=None,
        pull_name=None,
        pushed=False,
        repos=("acme/app",),
        source="github:acme/app",
        github_host=GITHUB,
    )
    assert [(link.label, link.url) for link in links] == [("Branch", None), ("Commit", None)]
    assert links[0].title == "not pushed"
    odd = work_links(
        branch=None,
        commit=None,
        pull_url="javascript:alert(1)",
        pull_name="acme/app#1",
        pushed=True,
        repos=(),
        source="cli",
        github_host=GITHUB,
    )
    assert odd == [Link("Pull request", "acme/app#1", None)]


def test_the_repository_comes_from_the_submit_else_the_issue_it_came_from() -> None:
    def branch_url(repos: tuple[str | None, ...], source: str) -> str | None:
        (branch,) = work_links(
            branch="b",
            commit=None,
            pull_url=None,
            pull_name=None,
            pushed=True,
            repos=repos,
            source=source,
            github_host=GITHUB,
        )
        return branch.url

    assert branch_url(("https://git.example/t/a",), "github:acme/app") == (
        "https://git.example/t/a/tree/b"
    )
    assert branch_url((None,), "github:acme/app") == "https://github.com/acme/app/tree/b"
    assert branch_url((None,), "dashboard") is None
