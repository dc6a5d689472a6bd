"""Java's ``String.hashCode`` and Kafka's ``Utils.abs(hash) % n``: how Kafka places a key on a partition.

Every coordinator topic routes its keys this way -- group ids onto
``__consumer_offsets``, transactional ids onto ``__transaction_state``,
``"group:topicId:partition"`` onto ``__share_group_state`` -- and a log a
Kafka broker could take over must hold each key where Kafka would look for it.
"""

from __future__ import annotations

import sys

__all__ = ["java_string_hash", "java_partition"]

_UTF16 = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, signed 32-bit wrap-around.

    Characters outside the BMP count as their two surrogates, as in Java.
    """
    h = 0
    for unit in memoryview(s.encode(_UTF16, "surrogatepass")).cast("H"):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def java_partition(key: str, n: int) -> int:
    """``Utils.abs(key.hashCode()) % n``, where Kafka's ``abs`` maps ``Integer.MIN_VALUE`` to 0."""
    if n <= 0:
        raise ValueError(f"number of partitions must be positive, got {n}")
    h = java_string_hash(key)
    return (0 if h == -0x80000000 else abs(h)) % n
