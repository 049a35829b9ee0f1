"""A follow-up whose whole change removes or skips tests is told apart from a real fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_team.builders.test_guard import is_test_path, weakens_tests_only
from tests.integration.builders.helpers import git

TEST_FILE = """import pytest


def test_login():
    assert login("a") == "ok"


def test_cookie():
    assert cookie() == "email"
"""


def commit(repo: Path, files: dict[str, str | None], message: str) -> str:
    for name, text in files.items():
        path = repo / name
        if text is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q", "-b", "main")
    commit(
        tmp_path,
        {"tests/test_login.py": TEST_FILE, "app/login.py": "def login(x):\n    return 'ok'\n"},
        "base",
    )
    return tmp_path


def test_deleting_a_test_is_refused(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    text = TEST_FILE.split("\n\n\ndef test_cookie")[0] + "\n"
    head = commit(repo, {"tests/test_login.py": text}, "drop the red test")
    why = weakens_tests_only(repo, base, head)
    assert why is not None and "deletes test lines" in why


def test_deleting_a_test_file_is_refused(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    head = commit(repo, {"tests/test_login.py": None}, "no tests, no failures")
    assert weakens_tests_only(repo, base, head) is not None


def test_skipping_a_test_is_refused(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    skipped = TEST_FILE.replace(
        "def test_cookie", '@pytest.mark.skip(reason="flaky")\ndef test_cookie'
    )
    head = commit(repo, {"tests/test_login.py": skipped}, "skip it")
    why = weakens_tests_only(repo, base, head)
    assert why is not None and "skipped" in why


def test_letting_ci_fail_is_refused_like_skipping_a_test(repo: Path) -> None:
    workflow = "jobs:\n  test:\n    steps:\n      - run: pytest\n"
    base = commit(repo, {".github/workflows/ci.yml": workflow}, "ci")
    lenient = workflow.replace(
        "      - run: pytest\n", "      - run: pytest\n        continue-on-error: true\n"
    )
    head = commit(repo, {".github/workflows/ci.yml": lenient}, "let it fail")
    assert weakens_tests_only(repo, base, head) is not None


@pytest.mark.parametrize(
    "files",
    [
        {"app/login.py": "def login(x):\n    return 'ok!'\n"},  # a code fix
        {"app/login.py": "def login(x):\n    return 'ok!'\n", "tests/test_login.py": None},
        {"tests/test_login.py": TEST_FILE.replace('"email"', '"e-mail"')},  # a test rewritten
        {"tests/test_login.py": TEST_FILE + "\n\ndef test_more():\n    assert True\n"},
    ],
)
def test_a_change_with_code_or_new_test_lines_passes(
    repo: Path, files: dict[str, str | None]
) -> None:
    base = git(repo, "rev-parse", "HEAD")
    head = commit(repo, files, "a fix")
    assert weakens_tests_only(repo, base, head) is None


def test_an_empty_change_passes(repo: Path) -> None:
    base = git(repo, "rev-parse", "HEAD")
    assert weakens_tests_only(repo, base, commit(repo, {}, "nothing")) is None


@pytest.mark.parametrize(
    ("path", "is_test"),
    [
        ("tests/test_login.py", True),
        ("pkg/test_x.py", True),
        ("x_test.go", True),
        ("web/src/login.test.tsx", True),
        ("web/src/login.spec.js", True),
        ("src/main/java/LoginTest.java", True),
        ("spec/login_spec.rb", True),
        ("app/login.py", False),
        ("docs/testing.md", False),
        ("attest.py", False),
    ],
)
def test_what_counts_as_a_test_file(path: str, is_test: bool) -> None:
    assert is_test_path(path) is is_test
