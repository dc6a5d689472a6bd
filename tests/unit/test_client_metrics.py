"""ClientMetricsManager and the client-metrics subscriptions, without a server: the instance
cache's bounds and expiry, how subscriptions combine, and what the OTLP decoder keeps."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

import pytest

from odradek.broker import client_metrics as cm
from odradek.broker.client_metrics_config import ClientInfo, ClientMetricsConfigError, Subscription, combine
from odradek.broker.otlp import OtlpError, decode_metrics
from odradek.protocol.errors import ErrorCode as E

ZERO = uuid.UUID(int=0)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def ctx(client_id: str = "app", host: str = "127.0.0.1"):
    return SimpleNamespace(client_id=client_id, client_host=host)


def manager(clock: Clock, metrics: str = "*", interval_ms: int = 1000) -> cm.ClientMetricsManager:
    default = Subscription.from_configs({"metrics": metrics, "interval.ms": str(interval_ms)})
    return cm.ClientMetricsManager(default, 1024, clock)


def test_instances_expire_after_three_intervals_or_a_minute():
    clock = Clock()
    m = manager(clock, interval_ms=30_000)
    m.get_subscriptions(ZERO, ctx())
    clock.now += 89_999
    assert len(m.instances()) == 1
    clock.now += 1
    assert m.instances() == []


def test_the_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(cm, "CACHE_MAX_SIZE", 3)
    m = manager(Clock())
    ids = [m.get_subscriptions(ZERO, ctx())["client_instance_id"] for _ in range(5)]
    assert [i["client_instance_id"] for i in m.instances()] == [str(i) for i in ids[2:]]


def test_subscription_ids_depend_on_the_subscription_and_the_instance():
    a, b = uuid.uuid4(), uuid.uuid4()
    sub = Subscription(("x",), 1000)
    assert cm.subscription_id(sub, a) == cm.subscription_id(sub, a)
    assert cm.subscription_id(sub, a) != cm.subscription_id(sub, b)
    assert cm.subscription_id(sub, a) != cm.subscription_id(Subscription(("x",), 2000), a)
    assert -2**31 <= cm.subscription_id(sub, a) < 2**31


def test_new_instance_ids_are_never_reserved():
    assert all(cm.new_instance_id() not in (ZERO, uuid.UUID(int=1)) for _ in range(100))


def test_combine_takes_the_union_and_the_least_interval():
    subs = [Subscription(("a", "b"), 5000), Subscription(("b", "c"), 2000)]
    assert combine(subs) == Subscription(("a", "b", "c"), 2000)
    assert combine([*subs, Subscription(("*",), 9000)]).metrics == ("*",)
    assert combine([]) == Subscription((), 300_000)


def test_match_selects_whole_values():
    sub = Subscription.from_configs({"metrics": "a", "match": "client_id=app-.*,client_source_address=10\\..*"})
    assert sub.matches(ClientInfo("i", "app-1", "10.0.0.1"))
    assert not sub.matches(ClientInfo("i", "app-1", "110.0.0.1"))
    assert not sub.matches(ClientInfo("i", "my-app-1", "10.0.0.1"))


def test_unknown_keys_are_an_invalid_request_bad_values_an_invalid_config():
    with pytest.raises(ClientMetricsConfigError) as unknown:
        Subscription.from_configs({"colour": "blue"})
    assert unknown.value.invalid_request
    with pytest.raises(ClientMetricsConfigError) as bad:
        Subscription.from_configs({"interval.ms": "3600001"})
    assert not bad.value.invalid_request


def test_a_push_decodes_and_keeps_the_last_metrics():
    from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

    data = MetricsData()
    rm = data.resource_metrics.add()
    attr = rm.resource.attributes.add()
    attr.key, attr.value.string_value = "client_rack", "r1"
    metric = rm.scope_metrics.add().metrics.add()
    metric.name = "lat"
    for node, value in (("1", 5), ("2", 7)):
        point = metric.sum.data_points.add()
        point.as_int = value
        kv = point.attributes.add()
        kv.key, kv.value.string_value = "node_id", node
    metrics, resource = decode_metrics(data.SerializeToString())
    assert metrics == {"lat": [{"attributes": {"node_id": "1"}, "value": 5},
                               {"attributes": {"node_id": "2"}, "value": 7}]}
    assert resource == {"client_rack": "r1"}
    with pytest.raises(OtlpError):
        decode_metrics(b"\x0a\xff")

    m = manager(Clock())
    got = m.get_subscriptions(ZERO, ctx())
    req = SimpleNamespace(client_instance_id=got["client_instance_id"], subscription_id=got["subscription_id"],
                          terminating=False, compression_type=0, metrics=data.SerializeToString())
    assert asyncio.run(m.push(req, ctx())) == E.NONE
    assert m.reported("app") == {str(got["client_instance_id"]): metrics}
    assert m.reported("other") == {}
    assert m.numbers()[0][2:] == ("lat", "node_id=1", 5)
