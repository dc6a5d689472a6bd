"""The odradek-log data source and the reports, over two brokers' data dirs built with the storage APIs."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark", reason="the spark extra is not installed: pip install -e '.[dev,spark]'")

from odradek.pipeline import reports  # noqa: E402
from odradek.pipeline.datasource import SPARK_SCHEMA, read_binary_files  # noqa: E402
from odradek.pipeline.decode import ARROW_SCHEMA, find_segments  # noqa: E402
from tests.spark.datagen import DAY, HOUR, MINUTE, T0  # noqa: E402

pytestmark = pytest.mark.spark


def test_schema_is_the_arrow_contract():
    """The data source refuses batches whose Arrow schema differs from what Spark derives."""
    from pyspark.sql.pandas.types import to_arrow_schema

    assert to_arrow_schema(SPARK_SCHEMA, timezone="UTC").equals(ARROW_SCHEMA)


def test_splits_are_segment_runs_of_split_bytes_across_both_brokers(spark, scenario, records):
    segments = find_segments([str(scenario.parent)])
    offsets_segments = [s for s in segments if s.topic == "__consumer_offsets" and s.source_dir.endswith("broker-a")]
    assert len(offsets_segments) >= 3, "the scenario should spread __consumer_offsets over several segments"
    per_segment = spark.read.format("odradek-log").option("splitBytes", "0").load(str(scenario.parent))
    assert per_segment.rdd.getNumPartitions() == len(segments)
    packed = spark.read.format("odradek-log").option("splitBytes", "4096").load(str(scenario.parent))
    assert 1 < packed.rdd.getNumPartitions() < len(segments)
    assert spark.read.format("odradek-log").load(str(scenario.parent)).rdd.getNumPartitions() == 1  # 128 MiB
    spread = spark.read.format("odradek-log").option("parallelism", "2").load(str(scenario.parent))
    assert spread.rdd.getNumPartitions() == 2  # a small log: one wave, a split per core
    for df in (per_segment, packed, spread):
        assert df.exceptAll(records).count() == 0 and records.exceptAll(df).count() == 0

    counts = {(r.source_dir.rsplit("/", 1)[-1], r.topic, r.record_type): r["count"]
              for r in records.groupBy("source_dir", "topic", "record_type").count().collect()}
    a = scenario.logs["broker-a"]
    assert counts[("broker-a", "__consumer_offsets", "offset_commit")] == a.commits + 2 + 2  # + tombstones, txn
    assert counts[("broker-a", "__consumer_offsets", "group_metadata")] == 7
    assert counts[("broker-a", "__consumer_offsets", "control")] == 2
    assert counts[("broker-a", "__consumer_offsets", "unknown")] == scenario.unknown_records
    assert counts[("broker-a", "__consumer_offsets", "consumer_group")] == 16
    assert counts[("broker-a", "__consumer_offsets", "share_group")] == 2
    assert counts[("broker-a", "orders", "data")] == 140
    assert counts[("broker-b", "orders", "data")] == 30


def test_a_partition_dir_a_data_dir_and_the_topics_option(spark, scenario):
    part = scenario.dirs["broker-b"] / "__consumer_offsets-0"
    only = spark.read.format("odradek-log").load(str(part))
    assert {(r.source_dir, r.topic) for r in only.select("source_dir", "topic").distinct().collect()} == {
        (str(scenario.dirs["broker-b"]), "__consumer_offsets")}
    both = (spark.read.format("odradek-log").option("topics", "orders")
            .load([str(scenario.dirs["broker-a"]), str(scenario.dirs["broker-b"])]))
    assert both.count() == 170


def test_a_narrower_schema_reads_only_those_columns(spark, scenario, records):
    """Python data sources get no column pruning; naming the columns is how a job asks for fewer."""
    cols = "group_id string, offset bigint, committed_offset bigint"
    narrow = spark.read.format("odradek-log").schema(cols).load(str(scenario.parent))
    assert narrow.columns == ["group_id", "offset", "committed_offset"]
    assert narrow.exceptAll(records.select("group_id", "offset", "committed_offset")).count() == 0
    with pytest.raises(Exception, match="not one of its columns"):
        spark.read.format("odradek-log").schema("offset string").load(str(scenario.parent)).count()


def test_binary_files_path_gives_the_same_rows(spark, scenario, records):
    other = read_binary_files(spark, str(scenario.parent))
    assert other.exceptAll(records).count() == 0
    assert records.exceptAll(other).count() == 0


def test_latest_offsets_replay_the_log(records, scenario):
    """Last record per key wins, tombstones delete, aborted transactions do not count; per data dir."""
    got = {(r.source_dir, r.group_id, r.topic, r.partition, r.committed_offset)
           for r in reports.latest_offsets(records).collect()}
    assert got == scenario.expected_latest()
    a = str(scenario.dirs["broker-a"])
    assert (a, "txn-app", "orders", 0, 500) in got  # committed transaction
    assert not any(g == "txn-app" and p == 1 for _d, g, _t, p, _o in got)  # aborted one
    assert not any(g == "gone-app" for _d, g, *_ in got)


def test_group_timeline_infers_states_and_membership(records, scenario):
    rows = [r.asDict() for r in reports.group_timeline(records).orderBy("source_dir", "group_id", "record_offset")
            .collect()]
    a = str(scenario.dirs["broker-a"])
    orders = [r for r in rows if r["source_dir"] == a and r["group_id"] == "orders-app"]
    assert [(r["generation"], r["state"], r["joined"], r["left"]) for r in orders] == [
        (1, "Stable", ["m1"], []),
        (2, "Stable", ["m2"], []),
        (3, "Empty", [], ["m1", "m2"]),
    ]
    assert orders[2]["state_timestamp"] == T0 + 20 * MINUTE
    assert [r["state_changed"] for r in orders] == [True, False, True]
    gone = [r["state"] for r in rows if r["group_id"] == "gone-app"]
    assert gone == ["Stable", "Empty", "Dead"]


def test_modern_groups_follow_epochs_members_and_assignments(records, scenario):
    """KIP-848 consumer-group and KIP-932 share-group records: epochs, members joining and leaving."""
    rows = [r.asDict() for r in reports.modern_groups(records).orderBy("source_dir", "group_id", "record_offset")
            .collect()]
    cg = [r for r in rows if r["group_id"] == "cg-app"]
    assert {r["group_type"] for r in cg} == {"consumer"}
    assert [(r["event"], r["member_id"], r["member_count"]) for r in cg if r["event"].startswith("member-")
            and r["event"] != "member-epoch"] == [("member-joined", "c1", 1), ("member-joined", "c2", 2),
                                                 ("member-left", "c1", 1)]
    assert [(r["group_epoch"], r["epoch_step"]) for r in cg if r["event"] == "group-epoch"] == [
        (1, None), (2, 1), (3, 1)]
    assert [r["assignment_epoch"] for r in cg if r["event"] == "target-assignment-epoch"] == [1, 2]
    assert [(r["member_id"], r["previous_member_epoch"], r["member_epoch"]) for r in cg
            if r["event"] == "member-epoch"] == [("c1", 0, 1), ("c2", 1, 2), ("c1", 1, 2)]
    assert [r["event"] for r in cg if r["is_tombstone"]] == ["assignment-removed", "target-removed", "member-left"]
    # what a reload keeps: the last record per key; c2's state and the group's epoch 3
    last = {(r["group_record"], r["member_id"]): r for r in cg if r["is_last"]}
    assert last[("ConsumerGroupMetadata", None)]["group_epoch"] == 3
    assert last[("ConsumerGroupCurrentMemberAssignment", "c2")]["member_epoch"] == 2
    assert last[("ConsumerGroupMemberMetadata", "c1")]["is_tombstone"]
    share = [(r["group_type"], r["event"], r["member_id"], r["member_count"]) for r in rows
             if r["group_id"] == "share-app"]
    assert share == [("share", "member-joined", "s1", 1), ("share", "group-epoch", None, 1)]


def test_expiry_audit_applies_kip211_to_groups_rebuilt_from_the_log(records):
    now = T0 + 3 * HOUR
    audit = reports.expiry_audit(records, now_ms=now, retention_ms=DAY)
    rows = {(r.source_dir.rsplit("/", 1)[-1], r.group_id, r.topic, r.partition): r for r in audit.collect()}

    def check(key, reason, at, state):
        r = rows[key]
        assert (r.reason, r.expires_at, r.group_state) == (reason, at, state), key
        assert r.expired == (at is not None and at <= now)

    check(("broker-a", "orders-app", "orders", 0), "empty-group", T0 + 20 * MINUTE + DAY, "Empty")
    check(("broker-a", "orders-app", "orders", 1), "empty-group", T0 + 20 * MINUTE + DAY, "Empty")
    check(("broker-a", "stable-app", "legacy", 0), "unsubscribed-topic", T0 + 3 * MINUTE + DAY, "Stable")
    check(("broker-a", "stable-app", "payments", 0), "kept-subscribed-topic", None, "Stable")
    check(("broker-a", "simple-app", "orders", 0), "simple-group", T0 + 5 * MINUTE + DAY, "Empty")
    check(("broker-a", "simple-app", "orders", 1), "explicit-expiry", T0 + 2 * HOUR, "Empty")
    check(("broker-b", "orders-app", "orders", 0), "kept-subscribed-topic", None, "Stable")
    assert [k for k, r in rows.items() if r.expired] == [("broker-a", "simple-app", "orders", 1)]


def test_commit_rates_per_window(records, scenario):
    a = str(scenario.dirs["broker-a"])
    rates = reports.commit_rates(records, "10 minutes").where(
        f"source_dir = '{a}' AND group_id = 'orders-app'").collect()
    assert sum(r.commits for r in rates) == 15
    assert sum(r.requests for r in rates) == 8
    first = min(rates, key=lambda r: r.window_start)
    assert first.commits == 12 and first.commits_per_s == pytest.approx(12 / 600)


def test_consumer_lag_against_the_data_logs(records, scenario):
    lag = {(r.source_dir.rsplit("/", 1)[-1], r.group_id, r.topic, r.partition): (r.log_end_offset, r.lag)
           for r in reports.consumer_lag(records).collect()}
    assert lag[("broker-a", "orders-app", "orders", 0)] == (100, 40)
    assert lag[("broker-a", "orders-app", "orders", 1)] == (40, 7)
    assert lag[("broker-b", "orders-app", "orders", 0)] == (30, 23)
    assert ("broker-a", "stable-app", "payments", 0) not in lag  # no payments log in the input


@pytest.mark.parametrize("split_bytes", ["0", "4096", "134217728"])
def test_split_local_aggregation_gives_the_same_reports(spark, scenario, records, split_bytes):
    """aggregate=latest-offsets keeps per split only what latest offsets, the audit and lag read."""
    reduced = (spark.read.format("odradek-log").option("aggregate", "latest-offsets")
               .option("splitBytes", split_bytes).load(str(scenario.parent)))
    assert reduced.count() < records.count()
    now = T0 + 3 * HOUR
    for build in (reports.latest_offsets, reports.consumer_lag,
                  lambda df: reports.expiry_audit(df, now_ms=now, retention_ms=DAY)):
        full, agg = build(records), build(reduced)
        assert full.count() > 0
        assert full.exceptAll(agg).count() == 0 and agg.exceptAll(full).count() == 0
    with pytest.raises(Exception, match="aggregate must be one of"):
        spark.read.format("odradek-log").option("aggregate", "everything").load(str(scenario.parent)).count()


def _every_report(window: str):
    now = T0 + 3 * HOUR
    return {"overview": reports.overview, "latest_offsets": reports.latest_offsets,
            "group_timeline": reports.group_timeline, "group_snapshot": reports.group_snapshot,
            "expiry_audit": lambda df: reports.expiry_audit(df, now_ms=now, retention_ms=DAY),
            "commit_rates": lambda df: reports.commit_rates(df, window), "lag": reports.consumer_lag,
            "txn_offsets": reports.transactional_offsets, "modern_groups": reports.modern_groups}


@pytest.mark.parametrize("split_bytes", ["0", "134217728"])
def test_the_reports_aggregation_gives_every_report_the_same_rows(spark, scenario, records, split_bytes):
    """aggregate=reports: winners, group and transactional records, and partial counts; every report agrees."""
    from odradek.pipeline.partial import PARTIAL

    window = "10 minutes"
    reduced = (spark.read.format("odradek-log").option("aggregate", "reports").option("windowMs", str(10 * MINUTE))
               .option("splitBytes", split_bytes).load(str(scenario.parent))).cache()
    assert reduced.where(f"{PARTIAL} IS NULL").count() < records.count()
    for name, build in _every_report(window).items():
        full, agg = build(records), build(reduced)
        assert full.schema.simpleString() == agg.schema.simpleString(), name
        assert full.count() > 0, name
        assert full.exceptAll(agg).count() == 0 and agg.exceptAll(full).count() == 0, name
    with pytest.raises(Exception, match="another window"):
        reports.commit_rates(reduced, "1 minute").collect()
    reduced.unpersist()


def test_window_ms_reads_spark_intervals():
    from odradek.pipeline.partial import window_ms

    assert window_ms("1 minute") == MINUTE and window_ms("10 minutes") == 10 * MINUTE
    assert window_ms("1 hour 30 minutes") == 90 * MINUTE and window_ms("INTERVAL 2 days") == 2 * DAY
    assert window_ms("500 milliseconds") == 500
    for bad in ("1 month", "soon", "0 seconds", ""):
        with pytest.raises(ValueError):
            window_ms(bad)


def test_transactional_offsets_committed_aborted_and_pending(spark, tmp_path):
    from odradek.offsets.records import OffsetKey, OffsetValue, encode_key, encode_value
    from tests.spark.datagen import OffsetsLog

    log = OffsetsLog(tmp_path / "broker")
    log.txn_commit("eos-app", {("orders", 0): 10}, T0, producer_id=7, commit=True)
    log.txn_commit("eos-app", {("orders", 1): 20}, T0 + MINUTE, producer_id=8, commit=False)
    log._append([(encode_key(OffsetKey("eos-app", "orders", 2)),
                  encode_value(OffsetValue(offset=30, commit_timestamp=T0 + 2 * MINUTE)))],
                T0 + 2 * MINUTE, producer_id=9, producer_epoch=0, base_sequence=0, transactional=True)
    log.close()
    df = spark.read.format("odradek-log").load(str(tmp_path / "broker"))
    rows = {r.partition: r for r in reports.transactional_offsets(df).collect()}
    assert {p: (r.committed_offset, r.producer_id, r.outcome) for p, r in rows.items()} == {
        0: (10, 7, "committed"), 1: (20, 8, "aborted"), 2: (30, 9, "pending")}
    assert rows[0].marker_timestamp == T0 + 1 and rows[0].marker_offset > rows[0].record_offset
    assert rows[2].marker_offset is None


def test_transaction_log_records_and_the_transactions_report(spark, tmp_path):
    """__transaction_state decoded by the coordinator's own records module; one report row per record."""
    from odradek.pipeline.decode import decode_segment_file
    from odradek.protocol.records import encode_batch
    from odradek.storage.log_manager import TRANSACTION_STATE_TOPIC
    from odradek.transactions.records import TxnKey, TxnValue, encode_key, encode_value
    from odradek.transactions.state import TxnState
    from tests.spark.datagen import CoordinatorLog

    log = CoordinatorLog(tmp_path / "broker", TRANSACTION_STATE_TOPIC)

    def write(txn_id, value, ts, version=0):
        log.write(encode_key(TxnKey(txn_id)), encode_value(value, version), ts)

    def value(state, epoch=0, partitions=(), pid=4000, start=T0):
        return TxnValue(producer_id=pid, producer_epoch=epoch, timeout_ms=60000, state=state,
                        partitions=partitions, last_update_ms=T0 + epoch, start_ms=start)

    write("app-1", value(TxnState.EMPTY, partitions=None, start=-1), T0)
    write("app-1", value(TxnState.ONGOING, partitions=(("orders", 0), ("orders", 1), ("pay", 3))), T0 + 1)
    write("app-1", value(TxnState.PREPARE_COMMIT, partitions=(("orders", 0), ("orders", 1), ("pay", 3))),
              T0 + 2, version=1)
    write("app-1", value(TxnState.COMPLETE_COMMIT, epoch=1), T0 + 3)
    write("gone", value(TxnState.ONGOING, pid=4001), T0 + 4)
    log.log.append(encode_batch([(b"\x00\x00\x00\x04gone", None), (b"\x00\x07junk", b"\x00\x00")],
                                base_timestamp=T0 + 5))
    log.close()

    ref = find_segments([str(tmp_path / "broker")])[0]
    rows = [r for b in decode_segment_file(ref) for r in b.to_pylist()]
    assert [r["record_type"] for r in rows] == ["transaction"] * 7
    assert rows[1]["txn_partitions"] == [{"topic": "orders", "partitions": [0, 1]}, {"topic": "pay", "partitions": [3]}]
    assert (rows[2]["transactional_id"], rows[2]["txn_state"], rows[2]["txn_timeout_ms"]) == (
        "app-1", "PrepareCommit", 60000)
    assert rows[0]["txn_partitions"] is None and rows[5]["is_tombstone"] and rows[5]["transactional_id"] == "gone"
    assert "unknown transaction log key version 7" in rows[6]["decode_error"]

    df = spark.read.format("odradek-log").load(str(tmp_path / "broker"))
    report = reports.transactions(df).orderBy("record_offset").collect()
    assert [(r.transactional_id, r.state, r.state_changed, r.producer_epoch, r.epoch_step, r.partition_count,
             r.is_last) for r in report] == [
        ("app-1", "Empty", True, 0, None, 0, False), ("app-1", "Ongoing", True, 0, 0, 3, False),
        ("app-1", "PrepareCommit", True, 0, 0, 3, False), ("app-1", "CompleteCommit", True, 1, 1, 0, True),
        ("gone", "Ongoing", True, 0, None, 0, False), ("gone", "Dead", True, None, None, 0, True)]
    reduced = spark.read.format("odradek-log").option("aggregate", "reports").load(str(tmp_path / "broker"))
    assert sorted(reports.transactions(reduced).collect()) == sorted(report)


def test_share_group_state_records_and_the_share_groups_report(spark, tmp_path):
    """__share_group_state decoded by shares.records, replayed per share-partition by shares.state."""
    import uuid

    from odradek.pipeline.decode import decode_segment_file
    from odradek.shares import records as sr
    from odradek.shares.state import replay
    from tests.spark.datagen import CoordinatorLog

    topic = uuid.UUID(int=7)
    log = CoordinatorLog(tmp_path / "broker", sr.STATE_TOPIC)
    written = []

    def write(key, value, ts):
        written.append((key, value))
        log.write(sr.encode_key(key), sr.encode_value(value), ts)

    snap, upd = sr.ShareSnapshotKey("sg", topic, 0), sr.ShareUpdateKey("sg", topic, 0)
    write(snap, sr.ShareSnapshotValue(snapshot_epoch=0, state_epoch=1, leader_epoch=0, start_offset=0,
                                      create_timestamp=T0, write_timestamp=T0,
                                      state_batches=[sr.StateBatch(0, 9, 2, 1)]), T0)
    write(upd, sr.ShareUpdateValue(snapshot_epoch=0, leader_epoch=0, start_offset=10,
                                   state_batches=[sr.StateBatch(10, 14, 0, 2), sr.StateBatch(15, 19, 4, 5)]), T0 + 1)
    write(upd, sr.ShareUpdateValue(snapshot_epoch=0, leader_epoch=-1, start_offset=-1,
                                   state_batches=[sr.StateBatch(10, 11, 2, 3)]), T0 + 2)
    gone = sr.ShareSnapshotKey("gone", topic, 1)
    write(gone, sr.ShareSnapshotValue(snapshot_epoch=0, state_epoch=0, leader_epoch=0, start_offset=5,
                                      create_timestamp=T0, write_timestamp=T0), T0 + 3)
    write(gone, None, T0 + 4)
    log.close()

    rows = [r for ref in find_segments([str(tmp_path / "broker")]) for b in decode_segment_file(ref)
            for r in b.to_pylist()]
    assert {r["record_type"] for r in rows} == {"share_state"} and len(rows) == 5
    assert (rows[1]["share_record"], rows[1]["share_topic_id"], rows[1]["share_start_offset"]) == (
        "ShareUpdate", sr.kafka_uuid_text(topic), 10)
    assert rows[1]["share_state_batches"][1] == {"first_offset": 15, "last_offset": 19, "delivery_state": 4,
                                                 "delivery_count": 5}

    expected = replay(written)[("sg", topic, 0)]
    df = spark.read.format("odradek-log").load(str(tmp_path / "broker"))
    report = {r.group_id: r for r in reports.share_groups(df).collect()}
    sg = report["sg"]
    assert (sg.snapshots, sg.updates, sg.deleted, sg.start_offset) == (1, 2, False, expected.start_offset)
    assert sg.in_flight_offsets == sum(b.last_offset - b.first_offset + 1 for b in expected.state_batches)
    assert (sg.redelivered_offsets, sg.max_delivery_count, sg.archived_offsets) == (10, 5, 5)
    assert report["gone"].deleted and report["gone"].in_flight_offsets == 0
    reduced = spark.read.format("odradek-log").option("aggregate", "reports").load(str(tmp_path / "broker"))
    assert sorted(reports.share_groups(reduced).collect()) == sorted(report.values())
