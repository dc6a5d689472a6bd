"""Property: any interleaving of appends, rolls, compactions and crashes keeps what was acknowledged.

A model remembers every acknowledged record by offset.  After every step the
log (reopened after a crash) must hold only records the model knows, in
order, with the log end offset = everything acknowledged (prefix-consistent
superset), every record after the cleaned part, and the newest record of
every key (compaction never changes the newest value of a key).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from odradek.protocol.records import encode_batch, iter_batches
from odradek.storage.cleaner import clean_log
from odradek.storage.config import LogConfig
from odradek.storage.files import FileOps, SimulatedCrash
from odradek.storage.log import Log

CFG = LogConfig(cleanup_policy=frozenset({"compact"}), segment_bytes=700, index_interval_bytes=100,
                delete_retention_ms=10**12)
KEYS = [b"k%d" % i for i in range(6)]

records_st = st.lists(
    st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(min_size=0, max_size=30))),
    min_size=1, max_size=5)


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.mkdtemp()
        self.dir = Path(self.tmp) / "m-0"
        self.log = Log.open(self.dir, CFG)
        self.model: dict[int, tuple[bytes, bytes | None]] = {}
        self.next = 0
        self.compacted_below = 0  # offsets below this may have been removed by compaction

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @rule(recs=records_st)
    def append(self, recs: list[tuple[bytes, bytes | None]]) -> None:
        base, last = self.log.append(encode_batch(recs))
        assert base == self.next and last == base + len(recs) - 1
        for i, (k, v) in enumerate(recs):
            self.model[base + i] = (k, v)
        self.next = last + 1

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule()
    def compact(self) -> None:
        end = self.log.active_segment.base_offset
        self.log.clean()
        self.compacted_below = max(self.compacted_below, end)

    @rule(step=st.integers(0, 40))
    def compact_and_crash(self, step: int) -> None:
        end = self.log.active_segment.base_offset
        try:
            clean_log(self.log, self.log.clock(), ops=FileOps(crash_after=step))
        except SimulatedCrash:
            pass
        self.compacted_below = max(self.compacted_below, end)
        self._crash_and_reopen(torn=b"")

    @rule(torn=st.binary(max_size=80))
    def crash(self, torn: bytes) -> None:
        """Process dies; maybe in the middle of writing an unacknowledged batch."""
        self._crash_and_reopen(torn)

    @precondition(lambda self: self.next > 0)
    @rule(data=st.data())
    def torn_unacked_batch(self, data: st.DataObject) -> None:
        b = encode_batch([(b"unacked", b"x" * 50)], base_offset=self.next)
        cut = data.draw(st.integers(1, len(b) - 1))
        self._crash_and_reopen(b[:cut])

    def _crash_and_reopen(self, torn: bytes) -> None:
        active = self.log.active_segment.path
        self.log = None  # type: ignore[assignment]  # no close, no flush: just gone
        if torn and active.exists():
            with open(active, "ab") as f:
                f.write(torn)
        self.log = Log.open(self.dir, CFG)

    @invariant()
    def acknowledged_records_survive(self) -> None:
        log = self.log
        assert log.log_end_offset == self.next
        seen: list[int] = []
        pos = log.log_start_offset
        while pos < log.log_end_offset:
            data = log.read(pos, 1 << 20)
            if not data:
                break
            for h, recs in iter_batches(data, verify_crc=True):
                for r in recs:
                    assert self.model[r.offset] == (r.key, r.value), "record changed or invented"
                    seen.append(r.offset)
                pos = h.last_offset + 1
        assert seen == sorted(set(seen))
        present = set(seen)
        newest: dict[bytes, int] = {}
        for off in sorted(self.model):
            newest[self.model[off][0]] = off
        for k, off in newest.items():
            assert off in present, f"newest value of {k!r} (offset {off}) lost"
        for off in self.model:
            if off >= self.compacted_below:
                assert off in present, f"uncompacted offset {off} lost"


TestLogMachine = LogMachine.TestCase
TestLogMachine.settings = settings(max_examples=60, stateful_step_count=25, deadline=None,
                                   suppress_health_check=[HealthCheck.too_slow])
