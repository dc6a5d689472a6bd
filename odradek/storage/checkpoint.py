"""Kafka's per-log-dir offset checkpoint files (``recovery-point-offset-checkpoint`` ...).

Text, same as Kafka: a version line ``0``, an entry-count line, then one
``topic partition offset`` line per partition.  Written atomically (tmp,
fsync, rename, dir fsync) so a crash leaves the old or the new file; an
unreadable file reads as empty, which only costs a longer recovery.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import structlog

from odradek.storage.files import atomic_write_text

logger = structlog.get_logger("odradek.storage")

RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
CLEANER_FILE = "cleaner-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"

TopicPartition = tuple[str, int]


def read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        logger.warning("log.checkpoint.unreadable", file=str(path), error=str(exc))
        return {}
    try:
        if not lines or lines[0].strip() != "0":
            raise ValueError(f"version line {lines[:1]!r}")
        count = int(lines[1])
        out: dict[TopicPartition, int] = {}
        for line in lines[2:2 + count]:
            topic, part, offset = line.split()
            out[(topic, int(part))] = int(offset)
        if len(out) != count:
            raise ValueError(f"{len(out)} entries, header says {count}")
        return out
    except (ValueError, IndexError) as exc:
        logger.warning("log.checkpoint.malformed", file=str(path), error=str(exc))
        return {}


def write_checkpoint(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    body = "".join(f"{t} {p} {o}\n" for (t, p), o in sorted(offsets.items()))
    atomic_write_text(path, f"0\n{len(offsets)}\n{body}")
