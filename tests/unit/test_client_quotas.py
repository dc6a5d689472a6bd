"""The quota rules without a broker: Kafka's precedence of user/client-id quotas, its Rate window and
throttle time, and the store's file."""

from __future__ import annotations

import pytest

from odradek.broker.client_quotas import QuotaStore
from odradek.broker.quota_enforcer import QuotaEnforcer, Rate

LEVELS = [
    ((("client-id", "app"), ("user", "alice")), 1.0),
    ((("client-id", None), ("user", "alice")), 2.0),
    ((("user", "alice"),), 3.0),
    ((("client-id", "app"), ("user", None)), 4.0),
    ((("client-id", None), ("user", None)), 5.0),
    ((("user", None),), 6.0),
    ((("client-id", "app"),), 7.0),
    ((("client-id", None),), 8.0),
]


@pytest.mark.parametrize("first", range(len(LEVELS)))
def test_the_first_of_kafkas_eight_levels_applies(first):
    store = QuotaStore(None)
    store.apply({entity: {"producer_byte_rate": v} for entity, v in LEVELS[first:]})
    assert store.quota_for("alice", "app", "producer_byte_rate") == LEVELS[first]


def test_no_level_no_quota():
    store = QuotaStore(None)
    store.apply({(("user", "bob"),): {"producer_byte_rate": 1.0}})
    assert store.quota_for("alice", "app", "producer_byte_rate") is None


def test_rate_window_is_at_least_samples_minus_one_windows():
    r = Rate(11, 1000)
    r.record(100_000, 0)
    assert r.window(0) == 10_000 and r.measure(0) == 10_000
    r.record(0, 12_000)  # the first sample expired (11 windows)
    assert r.measure(12_000) == 0


def test_throttle_time_is_kafkas_formula_and_shared_by_the_entity():
    now = [0]
    store = QuotaStore(None)
    store.apply({(("user", None),): {"producer_byte_rate": 1000.0}})
    q = QuotaEnforcer(store, lambda: now[0])
    assert q.refresh()
    assert q.record("producer_byte_rate", "a", "x", 10_000) == 0  # exactly the bound
    # another user under the same default-user quota shares the rate
    assert q.record("producer_byte_rate", "b", "y", 5_000) == round((1500 - 1000) / 1000 * 10_000)


def test_store_survives_a_reload(tmp_path):
    store = QuotaStore(tmp_path)
    quotas = {(("client-id", None), ("user", "alice")): {"consumer_byte_rate": 5.0}}
    store.save(quotas)
    store.apply(quotas)
    again = QuotaStore(tmp_path)
    again.load()
    assert again.quotas == quotas
