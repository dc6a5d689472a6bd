"""Random sequences of transactional requests against a model of Kafka's rules.

Operations: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, the data
plane's produce-time check, EndTxn commit/abort (with the current or a stale
epoch), a timeout (the clock moved past every open transaction's deadline)
and a restart (the logs reopened and replayed).  After every step each id's
state, producer id, epoch and partitions equal the model's, and after every
restart the replayed state equals the live state before it.  Bounded: a
fixed number of seeded sequences.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from odradek.protocol.errors import ErrorCode

from .txn_harness import Harness

E = ErrorCode
IDS = ["a", "b", "c"]
PARTITIONS = [("orders", 0), ("orders", 1), ("__consumer_offsets", 0)]
TIMEOUT_MS = 60_000
SEEDS = 25
STEPS = 40


@dataclass
class Model:
    pid: int
    epoch: int = 0
    state: str = "Empty"
    partitions: set = field(default_factory=set)


class Run:
    def __init__(self, h: Harness, rng: random.Random) -> None:
        self.h = h
        self.rng = rng
        self.model: dict[str, Model] = {}

    def epoch_for(self, m: Model | None) -> int:
        """Mostly the current epoch; sometimes a stale one."""
        if m is None:
            return 0
        return m.epoch - 1 if m.epoch > 0 and self.rng.random() < 0.15 else m.epoch

    async def step(self) -> None:
        h, rng = self.h, self.rng
        tid = rng.choice(IDS)
        m = self.model.get(tid)
        op = rng.choice(["init", "add", "add", "offsets", "produce", "commit", "abort", "timeout", "restart"])
        if op == "init":
            error, pid, epoch = await h.init(tid, TIMEOUT_MS)
            if m is not None and m.state == "Ongoing":
                assert error is E.CONCURRENT_TRANSACTIONS
                m.epoch, m.state, m.partitions = m.epoch + 1, "CompleteAbort", set()
            else:
                assert error is E.NONE
                if m is None:
                    m = self.model[tid] = Model(pid, -1)
                assert (pid, epoch) == (m.pid, m.epoch + 1)
                m.epoch, m.state, m.partitions = epoch, "Empty", set()
        elif op in ("add", "offsets"):
            pid = m.pid if m else 1
            epoch = self.epoch_for(m)
            if op == "add":
                tp = rng.choice(PARTITIONS[:2])
                error = await h.add(tid, pid, epoch, tp[1], topic=tp[0])
            else:
                tp = PARTITIONS[2]
                error = await h.offsets(tid, pid, epoch, "g")
            if m is None:
                assert error is E.INVALID_PRODUCER_ID_MAPPING
            elif epoch != m.epoch:
                assert error is E.PRODUCER_FENCED
            else:
                assert error is E.NONE
                m.partitions = (m.partitions if m.state == "Ongoing" else set()) | {tp}
                m.state = "Ongoing"
        elif op == "produce":
            pid = m.pid if m else 1
            epoch = self.epoch_for(m)
            tp = rng.choice(PARTITIONS)
            error = h.coord.verify_partition(tid, pid, epoch, *tp)
            if m is None:
                assert error is E.INVALID_PRODUCER_ID_MAPPING
            elif epoch != m.epoch:
                assert error is E.PRODUCER_FENCED
            else:
                assert error is (E.NONE if m.state == "Ongoing" and tp in m.partitions else E.INVALID_TXN_STATE)
        elif op in ("commit", "abort"):
            commit = op == "commit"
            pid = m.pid if m else 1
            epoch = self.epoch_for(m)
            error = await h.end(tid, pid, epoch, commit)
            await h.settle()
            done = "CompleteCommit" if commit else "CompleteAbort"
            if m is None:
                assert error is E.INVALID_PRODUCER_ID_MAPPING
            elif epoch != m.epoch:
                assert error is E.PRODUCER_FENCED
            elif m.state == "Ongoing":
                assert error is E.NONE
                m.state, m.partitions = done, set()
            else:
                assert error is (E.NONE if m.state == done else E.INVALID_TXN_STATE)
        elif op == "timeout":
            await h.tick(TIMEOUT_MS + h.config.abort_timed_out_interval_ms + 1)
            for other in self.model.values():
                if other.state == "Ongoing":
                    other.epoch, other.state, other.partitions = other.epoch + 1, "CompleteAbort", set()
        else:
            live = h.persisted()
            await h.reopen()
            assert h.persisted() == live
        await h.settle()
        self.check()

    def check(self) -> None:
        for tid, m in self.model.items():
            meta = self.h.meta(tid)
            assert (meta.state.kafka_name, meta.producer_id, meta.producer_epoch, meta.partitions) == \
                (m.state, m.pid, m.epoch, m.partitions), tid
            assert meta.pending_state is None  # nothing is left stuck half-way


@pytest.mark.parametrize("seed", range(SEEDS))
async def test_random_sequences_follow_the_model(tmp_path, seed):
    h = await Harness(tmp_path).start()
    try:
        run = Run(h, random.Random(seed))
        for _ in range(STEPS):
            await run.step()
        live = h.persisted()
        await h.reopen()
        assert h.persisted() == live
        run.check()
    finally:
        await h.close()
