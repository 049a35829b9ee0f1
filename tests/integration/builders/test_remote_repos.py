"""Builds from where a repository lives: a mirror per remote, fetched over loopback smart HTTP.

The remote is a real bare repository behind `git http-backend` (`tests/git_server.py`);
the builders fetch it with the real git. What must hold: a task branch starts
from the remote's head as fetched for it, so a push between two tasks is in the
second build; an existing task branch keeps its history and needs no fetch; a
fetch that fails parks (`RepoUnavailableError`) with git's words; the token
reaches the GitHub host alone and no text, argv or file of ours; one fetch of
a remote runs at a time.
"""

from __future__ import annotations

import fcntl
import logging
import threading
from pathlib import Path

import pytest

from agent_team.builders import (
    BuildTask,
    CommandBuilder,
    OfflineBuilder,
    remove_worktree,
    run_build,
)
from agent_team.builders.base import Builder
from agent_team.builders.gitcmd import registry_lock_path
from agent_team.builders.repos import REMOTE_HEAD, mirror_path
from agent_team.common.git_host import GitHost, basic_credential
from agent_team.common.repo_spec import RemoteRepo, parse_repo
from agent_team.exceptions import BuildError, RepoUnavailableError
from tests.git_server import GitServer, push_commit
from tests.integration.builders.conftest import GitCalls
from tests.integration.builders.helpers import changed_files, git, make_repo

REPO = "acme/widgets"
TOKEN = "ghp_" + "PrivateRepoToken" * 2
PLAN = "# Plan\n\n1. Add the widget.\n"


def builders() -> list[Builder]:
    return [OfflineBuilder(), CommandBuilder("printf 'built\\n' > built.txt", 60)]


def spec_of(url: str) -> RemoteRepo:
    spec = parse_repo(url)
    assert isinstance(spec, RemoteRepo)
    return spec


def parent(mirror: Path, commit: str) -> str:
    return git(mirror, "rev-parse", f"{commit}^")


@pytest.mark.parametrize("builder", builders(), ids=lambda b: b.name)
def test_a_task_naming_a_url_is_built_from_a_fetched_mirror(
    git_server: GitServer, state_dir: Path, builder: Builder
) -> None:
    bare = git_server.add(REPO)
    url = git_server.url_of(REPO)
    task = BuildTask(task_id="t-url", title="Add the widget", repo=url)

    built = run_build(builder, task, PLAN, repo_path=None, state_dir=state_dir)

    mirror = mirror_path(state_dir, spec_of(url))
    assert mirror.parent == state_dir.resolve() / "mirrors"
    assert mirror.name.startswith("acme-widgets-") and mirror.name.endswith(".git")
    assert git(mirror, "rev-parse", "--is-bare-repository") == "true"
    assert git(mirror, "rev-parse", f"refs/heads/{built.branch}") == built.commit
    assert parent(mirror, built.commit) == git(bare, "rev-parse", "main")
    expected = "built.txt" if builder.name == "command" else "docs/agent-team/t-url.md"
    assert changed_files(mirror, built.commit) == [expected]
    assert git(mirror, "config", "remote.origin.url") == url
    assert git_server.fetches(), "the build fetched over HTTP"
    # A finished task's worktree goes; its registration in the mirror with it, the branch stays.
    assert remove_worktree("t-url", state_dir=state_dir) is (builder.name == "command")
    assert not list((mirror / "worktrees").glob("*"))
    assert git(mirror, "rev-parse", f"refs/heads/{built.branch}") == built.commit


def test_a_push_between_two_tasks_is_in_the_second_build_and_old_branches_keep_theirs(
    git_server: GitServer, state_dir: Path
) -> None:
    bare = git_server.add(REPO)
    url = git_server.url_of(REPO)
    first_head = git(bare, "rev-parse", "main")
    builder = CommandBuilder("printf 'built\\n' > built.txt", 60)
    first = run_build(
        builder, BuildTask("t-1", "One", repo=url), PLAN, repo_path=None, state_dir=state_dir
    )

    pushed = push_commit(bare, "someone else's change", {"src/app.py": "print('hi')\n"})
    second = run_build(
        builder, BuildTask("t-2", "Two", repo=url), PLAN, repo_path=None, state_dir=state_dir
    )

    mirror = mirror_path(state_dir, spec_of(url))
    assert parent(mirror, first.commit) == first_head
    assert parent(mirror, second.commit) == pushed
    assert git(mirror, "rev-parse", REMOTE_HEAD) == pushed

    # The first task's branch is its build record: a new plan builds on it, nothing is fetched.
    fetched = len(git_server.fetches())
    again = run_build(
        builder,
        BuildTask("t-1", "One", repo=url),
        PLAN + "2. And more.\n",
        repo_path=None,
        state_dir=state_dir,
    )
    assert parent(mirror, again.commit) == first.commit
    assert len(git_server.fetches()) == fetched


def test_a_remote_that_went_away_parks_a_new_build_but_a_recorded_one_is_still_found(
    git_server: GitServer, state_dir: Path
) -> None:
    git_server.add(REPO)
    url = git_server.url_of(REPO)
    builder = OfflineBuilder()
    first = run_build(
        builder, BuildTask("t-1", "One", repo=url), PLAN, repo_path=None, state_dir=state_dir
    )
    git_server.gone = True

    with pytest.raises(RepoUnavailableError) as parked:
        run_build(
            builder, BuildTask("t-2", "Two", repo=url), PLAN, repo_path=None, state_dir=state_dir
        )
    message = str(parked.value)
    assert parked.value.parked_reason == "repo_unavailable"
    assert f"could not fetch {url}" in message and "503" in message, message
    assert "\n" not in message

    again = run_build(
        builder, BuildTask("t-1", "One", repo=url), PLAN, repo_path=None, state_dir=state_dir
    )
    assert (again.reused, again.commit) == (True, first.commit)

    git_server.gone = False
    built = run_build(
        builder, BuildTask("t-2", "Two", repo=url), PLAN, repo_path=None, state_dir=state_dir
    )
    assert built.reused is False


def test_a_private_repository_is_read_with_the_token_which_goes_nowhere_else(
    git_server: GitServer,
    state_dir: Path,
    git_calls: GitCalls,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    git_server.add(REPO)
    git_server.token = TOKEN
    host = git_server.url + "/"
    builder = OfflineBuilder()
    secrets = (TOKEN, basic_credential(TOKEN))

    # Without the token the host refuses, and the task would park.
    with pytest.raises(RepoUnavailableError) as refused:
        run_build(
            builder,
            BuildTask("t-anon", "Anon", repo=REPO),
            PLAN,
            repo_path=None,
            state_dir=state_dir,
            git_host=GitHost(host, None),
        )
    assert "could not fetch acme/widgets" in str(refused.value)

    # The same repository on another host name: the token is not sent there either.
    elsewhere = git_server.url.replace("127.0.0.1", "localhost") + f"/{REPO}.git"
    with pytest.raises(RepoUnavailableError) as not_sent:
        run_build(
            builder,
            BuildTask("t-other", "Other", repo=elsewhere),
            PLAN,
            repo_path=None,
            state_dir=state_dir,
            git_host=GitHost(host, TOKEN),
        )
    assert all(not r.authorised for r in git_server.requests), "no credential left our host"

    built = run_build(
        builder,
        BuildTask("t-owner", "Owner", repo=REPO),
        PLAN,
        repo_path=None,
        state_dir=state_dir,
        git_host=GitHost(host, TOKEN),
    )
    assert git_server.requests[-1].authorised and git_server.requests[-1].status == 200
    mirror = mirror_path(state_dir, spec_of(git_server.url_of(REPO)))
    assert git(mirror, "rev-parse", f"refs/heads/{built.branch}") == built.commit

    config = (mirror / "config").read_text(encoding="utf-8")
    words = " ".join(" ".join(call) for call in git_calls.take())
    texts = [str(refused.value), str(not_sent.value), config, words, caplog.text]
    assert not [text for text in texts for secret in secrets if secret in text]


def test_a_fetch_never_runs_what_a_builder_planted_in_the_mirrors_config(
    git_server: GitServer, state_dir: Path, tmp_path: Path
) -> None:
    git_server.add(REPO)
    url = git_server.url_of(REPO)
    run_build(
        OfflineBuilder(),
        BuildTask("t-1", "One", repo=url),
        PLAN,
        repo_path=None,
        state_dir=state_dir,
    )
    # What a builder working in a worktree of the mirror could write into its config.
    mirror = mirror_path(state_dir, spec_of(url))
    loot = tmp_path / "loot.txt"
    git(mirror, "config", "credential.helper", f"!env > '{loot}'; false")
    git(mirror, "config", "core.askPass", str(tmp_path / "askpass"))
    git_server.token = TOKEN  # the host now asks for credentials: a helper would run

    with pytest.raises(RepoUnavailableError):
        run_build(
            OfflineBuilder(),
            BuildTask("t-2", "Two", repo=url),
            PLAN,
            repo_path=None,
            state_dir=state_dir,
        )
    assert not loot.exists()


def test_two_builds_of_one_repository_at_once_fetch_one_at_a_time(
    git_server: GitServer, state_dir: Path
) -> None:
    git_server.add(REPO)
    url = git_server.url_of(REPO)
    lock = registry_lock_path(state_dir.resolve(), mirror_path(state_dir, spec_of(url)))
    held: list[bool] = []

    def lock_is_held(_path: str) -> None:
        # Inside the fetch's request: whoever fetches must hold the repository's lock.
        with lock.open("a+b") as handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                held.append(True)
                return
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            held.append(False)

    git_server.on_fetch = lock_is_held
    start = threading.Barrier(2)
    results: dict[str, str] = {}
    errors: list[BaseException] = []

    def build(task_id: str, builder: Builder) -> None:
        try:
            start.wait(timeout=30)
            task = BuildTask(task_id, task_id, repo=url)
            results[task_id] = run_build(
                builder, task, PLAN, repo_path=None, state_dir=state_dir
            ).commit
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=build, args=("t-a", OfflineBuilder())),
        threading.Thread(target=build, args=("t-b", CommandBuilder("true", 60))),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert not errors, errors
    assert set(results) == {"t-a", "t-b"}
    # Each build fetched (info/refs, ls-refs, fetch): six requests, all under the lock.
    assert len(held) == len(git_server.fetches()) >= 4
    assert all(held), held
    assert git_server.max_fetching == 1


def test_a_stored_repository_we_do_not_take_fails_the_build_saying_so(state_dir: Path) -> None:
    task = BuildTask("t-bad", "Bad", repo="file:///srv/x")
    with pytest.raises(BuildError, match="file: URLs are not taken"):
        run_build(OfflineBuilder(), task, PLAN, repo_path=None, state_dir=state_dir)


def test_a_task_naming_a_base_branch_starts_from_its_head(
    git_server: GitServer, state_dir: Path
) -> None:
    bare = git_server.add(REPO)
    develop = push_commit(bare, "develop work", {"dev.txt": "dev\n"}, branch="develop")
    url = git_server.url_of(REPO)
    on_main = BuildTask(task_id="t-main", title="On main", repo=url)
    on_develop = BuildTask(task_id="t-dev", title="On develop", repo=f"{url}#develop")

    main_build = run_build(OfflineBuilder(), on_main, PLAN, repo_path=None, state_dir=state_dir)
    dev_build = run_build(OfflineBuilder(), on_develop, PLAN, repo_path=None, state_dir=state_dir)

    mirror = mirror_path(state_dir, spec_of(url))  # one mirror for both bases
    assert parent(mirror, main_build.commit) == git(bare, "rev-parse", "main")
    assert parent(mirror, dev_build.commit) == develop


def test_a_base_branch_the_remote_lacks_parks_the_task_with_gits_words(
    git_server: GitServer, state_dir: Path
) -> None:
    git_server.add(REPO)
    task = BuildTask(task_id="t-nobranch", title="x", repo=f"{git_server.url_of(REPO)}#nope")

    with pytest.raises(RepoUnavailableError, match="nope"):
        run_build(OfflineBuilder(), task, PLAN, repo_path=None, state_dir=state_dir)


def test_a_local_clone_with_a_base_branch_starts_there(tmp_path: Path, state_dir: Path) -> None:
    clone = make_repo(tmp_path / "clone")
    git(clone, "checkout", "-q", "-b", "release")
    (clone / "r.txt").write_text("r\n")
    git(clone, "add", "r.txt")
    git(clone, "commit", "-q", "-m", "release work")
    release = git(clone, "rev-parse", "release")
    git(clone, "checkout", "-q", "main")

    built = run_build(
        OfflineBuilder(),
        BuildTask(task_id="t-rel", title="x", repo=f"{clone}#release"),
        PLAN,
        repo_path=None,
        state_dir=state_dir,
    )
    assert parent(clone, built.commit) == release
    with pytest.raises(BuildError, match="no branch 'gone'"):
        run_build(
            OfflineBuilder(),
            BuildTask(task_id="t-gone", title="x", repo=f"{clone}#gone"),
            PLAN,
            repo_path=None,
            state_dir=state_dir,
        )
