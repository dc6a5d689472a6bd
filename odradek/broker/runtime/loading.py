"""Reading a coordinator's log back for replay: every shard loads this way (Kafka's
``CoordinatorLoaderImpl`` reads the partition from its start to its end, batch by batch)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

from ...protocol.records import BatchHeader, Record, decode_batch
from ...storage.log import Log

READ_BYTES = 1 << 20


def iter_log_batches(log: Log) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """Each batch from the log start to the end as it is now, with only its records at or past
    the start (a batch may straddle a start moved by DeleteRecords or the cleaner)."""
    offset = log.log_start_offset
    end = log.log_end_offset
    while offset < end:
        chunk = log.read(offset, READ_BYTES)
        if not chunk:
            break
        pos = 0
        last = offset
        while pos < len(chunk):
            header, records = decode_batch(chunk, pos)
            pos += header.size
            last = header.last_offset
            if header.last_offset >= offset:
                yield header, [r for r in records if r.offset >= offset]
        offset = last + 1


async def replay_log(log: Log, decode: Callable[[Record], tuple[Any, Any]], replay: Callable[[Any, Any], None],
                     on_error: Callable[[int, Exception], None], errors: type[Exception] | tuple[type[Exception], ...],
                     yield_every: int = 200) -> int:
    """Replay every data record of ``log`` (control batches skipped) through ``decode`` and
    ``replay``, yielding to the loop every ``yield_every`` batches; the records replayed.

    A record ``decode`` refuses with one of ``errors`` is reported to ``on_error`` (its offset,
    the exception) and the error raised: a coordinator does not go Active over a log it cannot read."""
    count = batches = 0
    for header, records in iter_log_batches(log):
        if header.is_control:
            continue
        for record in records:
            try:
                key, value = decode(record)
            except errors as exc:
                on_error(record.offset, exc)
                raise
            replay(key, value)
            count += 1
        batches += 1
        if batches % yield_every == 0:
            await asyncio.sleep(0)
    return count
