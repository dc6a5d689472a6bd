"""Random transactional sessions over TCP against a model: coordinator, data plane and group
coordinator together, across restarts and timeouts.

A producer (raw frames) runs seeded random steps: InitProducerId, AddPartitionsToTxn,
transactional Produce (to a partition added or not), AddOffsetsToTxn + TxnOffsetCommit,
EndTxn commit/abort, a timeout (the broker clock moved past the transaction's deadline) and a
broker restart.  Every answer is checked against the model; at the end a read_committed
kafka-python consumer must see exactly the committed values, in order, and the group's
committed offset must be the last committed transaction's.  Bounded: a few seeds, 40 steps.
"""

from __future__ import annotations

import random
import time
import uuid

import pytest

from odradek.broker.wire_client import SyncClient
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.records import encode_batch

from . import txn_versions

pytestmark = pytest.mark.integration
broker = txn_versions.broker  # every test under transaction.version 1 and 2

PARTITIONS = 2
TIMEOUT_MS = 20_000
SEEDS = 6
STEPS = 40


class Session:
    def __init__(self, broker, rng: random.Random) -> None:
        self.b = broker
        self.rng = rng
        suffix = uuid.uuid4().hex[:8]
        self.topic, self.tid, self.group = f"rt-{suffix}", f"rt-tx-{suffix}", f"rt-g-{suffix}"
        self.c = self._client()
        r = self.c.request(19, 5, {"topics": [{"name": self.topic, "num_partitions": PARTITIONS,
                                               "replication_factor": -1, "assignments": [], "configs": []}],
                                   "timeout_ms": 5000, "validate_only": False})
        assert r.topics[0].error_code == E.NONE
        self.pid = self.epoch = -1
        self.seq = [0] * PARTITIONS
        self.added: set[int] = set()
        self.offsets_added = False
        self.pending: list[tuple[int, bytes]] = []
        self.pending_offset: int | None = None
        self.committed: list[list[bytes]] = [[] for _ in range(PARTITIONS)]
        self.committed_offset: int | None = None
        self.counter = 0

    def _client(self) -> SyncClient:
        return SyncClient("127.0.0.1", self.b.app.endpoint.port, timeout=15)

    # --- requests --------------------------------------------------------------------------

    def state(self) -> str:
        r = self.c.request(65, 0, {"transactional_ids": [self.tid]})
        return r.transaction_states[0].transaction_state

    def wait_complete(self) -> None:
        deadline = time.monotonic() + 10
        while self.state() not in ("CompleteCommit", "CompleteAbort", "Empty"):
            assert time.monotonic() < deadline, self.state()
            time.sleep(0.01)

    def init(self) -> None:
        deadline = time.monotonic() + 10
        while True:
            r = self.c.request(22, 4, {"transactional_id": self.tid, "transaction_timeout_ms": TIMEOUT_MS,
                                       "producer_id": -1, "producer_epoch": -1})
            if r.error_code == E.NONE:
                break
            assert r.error_code == E.CONCURRENT_TRANSACTIONS and time.monotonic() < deadline
            time.sleep(0.02)  # the previous incarnation's transaction is being aborted
        assert self.pid in (-1, r.producer_id) and r.producer_epoch > self.epoch
        self.pid, self.epoch = r.producer_id, r.producer_epoch
        self.seq = [0] * PARTITIONS  # a new epoch restarts the sequences
        self.drop_open()

    def drop_open(self) -> None:
        self.added, self.offsets_added, self.pending, self.pending_offset = set(), False, [], None

    def add(self, p: int) -> None:
        r = self.c.request(24, 3, {"v3_and_below_transactional_id": self.tid, "v3_and_below_producer_id": self.pid,
                                   "v3_and_below_producer_epoch": self.epoch,
                                   "v3_and_below_topics": [{"name": self.topic, "partitions": [p]}]})
        assert r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == E.NONE
        self.added.add(p)

    def produce(self, p: int) -> None:
        self.counter += 1
        value = b"v%d" % self.counter
        batch = encode_batch([(None, value)], producer_id=self.pid, producer_epoch=self.epoch,
                             base_sequence=self.seq[p], transactional=True)
        r = self.c.request(0, 9, {"transactional_id": self.tid, "acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": self.topic, "partition_data": [{"index": p, "records": batch}]}]})
        code = r.responses[0].partition_responses[0].error_code
        if p in self.added:
            assert code == E.NONE
            self.seq[p] += 1
            self.pending.append((p, value))
        else:
            assert code == E.INVALID_TXN_STATE  # "partition was not added to the transaction"

    def offsets(self) -> None:
        if not self.offsets_added:
            r = self.c.request(25, 3, {"transactional_id": self.tid, "producer_id": self.pid,
                                       "producer_epoch": self.epoch, "group_id": self.group})
            assert r.error_code == E.NONE
            self.offsets_added = True
        offset = self.rng.randrange(1000)
        r = self.c.request(28, 3, {"transactional_id": self.tid, "group_id": self.group, "producer_id": self.pid,
                                   "producer_epoch": self.epoch, "generation_id": -1, "member_id": "",
                                   "group_instance_id": None, "topics": [{"name": self.topic, "partitions": [
                                       {"partition_index": 0, "committed_offset": offset,
                                        "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
        assert r.topics[0].partitions[0].error_code == E.NONE
        self.pending_offset = offset

    def end(self, commit: bool) -> None:
        r = self.c.request(26, 3, {"transactional_id": self.tid, "producer_id": self.pid,
                                   "producer_epoch": self.epoch, "committed": commit})
        opened = bool(self.added or self.offsets_added)
        if not opened:
            assert r.error_code in (E.INVALID_TXN_STATE, E.NONE)  # nothing open: 48, or a repeat of the last end
            return
        assert r.error_code == E.NONE
        self.wait_complete()
        if commit:
            for p, value in self.pending:
                self.committed[p].append(value)
            if self.pending_offset is not None:
                self.committed_offset = self.pending_offset
        self.drop_open()

    def timeout(self) -> None:
        opened = bool(self.added or self.offsets_added)
        self.b.advance(ms=TIMEOUT_MS + 10_001)
        if opened:  # aborted and fenced: the producer must start again
            self.wait_complete()
            self.init()

    def restart(self) -> None:
        self.c.close()
        ahead = self.b.app.clock.offset_ms  # a restarted broker's clock starts at the wall clock
        self.b.restart()
        if ahead > 0:  # time only moves forward: the new clock resumes where the old one was
            self.b.advance(ms=ahead)
        self.c = self._client()

    def step(self) -> None:
        op = self.rng.choice(["add"] * 3 + ["produce"] * 6 + ["commit"] * 3 + ["offsets", "abort", "init",
                                                                                 "timeout", "restart"])
        if op == "add":
            self.add(self.rng.randrange(PARTITIONS))
        elif op == "produce":  # mostly to a partition added first (as clients do), sometimes not
            p = self.rng.randrange(PARTITIONS)
            if p not in self.added and self.rng.random() < 0.8:
                self.add(p)
            self.produce(p)
        elif op == "offsets":
            self.offsets()
        elif op in ("commit", "abort"):
            self.end(op == "commit")
        elif op == "init":
            self.init()  # fences an open transaction: it is aborted
        elif op == "timeout":
            self.timeout()
        else:
            self.restart()

    # --- what a read_committed consumer sees -----------------------------------------------

    def check(self) -> None:
        from kafka import KafkaConsumer, TopicPartition

        self.wait_complete()
        consumer = KafkaConsumer(bootstrap_servers=self.b.bootstrap_servers, group_id=self.group,
                                 isolation_level="read_committed", enable_auto_commit=False)
        try:
            tps = [TopicPartition(self.topic, p) for p in range(PARTITIONS)]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            seen: list[list[bytes]] = [[] for _ in range(PARTITIONS)]
            empty, deadline = 0, time.monotonic() + 15
            while empty < 2 and time.monotonic() < deadline:
                batch = consumer.poll(timeout_ms=300)
                empty = 0 if batch else empty + 1
                for tp, records in batch.items():
                    seen[tp.partition].extend(r.value for r in records)
            assert seen == self.committed
            assert consumer.committed(tps[0]) == self.committed_offset
        finally:
            consumer.close()


@pytest.mark.parametrize("seed", range(SEEDS))
def test_random_transactional_sessions_follow_the_model(broker, seed):
    s = Session(broker, random.Random(seed))
    s.init()
    for _ in range(STEPS):
        s.step()
    s.end(True)
    s.check()
    s.restart()
    s.check()  # and the same after one more restart
    s.c.close()
