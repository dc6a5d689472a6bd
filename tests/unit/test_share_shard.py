"""The share coordinator's shard over a real ``__share_group_state`` log and a manual clock:
Initialize / Write / Read / Read summary / Delete as Kafka's ShareCoordinatorShard answers them,
a snapshot every N updates, and a reload that rebuilds exactly the live state."""

from __future__ import annotations

import io
import json
import uuid

from odradek.broker.clock import ManualClock
from odradek.broker.dump_log import dump
from odradek.broker.runtime.loading import iter_log_batches
from odradek.broker.runtime.runtime import CoordinatorRuntime
from odradek.broker.share.shard import ShareStateShard
from odradek.protocol.errors import ErrorCode as E
from odradek.shares import records as r
from odradek.shares.partition import AckBatch, AckType, LogBatch, ShareConfig, SharePartition
from odradek.shares.records import StateBatch as B
from odradek.shares.state import StateWrite
from odradek.storage.config import LogConfig
from odradek.storage.log import Log

TOPIC = uuid.UUID(int=7)
KEY = ("g", TOPIC, 0)


def wait(promise):
    assert promise.done
    return promise.result()


class Harness:
    def __init__(self, directory, updates_per_snapshot=3):
        self.clock = ManualClock()
        self.log = Log.open(directory / "__share_group_state-0", LogConfig())
        self.n = updates_per_snapshot
        self.shard = self._shard()

    def _shard(self):
        return ShareStateShard(0, self.log, self.clock, runtime=CoordinatorRuntime(), updates_per_snapshot=self.n)

    async def reload(self):
        self.shard = self._shard()
        await self.shard.load()
        return self.shard

    def records(self):
        out = []
        for _, records in iter_log_batches(self.log):
            for rec in records:
                key = r.decode_key(rec.key)
                out.append((type(key).__name__, r.decode_value(key, rec.value)))
        return out


async def test_operations_and_their_errors(tmp_path):
    h = Harness(tmp_path)
    shard = await h.reload()
    assert wait(shard.run(shard.write_state(KEY, StateWrite(start_offset=0)))) == E.INVALID_REQUEST
    assert shard.read_state(KEY, 0)[0].response == E.INVALID_REQUEST
    assert shard.read_summary(KEY).start_offset == -1
    assert wait(shard.run(shard.initialize(KEY, state_epoch=2, start_offset=10))) == E.NONE
    assert shard.states[KEY].start_offset == 10 and shard.states[KEY].delivery_complete_count == 0
    assert wait(shard.run(shard.initialize(KEY, state_epoch=1, start_offset=0))) == E.FENCED_STATE_EPOCH
    write = StateWrite(state_epoch=2, leader_epoch=0, start_offset=12, delivery_complete_count=1,
                       state_batches=[B(12, 12, 0, 1), B(13, 13, 2, 1)])
    assert wait(shard.run(shard.write_state(KEY, write))) == E.NONE
    result, state = shard.read_state(KEY, 4)  # a newer leader epoch is recorded
    assert wait(shard.run(result)) == E.NONE and state.leader_epoch == 4
    assert state.state_batches == [B(12, 12, 0, 1), B(13, 13, 2, 1)]
    stale = StateWrite(state_epoch=2, leader_epoch=3, start_offset=12)
    assert wait(shard.run(shard.write_state(KEY, stale))) == E.FENCED_LEADER_EPOCH
    older = StateWrite(state_epoch=1, leader_epoch=4, start_offset=12)
    assert wait(shard.run(shard.write_state(KEY, older))) == E.FENCED_STATE_EPOCH
    summary = shard.read_summary(KEY)
    assert (summary.start_offset, summary.leader_epoch, summary.state_epoch) == (12, 4, 2)
    assert wait(shard.run(shard.delete(KEY))) == E.NONE and KEY not in shard.states
    assert wait(shard.run(shard.delete(KEY))) == E.NONE  # unknown key: success, nothing written
    assert [kind for kind, _ in h.records()] == ["ShareSnapshotKey", "ShareUpdateKey", "ShareUpdateKey",
                                                 "ShareSnapshotKey"]
    assert h.records()[-1][1] is None  # the tombstone
    await h.log.aclose()


async def test_a_snapshot_every_n_updates_and_reload_equals_live(tmp_path):
    h = Harness(tmp_path, updates_per_snapshot=3)
    shard = await h.reload()
    wait(shard.run(shard.initialize(KEY, state_epoch=0, start_offset=0)))
    for i in range(7):
        wait(shard.run(shard.write_state(KEY, StateWrite(start_offset=i, delivery_complete_count=0,
                                                         state_batches=[B(i, i, 0, 1)]))))
    kinds = [kind for kind, _ in h.records()]
    assert kinds == ["ShareSnapshotKey", "ShareUpdateKey", "ShareUpdateKey", "ShareUpdateKey",
                     "ShareSnapshotKey", "ShareUpdateKey", "ShareUpdateKey", "ShareUpdateKey"]
    snapshot = h.records()[4][1]
    assert snapshot.snapshot_epoch == 1 and snapshot.state_batches == [B(3, 3, 0, 1)]
    assert [v.snapshot_epoch for _, v in h.records()[5:]] == [1, 1, 1]
    live = shard.states
    reloaded = await h.reload()
    assert reloaded.states == live and reloaded.updates_since_snapshot == {KEY: 3}
    await h.log.aclose()


async def test_a_share_partition_resumes_from_the_coordinator_after_a_restart(tmp_path):
    """Acks survive a restart; acquired-unacknowledged records come back AVAILABLE and are redelivered."""
    h = Harness(tmp_path)
    shard = await h.reload()
    config = ShareConfig(record_lock_duration_ms=1000)
    wait(shard.run(shard.initialize(KEY, state_epoch=0, start_offset=0)))
    sp = SharePartition.from_persisted(config, shard.read_state(KEY, 0)[1])
    sp.acquire("m1", [LogBatch(0, 9)], max_records=10, batch_size=10, now=0)
    write = sp.acknowledge("m1", [AckBatch(0, 4, (int(AckType.ACCEPT),)), AckBatch(5, 5, (int(AckType.RELEASE),))], 0)
    assert wait(shard.run(shard.write_state(KEY, write))) == E.NONE
    await h.reload()
    resumed = SharePartition.from_persisted(config, h.shard.read_state(KEY, 0)[1])
    assert resumed.start_offset == 5 and resumed.fetch_offset() == 5
    got, _ = resumed.acquire("m2", [LogBatch(0, 9)], max_records=10, batch_size=10, now=0)
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in got] == [(5, 5, 2), (6, 9, 1)]
    await h.log.aclose()


async def test_dump_log_decodes_share_group_state(tmp_path):
    """``odradek dump-log`` on the shard's own segment: snapshots, updates and tombstones decoded."""
    h = Harness(tmp_path)
    shard = await h.reload()
    wait(shard.run(shard.initialize(KEY, state_epoch=1, start_offset=5)))
    write = StateWrite(state_epoch=1, start_offset=6, delivery_complete_count=0, state_batches=[B(6, 7, 4, 5)])
    assert wait(shard.run(shard.write_state(KEY, write))) == E.NONE
    assert wait(shard.run(shard.delete(KEY))) == E.NONE
    await h.log.aclose()
    out = io.StringIO()
    assert dump([str(tmp_path / "__share_group_state-0")], out, as_json=True) == 0
    records = [rec for line in out.getvalue().splitlines() for rec in json.loads(line)["records"]]
    assert [rec["key"]["type"] for rec in records] == ["ShareSnapshotKey", "ShareUpdateKey", "ShareSnapshotKey"]
    assert records[0]["key"] == {"type": "ShareSnapshotKey", "group_id": "g",
                                 "topic_id": r.kafka_uuid_text(TOPIC), "partition": 0}
    assert records[0]["value"]["start_offset"] == 5 and records[0]["value"]["state_epoch"] == 1
    assert records[1]["value"]["state_batches"] == [
        {"first_offset": 6, "last_offset": 7, "delivery_state": "ARCHIVED", "delivery_count": 5}]
    assert records[2]["value"] is None
