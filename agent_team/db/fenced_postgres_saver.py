"""`PostgresSaver` fenced like the ledger's writes and flushed only at the protocol's durable
points (see `fenced_savers` for why)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from langgraph.checkpoint.postgres import PostgresSaver
from psycopg import Cursor
from psycopg.rows import DictRow

from agent_team.db.fenced_savers import FlushesAtDurablePoints, FlushPolicy
from agent_team.db.fencing import check_fence
from agent_team.db.ledger import Reader

__all__ = ["FencedPostgresSaver"]

# A SELECT, so it can be prepared like every statement of the saver's connections.
_SYNCHRONOUS_COMMIT = "SELECT set_config('synchronous_commit', %s, true)"


class FencedPostgresSaver(FlushesAtDurablePoints, PostgresSaver):
    """`PostgresSaver` that refuses a fenced run's writes once its lease moved on, and waits
    for the server's flush only on the writes its `flush` policy names."""

    fence_reader: Reader | None = None

    def __init__(self, conn: Any, **kwargs: Any) -> None:
        super().__init__(conn, **kwargs)
        self.flush = FlushPolicy()

    def _before_write(self) -> None:
        if self.fence_reader is not None:
            check_fence(self.fence_reader)

    @contextmanager
    def _cursor(self, *, pipeline: bool = False) -> Iterator[Cursor[DictRow]]:
        """Upstream's cursor; the saver writes in a pipeline (one implicit transaction up to
        its sync), whose first statement now sets, for that transaction only, whether its
        commit waits for the flush: queued with the rest, it costs no round trip, and the
        connection goes back to the pool as it came."""
        with super()._cursor(pipeline=pipeline) as cur:
            if pipeline:
                lazy = not self.flush.flush_now
                cur.execute(_SYNCHRONOUS_COMMIT, ("off" if lazy else "on",))
            yield cur
