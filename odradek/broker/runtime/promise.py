"""``Promise``: a result delivered later, completed synchronously by the coordinators.

Why not an asyncio future: the coordinators are sans-I/O (tests drive them
without an event loop), and a commit that is durable at once must cost no
loop callback.  The network layer turns a pending promise into an answer
with ``add_done_callback`` (``dispatch.Later``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Promise:
    """A parked JoinGroup/SyncGroup answer, or a write's outcome once durable."""

    __slots__ = ("_done", "_result", "_callbacks")

    def __init__(self) -> None:
        self._done = False
        self._result: Any = None
        self._callbacks: list[Callable[[Any], None]] = []

    @property
    def done(self) -> bool:
        return self._done

    def result(self) -> Any:
        if not self._done:
            raise RuntimeError("promise not completed")
        return self._result

    def set(self, result: Any) -> None:
        if self._done:
            return
        self._done = True
        self._result = result
        callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb(result)

    def add_done_callback(self, cb: Callable[[Any], None]) -> None:
        if self._done:
            cb(self._result)
        else:
            self._callbacks.append(cb)

    @classmethod
    def resolved(cls, result: Any) -> Promise:
        """A promise already completed with ``result`` (built directly: one per OffsetCommit)."""
        p = _new(cls)
        p._done = True
        p._result = result
        p._callbacks = _NO_CALLBACKS  # a completed promise calls back at once, never stores
        return p


_new = object.__new__
_NO_CALLBACKS: list = []  # shared, never appended to (only completed promises hold it)
