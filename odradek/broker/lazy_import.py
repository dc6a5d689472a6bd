"""Importing a heavy module (aiohttp, Jinja2, the console's pages) off the event loop.

The HTTP surfaces load on their first connection, in a worker thread, so a broker nobody
browses never pays for them and the loop keeps serving Kafka meanwhile.  Two such imports may
start together (a browser opening the console and the registry at once); CPython 3.11 can fail
compiling in two threads at the same time ("SystemError: AST constructor recursion depth
mismatch", CPython gh-106905), so the imports take one lock, and the rare clash with a compile
on another thread is retried once.
"""

from __future__ import annotations

import asyncio
import importlib
import threading
from types import ModuleType

_LOCK = threading.Lock()


def _import(name: str) -> ModuleType:
    with _LOCK:
        try:
            return importlib.import_module(name)
        except SystemError:  # gh-106905: a concurrent compile elsewhere; the module is not cached
            return importlib.import_module(name)


async def import_off_loop(name: str) -> ModuleType:
    """``importlib.import_module(name)`` in a worker thread, one such import at a time."""
    return await asyncio.to_thread(_import, name)
