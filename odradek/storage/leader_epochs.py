"""A partition's leader-epoch history: Kafka's ``leader-epoch-checkpoint`` file and its cache.

Kafka keeps, per partition directory, the start offset of every leader epoch
(``LeaderEpochFileCache``, persisted by ``LeaderEpochCheckpointFile``): text,
a version line ``0``, an entry count, then ``<epoch> <start offset>`` lines,
epochs and offsets strictly increasing, written via a temporary file, fsync
and rename.  OffsetForLeaderEpoch answers from it (``endOffsetFor``), which is
how a consumer detects a log truncated by an unclean leader change (KIP-320).

A log without the file has the one implicit entry ``{0: log start}``: the
history of a partition whose leader never changed.
"""

from __future__ import annotations

from pathlib import Path

import structlog

from .files import atomic_write_text

log = structlog.get_logger("odradek.storage")

LEADER_EPOCH_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class LeaderEpochCache:
    """(epoch, start offset) entries of one partition, oldest first; each change is written at once."""

    def __init__(self, directory: Path, entries: list[tuple[int, int]] | None = None) -> None:
        self.path = directory / LEADER_EPOCH_FILE
        self.entries: list[tuple[int, int]] = entries or []

    @classmethod
    def load(cls, directory: Path) -> LeaderEpochCache:
        """The directory's history; a missing file is an empty history, an unreadable one too
        (logged: Kafka fails the log, a test broker starts with what it can)."""
        cache = cls(directory)
        try:
            lines = cache.path.read_text().split("\n")
        except FileNotFoundError:
            return cache
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("log.epoch_checkpoint_unreadable", file=str(cache.path), error=str(exc))
            return cache
        try:
            if lines[0].strip() != "0":
                raise ValueError(f"version {lines[0]!r}")
            count = int(lines[1])
            entries = [(int(e), int(o)) for e, o in (line.split() for line in lines[2:2 + count])]
            if len(entries) != count:
                raise ValueError(f"{len(entries)} entries, header says {count}")
            cache.entries = entries
        except (ValueError, IndexError) as exc:
            log.warning("log.epoch_checkpoint_malformed", file=str(cache.path), error=str(exc))
        return cache

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else 0

    def assign(self, epoch: int, start_offset: int) -> bool:
        """``LeaderEpochFileCache.assign``: entries with an epoch or start at or above the new one
        go, then it is added and the file written; nothing if the latest already covers it."""
        if self.entries and self.entries[-1][0] == epoch and self.entries[-1][1] <= start_offset:
            return False
        self.entries = [(e, o) for e, o in self.entries if e < epoch and o < start_offset]
        self.entries.append((epoch, start_offset))
        self.flush()
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """``truncateFromEnd``: entries starting at or after ``end_offset`` go (a truncated log)."""
        kept = [(e, o) for e, o in self.entries if o < end_offset]
        if kept != self.entries:
            self.entries = kept
            self.flush()

    def flush(self) -> None:
        body = "".join(f"{e} {o}\n" for e, o in self.entries)
        atomic_write_text(self.path, f"0\n{len(self.entries)}\n{body}")

    def end_offset_for(self, requested: int, log_start: int, log_end: int) -> tuple[int, int]:
        """``LeaderEpochFileCache.endOffsetFor``: (the latest epoch <= requested, the start of the
        first epoch above it), the log end for the latest epoch; (-1, -1) above every epoch."""
        entries = self.entries or [(0, log_start)]
        if requested == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested == entries[-1][0]:
            return requested, log_end
        if requested > entries[-1][0]:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        floor = None
        for epoch, start in entries:
            if epoch > requested:
                if floor is None:  # below every known epoch: where the first one starts
                    return requested, max(start, log_start)
                return floor, max(start, log_start)
            floor = epoch
        return requested, log_end  # unreachable: the last entry is above ``requested``

    def epoch_at(self, offset: int) -> int:
        """The epoch the batch at ``offset`` was written in (ListOffsets EARLIEST's epoch)."""
        found = UNDEFINED_EPOCH if self.entries else 0
        for epoch, start in self.entries:
            if start > offset:
                break
            found = epoch
        return found
