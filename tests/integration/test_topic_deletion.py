"""Topic deletion over raw frames: names at Kafka's length limit, reads racing a delete.

A deleted topic must stay deleted across restarts, whatever its name, and a
delete must never pull a segment's file descriptor from under a Fetch or a
ListOffsets that is reading it.
"""

from __future__ import annotations

import json

import pytest

from odradek.broker.dataplane.topics import MAX_NAME_LENGTH, REGISTRY_FILE
from odradek.protocol.errors import ErrorCode as E
from tests.integration.test_dataplane_wire import (
    DELETE,
    batch,
    client,
    create,
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
    assert json.loads(path.read_text())["deleting"] == []
