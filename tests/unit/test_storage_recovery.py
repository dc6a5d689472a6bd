"""Crash recovery: a log cut or damaged at any byte reopens with exactly its valid prefix."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from odradek.protocol.records import encode_batch, iter_batch_headers, iter_batches, read_batch_header
from odradek.storage.config import LogConfig
from odradek.storage.log import Log

CFG = LogConfig(segment_bytes=4000, index_interval_bytes=300)
REPO = Path(__file__).resolve().parents[2]


def build_log(directory: Path, n_batches: int = 40) -> list[tuple[int, bytes]]:
    """A multi-segment log; returns [(base offset, stored batch bytes)] in order."""
    log = Log.open(directory, CFG)
    for i in range(n_batches):
        log.append(encode_batch([(b"k%d" % j, b"v%d-%d" % (i, j) * (1 + i % 5)) for j in range(1 + i % 4)]))
    data = log.read(0, 1 << 30)
    log.close()
    return [(h.base_offset, data[p:p + h.size]) for p, h in iter_batch_headers(data)]


def stored_batches(log: Log) -> list[tuple[int, bytes]]:
    data = log.read(log.log_start_offset, 1 << 30)
    out = [(h.base_offset, data[p:p + h.size]) for p, h in iter_batch_headers(data, validate=True)]
    assert sum(len(b) for _o, b in out) == len(data)
    return out


def segment_files(d: Path) -> list[Path]:
    return sorted(d.glob("*.log"))


def survivors(original: list[tuple[int, bytes]], seg_base: int, pos: int) -> list[tuple[int, bytes]]:
    """The batches wholly before byte ``pos`` of the segment starting at ``seg_base``."""
    out = [(o, b) for o, b in original if o < seg_base]
    acc = 0
    for o, b in original:
        if o >= seg_base:
            if acc + len(b) > pos:
                break
            out.append((o, b))
            acc += len(b)
    return out


def batch_span(raw: bytes, pos: int) -> tuple[int, int]:
    """[start, end) of the batch of a segment file holding byte ``pos``."""
    for p, h in iter_batch_headers(raw):
        if p <= pos < p + h.size:
            return p, p + h.size
    raise AssertionError(pos)


def check_reopen(d: Path, original: list[tuple[int, bytes]], seg_base: int, pos: int) -> Log:
    """Reopen; the log must be exactly the batches wholly before the damage (a prefix)."""
    log = Log.open(d, CFG)
    got = stored_batches(log)
    assert got == survivors(original, seg_base, pos)
    next_off = got[-1][0] + read_batch_header(got[-1][1]).last_offset_delta + 1 if got else 0
    assert log.log_end_offset == next_off
    assert log.append(encode_batch([(b"after", b"crash")]))[0] == next_off  # still usable
    return log


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_truncated_at_any_byte(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "t-0"
        original = build_log(d)
        files = segment_files(d)
        victim = data.draw(st.sampled_from(files), label="segment")
        size = victim.stat().st_size
        pos = data.draw(st.integers(0, max(size - 1, 0)), label="cut")
        base = int(victim.name[:20])
        os.truncate(victim, pos)
        for later in files:  # a crash cuts the newest segment; later ones are lost with it
            if int(later.name[:20]) > base and data.draw(st.booleans(), label=f"drop {later.name}"):
                later.unlink()
        log = check_reopen(d, original, base, pos)
        log.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_garbage_at_any_byte(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "t-0"
        original = build_log(d)
        files = segment_files(d)
        victim = data.draw(st.sampled_from(files), label="segment")
        before = victim.read_bytes()
        raw = bytearray(before)
        pos = data.draw(st.integers(0, len(raw) - 1), label="pos")
        mode = data.draw(st.sampled_from(["flip", "zeros", "append"]), label="mode")
        start, end = batch_span(before, pos)
        # the leader epoch is outside the CRC and not checkable: damage there is not detected
        assume(not (mode == "flip" and 12 <= pos - start < 16))
        if mode == "flip":
            raw[pos] ^= data.draw(st.integers(1, 255))
        elif mode == "zeros":
            raw[pos:] = bytes(len(raw) - pos)
        else:
            raw += data.draw(st.binary(min_size=1, max_size=200))
            pos = start = len(before)
        victim.write_bytes(bytes(raw))
        log = Log.open(d, CFG)
        got = stored_batches(log)
        base = int(victim.name[:20])
        expected = survivors(original, base, start)
        if bytes(raw) == before:
            expected = original  # zeros over bytes that were zero already
        elif raw[start:end] == before[start:end] and mode != "append":
            expected = survivors(original, base, end)
        assert got == expected
        log.close()


def test_damaged_or_missing_index_is_rebuilt(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    original = build_log(d, 200)
    indexes = sorted(d.glob("*.index"))
    assert len(indexes) > 3
    indexes[0].write_bytes(b"\x7f" * 17)
    indexes[1].unlink()
    good = indexes[2].read_bytes()
    indexes[2].write_bytes(good[8:] + good[:8])  # out of order
    end = original[-1][0] + read_batch_header(original[-1][1]).last_offset_delta + 1
    log = Log.open(d, CFG, recovery_point=end)  # even segments below the recovery point get checked
    assert stored_batches(log) == original
    for off in range(end):
        h = read_batch_header(log.read(off, 1))
        assert h.base_offset <= off <= h.last_offset
    log.close()


def test_recovery_truncation_is_logged(tmp_path: Path) -> None:
    import structlog.testing

    d = tmp_path / "t-0"
    build_log(d)
    last = segment_files(d)[-1]
    os.truncate(last, last.stat().st_size - 5)
    with structlog.testing.capture_logs() as logs:
        Log.open(d, CFG).close()
    cut = [e for e in logs if e["event"] == "log.recovery.truncated"]
    assert cut and cut[0]["bytes_cut"] > 0 and cut[0]["segment"] == last.name


def test_leftover_files_from_an_interrupted_clean(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    original = build_log(d)
    (d / "00000000000000000000.log.cleaned").write_bytes(b"junk")
    (d / "00000000000000000000.index.cleaned").write_bytes(b"junk")
    (d / "00000000000000000099.log.deleted").write_bytes(b"junk")
    (d / "00000000000000000099.index.swap").write_bytes(b"junk")
    log = Log.open(d, CFG)
    assert stored_batches(log) == original
    assert sorted(p.suffix for p in d.iterdir()) == sorted([".log", ".index"] * len(segment_files(d)))
    log.close()


# --- a real process killed with SIGKILL while appending ----------------------------

WRITER = textwrap.dedent("""
    import sys
    from odradek.protocol.records import encode_batch
    from odradek.storage.config import LogConfig
    from odradek.storage.log import Log
    log = Log.open(sys.argv[1], LogConfig(segment_bytes=int(sys.argv[2])))
    i = log.log_end_offset
    out = sys.stdout
    while True:
        size = 10 + (i * 7919) % 200_000   # some batches are big, so kills land mid-write
        b = encode_batch([(b"k%d" % i, (b"%d;" % i) * (size // 8))])
        base, last = log.append(b)
        out.write(f"{base} {last}\\n")
        out.flush()
        i = last + 1
""")


def expected_value(offset: int) -> bytes:
    size = 10 + (offset * 7919) % 200_000
    return (b"%d;" % offset) * (size // 8)


def run_writer_and_kill(d: Path, rng: random.Random) -> int:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(d), "2000000"], stdout=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO)
    assert proc.stdout is not None
    acked = -1
    target_acks = rng.randint(1, 150)
    deadline = time.monotonic() + 20
    for line in proc.stdout:
        acked = int(line.split()[1])
        target_acks -= 1
        if target_acks <= 0 or time.monotonic() > deadline:
            break
    time.sleep(rng.random() * 0.01)
    proc.send_signal(signal.SIGKILL)
    for line in proc.stdout:  # acks printed before death count too
        acked = int(line.split()[1])
    proc.wait()
    return acked


def test_killed_writer_keeps_every_acknowledged_batch(tmp_path: Path) -> None:
    rng = random.Random(1234)
    d = tmp_path / "t-0"
    acked = -1
    for _round in range(6):
        acked = max(acked, run_writer_and_kill(d, rng))
        log = Log.open(d, LogConfig(segment_bytes=2_000_000))
        assert log.log_end_offset >= acked + 1, "lost acknowledged data"
        expect = 0
        pos = 0
        while pos < log.log_end_offset:
            chunk = log.read(pos, 4 << 20)
            for h, recs in iter_batches(chunk, verify_crc=True):
                for r in recs:
                    assert r.offset == expect and r.value == expected_value(r.offset)
                    expect += 1
                pos = h.last_offset + 1
        assert expect == log.log_end_offset
        log.close()


@pytest.mark.slow
def test_killed_writer_many_rounds(tmp_path: Path) -> None:
    rng = random.Random(99)
    for trial in range(4):
        d = tmp_path / f"t-{trial}"
        acked = -1
        for _round in range(8):
            acked = max(acked, run_writer_and_kill(d, rng))
            log = Log.open(d, LogConfig(segment_bytes=2_000_000))
            assert log.log_end_offset >= acked + 1
            got = [r.offset for r in _all_records(log)]
            assert got == list(range(log.log_end_offset))
            log.close()
        shutil.rmtree(d)


def _all_records(log: Log) -> list:
    out = []
    pos = log.log_start_offset
    while pos < log.log_end_offset:
        for h, recs in iter_batches(log.read(pos, 4 << 20)):
            out.extend(recs)
            pos = h.last_offset + 1
    return out
