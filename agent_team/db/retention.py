"""What a finished task keeps once its checkpoints are pruned: only what people read.

`show`, `/api/task/<id>` and the task page read the task row, its transitions,
questions, budget rows and audit rows; none of them reads its commands or its
execution lease. So the retention pass (`tasks.mark_checkpoints_pruned`) also
drops, in the same transaction as the mark:

- its `done` commands. Nothing de-duplicates against them any more: a
  `resume:<question>` id is only ever inserted together with the question's
  `open -> answered` flip, and a finished task has no open question (it
  supersedes them as it ends); the recovery sweep's repair list
  (`answered_without_resume`) looks at live tasks only; and a duplicate
  `start:<task>` is not queued for a finished task (`inbox.submit_task`), and
  would be a no-op if it were (`GraphRunner.start` skips finished tasks).
  When the resume command finished is copied onto its question
  (`pending_questions.resumed_at`, v11) first, so the answer -> resume latency
  in `/metrics` stays the same. Failed commands stay: they are rare and keep
  the error an operator may look for.
- its `task:<id>` lease row, unless someone holds it right now (a lease that
  lapsed because its release failed goes too). A finished
  task never runs a graph again (retry takes parked tasks only, reopen and
  cancel refuse finished ones, and every command handler returns at once for
  a finished task), so no fenced write of it is left to refuse. Its takeovers
  are added to the `TAKEOVER_TALLY` row, so the `/metrics` counter of
  task-lease takeovers never goes backwards, and its epoch raises that row's
  `epoch` to the highest any deleted task lease reached: a late command's new
  row starts above it (`leases.take_lease`), so an epoch never goes back.
"""

from __future__ import annotations

from agent_team.db.clock import to_iso, utc_now
from agent_team.db.leases import TASK_LEASE_TALLY, task_lease_name
from agent_team.db.ledger import Transaction
from agent_team.db.questions import resume_command_id

__all__ = ["TAKEOVER_TALLY", "forget_finished"]

# Takeovers (and the highest epoch) of deleted task leases; `lease_summary` counts it among
# the `task` leases.
TAKEOVER_TALLY = TASK_LEASE_TALLY


def forget_finished(tx: Transaction, task_id: str) -> None:
    """Inside the mark's transaction: drop the rows a pruned finished task no longer needs."""
    prefix = resume_command_id("")
    tx.execute(
        "UPDATE pending_questions SET resumed_at = (SELECT c.done_at FROM commands c "
        "WHERE c.command_id = ? || pending_questions.question_id) "
        "WHERE thread_id = ? AND resumed_at IS NULL AND EXISTS (SELECT 1 FROM commands c "
        "WHERE c.command_id = ? || pending_questions.question_id AND c.kind = 'resume' "
        "AND c.state = 'done' AND c.done_at IS NOT NULL)",
        (prefix, task_id, prefix),
    )
    tx.execute("DELETE FROM commands WHERE task_id = ? AND state = 'done'", (task_id,))
    name = task_lease_name(task_id)
    now = to_iso(utc_now())  # lease times are the instances' own clocks (`db.leases`)
    lease = tx.fetch_one(
        "SELECT owner, lease_until, takeovers, epoch FROM leases WHERE name = ?", (name,)
    )
    if lease is None:
        return
    if lease["owner"] is not None and (lease["lease_until"] or "") > now:
        return  # held: a late command's run is handling it right now; leave it be
    tally = tx.fetch_one("SELECT epoch FROM leases WHERE name = ?", (TAKEOVER_TALLY,))
    # Written only when it changes: every new task lease reads this row.
    if int(lease["takeovers"]) or tally is None or int(lease["epoch"]) > int(tally["epoch"]):
        tx.execute(
            "INSERT INTO leases (name, epoch, takeovers) VALUES (?, ?, ?) ON CONFLICT (name) "
            "DO UPDATE SET takeovers = leases.takeovers + excluded.takeovers, "
            "epoch = CASE WHEN excluded.epoch > leases.epoch THEN excluded.epoch "
            "ELSE leases.epoch END",
            (TAKEOVER_TALLY, int(lease["epoch"]), int(lease["takeovers"])),
        )
    # Released, or lapsed (a release that failed): a stalled holder's fence then finds
    # no row and its writes are refused, as after a takeover.
    tx.execute(
        "DELETE FROM leases WHERE name = ? AND (owner IS NULL OR lease_until <= ?)", (name, now)
    )
