"""The offline tools read KIP-848 records: ``odradek dump-log`` names and decodes them, ``odradek
offsets`` rebuilds the consumer groups, ``odradek import`` carries them into another data dir."""

from __future__ import annotations

import asyncio
import io
import json

from odradek.broker.coordinator.offsets import CommitRequest, commit_offsets
from odradek.broker.coordinator.shard import Shard
from odradek.broker.dump_log import iter_dump
from odradek.broker.import_kafka import import_offsets
from odradek.broker.offsets_view import build_view, write_json
from odradek.storage.log import Log
from tests.unit.consumer_harness import GROUP, ConsumerHarness


def _group_with_offsets(tmp_path) -> ConsumerHarness:
    h = ConsumerHarness(tmp_path / "src")
    h.topic("t", 2)
    h.subscribe("a", ["t"])
    commit_offsets(h.coordinator, CommitRequest(GROUP, 1, "a", None, -1, 9), [("t", 1, 42, -1, "", -1)],
                   lambda _n: 2).result()
    h.log.flush()
    return h


def test_dump_log_decodes_consumer_group_records(tmp_path):
    h = _group_with_offsets(tmp_path)
    [segment] = sorted(h.directory.glob("*.log"))
    types = [r["key"]["type"] for batch in iter_dump(segment) for r in batch.get("records", [])]
    assert {"ConsumerGroupMetadata", "ConsumerGroupMemberMetadata", "ConsumerGroupTargetAssignmentMember",
            "ConsumerGroupCurrentMemberAssignment", "OffsetKey"} <= set(types)
    json.dumps(list(iter_dump(segment)))  # everything printable


def test_offsets_view_and_import_rebuild_the_consumer_group(tmp_path):
    h = _group_with_offsets(tmp_path)
    view = build_view([tmp_path / "src"])
    out = io.StringIO()
    write_json(view, out, None, None)
    [doc] = json.loads(out.getvalue())["groups"]
    assert (doc["type"], doc["state"], doc["group_epoch"]) == ("consumer", "Stable", 1)
    assert doc["members"]["a"]["assigned"] == {"t": [0, 1]} and doc["offsets"][0]["offset"] == 42
    stats = import_offsets(tmp_path / "src", tmp_path / "dst", 1)
    assert GROUP in stats.groups and stats.skipped_unknown == 0
    log = Log.open(tmp_path / "dst" / "__consumer_offsets-0")
    shard = Shard(0, log, h.clock)
    asyncio.run(shard.load())
    assert shard.consumer_view() == h.shard.consumer_view()
    assert shard.offsets[GROUP][("t", 1)].offset == 42
    log.close()
