"""The JS LangGraph SDK (`@langchain/langgraph-sdk`, from the npm registry) against a live daemon.

A Node script (`js/inbox_calls.mjs`) makes the calls Agent Inbox makes,
with the Inbox's origin: the CORS preflight, `threads.search` for the
interrupted threads, `getState`, `runs.create` with an accept, a second
answer (a 409 the SDK must not retry), `runs.stream` with a response, and
"Mark as resolved". Skipped, with the reason, only when Node or npm is
missing or npm cannot install the SDK.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from agent_team import db
from tests.integration.langgraph_api.conftest import ADA_KEY, INBOX_ORIGIN, Live, wait_for

JS_DIR = Path(__file__).parent / "js"
INSTALL_TIMEOUT_S = 300


@pytest.fixture(scope="session")
def js_sdk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the pinned SDK installed and the script beside it (ESM resolves there)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("the JS SDK test needs node and npm on PATH")
    folder = tmp_path_factory.mktemp("js-sdk")
    for name in ("package.json", "inbox_calls.mjs"):
        shutil.copy(JS_DIR / name, folder / name)
    try:
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        pytest.skip(f"npm could not install @langchain/langgraph-sdk in {INSTALL_TIMEOUT_S} s")
    if done.returncode != 0:
        pytest.skip(f"npm could not install @langchain/langgraph-sdk: {done.stderr[-500:]}")
    return folder


def test_the_inbox_calls_through_the_js_sdk(js_sdk: Path, live: Live) -> None:
    (answer, stream, resolve), (plan_question, clarify_question, _) = live.three_waiting(
        ("Accept me", "Tell me more", "Resolve me")
    )

    node = shutil.which("node")
    assert node is not None
    done = subprocess.run(
        [node, "inbox_calls.mjs"],
        cwd=js_sdk,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={
            "PATH": str(Path(node).parent),
            "LANGGRAPH_URL": live.url,
            "LANGGRAPH_API_KEY": ADA_KEY,
            "ORIGIN": INBOX_ORIGIN,
            "ANSWER_THREAD": answer,
            "STREAM_THREAD": stream,
            "RESOLVE_THREAD": resolve,
        },
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])

    assert out["preflight"]["status"] == 204
    assert out["preflight"]["allowOrigin"] == INBOX_ORIGIN
    assert "x-api-key" in out["preflight"]["allowHeaders"]
    assert [t["id"] for t in out["interrupted"]] == [resolve, stream, answer]
    assert all(
        t["status"] == "interrupted" and len(t["interrupts"]) == 1 for t in out["interrupted"]
    )
    assert out["interrupted"][-1]["config"]["allow_accept"] is True
    assert out["state"] == {"next": ["plan_review"], "tasks": [["plan_review", 1]]}
    assert out["run"]["status"] == "pending"
    assert out["second"]["status"] == 409  # not retried: one request, one refusal
    assert out["stream"][0] == "metadata" and "values" in out["stream"]
    assert "error" not in out["stream"]
    assert out["resolved"] == "idle"  # cancelled by the time the update answered

    plan = db.get_question(live.conn, plan_question.question_id)
    assert plan is not None and plan.answer == {"decision": "approve", "text": ""}
    assert plan.answered_via == "langgraph-api:ada"
    assert len(db.list_audit(live.conn, target=plan_question.question_id)) == 1
    clarify = db.get_question(live.conn, clarify_question.question_id)
    assert clarify is not None and clarify.status == "answered"
    wait_for(lambda: live.task(resolve).status == "cancelled", "Mark as resolved")
