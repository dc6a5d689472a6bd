"""The transaction tests run under both ``transaction.version`` levels a Kafka 4 cluster may
finalize: 1 (the classic protocol for every client) and 2 (the default: transactions v2, chosen
per request by the clients that know it; the coordinator's own aborts use it)."""

from __future__ import annotations

import pytest

from odradek.testing import ThreadedBroker

TRANSACTION_VERSIONS = pytest.mark.parametrize("transaction_version", [1, 2], ids=["tv1", "tv2"])


def overrides(transaction_version: int) -> dict[str, str]:
    return {"odradek.initial.features": f"transaction.version={transaction_version}"}


@pytest.fixture(params=[1, 2], ids=["tv1", "tv2"])
def broker(request):
    """``tests/conftest.py``'s broker, once per transaction version."""
    with ThreadedBroker(overrides=overrides(request.param)) as b:
        yield b
