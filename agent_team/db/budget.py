"""The budget ledger: one row per model call, and the outbox that keeps rows we could not write.

Recording spend must never fail a task (docs/architecture.md §4): when the database
refuses a row, the row is appended to a JSONL outbox beside the database and
`agent-team ledger replay` writes it back later. Appends and replays take the
same lock file, so a replay never loses a line appended while it runs.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime
from functools import partial
from pathlib import Path
from typing import Any

from agent_team.db.clock import day_bucket, to_iso, utc_now
from agent_team.db.ledger import Ledger, Reader, Transaction
from agent_team.db.outage import is_outage
from agent_team.db.records import ReplayReport, UsageSummaryRow, fetch_records
from agent_team.db.validate import require_member
from agent_team.exceptions import AgentTeamError, LedgerInputError
from agent_team.task_model import BillingMode

__all__ = [
    "OUTBOX_FILENAME",
    "OutboxSpend",
    "default_outbox_path",
    "outbox_spend",
    "record_usage",
    "replay_outbox",
    "spent",
    "task_usage",
    "tokens_spent",
    "usage_summary",
]

log = logging.getLogger(__name__)

OUTBOX_FILENAME = "budget_ledger_failures.jsonl"
_FIELDS = (
    "thread_id",
    "stage",
    "model",
    "billing_mode",
    "input_tokens",
    "output_tokens",
    "usd_cost",
    "recorded_at",
    "day_bucket",
    "estimated",
)


def default_outbox_path(ledger: Ledger) -> Path:
    """`budget_ledger_failures.jsonl` beside the database (or the working folder if unknown)."""
    folder = ledger.files_dir
    return (folder if folder is not None else Path.cwd()) / OUTBOX_FILENAME


@contextmanager
def _outbox_lock(outbox: Path, *, shared: bool = False) -> Iterator[None]:
    outbox.parent.mkdir(parents=True, exist_ok=True)
    with open(outbox.with_name(outbox.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _insert(tx: Transaction, row: dict[str, Any]) -> None:
    # Skips a row already present, so a replay cut short by a crash can run again.
    values = [row[name] for name in _FIELDS]
    added = tx.execute(
        f"INSERT INTO budget_ledger ({', '.join(_FIELDS)}) "
        f"SELECT {', '.join('?' for _ in _FIELDS)} WHERE NOT EXISTS ("
        "SELECT 1 FROM budget_ledger WHERE thread_id = ? AND stage = ? AND model = ? "
        "AND recorded_at = ? AND input_tokens = ? AND output_tokens = ?)",
        (
            *values,
            row["thread_id"],
            row["stage"],
            row["model"],
            row["recorded_at"],
            row["input_tokens"],
            row["output_tokens"],
        ),
    ).rowcount
    if added == 1:  # the day's total moves with its rows, in the same transaction
        tx.execute(
            "INSERT INTO budget_days (day_bucket, billing_mode, calls, input_tokens, "
            "output_tokens, usd_cost) VALUES (?, ?, 1, ?, ?, ?) "
            "ON CONFLICT (day_bucket, billing_mode) DO UPDATE SET "
            "calls = budget_days.calls + 1, "
            "input_tokens = budget_days.input_tokens + excluded.input_tokens, "
            "output_tokens = budget_days.output_tokens + excluded.output_tokens, "
            "usd_cost = budget_days.usd_cost + excluded.usd_cost",
            (
                row["day_bucket"],
                row["billing_mode"],
                row["input_tokens"],
                row["output_tokens"],
                row["usd_cost"],
            ),
        )


def record_usage(
    ledger: Ledger,
    *,
    thread_id: str,
    stage: str,
    model: str,
    billing_mode: str,
    input_tokens: int,
    output_tokens: int,
    usd_cost: float,
    recorded_at: datetime | None = None,
    outbox: Path | None = None,
    estimated: bool = False,
) -> bool:
    """Record one model call's spend. Never raises on a write failure.

    Args:
        outbox: where rows go when the database refuses them; defaults to
            `budget_ledger_failures.jsonl` beside the database.
        estimated: the tokens are our estimate, not the provider's count (an
            attempt that timed out or was abandoned): the cap counts them, but
            the journey does not name the model as having answered.

    Returns:
        True if the row is in the ledger; False if it went to the outbox.

    Raises:
        LedgerInputError: the values themselves are wrong (unknown billing
            mode, negative counts): a bug in the caller, not a write failure.
    """
    require_member(billing_mode, BillingMode, "billing mode")
    if input_tokens < 0 or output_tokens < 0 or usd_cost < 0:
        raise LedgerInputError("token counts and usd_cost must not be negative")
    moment = recorded_at or utc_now()
    row: dict[str, Any] = {
        "thread_id": thread_id,
        "stage": stage,
        "model": model,
        "billing_mode": billing_mode,
        "input_tokens": int(input_tokens),
        "output_tokens": int(output_tokens),
        "usd_cost": float(usd_cost),
        "recorded_at": to_iso(moment),
        "day_bucket": day_bucket(moment),
        "estimated": 1 if estimated else 0,
    }
    try:
        ledger.write(partial(_insert, row=row))
        return True
    except (AgentTeamError, OSError) as exc:
        target = outbox or default_outbox_path(ledger)
        log.warning("budget row for %s/%s went to the outbox %s: %s", thread_id, stage, target, exc)
        try:
            with _outbox_lock(target), open(target, "a", encoding="utf-8") as out:
                out.write(json.dumps(row, sort_keys=True) + "\n")
                out.flush()
                os.fsync(out.fileno())
        except OSError as outbox_exc:
            log.error("could not write the budget outbox %s either: %s", target, outbox_exc)
        return False


def _parse_line(line: str) -> dict[str, Any] | None:
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    data.setdefault("estimated", 0)  # lines written before v13 had no such field
    if any(name not in data for name in _FIELDS):
        return None
    return {name: data[name] for name in _FIELDS}


def replay_outbox(path: str | Path, ledger: Ledger) -> ReplayReport:
    """Write the outbox's rows back into the ledger.

    Replayed lines leave the file (the file goes when all did); lines the
    ledger still refuses stay, and after a refusal that is an outage (the
    database away) the rest stay untried, so the lock a cap check waits on is
    not held through one timeout per row; lines that are not a budget row at
    all are kept untouched for a person to read.
    """
    outbox = Path(path)
    report: ReplayReport = {"replayed": 0, "failed": 0, "remaining": 0, "bad_lines": 0}
    if not outbox.exists():
        return report
    with _outbox_lock(outbox):
        kept: list[str] = []
        outage = False
        text = outbox.read_bytes().decode("utf-8", errors="replace")
        for line in text.splitlines(keepends=True):
            if not line.strip():
                continue
            row = _parse_line(line)
            if row is None:
                report["bad_lines"] += 1
                kept.append(line if line.endswith("\n") else line + "\n")
                continue
            if outage:  # the database is away: the rest waits for the next replay
                report["failed"] += 1
                kept.append(line if line.endswith("\n") else line + "\n")
                continue
            try:
                ledger.write(partial(_insert, row=row))
            except AgentTeamError as exc:
                log.warning("outbox row for %s still refused: %s", row["thread_id"], exc)
                report["failed"] += 1
                kept.append(line if line.endswith("\n") else line + "\n")
                outage = is_outage(exc)
                continue
            report["replayed"] += 1
        report["remaining"] = len(kept)
        if not kept:  # all of it is in the ledger: no file, so a cap check is one `stat`
            outbox.unlink(missing_ok=True)
            return report
        staged = outbox.with_name(outbox.name + ".tmp")
        with open(staged, "w", encoding="utf-8") as out:
            out.writelines(kept)
            out.flush()
            os.fsync(out.fileno())
        os.replace(staged, outbox)
    return report


@dataclass(frozen=True)
class OutboxSpend:
    """What waits in the outbox: rows in all, and a day's USD and tokens for one billing mode."""

    rows: int = 0
    usd: float = 0.0
    tokens: int = 0


def outbox_spend(
    path: str | Path, *, day: str | date | None = None, billing_mode: str | None = None
) -> OutboxSpend:
    """The spend the database refused, still waiting in the outbox file to be replayed.

    Why: the daily cap is checked against the ledger, and a row the ledger
    refused would otherwise be spend nobody counts until someone replays it. A
    cap check adds this (its day and mode); `/metrics`, `/healthz` and `doctor`
    show `rows`. No file (the usual case) costs one `stat`.
    """
    outbox = Path(path)
    if not outbox.exists():
        return OutboxSpend()
    try:
        # Shared with other readers, not with a replay: a row the replay has written to
        # the ledger but not yet taken out of the file is never counted twice.
        with _outbox_lock(outbox, shared=True):
            lines = outbox.read_bytes().decode("utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return OutboxSpend()
    except OSError as exc:
        log.warning("could not read the budget outbox %s: %s", outbox, exc)
        return OutboxSpend()
    wanted_day = None if day is None else (day if isinstance(day, str) else day_bucket(day))
    rows, usd, tokens = 0, 0.0, 0
    for line in lines:
        row = _parse_line(line) if line.strip() else None
        if row is None:
            continue
        rows += 1
        if wanted_day is not None and row["day_bucket"] != wanted_day:
            continue
        if billing_mode is not None and row["billing_mode"] != billing_mode:
            continue
        try:
            usd += float(row["usd_cost"])
            tokens += int(row["input_tokens"]) + int(row["output_tokens"])
        except (TypeError, ValueError):
            continue
    return OutboxSpend(rows=rows, usd=usd, tokens=tokens)


def _sum(ledger: Reader, column: str, day: str | date, billing_mode: str | None) -> Any:
    """The day's total from `budget_days`: one row a billing mode, whatever the day's volume."""
    mode_sql = " AND billing_mode = ?" if billing_mode is not None else ""
    params = [day_bucket(day)] + ([billing_mode] if billing_mode is not None else [])
    row = ledger.fetch_one(
        f"SELECT COALESCE(SUM({column}), 0) AS total FROM budget_days "
        f"WHERE day_bucket = ?{mode_sql}",
        params,
    )
    assert row is not None
    return row["total"]


def spent(ledger: Reader, *, day: str | date, billing_mode: str | None = None) -> float:
    """USD recorded on a UTC day (`YYYY-MM-DD`), for one billing mode or all."""
    return float(_sum(ledger, "usd_cost", day, billing_mode))


def tokens_spent(ledger: Reader, *, day: str | date, billing_mode: str | None = None) -> int:
    """Input plus output tokens recorded on a UTC day, for the token cap of unpriced models."""
    return int(_sum(ledger, "input_tokens + output_tokens", day, billing_mode))


def _summary(ledger: Reader, where: str, params: tuple[str, ...]) -> list[UsageSummaryRow]:
    return fetch_records(
        ledger,
        UsageSummaryRow,
        "SELECT billing_mode, model, stage, COUNT(*) AS calls, "
        "SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens, "
        f"SUM(usd_cost) AS usd_cost FROM budget_ledger WHERE {where} "
        "GROUP BY billing_mode, model, stage ORDER BY billing_mode, model, stage",
        params,
    )


def usage_summary(ledger: Reader, *, day: str | date) -> list[UsageSummaryRow]:
    """Spend on a UTC day per billing mode, model and stage."""
    return _summary(ledger, "day_bucket = ?", (day_bucket(day),))


def task_usage(ledger: Reader, *, thread_id: str) -> list[UsageSummaryRow]:
    """One task's spend per billing mode, model and stage (all days)."""
    return _summary(ledger, "thread_id = ?", (thread_id,))
