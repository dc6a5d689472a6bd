"""Shared fixtures: a real broker on 127.0.0.1, in-process, over TCP."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from odradek.testing import Broker, ThreadedBroker

# Property tests judge results, never timings: a busy CI machine must not fail them on a deadline
settings.register_profile("odradek", deadline=None)
settings.load_profile("odradek")

# ODRADEK_TEST_BROKERS=3: the same tests against a cluster of three brokers in the process (docs/CLUSTER.md)
BROKERS = int(os.environ.get("ODRADEK_TEST_BROKERS", "1"))


@pytest.fixture
def broker():
    """A thread-backed broker for synchronous clients (kafka-python, confluent-kafka)."""
    with ThreadedBroker(brokers=BROKERS) as b:
        yield b


@pytest.fixture
async def abroker():
    """A broker on the test's own event loop, for asyncio clients."""
    async with Broker(brokers=BROKERS) as b:
        yield b


def pytest_configure(config):
    from odradek.broker import logging_setup as logs

    logs.configure("text", "info")


def pytest_make_parametrize_id(config, val, argname):
    """Byte strings (record batches) as ids by length: they hold the wall clock, and ids must be the
    same in every xdist worker (duplicates get pytest's numbered suffixes, in collection order)."""
    if isinstance(val, bytes | bytearray) and len(val) > 16:
        return f"{argname}-{len(val)}B"
    return None
