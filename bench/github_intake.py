"""GitHub intake: what a poll pass costs against a loopback GitHub, vs. bare HTTP.

    .venv/bin/python bench/github_intake.py            # 1000 issues, 20 repeats
    .venv/bin/python bench/github_intake.py --issues 250 --repeats 50

Variants, all against the same loopback fake (tests/fakes/github_api.py):
- (a) baseline: httpx GETs of every page (following Link), no parsing, no ledger.
- (b) first pass: `GitHubIntake.poll_once()` on an empty ledger: every issue
  validated, claimed and submitted as a task (then the ledger is thrown away).
- (c) quiet pass: `poll_once()` again: one `If-None-Match` request answered 304.
- (d) changed pass: one issue edited, so page 1 changes: every page is read again
  and every issue is found already claimed.
Prints p50 per variant and ratios to (a) within this run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent_team import db
from agent_team.config import load_settings
from agent_team.integrations.github.intake import GitHubIntake, make_client
from agent_team.integrations.github.settings import GitHubSettings
from agent_team.requests import inbox
from tests.fakes.github_api import FakeGitHub

REPO = "acme/app"


def timed(fn: Callable[[], object], repeats: int) -> list[float]:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--issues", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()

    with FakeGitHub(token="bench-token") as fake, tempfile.TemporaryDirectory() as tmp:
        fake.add_repo(REPO)
        for _ in range(args.issues):
            fake.add_issue(REPO, labels=("agent-team",))

        def bare() -> None:
            with httpx.Client(headers={"Authorization": "Bearer bench-token"}) as client:
                url: str | None = f"{fake.url}/repos/{REPO}/issues"
                params: dict[str, str] | None = {
                    "labels": "agent-team",
                    "state": "open",
                    "per_page": "100",
                    "sort": "updated",
                    "direction": "desc",
                }
                while url:
                    response = client.get(url, params=params)
                    params = None
                    url = response.links.get("next", {}).get("url")

        counter = iter(range(10**9))

        def fresh_intake() -> GitHubIntake:
            path = Path(tmp) / f"ledger-{next(counter)}.db"
            settings = load_settings(
                db_path=path,
                github_repos=REPO,
                github_api_url=fake.url,
                github_token="bench-token",
            )
            db.init_db(path)
            conn = db.open_ledger(path)
            github = GitHubSettings.from_settings(settings)
            return GitHubIntake(
                github, conn, lambda **r: inbox.submit_task(conn, **r), make_client(github)
            )

        warm = fresh_intake()
        warm.poll_once()
        first = timed(lambda: fresh_intake().poll_once(), max(3, args.repeats // 5))
        quiet = timed(warm.poll_once, args.repeats)
        edits = iter(range(10**9))

        def changed() -> None:
            fake.touch(REPO, 1, title=f"edit {next(edits)}")
            warm.poll_once()

        changed_s = timed(changed, args.repeats)
        baseline = timed(bare, args.repeats)

    base = statistics.median(baseline)
    print(f"{args.issues} labelled issues, {args.repeats} repeats (p50, ratio to (a))")
    for name, samples in (
        ("(a) bare HTTP pages", baseline),
        ("(b) first pass (claims + tasks)", first),
        ("(c) quiet pass (304)", quiet),
        ("(d) changed pass (all claimed)", changed_s),
    ):
        p50 = statistics.median(samples)
        print(f"{name:34s} {p50 * 1000:9.1f} ms   x{p50 / base:6.2f}")


if __name__ == "__main__":
    main()
