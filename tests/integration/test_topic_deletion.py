"""Topic deletion over raw frames: names at Kafka's length limit, reads racing a delete.

A deleted topic must stay deleted across restarts, whatever its name, and a
delete must never pull a segment's file descriptor from under a Fetch or a
ListOffsets that is reading it.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from odradek.broker.dataplane.topics import MAX_NAME_LENGTH, REGISTRY_FILE
from odradek.protocol.errors import ErrorCode as E
from odradek.testing import ThreadedBroker
from tests.integration.test_dataplane_wire import (
    DELETE,
    batch,
    client,
    create,
    fetch,
    list_offset,
    metadata,
    produce,
)

pytestmark = pytest.mark.integration

LONGEST = "t" * MAX_NAME_LENGTH


def delete(c, *names: str, version: int = 4):
    r = c.request(DELETE, version, {"topic_names": list(names), "timeout_ms": 5000})
    return [x.error_code for x in r.responses]


def leftovers(data_dir, prefix: str) -> list[str]:
    return sorted(p.name for p in data_dir.iterdir() if p.name.startswith(prefix))


# --- names at the length limit ----------------------------------------------------------

def test_the_longest_legal_topic_name_deletes_and_the_broker_restarts(broker):
    with client(broker) as c:
        assert create(c, LONGEST, 3).error_code == E.NONE
        for p in range(3):
            assert produce(c, LONGEST, batch(2), partition=p).error_code == E.NONE
        assert delete(c, LONGEST) == [E.NONE]
        assert metadata(c, [LONGEST]).topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert leftovers(broker.data_dir, "ttt") == []
    broker.restart()
    with client(broker) as c:
        assert metadata(c, [LONGEST]).topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        assert create(c, LONGEST, 1).error_code == E.NONE  # the name is free and the topic empty
        assert list_offset(c, LONGEST, -1).offset == 0


def test_a_half_done_delete_of_a_long_name_is_finished_on_start(broker):
    """The registry marks the topic as being deleted but its directories are still there."""
    name = "x" * (MAX_NAME_LENGTH - 1)
    with client(broker) as c:
        assert create(c, name, 2).error_code == E.NONE
        assert produce(c, name, batch(1), partition=1).error_code == E.NONE
    broker.stop()
    path = broker.data_dir / REGISTRY_FILE
    registry = json.loads(path.read_text())
    registry["topics"] = [t for t in registry["topics"] if t["name"] != name]
    registry["deleting"] = [name]
    path.write_text(json.dumps(registry))
    broker.start()
    with client(broker) as c:
        assert metadata(c, [name]).topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert leftovers(broker.data_dir, "xxx") == []
    end = time.monotonic() + 10  # the marker goes once the coordinator has forgotten the topic's offsets
    while json.loads(path.read_text())["deleting"]:
        assert time.monotonic() < end
        time.sleep(0.02)


# --- reads racing a delete --------------------------------------------------------------

READ_ERRORS = {E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION}


def _fill(c, name: str, partitions: int, batches: int) -> None:
    for p in range(partitions):
        for _ in range(batches):
            assert produce(c, name, batch(20, value=b"x" * 400), partition=p).error_code == E.NONE


def _reader(port: int, name: str, partitions: int, stop: threading.Event, problems: list[str]) -> None:
    """Fetch (big reads go to worker threads) and ListOffsets by time, until told to stop."""
    from odradek.broker.wire_client import SyncClient
    from odradek.protocol.records import iter_records

    try:
        with SyncClient("127.0.0.1", port, timeout=15) as c:
            while not stop.is_set():
                for p in range(partitions):
                    part = fetch(c, name, 0, partition=p, pmax=8 << 20).responses[0].partitions[0]
                    if part.error_code not in READ_ERRORS:
                        problems.append(f"fetch p{p}: error {part.error_code}")
                    elif part.records:
                        list(iter_records(part.records))  # CRCs hold: bytes of this log, not another file's
                    for version, ts in ((1, 0), (7, -3)):
                        o = list_offset(c, name, ts, partition=p, version=version)
                        if o.error_code not in READ_ERRORS:
                            problems.append(f"list_offsets v{version} p{p}: error {o.error_code}")
    except Exception as exc:  # a closed connection is the failure this test looks for
        problems.append(f"{type(exc).__name__}: {exc}")


def test_reads_racing_a_delete_get_data_or_an_error_code():
    rounds, partitions = 6, 2
    overrides = {"log.segment.bytes": 16384}
    with ThreadedBroker(overrides=overrides) as b, client(b) as c:
        for r in range(rounds):
            name = f"raced-{r}"
            assert create(c, name, partitions).error_code == E.NONE
            _fill(c, name, partitions, 60)
            stop, problems = threading.Event(), []
            readers = [threading.Thread(target=_reader, args=(b.app.endpoint.port, name, partitions, stop,
                                                                problems)) for _ in range(3)]
            for t in readers:
                t.start()
            time.sleep(0.2)
            assert delete(c, name) == [E.NONE]
            time.sleep(0.1)
            stop.set()
            for t in readers:
                t.join(30)
            assert problems == []
        assert produce(c, "after", batch(1)).error_code == E.NONE  # the broker kept serving


# --- requests the client cuts off --------------------------------------------------------

def _settled(c, names: list[str], want: int, deadline_s: float = 20.0) -> list[str]:
    """Poll Metadata until ``want`` of ``names`` are gone (or the deadline); the ones still there."""
    end = time.monotonic() + deadline_s
    while True:
        present = [t.name for t in metadata(c, names).topics if t.error_code == E.NONE]
        if len(names) - len(present) >= want or time.monotonic() > end:
            return present
        time.sleep(0.05)


def test_a_delete_the_client_cuts_off_is_finished_and_stays_finished(broker):
    """Kafka completes an accepted request whatever the client does; only the answer is dropped."""
    from odradek.broker.wire_client import SyncClient, encode

    names = [f"cut-{i}" for i in range(40)]
    with client(broker) as c:
        for name in names:
            assert create(c, name, 4).error_code == E.NONE
            assert produce(c, name, batch(1), partition=3).error_code == E.NONE
    with SyncClient("127.0.0.1", broker.app.endpoint.port) as cut:
        cut.send_raw(encode(DELETE, 4, 1, {"topic_names": names, "timeout_ms": 5000}))
    # the socket is closed before the answer: the delete must still run to its end
    with client(broker) as c:
        assert _settled(c, names, len(names)) == []
    broker.restart()
    with client(broker) as c:
        assert _settled(c, names, len(names), deadline_s=0) == []
    assert leftovers(broker.data_dir, "cut-") == []


def test_creates_the_clients_cut_off_leave_a_registry_that_matches_the_topics(broker):
    """Many cut-off CreateTopics at once: every topic created is in topics.json, whole."""
    from odradek.broker.wire_client import SyncClient, encode

    names = [f"made-{i}" for i in range(30)]
    socks = []
    for i, name in enumerate(names):
        s = SyncClient("127.0.0.1", broker.app.endpoint.port)
        s.send_raw(encode(19, 5, i, {"topics": [{"name": name, "num_partitions": 3, "replication_factor": -1,
                                                 "assignments": [], "configs": []}],
                                     "timeout_ms": 5000, "validate_only": False}))
        socks.append(s)
    for s in socks:
        s.close()
    with client(broker) as c:
        end = time.monotonic() + 20
        while len(present := [t for t in metadata(c, names).topics if t.error_code == E.NONE]) < len(names):
            assert time.monotonic() < end, f"{len(present)} of {len(names)} created"
            time.sleep(0.05)
        ids = {t.name: t.topic_id for t in present}
    registry = json.loads((broker.data_dir / REGISTRY_FILE).read_text())
    assert sorted(t["name"] for t in registry["topics"]) == sorted(names)
    broker.restart()
    with client(broker) as c:
        after = {t.name: (t.topic_id, len(t.partitions)) for t in metadata(c, names).topics}
    assert after == {n: (ids[n], 3) for n in names}


def test_a_delete_a_crash_interrupted_also_forgets_the_topics_offsets(broker):
    """Crash after the marker was written: the start removes the logs and, once the
    coordinator has loaded, the committed offsets, so a re-created topic starts clean."""
    from tests.integration.test_dataplane_wire import _wait_coordinator, commit, committed

    with client(broker) as c:
        assert create(c, "interrupted").error_code == E.NONE
        assert _wait_coordinator(c, "g-int", "interrupted") == E.NONE
        assert commit(c, "g-int", "interrupted", 7) == E.NONE
    broker.stop()
    path = broker.data_dir / REGISTRY_FILE
    registry = json.loads(path.read_text())
    registry["topics"] = [t for t in registry["topics"] if t["name"] != "interrupted"]
    registry["deleting"] = ["interrupted"]
    path.write_text(json.dumps(registry))
    broker.start()
    with client(broker) as c:
        end = time.monotonic() + 10
        while create(c, "interrupted").error_code != E.NONE:  # refused while the delete finishes
            assert time.monotonic() < end
            time.sleep(0.05)
        assert committed(c, "g-int", "interrupted") == -1
