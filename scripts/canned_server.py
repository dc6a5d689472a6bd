#!/usr/bin/env python3
"""The benchmarks' yardstick: an asyncio server answering every size-prefixed frame with one
fixed reply, no work per request (uvloop when installed, as ``odradek serve`` runs).

    python scripts/canned_server.py PORT REPLY_HEX

Imports nothing beyond asyncio, so started as a process it also measures what merely starting
a Python asyncio server costs (``bench_startup.py``); ``bench_offsets.py`` calls :func:`run`.
"""

import asyncio
import struct
import sys

_SIZE = struct.Struct(">i")


def run(port: int, reply: bytes) -> int:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = _SIZE.unpack(await reader.readexactly(4))[0]
                await reader.readexactly(size)
                writer.write(reply)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def serve() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", port)
        async with server:
            await server.serve_forever()

    try:
        import uvloop
    except ImportError:
        asyncio.run(serve())
    else:
        uvloop.run(serve())
    return 0


if __name__ == "__main__":
    sys.exit(run(int(sys.argv[1]), bytes.fromhex(sys.argv[2])))
