"""Long-poll wake-ups: a Fetch waiting for data parks here until one of its partitions grows.

One future per waiting Fetch, registered under every partition it reads; an
append (or a topic deletion) resolves the futures of that partition, so a
consumer gets a message as soon as it is written instead of at max_wait_ms.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

TopicPartition = tuple[str, int]


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class AppendWaiters:
    def __init__(self) -> None:
        self._waiting: dict[TopicPartition, set[asyncio.Future[None]]] = {}

    def notify(self, topic: str, partition: int) -> None:
        futures = self._waiting.pop((topic, partition), None)
        if futures:
            for fut in futures:
                _wake(fut)

    def notify_topic(self, topic: str) -> None:
        for key in [k for k in self._waiting if k[0] == topic]:
            self.notify(*key)

    async def wait(self, partitions: Iterable[TopicPartition], timeout_s: float) -> None:
        """Return after an append to any of ``partitions`` or after ``timeout_s``, whichever is first."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        keys = list(partitions)
        for key in keys:
            self._waiting.setdefault(key, set()).add(fut)
        timer = loop.call_later(max(timeout_s, 0.0), _wake, fut)
        try:
            await fut
        finally:
            timer.cancel()
            for key in keys:
                waiting = self._waiting.get(key)
                if waiting is not None:
                    waiting.discard(fut)
                    if not waiting:
                        del self._waiting[key]

    def waiting(self) -> int:
        """Parked fetches, counted per partition (tests and metrics)."""
        return sum(len(s) for s in self._waiting.values())
