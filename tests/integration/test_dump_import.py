"""dump-log and import on a handcrafted Kafka-format __consumer_offsets segment.

The segment is built from real records captured from a Kafka cluster (the
konsumer_offsets captures in tests/kafka_captures.py), wrapped in batches the way a broker writes
them, in the order the vectors' commit times put them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from odradek.offsets.records import GroupKey, OffsetKey, decode_key, decode_value, partition_for
from odradek.protocol.records import Record, encode_batch
from odradek.storage.files import LOG_SUFFIX
from tests.kafka_captures import KONSUMER

pytestmark = pytest.mark.integration

ODRADEK = [sys.executable, "-m", "odradek.broker.cli"]


def _vector_records() -> list[tuple[bytes, bytes]]:
    return [KONSUMER[kind, case] for kind in ("group_metadata", "offset_commit")
            for case in sorted(c for k, c in KONSUMER if k == kind)]


@pytest.fixture
def kafka_dir(tmp_path) -> Path:
    """A Kafka log dir with one __consumer_offsets-0 segment of three batches."""
    part = tmp_path / "kafka-logs" / "__consumer_offsets-0"
    part.mkdir(parents=True)
    records = _vector_records()
    chunks, offset = [], 0
    for start in range(0, len(records), 4):
        batch = [Record(offset + i, 1672870000000 + offset + i, k, v)
                 for i, (k, v) in enumerate(records[start:start + 4])]
        chunks.append(encode_batch(batch, base_offset=offset, partition_leader_epoch=0))
        offset += len(batch)
    (part / f"{0:020d}{LOG_SUFFIX}").write_bytes(b"".join(chunks))
    return tmp_path / "kafka-logs"


def test_dump_log_decodes_offsets_records(kafka_dir):
    out = subprocess.run(ODRADEK + ["dump-log", "--json", str(kafka_dir / "__consumer_offsets-0")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    batches = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(batches) == 3
    records = [r for b in batches for r in b["records"]]
    assert len(records) == 10
    commits = [r for r in records if r["key"]["type"] == "OffsetKey"]
    first = next(r for r in commits if r["value"]["offset"] == 97507)
    assert first["key"] == {"type": "OffsetKey", "group": "ivan-experimental-consumer",
                            "topic": "__consumer_offsets", "partition": 46}
    assert first["value"]["commit_timestamp"] == 1672871009232
    assert first["value"]["leader_epoch"] == -1
    groups = [r for r in records if r["key"]["type"] == "GroupKey"]
    gen7 = next(r for r in groups if r["value"]["generation"] == 7)
    assert gen7["value"]["protocol"] == "range"
    member = gen7["value"]["members"][0]
    assert member["client_id"] == "rdkafka" and member["session_timeout"] == 45000
    assert member["subscription"]["topics"] == ["t01"]
    assert member["assignment"]["assigned_partitions"] == [{"topic": "t01", "partitions": [0, 1, 2]}]
    empty = next(r for r in groups if r["value"]["generation"] == 8)
    assert empty["value"]["protocol"] is None and empty["value"]["members"] == []

    text = subprocess.run(ODRADEK + ["dump-log", str(kafka_dir)], capture_output=True, text=True,
                          timeout=60)
    assert text.returncode == 0
    assert "baseOffset: 0" in text.stdout and "ivan-experimental-consumer" in text.stdout


def test_dump_log_reports_a_torn_tail(kafka_dir):
    segment = next((kafka_dir / "__consumer_offsets-0").glob("*.log"))
    data = segment.read_bytes()
    segment.write_bytes(data[:-7])
    out = subprocess.run(ODRADEK + ["dump-log", str(segment)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 1
    assert "INVALID" in out.stdout


@pytest.mark.parametrize("partitions", [1, 3])
def test_import_repartitions_groups(kafka_dir, tmp_path, partitions):
    data_dir = tmp_path / f"data-{partitions}"
    out = subprocess.run(ODRADEK + ["import", str(kafka_dir), "--override", f"log.dirs={data_dir}",
                                    "--override", f"offsets.topic.num.partitions={partitions}"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "imported 10 records of 2 groups" in out.stdout
    seen = {}
    for p in range(partitions):
        segment = data_dir / f"__consumer_offsets-{p}" / f"{0:020d}.log"
        if not segment.exists() or segment.stat().st_size == 0:
            continue
        dumped = subprocess.run(ODRADEK + ["dump-log", "--json", str(segment)],
                                capture_output=True, text=True, timeout=60)
        for batch in map(json.loads, dumped.stdout.splitlines()):
            for r in batch["records"]:
                group = r["key"]["group"]
                assert partition_for(group, partitions) == p
                seen.setdefault(group, []).append(r["key"]["type"])
    assert set(seen) == {"ivan-experimental-consumer", "kafkesc-devcluster-group-id"}
    assert sum(len(v) for v in seen.values()) == 10

    again = subprocess.run(ODRADEK + ["import", str(kafka_dir), "--override", f"log.dirs={data_dir}",
                                      "--override", f"offsets.topic.num.partitions={partitions}"],
                           capture_output=True, text=True, timeout=60)
    assert again.returncode == 1 and "already holds committed offsets" in again.stderr


def test_vector_keys_decode_to_known_types():
    for key, value in _vector_records():
        k = decode_key(key)
        assert isinstance(k, OffsetKey | GroupKey)
        assert decode_value(k, value) is not None


def test_import_with_several_log_dirs_writes_each_partition_where_it_is(kafka_dir, tmp_path):
    """A broker on two log dirs placed some offsets partitions in the second: the import writes
    those there, so the broker finds each partition in one dir and loads every group."""
    from odradek.testing import ThreadedBroker

    a, b = tmp_path / "a", tmp_path / "b"
    dirs = {"log.dirs": f"{a},{b}", "offsets.topic.num.partitions": "4"}
    with ThreadedBroker(a, overrides=dirs):
        pass  # creates the empty offsets partitions, spread over both dirs
    assert any(p.name.startswith("__consumer_offsets-") for p in b.iterdir())
    args = [x for k, v in dirs.items() for x in ("--override", f"{k}={v}")]
    out = subprocess.run(ODRADEK + ["import", str(kafka_dir), *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    for p in range(4):
        assert [d.name for d in (a, b) if (d / f"__consumer_offsets-{p}").is_dir()] in (["a"], ["b"]), p
    with ThreadedBroker(a, overrides=dirs) as broker:  # one copy of each partition: it starts
        broker._call(broker.app.wait_loaded())
        ends = broker.call(lambda: sum(broker.app.logs.get("__consumer_offsets", p).log_end_offset
                                       for p in range(4)))
    assert ends >= 10  # the ten imported records (and what the load wrote: expired offsets)
