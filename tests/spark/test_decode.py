"""The decoder behind both input paths, without Spark: rows, damaged input, and the two decode paths."""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("pyspark", reason="the spark extra is not installed: pip install -e '.[dev,spark]'")

import pyarrow as pa  # noqa: E402

from odradek.offsets.records import OffsetKey, OffsetValue, encode_key, encode_value  # noqa: E402
from odradek.pipeline.decode import (  # noqa: E402
    ARROW_SCHEMA,
    decode_segment_bytes,
    decode_segment_file,
    find_partition_dirs,
    find_segments,
    segment_ref_for,
)
from odradek.protocol.records import CorruptRecordError  # noqa: E402
from tests.spark.datagen import T0, OffsetsLog  # noqa: E402

pytestmark = pytest.mark.spark


def _rows(refs, **kw) -> list[dict]:
    return [row for ref in refs for batch in decode_segment_file(ref, **kw) for row in batch.to_pylist()]


def test_rows_of_every_record_type(scenario):
    refs = find_segments([str(scenario.dirs["broker-a"])])
    rows = _rows(refs)
    by_type = {}
    for r in rows:
        by_type.setdefault(r["record_type"], []).append(r)
    assert set(by_type) == {"offset_commit", "group_metadata", "control", "unknown", "data", "consumer_group",
                            "share_group"}
    assert [r["control_type"] for r in by_type["control"]] == [1, 0]  # COMMIT, then ABORT
    assert [r["key_type"] for r in by_type["unknown"]] == [9]
    # KIP-848/932 group records: decoded by the group coordinator's record modules, not "unknown"
    cg = by_type["consumer_group"]
    assert all(r["group_id"] == "cg-app" and r["decode_error"] is None for r in cg)
    assert [r["group_epoch"] for r in cg if r["group_record"] == "ConsumerGroupMetadata"] == [1, 2, 3]
    joined = [r for r in cg if r["group_record"] == "ConsumerGroupMemberMetadata"]
    assert [(r["member_id"], r["is_tombstone"], r["member_client_id"], r["group_topics"]) for r in joined] == [
        ("c1", False, "client-c1", ["orders"]), ("c2", False, "client-c2", ["orders"]), ("c1", True, None, None)]
    current = [r for r in cg if r["group_record"] == "ConsumerGroupCurrentMemberAssignment" and not r["is_tombstone"]]
    assert [(r["member_id"], r["member_epoch"], r["previous_member_epoch"], r["member_state"],
             [a["partitions"] for a in r["member_assignment"]]) for r in current] == [
        ("c1", 1, 0, 0, [[0, 1]]), ("c2", 2, 1, 0, [[1]]), ("c1", 2, 1, 0, [[0]])]
    assert {r["key_type"] for r in cg} == {3, 5, 6, 7, 8}
    sg = by_type["share_group"]
    assert [(r["group_id"], r["group_record"], r["member_id"], r["group_epoch"]) for r in sg] == [
        ("share-app", "ShareGroupMemberMetadata", "s1", None), ("share-app", "ShareGroupMetadata", None, 1)]
    tomb = [r for r in by_type["offset_commit"] if r["is_tombstone"]]
    assert {(r["group_id"], r["commit_topic"], r["commit_partition"]) for r in tomb} == {
        ("orders-app", "orders", 2), ("gone-app", "orders", 0)}
    assert all(r["committed_offset"] is None for r in tomb)
    simple = [r for r in by_type["offset_commit"] if r["group_id"] == "simple-app" and r["commit_partition"] == 1][0]
    assert (simple["committed_offset"], simple["expire_timestamp"]) == (43, T0 + 2 * 3600_000)
    gen2 = [r for r in by_type["group_metadata"] if r["group_id"] == "orders-app" and r["generation"] == 2][0]
    assert [(m["member_id"], m["subscribed_topics"], m["assigned_partitions"]) for m in gen2["members"]] == [
        ("m1", ["orders"], [{"topic": "orders", "partitions": [0]}]),
        ("m2", ["orders"], [{"topic": "orders", "partitions": [1]}])]
    assert all(r["source_dir"] == str(scenario.dirs["broker-a"]) for r in rows)


def test_chunking_and_the_bytes_path_give_the_same_rows(scenario):
    """Small chunks force key codes to be rebuilt per chunk; binaryFile content goes through bytes."""
    refs = find_segments([str(scenario.parent)])
    whole = _rows(refs)
    assert _rows(refs, max_rows=3) == whole
    from_bytes = [row for ref in refs for b in decode_segment_bytes(open(ref.path, "rb").read(), ref)
                  for row in b.to_pylist()]
    assert from_bytes == whole
    for batch in decode_segment_file(refs[0]):
        assert batch.schema.equals(ARROW_SCHEMA)


def test_undecodable_records_keep_their_row(tmp_path):
    log = OffsetsLog(tmp_path)
    good = encode_key(OffsetKey("g", "t", 0))
    log.raw(good, encode_value(OffsetValue(offset=5, commit_timestamp=T0)), T0)
    log.raw(good, b"\x00\x63garbage", T0 + 1)  # unknown value version 99
    log.raw(b"\x00\x01\x00", b"\x00\x03", T0 + 2)  # offset key cut short
    log.raw(good, encode_value(OffsetValue(offset=6, commit_timestamp=T0)), T0 + 3)
    log.close()
    rows = _rows(find_segments([str(tmp_path)]))
    assert [(r["record_type"], r["committed_offset"], r["decode_error"] is not None) for r in rows] == [
        ("offset_commit", 5, False), ("offset_commit", None, True), ("offset_commit", None, True),
        ("offset_commit", 6, False)]
    assert "version 99" in rows[1]["decode_error"]


def test_a_torn_or_corrupt_segment_stops_where_recovery_would(scenario, tmp_path, capsys):
    data = tmp_path / "broker-b"
    shutil.copytree(scenario.dirs["broker-b"], data)
    seg = sorted((data / "__consumer_offsets-0").glob("*.log"))[0]
    raw = seg.read_bytes()
    ref = segment_ref_for(str(seg))
    full = _rows([ref])
    seg.write_bytes(raw[:-5])  # a torn tail: the last batch is cut
    assert _rows([ref]) == full[:-1]
    assert "stopped at a corrupt batch" in capsys.readouterr().err
    damaged = bytearray(raw)
    damaged[-3] ^= 0xFF  # inside the last batch: its CRC fails
    seg.write_bytes(damaged)
    assert _rows([ref]) == full[:-1]
    with pytest.raises(CorruptRecordError, match="CRC"):
        _rows([ref], strict=True)
    assert len(_rows([ref], verify_crc=False)) == len(full)


def test_paths_are_found_by_content(scenario, tmp_path):
    parent = str(scenario.parent)
    dirs = find_partition_dirs([parent])
    assert {d.rsplit("/", 2)[-2] for d in dirs} == {"broker-a", "broker-b"}
    assert find_partition_dirs([str(scenario.dirs["broker-a"] / "orders-0")]) == [
        str(scenario.dirs["broker-a"] / "orders-0")]
    empty = tmp_path / "x-0"  # a partition-like name without segments is not a partition
    empty.mkdir()
    assert find_partition_dirs([str(tmp_path)]) == []
    assert segment_ref_for("file:/d/orders-3/00000000000000000042.log").base_offset == 42
    assert segment_ref_for("/d/orders-3/00000000000000000042.index") is None
    assert pa.types.is_list(ARROW_SCHEMA.field("members").type)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_the_hot_path_reads_every_value_version_as_decode_value_does(tmp_path, version):
    """The decoder calls storage's generated readers directly; decode_value stays the reference."""
    import struct

    from odradek.offsets.records import OFFSET_COMMIT_VALUE, decode_value

    fields = {"offset": 77, "leader_epoch": 4, "metadata": "meta", "commit_timestamp": T0, "expire_timestamp": T0 + 9}
    data = struct.pack(">h", version) + OFFSET_COMMIT_VALUE.build(fields, version)
    key = OffsetKey("g", "t", 0)
    log = OffsetsLog(tmp_path)
    log.raw(encode_key(key), data, T0)
    log.close()
    (row,) = _rows(find_segments([str(tmp_path)]))
    want = decode_value(key, data)
    assert (row["committed_offset"], row["leader_epoch"], row["metadata"], row["commit_timestamp"],
            row["expire_timestamp"], row["decode_error"]) == (
        want.offset, want.leader_epoch, want.metadata, want.commit_timestamp, want.expire_timestamp, None)


def test_data_source_options_are_case_insensitive():
    """Spark hands options over lower-cased; ``.option("verifyCrc", ...)`` must still reach the reader."""
    from pyspark.sql.datasource import CaseInsensitiveDict

    from odradek.pipeline.datasource import OdradekLogReader

    reader = OdradekLogReader(CaseInsensitiveDict(
        {"path": "/a,/b", "verifyCrc": "false", "STRICT": "true", "maxRowsPerBatch": "7", "topics": "x,y"}))
    assert (reader.paths, reader.verify_crc, reader.strict, reader.max_rows, reader.topics) == (
        ["/a", "/b"], False, True, 7, {"x", "y"})


@pytest.mark.parametrize("options", [{}, {"aggregate": "reports", "windowMs": "600000", "splitBytes": "4096"},
                                     {"topics": "__consumer_offsets", "SPLITBYTES": "0"}])
def test_a_read_planned_in_the_driver_gives_the_data_sources_rows(spark, scenario, options):
    """``read_planned`` (what odradek-report reads with): the data source's reader over splits planned here."""
    from odradek.pipeline.datasource import read_logs, read_planned

    planned = read_planned(spark, [str(scenario.parent)], **options)
    source = read_logs(spark, [str(scenario.parent)], **options)
    assert planned.schema == source.schema
    assert planned.count() == source.count() > 0
    assert planned.exceptAll(source).count() == 0 and source.exceptAll(planned).count() == 0
    assert planned.rdd.getNumPartitions() == source.rdd.getNumPartitions()


def test_control_batches_give_the_row_paths_rows(tmp_path):
    """Transaction markers, malformed ones included, are decoded in the columns: the same rows as the row
    path's (record type control, control_type, no key fields, an unparsable key's error on its row)."""
    from odradek.protocol.records import encode_batch, encode_control_key, encode_end_txn_batch
    from odradek.storage.log import Log, LogConfig

    marker = {"transactional": True, "control": True, "producer_id": 7, "producer_epoch": 0}
    log = OffsetsLog(tmp_path, segment_bytes=1 << 20)
    log.txn_commit("g", {("t", 0): 5}, T0, producer_id=7, commit=True)
    log.raw(b"\x00\x01", b"\x00\x00", T0 + 1)  # an offsets-topic key cut short: its own error
    log._append([(b"\x00", b"\x00\x00"), (None, None), (encode_control_key(0, version=3), b"\x00")], T0 + 2,
                **marker)
    log.commit("g", {("t", 1): 9}, T0 + 3)
    log.txn_commit("g", {("t", 0): 6}, T0 + 4, producer_id=7, commit=False)
    log.close()
    data = Log.open(tmp_path / "orders-0", LogConfig(), clock=lambda: T0)
    data.append(encode_batch([(b"k", b"v"), (b"k2", None)], base_timestamp=T0, transactional=True, producer_id=8,
                             producer_epoch=0, base_sequence=0))
    data.append(encode_end_txn_batch(True, producer_id=8, producer_epoch=0, coordinator_epoch=0, timestamp=T0 + 1))
    data.append(encode_batch([(encode_control_key(1), None)], base_timestamp=T0 + 2, **marker))
    data.close()
    refs = find_segments([str(tmp_path)])
    rows = _rows(refs)
    assert rows == _rows(refs, columnar=False)
    control = [(r["topic"], r["control_type"], r["key_type"], r["group_id"], r["metadata"], r["is_tombstone"],
                r["decode_error"]) for r in rows if r["record_type"] == "control"]
    short = "control record key shorter than 4 bytes"
    assert control == [
        ("__consumer_offsets", 1, None, None, None, False, None),
        ("__consumer_offsets", None, None, None, None, False, short),
        ("__consumer_offsets", None, None, None, None, True, short),
        ("__consumer_offsets", 0, None, None, None, False, None),
        ("__consumer_offsets", 0, None, None, None, False, None),
        ("orders", 1, None, None, None, False, None),
        ("orders", 1, None, None, None, True, None)]


def test_every_modern_group_record_type_gives_its_cells_each_time_it_recurs(tmp_path):
    """KIP-848/932 group records of every key type, each written twice (the decoder remembers each distinct
    key and value), a tombstone, and a value that fails after its key was seen: every row has its own
    cells, and the failing one its error naming its key."""
    import uuid

    from odradek.offsets import consumer_records as cg
    from odradek.offsets import share_group_records as sg
    from odradek.pipeline.decode import MODERN_GROUP_COLUMNS
    from odradek.shares.records import kafka_uuid_text

    t1, t2 = uuid.UUID(int=0xA1), uuid.UUID(int=0xB2)
    tp1 = [{"topic": kafka_uuid_text(t1), "partitions": [0, 2]}]
    records = [  # (key, value, the cells expected besides NULLs)
        (cg.CGMetadataKey("g"), cg.CGMetadataValue(7), {"group_epoch": 7}),
        (cg.CGPartitionMetadataKey("g"), cg.CGPartitionMetadataValue(
            {"b": cg.TopicMetadata(t2, "b", 1), "a": cg.TopicMetadata(t1, "a", 3)}), {"group_topics": ["a", "b"]}),
        (cg.CGMemberKey("g", "m1"), cg.CGMemberValue(
            instance_id="i1", rack_id="r1", client_id="c1", client_host="/h", subscribed_topic_names=("z", "a"),
            subscribed_topic_regex="re.*"), {
            "member_id": "m1", "member_instance_id": "i1", "member_rack_id": "r1", "member_client_id": "c1",
            "member_client_host": "/h", "group_topics": ["a", "z"], "group_regex": "re.*"}),
        (cg.CGTargetMetadataKey("g"), cg.CGTargetMetadataValue(4), {"assignment_epoch": 4}),
        (cg.CGTargetMemberKey("g", "m1"), cg.CGTargetMemberValue({t1: frozenset({2, 0})}),
         {"member_id": "m1", "member_assignment": tp1}),
        (cg.CGAssignmentKey("g", "m1"), cg.CGAssignmentValue(
            member_epoch=5, previous_member_epoch=4, state=1, assigned={t1: frozenset({0, 2})},
            pending_revocation={t2: frozenset({1})}), {
            "member_id": "m1", "member_epoch": 5, "previous_member_epoch": 4, "member_state": 1,
            "member_assignment": tp1,
            "member_pending_revocation": [{"topic": kafka_uuid_text(t2), "partitions": [1]}]}),
        (cg.CGRegexKey("g", "re.*"), cg.CGRegexValue(("t2", "t1"), 1, T0), {
            "group_regex": "re.*", "group_topics": ["t1", "t2"]}),
        (sg.SGMemberKey("s", "m2"), sg.SGMemberValue(client_id="c2", client_host="/h2", subscribed_topic_names=("a",)),
         {"member_id": "m2", "member_client_id": "c2", "member_client_host": "/h2", "group_topics": ["a"]}),
        (sg.SGMetadataKey("s"), sg.SGMetadataValue(3, 0), {"group_epoch": 3}),
        (sg.SGTargetMetadataKey("s"), sg.SGTargetMetadataValue(2), {"assignment_epoch": 2}),
        (sg.SGTargetMemberKey("s", "m2"), sg.SGTargetMemberValue({t1: frozenset({0, 2})}),
         {"member_id": "m2", "member_assignment": tp1}),
        (sg.SGAssignmentKey("s", "m2"), sg.SGAssignmentValue(
            member_epoch=3, previous_member_epoch=2, state=0, assigned={t1: frozenset({0, 2})}), {
            "member_id": "m2", "member_epoch": 3, "previous_member_epoch": 2, "member_state": 0,
            "member_assignment": tp1}),
        (sg.SGStatePartitionKey("s"), sg.SGStatePartitionValue(initialized={
            t1: sg.TopicPartitionsInfo("b", frozenset({0})), t2: sg.TopicPartitionsInfo("a", frozenset({1}))}),
         {"group_topics": ["a", "b"]}),
    ]
    log = OffsetsLog(tmp_path, segment_bytes=1 << 20)
    expected = []
    for key, value, cells in records:
        module, names = (cg, cg.CG_RECORD_NAMES) if type(key) in cg.CG_RECORD_NAMES else (sg, sg.SG_RECORD_NAMES)
        encode_key, encode_value = (cg.encode_cg_key, cg.encode_cg_value) if module is cg else (
            sg.encode_sg_key, sg.encode_sg_value)
        kb = encode_key(key)
        row = {column: None for column in MODERN_GROUP_COLUMNS}
        row.update(cells, group_record=names[type(key)])
        tombstone = {column: row[column] if column in ("group_record", "member_id") else None
                     for column in MODERN_GROUP_COLUMNS}
        if type(key) is cg.CGRegexKey:
            tombstone["group_regex"] = "re.*"
        for vb, want in ((encode_value(key, value), row), (encode_value(key, value), row), (b"\x00\x00\x7f", None),
                         (None, tombstone), (encode_value(key, value), row)):
            log.raw(kb, vb, T0)
            expected.append(want)
    log.close()
    refs = find_segments([str(tmp_path)])
    rows = _rows(refs)
    assert rows == _rows(refs, columnar=False)
    assert [{column: r[column] for column in MODERN_GROUP_COLUMNS} if r["decode_error"] is None else None
            for r in rows] == expected
    failed = [r for r in rows if r["decode_error"] is not None]
    assert len(failed) == len(records) and all("cannot decode value of" in r["decode_error"] for r in failed)
    assert all(r[column] is None for r in failed for column in MODERN_GROUP_COLUMNS)
    assert all(r["group_id"] in ("g", "s") for r in rows)


@pytest.mark.parametrize("options", [{}, {"aggregate": "reports", "windowMs": "600000", "splitBytes": "4096"},
                                     {"topics": "no-such-topic"}])
def test_a_read_written_by_its_tasks_is_the_planned_reads_rows(spark, scenario, options, tmp_path):
    """``write_planned`` (odradek-report's decode in a local session): the tasks' Parquet has read_planned's rows."""
    from odradek.pipeline.datasource import read_planned, write_planned

    target = tmp_path / "out.parquet"
    target.mkdir()
    (target / "stale.parquet").write_bytes(b"left by an earlier run")
    planned = read_planned(spark, [str(scenario.parent)], **options)
    rows = write_planned(spark, [str(scenario.parent)], target, **options)
    written = spark.read.parquet(str(target))
    assert written.schema == planned.schema
    assert rows == written.count() == planned.count()
    assert written.exceptAll(planned).count() == 0 and planned.exceptAll(written).count() == 0
    assert (target / "_SUCCESS").exists() and not (target / "stale.parquet").exists()
    assert not [p for p in target.iterdir() if p.name.startswith(".")]  # no task's temp file left


def test_python_workers_import_pyspark_as_installed(spark):
    """Workers start through odradek.pipeline.sparkdaemon: the installed pyspark (cached bytecode), not the zip's."""
    import pyspark

    def where(batches):
        import pyarrow as pa
        import pyspark as worker_pyspark

        for batch in batches:
            yield pa.RecordBatch.from_pydict({"file": [worker_pyspark.__file__] * batch.num_rows})

    files = {r.file for r in spark.range(2, numPartitions=2).mapInArrow(where, "file string").collect()}
    assert files == {pyspark.__file__}
