"""LangGraph savers whose writes are fenced like the ledger's (DESIGN.md §6).

A run that was paused past its lease must not write checkpoints into a
thread its new owner is running: the late checkpoint would become the
thread's newest and fork its history. Each saver checks the run's fence
(`fencing.check_fence`, a read of the lease row) before `put` and
`put_writes`. The read and the saver's own write are separate statements,
so a pause of exactly that width can still land one write; every ledger
write of the run after it is refused in-transaction.

The PostgreSQL saver lives in `fenced_postgres_saver` so the SQLite default
never imports psycopg.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.sqlite import SqliteSaver

from agent_team.db.fencing import check_fence
from agent_team.db.ledger import Reader

__all__ = ["FencedSqliteSaver"]


class FencedSqliteSaver(SqliteSaver):
    """`SqliteSaver` that refuses a fenced run's writes once its lease moved on."""

    fence_reader: Reader | None = None

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        if self.fence_reader is not None:
            check_fence(self.fence_reader)
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        if self.fence_reader is not None:
            check_fence(self.fence_reader)
        super().put_writes(config, writes, task_id, task_path)
