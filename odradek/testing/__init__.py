"""Run an Odradek broker inside a test process: asyncio and thread-backed variants."""

from .broker import Broker, ThreadedBroker

__all__ = ["Broker", "ThreadedBroker"]
