"""Coordinator writes made while the server answers one loop turn's reads go to the log together.

Why: clients pipeline, so one read from a socket often holds several
OffsetCommits of one group, and one event-loop iteration often reads several
connections whose groups share an offsets partition (there is one by
default).  Appending each request as its own batch costs a batch header, a
CRC, a write syscall and the log's bookkeeping per request: about a quarter
of an OffsetCommit's CPU when requests come one per read.

While the server answers the reads of one turn, the burst is *open*
(``KafkaServer.open_turn``): a shard stages each request's records instead
of appending them.  With ``log.fsync.mode`` never/interval it applies them
to its state as usual and answers; with ``always`` the answer and the state
change wait for the fsync round that covers the append (``Shard._settle``).
Before the server sends any answer, ``flush()`` appends each shard's staged
records, every request's records kept whole inside one batch, so a request
is still atomic and still on disk (the OS's page cache) before its answer
leaves.  If that append fails the shard goes Failed, as after a failed
fsync, and the server closes the connections waiting for answers instead of
answering: no client sees a success that was not written.

Timers that fire while a turn is open stage their writes too; whatever they
answer is sent from a callback queued behind the turn's end, or flushes
first (``Connection._drain``).  Writes made while no turn is open go to the
log at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .shard import Shard


class StagedWriteFailed(Exception):
    """A staged batch could not be appended: the answers that relied on it must not be sent."""


class WriteBurst:
    def __init__(self) -> None:
        self.open = False
        self._staged: dict[Shard, None] = {}
        self.failed: list[int] = []  # partitions whose staged writes failed before the flush

    def begin(self) -> None:
        self.open = True

    def stage(self, shard: Shard) -> None:
        self._staged[shard] = None

    def flush(self) -> None:
        """Append everything staged so far; raises StagedWriteFailed if any shard could not."""
        if not self._staged and not self.failed:
            return
        shards = list(self._staged)
        self._staged.clear()
        failed = [shard.partition for shard in shards if not shard.flush_staged()] + self.failed
        self.failed = []
        if failed:
            raise StagedWriteFailed(f"offsets partitions {failed} could not append their writes")

    def end(self) -> None:
        """Close the burst: flush (raising like ``flush``); later writes go straight to the log."""
        self.open = False
        self.flush()
