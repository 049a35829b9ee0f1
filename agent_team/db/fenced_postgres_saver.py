"""`PostgresSaver` fenced like the ledger's writes (see `fenced_savers` for why)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.postgres import PostgresSaver

from agent_team.db.fencing import check_fence
from agent_team.db.ledger import Reader

__all__ = ["FencedPostgresSaver"]


class FencedPostgresSaver(PostgresSaver):
    """`PostgresSaver` that refuses a fenced run's writes once its lease moved on."""

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
