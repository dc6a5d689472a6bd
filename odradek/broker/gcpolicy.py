"""The broker process's garbage-collector policy: no long pauses on the event loop.

Why: CPython's full (generation-2) collection walks every object the
collector tracks, and it runs on whatever thread allocates, here the event
loop.  A broker with one 1000-partition topic tracks about 60,000 objects
(each partition's log, segment, index and locks), and a full collection of
that heap took 20-77 ms on the 2-core project VM, several times a second
under commit load: the p99 latency of every request was a GC pause.

Policy, for a process that ``odradek serve`` owns (an embedded broker, such
as the pytest fixture, leaves its host process's collector alone):

- While the command imports its modules, no collection at all (``cli.cmd_serve``
  turns the collector off once its configuration is read): an import makes tens of thousands of
  objects that live for good, and the ~80 young collections a start ran to find
  that out, plus the full one that freed the import's ~1,000 dead objects (mostly
  the classes ``slots=True`` replaces), cost ~25 ms of its CPU (BENCHMARKS.md).
  Once imported (:meth:`GcPolicy.imported`) the heap is frozen as it is, that
  garbage included (~0.4 MB of RSS, kept until a deep collection), and the
  collector is on again before the broker loads its state.
- Once started: collect what is not frozen yet, then ``gc.freeze()``.  Configuration
  and every open log move to the permanent generation, which no collection walks.
- After every automatic full collection, freeze what survived it.  The next
  full collection then walks only what became old since: topics created at
  run time, loaded groups, long-lived connections.
- Frozen objects are still freed by reference counting; only a reference
  cycle that dies after being frozen is missed.  To bound that, every
  ``DEEP_CHECK_S`` the permanent generation is counted, and when it has grown
  by ``DEEP_GROWTH`` since the last deep collection, everything is unfrozen,
  collected once and frozen again: one full pause, only while the heap grows.
"""

from __future__ import annotations

import asyncio
import gc
import time

import structlog

log = structlog.get_logger("odradek.gc")

DEEP_CHECK_S = 60.0
DEEP_GROWTH = 1.25


class GcPolicy:
    def __init__(self) -> None:
        self.frozen_after_deep = 0
        self.freezes = 0
        self.deep_collections = 0
        self._handle: asyncio.TimerHandle | None = None

    def imported(self) -> None:
        """The modules are loaded: freeze them as they are and turn the collector back on."""
        gc.freeze()
        gc.enable()

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        """Freeze the start-up heap and keep full collections short from now on."""
        self.collect()
        gc.callbacks.append(self._after_collection)
        self._handle = loop.call_later(DEEP_CHECK_S, self._check, loop)

    def uninstall(self) -> None:
        if self._after_collection in gc.callbacks:
            gc.callbacks.remove(self._after_collection)
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        gc.unfreeze()

    def _after_collection(self, phase: str, info: dict) -> None:
        # runs inside the collector, after it finished: the generation lists are consistent
        if phase == "stop" and info["generation"] == 2:
            gc.freeze()
            self.freezes += 1

    def collect(self, event: str = "gc.collection") -> None:
        """Collect what is not frozen, freeze the survivors."""
        started = time.perf_counter()
        found = gc.collect()
        gc.freeze()
        self.frozen_after_deep = gc.get_freeze_count()
        log.info(event, collected=found, frozen=self.frozen_after_deep,
                 ms=round((time.perf_counter() - started) * 1000, 1))

    def deep_collect(self) -> None:
        """Unfreeze, collect everything once, freeze the survivors."""
        gc.unfreeze()
        self.deep_collections += 1
        self.collect("gc.deep_collection")

    def _check(self, loop: asyncio.AbstractEventLoop) -> None:
        if gc.get_freeze_count() > DEEP_GROWTH * self.frozen_after_deep:
            self.deep_collect()
        self._handle = loop.call_later(DEEP_CHECK_S, self._check, loop)
