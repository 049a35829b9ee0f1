"""The one-daemon-per-ledger lock beside a SQLite ledger."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_team import db
from agent_team.exceptions import LedgerInUseError


def test_a_second_claim_names_the_holder_and_a_release_frees_the_ledger(tmp_path: Path) -> None:
    ledger = tmp_path / "agent-team.db"
    assert db.daemon_holder(ledger) is None

    with db.claim_daemon_slot(ledger, url="http://127.0.0.1:8765/"):
        holder = db.daemon_holder(ledger)
        assert holder is not None
        assert (holder.pid, holder.url) == (os.getpid(), "http://127.0.0.1:8765/")
        with pytest.raises(LedgerInUseError) as caught:
            db.claim_daemon_slot(ledger, url="http://127.0.0.1:9999/")
        message = str(caught.value)
        assert f"pid {os.getpid()}" in message and "http://127.0.0.1:8765/" in message
        assert str(ledger) in message

    assert db.daemon_holder(ledger) is None
    assert not ledger.exists(), "claiming the slot never creates the ledger"
    with db.claim_daemon_slot(ledger, url="http://127.0.0.1:9999/"):
        holder = db.daemon_holder(ledger)
        assert holder is not None and holder.url == "http://127.0.0.1:9999/"
