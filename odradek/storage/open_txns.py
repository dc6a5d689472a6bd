"""The first offset of a log's oldest undecided transaction, read from its batch headers alone.

Kafka never compacts past a partition's last stable offset (an open
transaction may still abort, and the cleaner must not drop what its records
would hide).  The broker knows each partition's open transactions (the data
plane's producer state, the group coordinator's for ``__consumer_offsets``);
an offline tool with only the files rebuilds the bound here: a transactional
data batch opens its producer's transaction, that producer's next marker
(control batch) ends it (Kafka's ``ProducerStateManager``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.protocol.records import CONTROL_MASK, TRANSACTIONAL_MASK

if TYPE_CHECKING:
    from odradek.storage.log import Log


def first_unstable_offset(log: Log) -> int | None:
    """Base offset of the first batch of the oldest transaction with no marker yet; None if none is open."""
    first: dict[int, int] = {}  # producer id -> first offset of its open transaction
    with log.reading() as segments:
        for seg in segments:
            for _pos, _buf, _off, h in seg.iter_batches():
                if not h.attributes & TRANSACTIONAL_MASK:
                    continue
                if h.attributes & CONTROL_MASK:
                    first.pop(h.producer_id, None)
                else:
                    first.setdefault(h.producer_id, h.base_offset)
    return min(first.values()) if first else None
