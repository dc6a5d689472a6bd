"""Reading a coordinator's log back for replay: every shard loads this way (Kafka's
``CoordinatorLoaderImpl`` reads the partition from its start to its end, batch by batch)."""

from __future__ import annotations

from collections.abc import Iterator

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
