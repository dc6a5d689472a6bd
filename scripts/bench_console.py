#!/usr/bin/env python3
"""What the web console costs the broker's clients, and what browsing a big partition costs in memory.

``odradek serve`` runs in its own process with the console on.  One Kafka client commits offsets
back to back (OffsetCommit v8, one partition, a simple group) while, in alternating phases of
``--seconds``, either nobody looks or ``--tabs`` console tabs refresh the group's lag every
``--interval`` seconds (what an open group page's htmx poll does, staggered across the tabs).
Printed: the commit p50/p99 with and without the tabs, each phase kind pooled over ``--rounds``
alternations, and the ratio -- side by side in one run.

Then ``--browse-mb`` MiB are written to one partition and browsed a page at a time from twenty
offsets spread over it, oldest first and newest first: the broker's peak RSS growth (``VmHWM``
after ``clear_refs``) against what one page's Fetch asks for (``reads.FETCH_BYTES``, a batch bigger than that
coming whole).

    python scripts/bench_console.py [--tabs 50] [--seconds 5] [--rounds 3] [--browse-mb 256]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from odradek.broker.wire_client import AsyncClient  # noqa: E402
from odradek.testing.process import free_port, memory_mb, reset_peak, serving  # noqa: E402
from odradek.web.console.reads import FETCH_BYTES  # noqa: E402

CREATE_TOPICS, PRODUCE, OFFSET_COMMIT = 19, 0, 8
GROUP, TOPIC = "bench-group", "bench-lag"


async def create_topic(client: AsyncClient, name: str, partitions: int) -> None:
    answer = await client.request(CREATE_TOPICS, 5, {"timeout_ms": 30000, "validate_only": False, "topics": [
        {"name": name, "num_partitions": partitions, "replication_factor": -1, "assignments": [], "configs": []}]})
    assert answer.topics[0].error_code == 0, answer


async def produce(client: AsyncClient, topic: str, partition: int, values: list[bytes]) -> None:
    from odradek.protocol.records import encode_batch

    answer = await client.request(PRODUCE, 8, {"transactional_id": None, "acks": 1, "timeout_ms": 30000,
                                               "topic_data": [{"name": topic, "partition_data": [
                                                   {"index": partition, "records": encode_batch(
                                                       [(None, v) for v in values])}]}]})
    assert answer.responses[0].partition_responses[0].error_code == 0, answer


def commit_body(offset: int) -> dict:
    return {"group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": TOPIC, "partitions": [{"partition_index": offset % 4, "committed_offset": offset,
                                                       "committed_leader_epoch": -1, "committed_metadata": ""}]}]}


async def commit_for(client: AsyncClient, seconds: float, start: int) -> list[float]:
    """Commit back to back for ``seconds``; each commit's latency in ms."""
    out = []
    end = time.perf_counter() + seconds
    n = start
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        await client.request(OFFSET_COMMIT, 8, commit_body(n))
        out.append((time.perf_counter() - t0) * 1000)
        n += 1
    return out


async def tab(http: aiohttp.ClientSession, url: str, interval: float, delay: float, stop: asyncio.Event,
              served: list[int]) -> None:
    await asyncio.sleep(delay)
    while not stop.is_set():
        async with http.get(f"{url}group/lag?id={GROUP}") as r:
            await r.read()
            served.append(r.status)
        try:
            await asyncio.wait_for(stop.wait(), interval)
        except TimeoutError:
            pass


def p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=1000)[int(q * 1000) - 1] if len(values) > 10 else max(values)


async def lag_load(port: int, console: str, args) -> None:
    client = await AsyncClient.connect("127.0.0.1", port)
    await create_topic(client, TOPIC, 4)
    for partition in range(4):
        await produce(client, TOPIC, partition, [b"x" * 100] * 1000)
    await commit_for(client, 1.0, 0)  # warm up
    quiet: list[float] = []
    looked: list[float] = []
    pages: list[int] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        async with http.get(console) as r:
            assert r.status == 200, r.status
        for _ in range(args.rounds):
            quiet += await commit_for(client, args.seconds, 0)
            stop = asyncio.Event()
            tabs = [asyncio.create_task(tab(http, console, args.interval, i * args.interval / args.tabs, stop, pages))
                    for i in range(args.tabs)]
            await asyncio.sleep(args.interval)  # every tab is polling
            looked += await commit_for(client, args.seconds, 0)
            stop.set()
            await asyncio.gather(*tabs)
    await client.close()
    assert set(pages) == {200}, set(pages)
    q99, l99 = p(quiet, 0.99), p(looked, 0.99)
    print(f"commit latency, {args.rounds} x {args.seconds:.0f} s per kind, alternating:")
    print(f"  no console tab:            {len(quiet):6d} commits, p50 {statistics.median(quiet):.2f} ms, "
          f"p99 {q99:.2f} ms")
    print(f"  {args.tabs} tabs polling lag/{args.interval:.0f}s: {len(looked):6d} commits, "
          f"p50 {statistics.median(looked):.2f} ms, p99 {l99:.2f} ms  ({len(pages)} lag pages served)")
    print(f"  ratio p99 with/without: {l99 / q99:.2f}x (target <= 2x); "
          f"p50 {statistics.median(looked) / statistics.median(quiet):.2f}x")


async def browse_memory(proc, port: int, console: str, megabytes: int) -> None:
    client = await AsyncClient.connect("127.0.0.1", port)
    await create_topic(client, "bench-big", 1)
    value = b"v" * 1000
    chunk = [value] * 1000  # ~1 MB per produce
    for _ in range(megabytes):
        await produce(client, "bench-big", 0, chunk)
    await client.close()
    records = megabytes * 1000
    async with aiohttp.ClientSession() as http:
        for order in ("oldest", "newest"):  # the pages' code paths are warm before the peak is reset
            async with http.get(f"{console}messages?topic=bench-big&partition=0&at=50&order={order}&format=hex") as r:
                await r.read()
        before = memory_mb(proc.pid)["VmRSS"]
        reset_peak(proc.pid)
        t0 = time.perf_counter()
        for i in range(20):
            for order, at in (("oldest", records * i // 20), ("newest", records * i // 20 + 50)):
                async with http.get(f"{console}messages?topic=bench-big&partition=0&at={at}&order={order}"
                                    "&format=hex") as r:
                    assert r.status == 200 and (await r.text()).count('class="message"') == 50
        took = time.perf_counter() - t0
    peak = memory_mb(proc.pid)["VmHWM"]
    print(f"browsing a {megabytes} MiB partition ({records} records), 40 pages at 20 offsets: "
          f"{took / 40 * 1000:.0f} ms a page; peak RSS {peak - before:+.1f} MiB over {before:.1f} MiB "
          f"(one Fetch of a page asks for {FETCH_BYTES >> 10} KiB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tabs", type=int, default=50)
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between a tab's refreshes (htmx's)")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--browse-mb", type=int, default=256, help="0: skip the browsing run")
    args = parser.parse_args()
    console_port = free_port()
    console = f"http://127.0.0.1:{console_port}/"
    with serving([f"odradek.console.listener={console}", "odradek.schema.registry.listener="]) as (proc, port):
        deadline = time.monotonic() + 30
        asyncio.run(_wait_console(console, deadline))
        asyncio.run(lag_load(port, console, args))
        if args.browse_mb:
            asyncio.run(browse_memory(proc, port, console, args.browse_mb))


async def _wait_console(url: str, deadline: float) -> None:
    async with aiohttp.ClientSession() as http:
        while True:
            try:
                async with http.get(url) as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("the console never answered")
            await asyncio.sleep(0.1)


if __name__ == "__main__":
    main()
