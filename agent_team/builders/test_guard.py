"""Refuse a follow-up commit whose whole change is removing or skipping tests.

An agent told to make CI green can make it green by deleting the red test.
The follow-up's instructions forbid it (`nodes.pull_request`); this is the
check after the fact, before anything is pushed: a commit that touches only
test files, and there only deletes lines or adds skip markers, is not a fix.
The PR's decision gate then asks a person instead. A commit that also changes
code passes: judging a mixed change is the reviewers' job.
"""

from __future__ import annotations

import re
from pathlib import Path

from agent_team.builders.gitcmd import run_git

__all__ = ["is_test_path", "weakens_tests_only"]

_TEST_PATH = re.compile(
    r"(^|/)(tests?|__tests__|spec|specs)/"
    r"|(^|/)test_[^/]*\.py$|_test\.(py|go|rb)$|\.(test|spec)\.[cm]?[jt]sx?$"
    r"|(^|/)[^/]*Tests?\.(java|kt|cs|swift)$|_spec\.rb$"
    # How the tests are run counts as the tests: CI and the test runner's settings.
    r"|(^|/)\.github/workflows/|(^|/)\.circleci/|(^|/)\.gitlab-ci\.yml$"
    r"|(^|/)(pytest\.ini|tox\.ini|noxfile\.py|conftest\.py|jest\.config\.[cm]?[jt]s)$"
)
_SKIP_MARK = re.compile(
    r"@pytest\.mark\.(skip|xfail)|pytest\.skip\(|@unittest\.skip|\bself\.skipTest\("
    r"|\b(it|describe|test)\.skip\(|\bx(it|describe|test)\(|\bt\.Skip(Now|f)?\("
    r"|@(Disabled|Ignore)\b|#\[ignore\]|\bskip\s*:\s*true"
    r"|continue-on-error\s*:\s*true|--deselect\b|\bcollect_ignore|\|\|\s*true\b"
)


def is_test_path(path: str) -> bool:
    return bool(_TEST_PATH.search(path))


def weakens_tests_only(repo: Path, base: str, head: str) -> str | None:
    """Why the change `base..head` is only tests removed or skipped; None when it is not.

    Raises:
        BuildError: git could not compare the commits.
    """
    listed = run_git(repo, "diff", "--numstat", "--no-renames", "-z", base, head, "--")
    changed: list[str] = []
    deleted = 0
    for entry in listed.stdout.split("\0"):
        parts = entry.split("\t", 2)
        if len(parts) != 3:
            continue
        _added, removed, path = parts
        changed.append(path)
        deleted += int(removed) if removed.isdigit() else 0
    if not changed or not all(is_test_path(path) for path in changed):
        return None
    patch = run_git(repo, "diff", "-U0", "--no-renames", base, head, "--", *changed)
    added = [
        line[1:].strip()
        for line in patch.stdout.splitlines()
        if line.startswith("+") and not line.startswith("+++")
    ]
    skips = sum(1 for line in added if _SKIP_MARK.search(line))
    real = [line for line in added if line and not _SKIP_MARK.search(line)]
    if real:
        return None  # tests were written or rewritten, not only taken away
    if skips:
        return f"it only marks tests as skipped ({skips} marker(s) in {len(changed)} test file(s))"
    if deleted:
        return f"it only deletes test lines ({deleted} line(s) in {len(changed)} test file(s))"
    return None
