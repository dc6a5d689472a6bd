"""The web console as a user sees it: data made by real clients, read and changed from the pages."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource
from kafka.structs import OffsetAndMetadata

pytestmark = pytest.mark.browser

HOSTILE = '<script>window.__pwned = true; alert(1)</script><img src=x onerror="window.__pwned = true">'


def _produce(bootstrap: str, topic: str, records: list[tuple], partition: int = 0) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for key, value, headers in records:
        producer.send(topic, key=key, value=value, headers=headers, partition=partition)
    producer.flush()
    producer.close()


def _commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int], client_id: str = "committer") -> None:
    """Commit ``offsets`` for ``group`` as a simple consumer (no membership: the group stays Empty)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             client_id=client_id)
    tps = [TopicPartition(t, p) for t, p in offsets]
    consumer.assign(tps)
    consumer.commit({TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()})
    consumer.close()


def _in_thread(coro_fn, *args):
    """Run an asyncio client (aiokafka) on a loop of its own, away from Playwright's."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro_fn(*args)).result(timeout=60)


def _rows(page, selector: str) -> list[list[str]]:
    return [[c.strip() for c in row.locator("td").all_inner_texts()] for row in page.locator(selector).all()]


def test_every_page_renders_what_clients_made(tab, console_broker):
    """Browsing a partition shows what a kafka-python producer sent, as text, JSON and hex."""
    bootstrap = console_broker.bootstrap_servers
    console_broker.create_topic("orders", partitions=2)
    _produce(bootstrap, "orders", [(b"k-text", b"hello console", [("origin", b"test")]),
                                   (b"k-json", json.dumps({"id": 7, "items": ["a", "b"]}).encode(), []),
                                   (None, bytes([0, 255, 16, 1]), [])])
    _commit(bootstrap, "billing", {("orders", 0): 2})

    page = tab.open("/")
    assert page.locator("#topic-count").inner_text() != "0"
    tab.shot("overview")
    page = tab.open("/topics")
    assert "orders" in page.locator("#topics").inner_text()
    tab.shot("topics")
    page.click("text=orders")
    partitions = _rows(page, "#partitions tr:has(td)")
    assert [r[:5] for r in partitions] == [["0", "1", "0", "0", "3"], ["1", "1", "0", "0", "0"]]
    tab.shot("topic")

    page = tab.open("/messages?topic=orders&partition=0")
    values = page.locator("#messages td.value").all_inner_texts()
    assert values[0] == "hello console" and values[1] == '{"id": 7, "items": ["a", "b"]}'
    assert "binary: hex" in values[2] and "00 ff 10 01" in values[2]
    assert page.locator("#messages td.headers").first.inner_text() == "origin: test"
    tab.shot("messages-text")
    page = tab.open("/messages?topic=orders&partition=0&format=json")
    assert json.loads(page.locator("#messages td.value pre").nth(1).inner_text()) == {"id": 7, "items": ["a", "b"]}
    assert "\n" in page.locator("#messages td.value pre").nth(1).inner_text()  # pretty
    tab.shot("messages-json")
    page = tab.open("/messages?topic=orders&partition=0&format=hex&order=newest")
    offsets = [int(x) for x in page.locator("#messages tr.message td:first-child").all_inner_texts()]
    assert offsets == [2, 1, 0]
    assert page.locator("#messages td.value").first.inner_text().startswith("00 ff 10 01")
    tab.shot("messages-hex-newest")

    page = tab.open("/groups")
    assert "billing" in page.locator("#groups").inner_text()
    tab.shot("groups")
    page.click("text=billing")
    assert page.locator("#state").inner_text() == "Empty"
    tab.shot("group")
    registry = SchemaRegistryClient({"url": console_broker.schema_registry_url})
    registry.register_schema("orders-value", Schema('{"type": "record", "name": "Order", "fields": '
                                                    '[{"name": "id", "type": "int"}]}', "AVRO"))
    page = tab.open("/schemas")
    assert _rows(page, "#subjects tr:has(td)") == [["orders-value", "1", "1", "AVRO", "BACKWARD"]]
    tab.shot("schemas")
    page = tab.open("/test")
    assert "Produce" in page.locator("#captured").inner_text()
    tab.shot("test-view")
    assert not tab.pwned()


def test_lag_matches_the_admin_api_and_refreshes(tab, console_broker):
    bootstrap = console_broker.bootstrap_servers
    console_broker.create_topic("lagging", partitions=2)
    _produce(bootstrap, "lagging", [(None, b"x", [])] * 7, partition=0)
    _produce(bootstrap, "lagging", [(None, b"y", [])] * 4, partition=1)
    _commit(bootstrap, "lag-group", {("lagging", 0): 3, ("lagging", 1): 4})

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    committed = admin.list_group_offsets("lag-group")["lag-group"]
    admin.close()
    reader = KafkaConsumer(bootstrap_servers=bootstrap)
    ends = reader.end_offsets(list(committed))
    reader.close()
    expected = sorted([tp.topic, str(tp.partition), str(meta.offset), str(ends[tp]), str(ends[tp] - meta.offset)]
                      for tp, meta in committed.items())

    page = tab.open("/group?id=lag-group")
    assert sorted(_rows(page, "#lag tr.lag-row")) == expected
    assert page.locator("#total-lag").inner_text() == str(sum(ends[tp] - m.offset for tp, m in committed.items()))
    tab.shot("lag")
    _produce(bootstrap, "lagging", [(None, b"z", [])] * 5, partition=1)  # the page follows without a reload
    page.wait_for_function("() => document.querySelector('#total-lag').textContent.trim() === '9'")


def test_resetting_an_empty_groups_offsets_is_where_aiokafka_starts(tab, console_broker):
    from aiokafka import AIOKafkaConsumer

    bootstrap = console_broker.bootstrap_servers
    console_broker.create_topic("replay")
    _produce(bootstrap, "replay", [(None, f"m{i}".encode(), []) for i in range(10)])
    _commit(bootstrap, "replayers", {("replay", 0): 8})
    stop = threading.Event()
    joined = threading.Event()

    async def member() -> None:  # an active member: the reset is refused while it is there
        consumer = AIOKafkaConsumer("replay", bootstrap_servers=bootstrap, group_id="replayers",
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            await consumer.getone()
            joined.set()
            while not stop.is_set():
                await asyncio.sleep(0.05)
        finally:
            await consumer.stop()

    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(asyncio.run, member())
        assert joined.wait(30)
        tab.open("/group?id=replayers")
        refused = tab.confirm("#reset-offsets", to="earliest")
        assert refused.startswith("Assignments can only be reset if the group 'replayers' is inactive")
        tab.shot("reset-refused")
        stop.set()
        running.result(timeout=30)

    tab.open("/group?id=replayers")
    done = tab.confirm("#reset-offsets", topic="replay", to="offset", value="3")
    assert done == "offsets of replayers reset to replay-0: 3"
    tab.shot("reset-done")

    async def first_offset() -> int:
        consumer = AIOKafkaConsumer("replay", bootstrap_servers=bootstrap, group_id="replayers",
                                    enable_auto_commit=False, auto_offset_reset="latest")
        await consumer.start()
        try:
            return (await consumer.getone()).offset
        finally:
            await consumer.stop()

    assert _in_thread(first_offset) == 3


def test_a_topic_created_from_the_page_is_usable(tab, console_broker):
    bootstrap = console_broker.bootstrap_servers
    tab.open("/topics")
    assert tab.confirm("#create-topic", name="from-page", partitions="3",
                       configs="cleanup.policy=compact\nretention.ms=60000") == \
        "created topic from-page with 3 partition(s)"
    tab.shot("topic-created")
    bad = tab.open("/topics") and tab.confirm("#create-topic", name="<b>bad</b>", partitions="1")
    assert bad.startswith("INVALID_TOPIC_EXCEPTION")  # Kafka's own answer, shown as text

    _produce(bootstrap, "from-page", [(b"k", b"usable", [])], partition=2)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    consumer.assign([TopicPartition("from-page", 2)])
    assert next(iter(consumer)).value == b"usable"
    consumer.close()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    described = admin.describe_configs([ConfigResource("TOPIC", "from-page")])
    admin.close()
    text = repr(described)
    assert "compact" in text and "60000" in text


def test_the_timeline_shows_the_commits_a_test_made(tab, console_broker):
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as AioTp

    bootstrap = console_broker.bootstrap_servers
    console_broker.create_topic("ticks")
    _produce(bootstrap, "ticks", [(None, b"t", [])] * 6)

    async def commit_three() -> None:
        consumer = AIOKafkaConsumer("ticks", bootstrap_servers=bootstrap, group_id="tickers",
                                    enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        try:
            await consumer.getone()
            for offset in (2, 4, 6):
                await consumer.commit({AioTp("ticks", 0): offset})
                await asyncio.sleep(0.02)
        finally:
            await consumer.stop()

    _in_thread(commit_three)
    page = tab.open("/group/timeline?id=tickers")
    commits = [r for r in _rows(page, "#commits tr.commit") if r[1] == "ticks"]
    assert [int(r[3]) for r in reversed(commits)][-3:] == [2, 4, 6]
    times = [int(r[0]) for r in reversed(commits)]
    assert times == sorted(times) and times[-1] <= time.time() * 1000
    assert page.locator("#generations tr:has(td)").count() >= 1  # the join, and the leave
    assert page.locator("#chart polyline.series").count() == 1
    tab.shot("timeline")


def test_hostile_names_keys_values_and_headers_are_inert(tab, console_broker):
    bootstrap = console_broker.bootstrap_servers
    console_broker.create_topic("hostile")
    _produce(bootstrap, "hostile", [(HOSTILE.encode(), HOSTILE.encode(), [(HOSTILE, HOSTILE.encode())]),
                                    (b"k", json.dumps({"html": HOSTILE}).encode(), [])])
    group = f"grp{HOSTILE}"
    _commit(bootstrap, group, {("hostile", 0): 1}, client_id=HOSTILE)

    for fmt in ("text", "json"):
        page = tab.open(f"/messages?topic=hostile&partition=0&format={fmt}")
        assert page.locator("#messages td.key pre").first.inner_text() == HOSTILE  # shown as the text it is
        assert page.locator("#messages td.headers b").first.inner_text() == HOSTILE
        assert page.locator("#messages script, #messages img").count() == 0
    tab.shot("hostile-messages")
    page = tab.open("/groups")
    assert HOSTILE in page.locator("#groups").inner_text()
    page.locator("#groups a").filter(has_text="grp").first.click()
    assert page.locator("h1").inner_text() == f"Group {group}"
    page = tab.open("/test?client_id=" + quote(HOSTILE))
    assert HOSTILE in page.locator("#captured").inner_text()
    tab.shot("hostile-group")
    page.wait_for_timeout(300)  # an onerror would have fired by now
    assert not tab.pwned()


def test_a_consumer_protocol_group_shows_its_members_and_lag(tab, console_broker):
    """A confluent-kafka consumer with ``group.protocol=consumer`` (KIP-848, a hostile client id):
    the list names the group's type, its page the member, its assignment and the admin API's lag."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP
    from confluent_kafka.admin import AdminClient, OffsetSpec

    bootstrap = console_broker.bootstrap_servers
    console_broker.create_topic("cp-browse", partitions=2)
    _produce(bootstrap, "cp-browse", [(None, b"x", [])] * 5, partition=0)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kip848-readers", "group.protocol": "consumer",
                         "client.id": HOSTILE, "enable.auto.commit": False})
    try:
        consumer.subscribe(["cp-browse"])
        deadline = time.monotonic() + 30
        while len(consumer.assignment()) != 2:
            assert time.monotonic() < deadline, "both partitions assigned"
            consumer.poll(0.05)
        consumer.commit(offsets=[CTP("cp-browse", 0, 2)], asynchronous=False)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        end = admin.list_offsets({CTP("cp-browse", 0): OffsetSpec.latest()})[CTP("cp-browse", 0)].result(10).offset

        page = tab.open("/groups")
        row = page.locator("#groups tr").filter(has_text="kip848-readers")
        assert row.locator("td.type").inner_text() == "consumer"
        row.locator("a").click()
        assert page.locator("h1").inner_text() == "Group kip848-readers"
        assert page.locator("#type").inner_text() == "consumer"
        assert page.locator("#members td.client-id").inner_text() == HOSTILE
        assert page.locator("#members td.subscribed").inner_text() == "cp-browse"
        assert page.locator("#members td.assigned").inner_text().strip() == "cp-browse: 0, 1"
        assert _rows(page, "#lag tr.lag-row") == [["cp-browse", "0", "2", str(end), str(end - 2)]]
        tab.shot("consumer-group")
        page.wait_for_timeout(300)  # an onerror would have fired by now
        assert not tab.pwned()
    finally:
        consumer.close()


def test_a_share_group_shows_its_members_and_share_partitions(tab, console_broker):
    """A confluent-kafka ShareConsumer (KIP-932, a hostile client id) that accepted 3 of the 5
    records it got: the list names the group a share group, its page the member, its assignment,
    and per share-partition the start offset and lag DescribeShareGroupOffsets answers."""
    from confluent_kafka import AcknowledgeType, ShareConsumer

    from tests.integration.share_wire import client, describe_offsets

    bootstrap = console_broker.bootstrap_servers
    console_broker.create_topic("sh-browse", partitions=2)
    _produce(bootstrap, "sh-browse", [(None, b"x", [])] * 5, partition=0)
    console_broker.call(lambda: console_broker.app.group_configs.set_overrides(
        "queue-readers", {"share_auto_offset_reset": "earliest"}))
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "queue-readers", "client.id": HOSTILE,
                              "share.acknowledgement.mode": "explicit"})
    try:
        consumer.subscribe(["sh-browse"])
        got: list = []
        deadline = time.monotonic() + 30
        while len(got) < 5:
            assert time.monotonic() < deadline, f"only {[m.offset() for m in got]}"
            got += [m for m in consumer.poll(0.2) or [] if m.error() is None]
        for m in got:
            if m.offset() < 3:
                consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        consumer.commit_sync()
        with client(console_broker.bootstrap_servers.rsplit(":", 1)) as raw:
            [described] = describe_offsets(raw, "queue-readers").groups[0].topics
        admin = sorted(["sh-browse", str(p.partition_index), str(p.start_offset), str(p.lag) if p.lag >= 0 else ""]
                       for p in described.partitions)

        page = tab.open("/groups")
        row = page.locator("#groups tr").filter(has_text="queue-readers")
        assert row.locator("td.type").inner_text() == "share"
        row.locator("a").click()
        assert page.locator("h1").inner_text() == "Group queue-readers"
        assert (page.locator("#type").inner_text(), page.locator("#state").inner_text()) == ("share", "Stable")
        assert page.locator("p.err").count() == 0
        assert page.locator("#members td.client-id").inner_text() == HOSTILE
        assert page.locator("#members td.subscribed").inner_text() == "sh-browse"
        assert page.locator("#members td.assigned").inner_text().strip() == "sh-browse: 0, 1"
        rows = _rows(page, "#lag tr.lag-row")
        # partition 1 has had no record yet: no start offset (-1, auto.offset.reset still to apply), no lag
        assert rows == [["sh-browse", "0", "3", "5", "2"], ["sh-browse", "1", "-1", "0", ""]]
        assert [[r[0], r[1], r[2], r[4]] for r in rows] == admin
        assert "Start offset" in page.locator("#lag").inner_text()
        assert "Reset start offsets" in page.locator("#reset-offsets").inner_text()  # kafka-share-groups --reset-offsets
        assert page.locator("#delete-offsets").count() == 1  # kafka-share-groups --delete-offsets
        tab.shot("share-group")
        page.wait_for_timeout(300)  # an onerror would have fired by now
        assert not tab.pwned()
    finally:
        consumer.close()
