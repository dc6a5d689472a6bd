"""``odradek offsets``: replay of a data dir's offsets logs, time travel, and the expiry preview."""

from __future__ import annotations

import json
import os
from io import StringIO

import pytest

from odradek.broker import cli
from odradek.broker.offsets_view import build_view, expiry_preview, parse_time

from .test_offsets_harness import MINUTE, E, OffsetsEnv

RETENTION = 10 * MINUTE


@pytest.fixture
async def env(tmp_path):
    env = await OffsetsEnv(tmp_path / "data", partitions=3, offsets_retention_ms=RETENTION,
                           offsets_retention_check_interval_ms=MINUTE).start()
    (tmp_path / "data").mkdir(exist_ok=True)
    yield env
    await env.stop()


def views(env) -> list:
    return [s.persisted_view() for s in env.coordinator.shards]


def view_of(env, **kw):
    return build_view([env.root], **kw)


async def test_view_equals_the_live_persisted_view(env):
    env.commit_now("a", [("t", 0, 1, "x", 4), ("u", 1, 2)])
    env.commit_now("b", [("t", 3, 9)], version=2, retention=MINUTE)
    group = env.consumer_group("c", {"m1": ["t"]})
    await env.persist_group(group)
    env.commit_now("c", [("t", 1, 5)], generation=1, member="m1")
    view = view_of(env)
    assert [pv.shard.persisted_view() for pv in view.partitions] == views(env)
    states = {g.group_id: (g.state.value, g.protocol_type) for _, g in view.groups()}
    assert states == {"a": ("Empty", None), "b": ("Empty", None), "c": ("Stable", "consumer")}


async def test_reads_a_running_brokers_dir_without_touching_it(env):
    env.commit_now("a", [("t", 0, 1)])
    before = {p: p.stat().st_mtime_ns for p in env.root.rglob("*") if p.is_file()}
    view_of(env)
    assert {p: p.stat().st_mtime_ns for p in env.root.rglob("*") if p.is_file()} == before


async def test_time_travel_by_time_and_by_offset(env):
    t0 = env.clock.now_ms()
    env.commit_now("a", [("t", 0, 1)])
    env.clock.advance(MINUTE)
    env.commit_now("a", [("t", 0, 2), ("t", 1, 2)])
    env.clock.advance(MINUTE)
    env.commit_now("a", [("t", 0, 3)])

    def offsets(view):
        return {tp: v.offset for pv in view.partitions for tp, v in pv.shard.offsets.get("a", {}).items()}

    assert offsets(view_of(env, group="a", until_ms=t0 - 1)) == {}
    assert offsets(view_of(env, group="a", until_ms=t0)) == {("t", 0): 1}
    assert offsets(view_of(env, group="a", until_ms=t0 + MINUTE)) == {("t", 0): 2, ("t", 1): 2}
    assert offsets(view_of(env, group="a")) == {("t", 0): 3, ("t", 1): 2}
    assert offsets(view_of(env, group="a", until_offset=0)) == {("t", 0): 1}
    assert offsets(view_of(env, group="a", until_offset=1)) == {("t", 0): 2}


async def test_torn_tail_is_reported_and_left_alone(env):
    env.commit_now("a", [("t", 0, 1)])
    segment = sorted(env.shard("a").log.directory.glob("*.log"))[-1]
    with open(segment, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x09\x00\x00\x01\x00")  # half a batch header
    size = segment.stat().st_size
    view = view_of(env, group="a")
    assert view.partitions[0].problem and "torn tail" in view.partitions[0].problem
    assert view.partitions[0].shard.offsets["a"][("t", 0)].offset == 1
    assert segment.stat().st_size == size


async def test_compacted_log_gives_the_same_view(env):
    for i in range(20):
        env.commit_now("a", [("t", i % 4, i)])
        env.commit_now("b", [("u", i % 2, i)])
    env.delete("b", [("u", [0])])
    before = view_of(env)
    for lg in env.logs:
        lg.roll()
        await lg.compact(env.clock.now_ms())
    after = view_of(env)
    assert [pv.shard.persisted_view() for pv in after.partitions] == \
        [pv.shard.persisted_view() for pv in before.partitions]


async def test_expiry_preview_agrees_with_the_live_sweep(env):
    env.commit_now("simple", [("t", 0, 1)])
    env.clock.advance(2 * MINUTE)
    env.commit_now("simple", [("t", 1, 1)])
    env.commit_now("explicit", [("t", 0, 1)], version=3, retention=3 * MINUTE)
    group = env.consumer_group("c", {"m1": ["t"]})
    await env.persist_group(group)
    env.commit_now("c", [("t", 0, 1), ("u", 0, 1)], generation=1, member="m1")
    env.empty_group(group)
    env.consumer_group("c", {"m2": ["t"]})
    await env.persist_group(env.shard("c").groups["c"])
    preview = expiry_preview(view_of(env), RETENTION)
    assert {(e.group, e.topic, e.partition, e.reason) for e in preview} == {
        ("simple", "t", 0, "simple-group"), ("simple", "t", 1, "simple-group"),
        ("simple", None, None, "last offset expired"),
        ("explicit", "t", 0, "explicit expire_timestamp"),
        ("explicit", None, None, "last offset expired"),
        ("c", "u", 0, "unsubscribed-topic")}
    due: dict[int, list] = {}
    for entry in preview:
        if entry.topic is not None:
            due.setdefault(entry.at_ms, []).append(entry)
    for at in sorted(due):  # the live sweep removes each one exactly at the previewed time
        env.clock.advance(at - 1 - env.clock.now_ms())
        env.coordinator.expiry.sweep()
        assert all((e.topic, e.partition) in env.committed(e.group) for e in due[at])
        env.clock.advance(1)
        env.coordinator.expiry.sweep()
        assert not any((e.topic, e.partition) in env.committed(e.group) for e in due[at])
    assert env.committed("c") == {("t", 0): 1}
    assert "simple" not in env.shard("simple").groups and "explicit" not in env.shard("explicit").groups


def test_parse_time():
    assert parse_time("1700000000000") == 1700000000000
    assert parse_time("2023-11-14T22:13:20Z") == 1700000000000
    assert parse_time("2023-11-14T22:13:20") == 1700000000000
    assert parse_time("2023-11-15T00:13:20+02:00") == 1700000000000


async def test_cli_json_and_text(env, tmp_path, capsys):
    env.commit_now("a", [("t", 0, 7, "meta")])
    assert env.commit_now("a", [("nope", 0, 1)]) == [E.UNKNOWN_TOPIC_OR_PARTITION]
    os.environ.pop("KAFKA_LOG_DIRS", None)
    assert cli.main(["offsets", "--data-dir", str(env.root), "--group", "a", "--json",
                     "--expiry-preview", "--retention-minutes", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["groups"][0]["offsets"][0]["offset"] == 7
    assert doc["groups"][0]["offsets"][0]["metadata"] == "meta"
    assert doc["expiry_preview"][0]["at_ms"] == env.clock.now_ms() + MINUTE
    assert cli.main(["offsets", "--override", f"log.dirs={env.root}"]) == 0
    text = capsys.readouterr().out
    assert "group 'a'" in text and '"meta"' in text
    assert cli.main(["offsets", "--data-dir", str(tmp_path / "nothing-here")]) == 1


def test_run_writes_to_the_given_stream(tmp_path):
    (tmp_path / "__consumer_offsets-0").mkdir()
    args = cli.build_parser().parse_args(["offsets", "--data-dir", str(tmp_path)])
    out = StringIO()
    assert args.func.__name__ == "cmd_offsets"
    from odradek.broker.offsets_view import run

    assert run(args, out) == 0
    assert out.getvalue() == "no groups\n"
