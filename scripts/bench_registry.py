#!/usr/bin/env python3
"""The schema registry's HTTP throughput, side by side with the ceiling of its HTTP library.

Runs ``odradek serve`` (its registry on a free port) and, as the yardstick, a bare aiohttp
server answering one constant JSON body on the same loop kind (uvloop when installed, as
``odradek serve``), each its own process.  The client (this process, aiohttp, keep-alive
connections) measures, alternating rounds:

- cached ``GET /schemas/ids/{id}`` requests/s against the registry, and the same GETs
  against the bare route: the ratio is what the registry's routing, lookup and rendering
  cost on top of Python HTTP (issue 35's target: >= 0.5x);
- registrations/s: ``POST /subjects/{s}/versions`` of distinct schemas, each durable in
  ``_schemas`` before it is answered.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from odradek.testing.process import free_port, serving  # noqa: E402

BARE = r"""
import sys
from aiohttp import web
BODY = b'{"schema":"{\\"type\\":\\"record\\",\\"name\\":\\"R\\",\\"fields\\":[{\\"name\\":\\"a\\",\\"type\\":\\"int\\"}]}"}'
async def constant(request):
    return web.Response(body=BODY, content_type="application/vnd.schemaregistry.v1+json")
app = web.Application()
app.router.add_get("/schemas/ids/{id}", constant)
try:
    import uvloop
    loop_factory = uvloop.new_event_loop
except ImportError:
    loop_factory = None
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None,
            **({"loop": loop_factory()} if loop_factory else {}))
"""

SCHEMA = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}


async def wait_http(url: str, timeout: float = 30.0) -> None:
    import aiohttp

    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while True:
            try:
                async with session.get(url) as response:
                    await response.read()
                    return
            except aiohttp.ClientError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.05)


async def get_rate(url: str, seconds: float, connections: int) -> float:
    """GETs of ``url`` per second over ``connections`` keep-alive connections."""
    import aiohttp

    done = 0
    stop = time.perf_counter() + seconds
    connector = aiohttp.TCPConnector(limit=connections)
    async with aiohttp.ClientSession(connector=connector) as session:
        async def worker() -> None:
            nonlocal done
            while time.perf_counter() < stop:
                async with session.get(url) as response:
                    await response.read()
                    assert response.status == 200, response.status
                done += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(connections)))
        return done / (time.perf_counter() - started)


async def register_rate(url: str, count: int, connections: int, prefix: str) -> float:
    """Registrations of ``count`` distinct schemas (a subject each) per second."""
    import aiohttp

    bodies = [json.dumps({"schema": json.dumps({**SCHEMA, "name": f"R{prefix}{i}"})}) for i in range(count)]
    queue = list(enumerate(bodies))
    headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=connections)) as session:
        async def worker() -> None:
            while queue:
                i, body = queue.pop()
                async with session.post(f"{url}/subjects/bench-{prefix}-{i}/versions", data=body,
                                        headers=headers) as response:
                    await response.read()
                    assert response.status == 200, response.status

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(connections)))
        return count / (time.perf_counter() - started)


async def measure(registry: str, bare: str, rounds: int, seconds: float, connections: int,
                  registrations: int) -> None:
    await wait_http(f"{registry}/subjects")
    await wait_http(f"{bare}/schemas/ids/1")
    async with __import__("aiohttp").ClientSession() as session:
        async with session.post(f"{registry}/subjects/bench/versions", json={"schema": json.dumps(SCHEMA)}) as r:
            schema_id = (await r.json())["id"]
    cached, ceiling, ratios, registered = [], [], [], []
    for n in range(rounds):
        a = await get_rate(f"{registry}/schemas/ids/{schema_id}", seconds, connections)
        b = await get_rate(f"{bare}/schemas/ids/{schema_id}", seconds, connections)
        cached.append(a)
        ceiling.append(b)
        ratios.append(a / b)
        registered.append(await register_rate(registry, registrations, connections, str(n)))
    print(f"rounds: {rounds} x {seconds:.0f} s, {connections} connections (python {sys.version.split()[0]})")
    print(f"GET /schemas/ids/{{id}} (registry):  median {statistics.median(cached):,.0f} req/s")
    print(f"GET, bare aiohttp constant route:   median {statistics.median(ceiling):,.0f} req/s")
    print(f"ratio registry/bare, round by round: median {statistics.median(ratios):.2f}x "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f}); target >= 0.5x")
    print(f"registrations (distinct schemas, durable): median {statistics.median(registered):,.0f} /s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--registrations", type=int, default=500)
    args = parser.parse_args()
    registry_port, bare_port = free_port(), free_port()
    bare = subprocess.Popen([sys.executable, "-c", BARE, str(bare_port)])
    try:
        with serving([f"odradek.schema.registry.listener=http://127.0.0.1:{registry_port}"]):
            asyncio.run(measure(f"http://127.0.0.1:{registry_port}", f"http://127.0.0.1:{bare_port}",
                                args.rounds, args.seconds, args.connections, args.registrations))
    finally:
        bare.terminate()
        bare.wait(10)


if __name__ == "__main__":
    main()
