"""Build data dirs for the pipeline tests with the storage and record APIs (no broker).

Records go through ``storage.log.Log.append`` -- the broker's own append path
(offset assignment, segment rolls, indexes) -- and are encoded by
``offsets.records`` and ``protocol.records``, so the bytes are what a
broker writes.  ``Scenario`` also keeps the expected end state, computed the
simple way (last record per key wins, tombstones delete), for the assertions.
"""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

from odradek.offsets import consumer_records, share_group_records
from odradek.offsets.consumer_protocol import (
    Assignment,
    Subscription,
    TopicPartitions,
    encode_assignment,
    encode_subscription,
)
from odradek.offsets.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    encode_key,
    encode_value,
)
from odradek.protocol.records import Record, encode_batch, encode_end_txn_batch
from odradek.storage.config import LogConfig
from odradek.storage.log import Log
from odradek.storage.log_manager import OFFSETS_TOPIC, offsets_topic_config

T0 = 1_700_000_000_000  # 2023-11-14T22:13:20Z
MINUTE = 60_000
HOUR = 60 * MINUTE
DAY = 24 * HOUR


def member(member_id: str, topics: list[str], assigned: dict[str, list[int]] | None = None,
           instance: str | None = None) -> MemberValue:
    sub = encode_subscription(Subscription(version=1, topics=topics))
    asg = encode_assignment(Assignment(version=1, assigned_partitions=[
        TopicPartitions(t, ps) for t, ps in (assigned or {}).items()]))
    return MemberValue(member_id=member_id, group_instance_id=instance, client_id=f"client-{member_id}",
                       client_host="/127.0.0.1", rebalance_timeout=300000, session_timeout=10000,
                       subscription=sub, assignment=asg)


class OffsetsLog:
    """Appends coordinator records to ``<data dir>/__consumer_offsets-<p>`` as a broker would."""

    def __init__(self, data_dir: Path, partition: int = 0, segment_bytes: int = 1024) -> None:
        config = dataclasses.replace(offsets_topic_config(LogConfig()), segment_bytes=segment_bytes)
        self.now = T0
        self.log = Log.open(data_dir / f"{OFFSETS_TOPIC}-{partition}", config, clock=lambda: self.now)
        # expected state: (group, topic, partition) -> OffsetValue ; group -> GroupValue
        self.offsets: dict[tuple[str, str, int], OffsetValue] = {}
        self.groups: dict[str, GroupValue] = {}
        self.commits = 0

    def _append(self, items: list[tuple[bytes, bytes | None]], ts: int, **kw) -> None:
        self.now = ts
        self.log.append(encode_batch(items, base_timestamp=ts, **kw))

    def commit(self, group: str, offsets: dict[tuple[str, int], int], ts: int, *, expire: int = -1,
               leader_epoch: int = -1, metadata: str = "") -> None:
        """One OffsetCommit request: one batch, one record per partition."""
        items = []
        for (topic, p), off in offsets.items():
            key = OffsetKey(group, topic, p)
            value = OffsetValue(offset=off, leader_epoch=leader_epoch, metadata=metadata, commit_timestamp=ts,
                                expire_timestamp=expire)
            items.append((encode_key(key), encode_value(value)))
            self.offsets[(group, topic, p)] = value
        self.commits += len(items)
        self._append(items, ts)

    def delete_offsets(self, group: str, partitions: list[tuple[str, int]], ts: int) -> None:
        self._append([(encode_key(OffsetKey(group, t, p)), None) for t, p in partitions], ts)
        for t, p in partitions:
            self.offsets.pop((group, t, p), None)

    def group(self, group: str, generation: int, members: list[MemberValue], ts: int, *,
              protocol_type: str = "consumer", protocol: str | None = "range") -> None:
        value = GroupValue(protocol_type=protocol_type, generation=generation,
                           protocol=protocol if members else None,
                           leader=members[0].member_id if members else None, current_state_timestamp=ts,
                           members=members)
        self.groups[group] = value
        self._append([(encode_key(GroupKey(group)), encode_value(value))], ts)

    def delete_group(self, group: str, ts: int) -> None:
        self.groups.pop(group, None)
        self._append([(encode_key(GroupKey(group)), None)], ts)

    def txn_commit(self, group: str, offsets: dict[tuple[str, int], int], ts: int, producer_id: int,
                   commit: bool) -> None:
        """A TxnOffsetCommit batch followed by its COMMIT or ABORT marker."""
        items = [(encode_key(OffsetKey(group, t, p)),
                  encode_value(OffsetValue(offset=o, commit_timestamp=ts))) for (t, p), o in offsets.items()]
        self._append(items, ts, producer_id=producer_id, producer_epoch=0, base_sequence=0, transactional=True)
        self.log.append(encode_end_txn_batch(commit, producer_id=producer_id, producer_epoch=0,
                                             coordinator_epoch=0, timestamp=ts + 1))
        if commit:
            for (t, p), o in offsets.items():
                self.offsets[(group, t, p)] = OffsetValue(offset=o, commit_timestamp=ts)

    def raw(self, key: bytes, value: bytes | None, ts: int) -> None:
        self._append([(key, value)], ts)

    def close(self) -> None:
        self.log.close()


def data_topic(data_dir: Path, topic: str, partition: int, records: int, ts: int, per_batch: int = 10) -> int:
    """A plain data partition with ``records`` keyed records; returns its log end offset."""
    log = Log.open(data_dir / f"{topic}-{partition}", LogConfig(segment_bytes=2048), clock=lambda: ts)
    n = 0
    while n < records:
        batch = [Record(n + i, ts + n + i, f"k{n + i}".encode(), b"v" * 20) for i in range(min(per_batch, records - n))]
        log.append(encode_batch(batch, base_offset=n))
        n += len(batch)
    end = log.log_end_offset
    log.close()
    return end


@dataclasses.dataclass
class Scenario:
    """Two brokers' data dirs under one parent, and what they should report."""

    parent: Path
    dirs: dict[str, Path]
    logs: dict[str, OffsetsLog]
    log_ends: dict[tuple[str, str, int], int]
    unknown_records: int

    def expected_latest(self) -> set[tuple[str, str, str, int, int]]:
        return {(str(self.dirs[b]), g, t, p, v.offset) for b, lg in self.logs.items()
                for (g, t, p), v in lg.offsets.items()}


def build_scenario(parent: Path) -> Scenario:
    """The fixture data of tests/spark (see the comments for what each group exercises)."""
    a = parent / "broker-a"
    b = parent / "broker-b"
    la = OffsetsLog(a)
    t = T0
    # orders-app: a consumer group that goes Stable (gen 1), grows (gen 2), then empties (gen 3)
    la.group("orders-app", 1, [member("m1", ["orders"], {"orders": [0, 1]})], t)
    for i in range(6):
        la.commit("orders-app", {("orders", 0): 10 * i, ("orders", 1): 5 * i}, t + (i + 1) * MINUTE, leader_epoch=0)
    la.group("orders-app", 2, [member("m1", ["orders"], {"orders": [0]}),
                               member("m2", ["orders"], {"orders": [1]})], t + 10 * MINUTE)
    la.commit("orders-app", {("orders", 0): 60, ("orders", 1): 33}, t + 11 * MINUTE, leader_epoch=0)
    la.commit("orders-app", {("orders", 2): 7}, t + 12 * MINUTE)
    la.delete_offsets("orders-app", [("orders", 2)], t + 13 * MINUTE)  # OffsetDelete: gone from OffsetFetch
    la.group("orders-app", 3, [], t + 20 * MINUTE)  # everyone left: Empty since t+20min
    # stable-app: Stable consumer subscribed to payments; its old commit on legacy is unsubscribed
    la.group("stable-app", 5, [member("s1", ["payments"], {"payments": [0]})], t + 2 * MINUTE)
    la.commit("stable-app", {("legacy", 0): 99}, t + 3 * MINUTE)
    la.commit("stable-app", {("payments", 0): 1234}, t + 4 * MINUTE, metadata="ok")
    # simple-app: no group record (manual assignment); one commit carries its own expiry (value v1)
    la.commit("simple-app", {("orders", 0): 42}, t + 5 * MINUTE)
    la.commit("simple-app", {("orders", 1): 43}, t + 6 * MINUTE, expire=t + 2 * HOUR)
    # gone-app: deleted (DeleteGroups): offset tombstones, then the group tombstone
    la.group("gone-app", 1, [member("g1", ["orders"])], t + 7 * MINUTE)
    la.commit("gone-app", {("orders", 0): 1}, t + 8 * MINUTE)
    la.group("gone-app", 2, [], t + 9 * MINUTE)
    la.delete_offsets("gone-app", [("orders", 0)], t + 14 * MINUTE)
    la.delete_group("gone-app", t + 14 * MINUTE)
    # txn-app: a committed and an aborted transactional commit
    la.txn_commit("txn-app", {("orders", 0): 500}, t + 15 * MINUTE, producer_id=42, commit=True)
    la.txn_commit("txn-app", {("orders", 1): 600}, t + 16 * MINUTE, producer_id=43, commit=False)
    # cg-app, a KIP-848 consumer group: c1 joins (epoch 1), c2 joins (epoch 2), c1 leaves (epoch 3);
    # share-app, a KIP-932 share group with one member
    kip848_records(la, t + 17 * MINUTE)
    # a 4.0 ShareGroupPartitionMetadata record (key type 9, gone in 4.1): no coordinator here reads it
    la.raw(b"\x00\x09\x00\x03abc", b"\x00\x00", t + 18 * MINUTE)
    la.close()

    lb = OffsetsLog(b)
    # broker-b has its own orders-app: a different world with the same group name
    lb.group("orders-app", 1, [member("x1", ["orders"], {"orders": [0]})], t)
    lb.commit("orders-app", {("orders", 0): 7}, t + MINUTE)
    lb.close()

    ends = {("broker-a", "orders", 0): data_topic(a, "orders", 0, 100, t),
            ("broker-a", "orders", 1): data_topic(a, "orders", 1, 40, t),
            ("broker-b", "orders", 0): data_topic(b, "orders", 0, 30, t)}
    return Scenario(parent, {"broker-a": a, "broker-b": b}, {"broker-a": la, "broker-b": lb}, ends, 1)


CG_TOPIC_ID = uuid.UUID(int=0x0D7AD3C)


def kip848_records(log: OffsetsLog, ts: int) -> None:
    """What a KIP-848 group coordinator writes for cg-app (two members join, one leaves) and share-app
    (one member), through the offsets package's encoders: the bytes Kafka writes."""
    cg, sg = consumer_records, share_group_records

    def write(encode_key, encode_value, key, value, at: int) -> None:
        log.raw(encode_key(key), encode_value(key, value), at)

    def cg_write(key, value, at: int) -> None:
        write(cg.encode_cg_key, cg.encode_cg_value, key, value, at)

    def assignment(member: str, epoch: int, partitions: set[int], at: int) -> None:
        cg_write(cg.CGTargetMemberKey("cg-app", member), cg.CGTargetMemberValue({CG_TOPIC_ID: frozenset(partitions)}),
                 at)
        cg_write(cg.CGAssignmentKey("cg-app", member), cg.CGAssignmentValue(
            member_epoch=epoch, previous_member_epoch=epoch - 1, state=0,
            assigned={CG_TOPIC_ID: frozenset(partitions)}, pending_revocation={}), at)

    for epoch, joining in ((1, "c1"), (2, "c2")):
        cg_write(cg.CGMemberKey("cg-app", joining), cg.CGMemberValue(
            client_id=f"client-{joining}", client_host="/127.0.0.1", subscribed_topic_names=("orders",),
            subscribed_topic_regex=None, rebalance_timeout_ms=45000, server_assignor="uniform"), ts)
        cg_write(cg.CGMetadataKey("cg-app"), cg.CGMetadataValue(epoch), ts)
        cg_write(cg.CGTargetMetadataKey("cg-app"), cg.CGTargetMetadataValue(epoch), ts)
        assignment(joining, epoch, {0, 1} if epoch == 1 else {1}, ts)
        ts += 1000
    assignment("c1", 2, {0}, ts)
    for key in (cg.CGAssignmentKey("cg-app", "c1"), cg.CGTargetMemberKey("cg-app", "c1"),
                cg.CGMemberKey("cg-app", "c1")):
        cg_write(key, None, ts + 1000)
    cg_write(cg.CGMetadataKey("cg-app"), cg.CGMetadataValue(3), ts + 1000)
    write(sg.encode_sg_key, sg.encode_sg_value, sg.SGMemberKey("share-app", "s1"),
          sg.SGMemberValue(client_id="client-s1", client_host="/127.0.0.1", subscribed_topic_names=("orders",)),
          ts + 2000)
    write(sg.encode_sg_key, sg.encode_sg_value, sg.SGMetadataKey("share-app"), sg.SGMetadataValue(1, 0), ts + 2000)


class CoordinatorLog:
    """Appends records to a coordinator topic's ``<data dir>/<topic>-<p>`` (__transaction_state,
    __share_group_state) as a broker would: one record per batch."""

    def __init__(self, data_dir: Path, topic: str, partition: int = 0) -> None:
        self.log = Log.open(data_dir / f"{topic}-{partition}", LogConfig(), clock=lambda: T0)

    def write(self, key: bytes, value: bytes | None, ts: int) -> None:
        self.log.append(encode_batch([(key, value)], base_timestamp=ts))

    def close(self) -> None:
        self.log.close()
