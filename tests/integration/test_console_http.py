"""The web console over HTTP (no browser): what it refuses, what it asks before acting, whose ACLs
its actions pass, and that it is off unless asked.  The pages as a user sees them are in
tests/browser/."""

from __future__ import annotations

import asyncio
import re
import socket
import time
from urllib.parse import quote

import aiohttp
import pytest
from aiokafka import AIOKafkaProducer

from odradek.testing import Broker
from odradek.testing.handle import BrokerHandle

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


async def _topics(b: Broker) -> list[str]:
    return sorted(b.app.topics.names())


async def _post(url: str, action: str, http_headers: dict | None = None, **form: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.post(f"{url}action/{action}", data=form,
                                                          headers=http_headers or {}) as r:
        return r.status, await r.text()


async def _get(url: str, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(url + path) as r:
        return r.status, await r.text()


async def test_the_test_brokers_have_no_console_unless_asked():
    async with Broker() as b:
        assert b.console_url is None and b.app.console is None
    async with Broker(console=True) as b:
        url = b.console_url
        assert url.startswith("http://127.0.0.1:")
        status, html = await _get(url, "")
        assert status == 200 and b.app.cluster_id in html
        await b.restart()  # the console comes back at the same address
        assert b.console_url == url and (await _get(url, ""))[0] == 200


async def test_a_change_is_made_only_once_confirmed():
    async with Broker(console=True) as b:
        status, html = await _post(b.console_url, "create-topic", name="orders", partitions="2")
        assert status == 200 and "Create topic orders with 2 partition(s)?" in html
        assert await _topics(b) == []
        status, html = await _post(b.console_url, "create-topic", name="orders", partitions="2", confirm="yes")
        assert status == 200 and "created topic orders with 2 partition(s)" in html
        assert await _topics(b) == ["orders"]
        status, html = await _post(b.console_url, "create-topic", name="orders", partitions="1", confirm="yes")
        assert status == 409 and "TOPIC_ALREADY_EXISTS" in html  # Kafka's answer, as a client gets it


async def test_a_post_from_another_site_is_refused():
    async with Broker(console=True) as b:
        for headers in ({"Origin": "http://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
            status, _ = await _post(b.console_url, "create-topic", headers, name="x", partitions="1", confirm="yes")
            assert status == 403
        assert await _topics(b) == []


async def test_read_only_shows_but_never_changes():
    async with Broker(console=True, overrides={"odradek.console.read.only": "true"}) as b:
        status, _ = await _post(b.console_url, "create-topic", name="x", partitions="1", confirm="yes")
        assert status == 403 and await _topics(b) == []
        status, html = await _get(b.console_url, "topics")
        assert status == 200 and "create-topic" not in html and "read-only" in html


@pytest.mark.parametrize("principal, allowed", [("User:ANONYMOUS", False), ("User:admin", True)])
async def test_actions_pass_the_same_acls_as_a_client(principal, allowed):
    overrides = {"authorizer.class.name": STANDARD, "super.users": "User:admin",
                 "odradek.console.principal": principal}
    async with Broker(console=True, overrides=overrides) as b:
        status, html = await _post(b.console_url, "create-topic", name="guarded", partitions="1", confirm="yes")
        if allowed:
            assert status == 200 and await _topics(b) == ["guarded"]
        else:
            assert status == 409 and "TOPIC_AUTHORIZATION_FAILED" in html and await _topics(b) == []


async def test_a_console_port_in_use_leaves_the_broker_serving():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        async with Broker(overrides={"odradek.console.listener": f"http://127.0.0.1:{port}"}) as b:
            assert b.console_url is None
            await b.app.wait_loaded()
            assert b.app.endpoint.port  # the Kafka listener serves (the clients' tests cover it)


async def test_a_partition_is_browsed_a_page_at_a_time():
    async with Broker(console=True) as b:
        await _post(b.console_url, "create-topic", name="big", partitions="1", confirm="yes")
        producer = AIOKafkaProducer(bootstrap_servers=b.bootstrap_servers, linger_ms=50)
        await producer.start()
        try:  # 300 records of 1 KiB
            for i in range(300):
                await producer.send("big", f"{i:04d}".encode() + b"." * 1020, partition=0)
            await producer.flush()
        finally:
            await producer.stop()
        status, html = await _get(b.console_url, "messages?topic=big&partition=0&order=newest")
        assert status == 200 and html.count('class="message"') == 50
        assert ">0299." in html and ">0250." in html and ">0249." not in html
        assert 'id="next" href="/messages?topic=big&amp;partition=0&amp;order=newest&amp;format=text&amp;at=250"' in html
        status, html = await _get(b.console_url, "messages?topic=big&partition=0&at=120")
        assert html.count('class="message"') == 50 and ">0120." in html and ">0169." in html


def test_schemas_and_registered_values_are_shown():
    """The Schemas page lists what a Confluent client registered, and browsing decodes a value the
    Confluent Avro serializer wrote (wire format: magic 0, schema id, Avro) with its schema."""
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    schema = ('{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "int"}, '
              '{"name": "note", "type": "string"}]}')
    with BrokerHandle(schema_registry=True, console=True) as b:
        b.create_topic("orders")
        registry = SchemaRegistryClient({"url": b.schema_registry_url})
        serialize = AvroSerializer(registry, schema)
        value = serialize({"id": 7, "note": "<b>seven</b>"}, SerializationContext("orders", MessageField.VALUE))
        producer = Producer({"bootstrap.servers": b.bootstrap_servers})
        producer.produce("orders", value=value, partition=0)
        assert producer.flush(10) == 0

        status, html = asyncio.run(_get(b.console_url, "schemas"))
        assert status == 200 and "orders-value" in html and "BACKWARD" in html
        status, html = asyncio.run(_get(b.console_url, "schemas?subject=orders-value"))
        assert "&#34;Order&#34;" in html or "&quot;Order&quot;" in html
        status, html = asyncio.run(_get(b.console_url, "messages?topic=orders&partition=0"))
        assert "schema id 1: orders-value v1 (AVRO)" in html
        assert "&#34;note&#34;: &#34;&lt;b&gt;seven&lt;/b&gt;&#34;" in html  # decoded, and escaped


async def test_long_lists_come_a_page_at_a_time():
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    async with Broker(console=True) as b:
        admin = AIOKafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(f"t{i:03d}", 1, 1) for i in range(130)])
        finally:
            await admin.close()
        status, html = await _get(b.console_url, "topics")
        total = int(re.search(r"1–100 of (\d+)", html).group(1))  # with the internal topics, listed first
        assert total >= 130 and html.count('href="/topic?name=') == 100
        assert 'href="?start=100"' in html and ">t129<" not in html
        status, html = await _get(b.console_url, "topics?start=100")
        assert html.count('href="/topic?name=') == total - 100 and ">t129<" in html
        status, html = await _get(b.console_url, "")
        assert f'<td class="n" id="topic-count">{total}</td>' in html


async def test_the_test_view_shows_faults_and_moves_the_clock():
    async with Broker(console=True) as b:
        rule = b.control("add_fault", api="OffsetCommit", error="NOT_COORDINATOR", group_id="g<script>")
        status, html = await _get(b.console_url, "test")
        assert status == 200 and "NOT_COORDINATOR" in html and "g&lt;script&gt;" in html
        before = b.control("clock")["now_ms"]
        status, html = await _post(b.console_url, "advance-clock", ms="60000", confirm="yes")
        assert status == 200 and b.control("clock")["now_ms"] >= before + 60000
        status, _ = await _post(b.console_url, "remove-fault", id=str(rule), confirm="yes")
        assert status == 200 and b.control("faults") == []
        await _post(b.console_url, "create-topic", name="gone-soon", partitions="1", confirm="yes")
        status, html = await _post(b.console_url, "reset-broker", confirm="yes")
        assert status == 200 and await _topics(b) == []


async def test_topic_and_group_changes_are_what_clients_then_see():
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    async with Broker(console=True) as b:
        url = b.console_url
        await _post(url, "create-topic", name="ops", partitions="1", confirm="yes")
        producer = AIOKafkaProducer(bootstrap_servers=b.bootstrap_servers)
        await producer.start()
        try:
            for i in range(10):
                await producer.send_and_wait("ops", f"v{i}".encode(), partition=0, timestamp_ms=1_000 * (i + 1))
        finally:
            await producer.stop()

        status, html = await _get(url, "messages?topic=ops&partition=0&start=timestamp&at=5000")
        assert ">v4<" in html and ">v3<" not in html  # the first record at or after the timestamp
        assert (await _post(url, "add-partitions", name="ops", count="3", confirm="yes"))[0] == 200
        assert (await _post(url, "alter-config", name="ops", key="retention.ms", value="123456", confirm="yes"))[0] == 200
        status, html = await _post(url, "delete-records", name="ops", partition="0", before="5", confirm="yes")
        assert status == 200 and "ops-0 now starts at offset 5" in html
        status, html = await _post(url, "produce", topic="ops", partition="2", key="k", value="hello",
                                   headers="trace: abc", confirm="yes")
        assert status == 200 and "written to ops-2 at offset 0" in html

        admin = AIOKafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        await admin.start()
        try:
            described = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "ops")])
            assert ("retention.ms", "123456") in [(c[0], c[1]) for c in described[0].resources[0][4]]
            consumer = AIOKafkaConsumer(bootstrap_servers=b.bootstrap_servers, group_id="ops-readers",
                                        enable_auto_commit=False, auto_offset_reset="earliest")
            await consumer.start()
            try:
                assert len(consumer.partitions_for_topic("ops") or await _partitions(consumer)) == 3
                consumer.assign([TopicPartition("ops", 0), TopicPartition("ops", 2)])
                got = await consumer.getmany(timeout_ms=5000)
                firsts = {tp.partition: records[0] for tp, records in got.items()}
                assert firsts[0].offset == 5 and firsts[2].value == b"hello"
                assert firsts[2].key == b"k" and list(firsts[2].headers) == [("trace", b"abc")]
                await consumer.commit({TopicPartition("ops", 0): 7})
            finally:
                await consumer.stop()
            other = AIOKafkaConsumer(bootstrap_servers=b.bootstrap_servers, group_id="ops-others",
                                     enable_auto_commit=False)
            await other.start()
            try:
                other.assign([TopicPartition("ops", 0)])
                await other.commit({TopicPartition("ops", 0): 6})
            finally:
                await other.stop()
        finally:
            await admin.close()

        status, html = await _post(url, "delete-group", group="ops-readers", confirm="yes")
        assert status == 200 and "deleted group ops-readers" in html
        groups = (await _get(url, "groups"))[1]
        assert ">ops-readers<" not in groups and ">ops-others<" in groups
        status, html = await _post(url, "delete-offsets", group="ops-others", topic="ops", confirm="yes")
        assert status == 200 and "deleted the offsets of ops-others for ops" in html
        assert 'class="lag-row"' not in (await _get(url, "group?id=ops-others"))[1]


async def _partitions(consumer) -> set[int]:
    await consumer._client.force_metadata_update()
    return consumer.partitions_for_topic("ops")


@pytest.mark.kafka_broker_overrides({"odradek.console.listener": "http://127.0.0.1:0"})
def test_a_fixture_broker_serves_the_console_when_its_settings_ask(fresh_kafka_broker):
    status, html = asyncio.run(_get(fresh_kafka_broker.console_url, "topics"))
    assert status == 200 and "__consumer_offsets" in html


def _cells(html: str, cls: str) -> list[str]:
    return [re.sub(r"<br>", " ", c).strip() for c in re.findall(rf'<td class="{cls}">(.*?)</td>', html, re.S)]


def test_a_consumer_protocol_group_is_listed_shown_and_guarded():
    """Two confluent-kafka consumers with ``group.protocol=consumer`` (KIP-848): the list shows the
    group's type, its page its epochs, members and assignment as the admin API describes them, and
    committed offset, end offset and lag as the admin API's figures give them; changes are refused
    while it has members, as for a classic group."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as CTP
    from confluent_kafka.admin import AdminClient, OffsetSpec

    group, topic = "kip848<b>", "cp-orders"
    with BrokerHandle(console=True, overrides={"group.consumer.heartbeat.interval.ms": "300"}) as b:
        url, bootstrap = b.console_url, b.bootstrap_servers
        b.create_topic(topic, partitions=4)
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(40):
            producer.produce(topic, str(i).encode(), partition=i % 4)
        assert producer.flush(10) == 0
        consumers = [Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                               "client.id": f"cp-{n}", "enable.auto.commit": False}) for n in "ab"]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        try:
            for c in consumers:
                c.subscribe([topic])
            deadline = time.monotonic() + 30
            while not all(len(c.assignment()) == 2 for c in consumers):
                assert time.monotonic() < deadline, "two partitions each"
                for c in consumers:
                    c.poll(0.05)
            for c in consumers:  # a different committed offset per partition
                c.commit(offsets=[CTP(topic, tp.partition, tp.partition + 2) for tp in c.assignment()],
                         asynchronous=False)
            described = admin.describe_consumer_groups([group])[group].result(10)
            while str(described.state).rsplit(".", 1)[-1] != "STABLE":
                assert time.monotonic() < deadline, "a stable group"
                for c in consumers:
                    c.poll(0.05)
                described = admin.describe_consumer_groups([group])[group].result(10)
            offsets = admin.list_consumer_group_offsets([_request(group)])[group].result(10)
            committed = {tp.partition: tp.offset for tp in offsets.topic_partitions}
            ends = {tp.partition: r.offset for tp, r in admin.list_offsets(
                {CTP(topic, p): OffsetSpec.latest() for p in range(4)}).items() for r in [r.result(10)]}

            status, html = asyncio.run(_get(url, "groups"))
            assert status == 200
            assert '>kip848&lt;b&gt;</a></td><td class="type">consumer</td><td>Stable</td>' in html

            status, html = asyncio.run(_get(url, f"group?id={quote(group)}"))
            assert status == 200 and "<h1>Group kip848&lt;b&gt;</h1>" in html
            assert '<td id="type">consumer</td>' in html and '<td id="state">Stable</td>' in html
            assert re.search(r'<td id="group-epoch">\d+</td>', html) and 'id="assignment-epoch"' in html
            shown = dict(zip(_cells(html, "member-id"), _cells(html, "assigned"), strict=True))
            assert shown == {m.member_id: f"{topic}: " + ", ".join(str(tp.partition) for tp in sorted(
                m.assignment.topic_partitions, key=lambda tp: tp.partition)) for m in described.members}
            assert sorted(_cells(html, "client-id")) == ["cp-a", "cp-b"]
            assert _cells(html, "subscribed") == [topic, topic]
            rows = {int(p): (int(c), int(e), int(lag)) for p, c, e, lag in re.findall(
                r'data-partition="(\d+)">.*?class="n committed">(\d+)</td><td class="n end">(\d+)</td>'
                r'<td class="n lagv">(\d+)</td>', html, re.S)}
            assert rows == {p: (committed[p], ends[p], ends[p] - committed[p]) for p in range(4)}
            assert f'id="total-lag">{sum(ends[p] - committed[p] for p in range(4))}<' in html
            status, html = asyncio.run(_get(url, f"group/timeline?id={quote(group)}"))
            assert status == 200 and html.count('<tr class="commit">') == 4  # its commits, and its epochs
            assert re.search(r'<td class="n">\d+</td><td class="n"></td><td>consumer \(group epoch\)</td>', html)
            assert re.search(r">epoch \d+</text>", html)

            status, html = asyncio.run(_post(url, "reset-offsets", group=group, to="earliest", confirm="yes"))
            assert status == 409
            assert "Assignments can only be reset if the group &#39;kip848&lt;b&gt;&#39; is inactive, but the " \
                   "current state is Stable." in html
            status, html = asyncio.run(_post(url, "delete-offsets", group=group, topic=topic, confirm="yes"))
            assert status == 409 and "GROUP_SUBSCRIBED_TO_TOPIC" in html
            status, html = asyncio.run(_post(url, "delete-group", group=group, confirm="yes"))
            assert status == 409 and "NON_EMPTY_GROUP" in html
        finally:
            for c in consumers:
                c.close()
        status, html = asyncio.run(_post(url, "reset-offsets", group=group, to="earliest", confirm="yes"))
        assert status == 200, html  # once its members left (Empty), as Kafka's tool allows
        offsets = admin.list_consumer_group_offsets([_request(group)])[group].result(10)
        assert {tp.partition: tp.offset for tp in offsets.topic_partitions} == dict.fromkeys(range(4), 0)



def test_a_consumer_groups_page_shows_partitions_pending_revocation_and_assignment():
    """A KIP-848 member that has not yet given up what a newcomer's target holds: its page shows
    them pending revocation on the one and pending assignment on the other, until it polls."""
    from confluent_kafka import Consumer

    def partitions(cell: str) -> set[int]:
        return {int(p) for p in cell.partition(": ")[2].split(", ") if p}

    with BrokerHandle(console=True, overrides={"group.consumer.heartbeat.interval.ms": "300"}) as b:
        b.create_topic("moving", partitions=4)
        a, n = (Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "movers", "client.id": name,
                          "group.protocol": "consumer"}) for name in ("old", "new"))
        try:
            a.subscribe(["moving"])
            deadline = time.monotonic() + 30
            while len(a.assignment()) != 4:
                assert time.monotonic() < deadline, "all four to the first member"
                a.poll(0.05)
            n.subscribe(["moving"])  # the first member does not poll: it cannot give anything up yet
            while True:
                n.poll(0.05)
                html = asyncio.run(_get(b.console_url, "group?id=movers"))[1]
                rows = dict(zip(_cells(html, "client-id"), zip(_cells(html, "assigned"),
                                _cells(html, "pending-assignment"), _cells(html, "pending-revocation"),
                                strict=True), strict=True))
                if rows.get("old", ("", "", ""))[2]:  # its next heartbeat moves it to revoking
                    break
                assert time.monotonic() < deadline, "a pending revocation"
            assert '<td id="state">Reconciling</td>' in html
            kept, revoking = partitions(rows["old"][0]), partitions(rows["old"][2])
            assert revoking and kept | revoking == {0, 1, 2, 3} and not kept & revoking
            assert partitions(rows["new"][1]) == revoking and rows["new"][2] == "" and rows["old"][1] == ""
            while len(n.assignment()) != 2:  # once the first member polls, the partitions move
                assert time.monotonic() < deadline, "the partitions to move"
                a.poll(0.05)
                n.poll(0.05)
            html = asyncio.run(_get(b.console_url, "group?id=movers"))[1]
            assert set(_cells(html, "pending-assignment")) == set(_cells(html, "pending-revocation")) == {""}
        finally:
            a.close()
            n.close()


def _request(group: str):
    from confluent_kafka import ConsumerGroupTopicPartitions

    return ConsumerGroupTopicPartitions(group)


def test_a_share_groups_start_offsets_are_reset_and_deleted_from_its_page_while_it_is_empty():
    """``kafka-share-groups --reset-offsets`` from the page: the start offsets of the share-partitions
    the group has (or of a named topic), set with AlterShareGroupOffsets; ``--delete-offsets`` with
    DeleteShareGroupOffsets; refused while the group has members, with ShareGroupCommand's message."""
    from .share_wire import client as share_client
    from .share_wire import create_topic, describe_offsets, init_share, produce

    with BrokerHandle(console=True) as b:
        url = b.console_url
        with share_client(b) as c:
            create_topic(c, "sq", partitions=2)
            produce(c, "sq", 2, 5, partition=0)
            produce(c, "sq", 1, 5, partition=1)
            init_share(c, "sq-g", "sq", partitions=2)  # an empty share group starting at 0
        assert 'id="reset-offsets"' in asyncio.run(_get(url, "group?id=sq-g"))[1]
        status, html = asyncio.run(_post(url, "reset-offsets", group="sq-g", topic="", to="latest", confirm="yes"))
        assert status == 200 and "offsets of sq-g reset to sq-0: 10, sq-1: 5" in html
        with share_client(b) as c:
            starts = describe_offsets(c, "sq-g", "sq", (0, 1)).groups[0].topics[0].partitions
            assert [(p.start_offset, p.lag) for p in starts] == [(10, 0), (5, 0)]
            status, html = asyncio.run(_post(url, "reset-offsets", group="sq-g", topic="sq", to="offset",
                                             value="3", confirm="yes"))
            assert "offsets of sq-g reset to sq-0: 3, sq-1: 3" in html
            starts = describe_offsets(c, "sq-g", "sq", (0, 1)).groups[0].topics[0].partitions
            assert [p.start_offset for p in starts] == [3, 3]
            assert 'id="delete-offsets"' in asyncio.run(_get(url, "group?id=sq-g"))[1]
            status, html = asyncio.run(_post(url, "delete-offsets", group="sq-g", topic="sq", confirm="yes"))
            assert status == 200 and "deleted the offsets of sq-g for sq" in html
            assert describe_offsets(c, "sq-g").groups[0].topics == []  # kafka-share-groups --delete-offsets
            joined = c.request(76, 1, {"group_id": "sq-g", "member_id": "m" * 22, "member_epoch": 0,
                                       "rack_id": None, "subscribed_topic_names": ["sq"]})
            assert joined.error_code == 0
        status, html = asyncio.run(_post(url, "reset-offsets", group="sq-g", topic="", to="earliest", confirm="yes"))
        assert "Share group &#39;sq-g&#39; is not empty." in html
