#!/usr/bin/env python3
"""What security costs: handshakes per second and commit throughput over SASL_SSL vs PLAINTEXT.

One ``odradek serve`` process (uvloop, its CPU its own on this 2-core
machine) with four listeners -- PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL --
throw-away certificates and a user for PLAIN and SCRAM-SHA-256.  The client is
one asyncio process.

1. Handshake rate, ``--clients`` concurrent loops each opening a connection,
   getting in, sending ApiVersions and closing, for ``--seconds``:
   TCP only (PLAINTEXT), TLS (SSL), SASL PLAIN (SASL_PLAINTEXT), SCRAM-SHA-256
   (SASL_PLAINTEXT; the client's PBKDF2 is computed once and kept, as a client
   with a cached salted password would, so the figure is the exchange and the
   broker's work), and TLS + PLAIN (SASL_SSL).
2. Commit throughput: OffsetCommit v8, 1 partition, 16 connections each keeping
   ``--window`` requests in flight, over PLAINTEXT, SASL_PLAINTEXT, SSL and
   SASL_SSL (PLAIN) in turn, ``--runs`` rounds; each round prints the
   SASL_SSL / PLAINTEXT ratio (target >= 0.7).

The client runs on uvloop when installed, as the broker does.

    python scripts/bench_security.py [--runs 3] [--seconds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from odradek.broker.wire_client import AsyncClient, SyncClient, encode  # noqa: E402
from odradek.testing.process import SERVE, free_port, serve_args, stop  # noqa: E402
from odradek.testing.security import PLAIN_MODULE, make_security  # noqa: E402

_SIZE = struct.Struct(">i")
CONNECTIONS = 16
USER, PASSWORD = "bench", "bench-secret"
API_VERSIONS = encode(18, 3, 1, {"client_software_name": "bench", "client_software_version": "1"})


# --- broker --------------------------------------------------------------------------------------

class Broker:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="bench-security-"))
        settings, self.client = make_security("SASL_SSL", self.dir / "tls", username=USER, password=PASSWORD)
        self.ports = {name: free_port() for name in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}
        jaas = f'{PLAIN_MODULE} required user_{USER}="{PASSWORD}";'
        overrides = [
            "listeners=" + ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.ports.items()),
            f"log.dirs={self.dir / 'data'}", "log.level=warning", "log.format=json",
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256", f"sasl.jaas.config={jaas}",
            "ssl.keystore.type=PEM", f"ssl.keystore.location={settings['ssl.keystore.location']}",
        ]
        subprocess.run([sys.executable, "-m", "odradek.broker.cli", "format", "--data-dir", str(self.dir / "data"),
                        "--add-scram", f"SCRAM-SHA-256=[name={USER},password={PASSWORD}]"],
                       check=True, capture_output=True)
        self.proc = subprocess.Popen([*SERVE, *serve_args(overrides)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while True:
            try:
                with SyncClient("127.0.0.1", self.ports["PLAINTEXT"], timeout=1):
                    break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"broker did not start: {self.proc.stderr.read().decode()[-2000:]}") from None
                time.sleep(0.05)
        self.ssl = self.client.ssl_context()

    def cpu_seconds(self) -> float:
        """The broker process's user + system CPU time so far (/proc; 0 where there is none)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        stop(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)


# --- handshakes ------------------------------------------------------------------------------------

class ScramLogin:
    """SCRAM-SHA-256 client with the salted password computed once (scramp does the arithmetic)."""

    def __init__(self) -> None:
        self.salted: dict[tuple[bytes, int], bytes] = {}

    async def login(self, client: AsyncClient) -> None:
        import base64
        import hashlib
        import hmac
        import secrets

        handshake = await client.request(17, 1, {"mechanism": "SCRAM-SHA-256"})
        assert handshake.error_code == 0, handshake
        nonce = secrets.token_urlsafe(18)
        first_bare = f"n={USER},r={nonce}"
        answer = await client.request(36, 2, {"auth_bytes": ("n,," + first_bare).encode()})
        assert answer.error_code == 0, answer
        server_first = answer.auth_bytes.decode()
        fields = dict(item.split("=", 1) for item in server_first.split(","))
        salt, iterations = base64.b64decode(fields["s"]), int(fields["i"])
        key = (salt, iterations)
        if key not in self.salted:
            self.salted[key] = hashlib.pbkdf2_hmac("sha256", PASSWORD.encode(), salt, iterations)
        salted = self.salted[key]
        client_key = hmac.digest(salted, b"Client Key", "sha256")
        stored_key = hashlib.sha256(client_key).digest()
        final_bare = f"c=biws,r={fields['r']}"
        auth_message = f"{first_bare},{server_first},{final_bare}".encode()
        signature = hmac.digest(stored_key, auth_message, "sha256")
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
        final = await client.request(36, 2, {"auth_bytes": f"{final_bare},p={proof}".encode()})
        assert final.error_code == 0, final


async def one_handshake(broker: Broker, kind: str, scram: ScramLogin) -> None:
    listener = {"tcp": "PLAINTEXT", "tls": "SSL", "plain": "SASL_PLAINTEXT", "scram": "SASL_PLAINTEXT",
                "tls+plain": "SASL_SSL"}[kind]
    ctx = broker.ssl if listener in ("SSL", "SASL_SSL") else None
    sasl = (USER, PASSWORD) if kind in ("plain", "tls+plain") else None
    client = await AsyncClient.connect("127.0.0.1", broker.ports[listener], ssl_context=ctx, sasl_plain=sasl)
    try:
        if kind == "scram":
            await scram.login(client)
        client.writer.write(API_VERSIONS)
        size = _SIZE.unpack(await client.reader.readexactly(4))[0]
        await client.reader.readexactly(size)
    finally:
        # close with a reset: tens of thousands of sockets in TIME_WAIT would exhaust the client's
        # ports and slow whichever kind of handshake is measured next
        sock = client.writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        await client.close()


async def handshake_rate(broker: Broker, kind: str, clients: int, seconds: float) -> float:
    scram = ScramLogin()
    await one_handshake(broker, kind, scram)  # warm-up (and the SCRAM salted password)
    done = 0
    stop_at = time.perf_counter() + seconds

    async def loop() -> None:
        nonlocal done
        while time.perf_counter() < stop_at:
            await one_handshake(broker, kind, scram)
            done += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(loop() for _ in range(clients)))
    return done / (time.perf_counter() - t0)


# --- commit throughput ---------------------------------------------------------------------------------

def commit_frame(group: str) -> bytes:
    body = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "retention_time_ms": -1, "topics": [{"name": "bench", "partitions": [
                {"partition_index": 0, "committed_offset": 1000, "committed_leader_epoch": 0,
                 "commit_timestamp": -1, "committed_metadata": ""}]}]}
    return encode(8, 8, 1, body)


class Counter(asyncio.Protocol):
    """Counts size-prefixed responses after the stream that logged in hands its transport over."""

    def __init__(self, transport) -> None:
        self.transport = transport
        self.buf = bytearray()
        self.in_flight = 0
        self.done = 0
        self.waiter: asyncio.Future | None = None
        self.client: AsyncClient | None = None

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos = 0
        while len(buf) - pos >= 4:
            size = _SIZE.unpack_from(buf, pos)[0]
            if len(buf) - pos - 4 < size:
                break
            pos += 4 + size
            self.in_flight -= 1
            self.done += 1
        del buf[:pos]
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def connection_lost(self, exc) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError("closed"))


async def commit_rate(broker: Broker, listener: str, window: int, seconds: float) -> float:
    ctx = broker.ssl if listener in ("SSL", "SASL_SSL") else None
    sasl = (USER, PASSWORD) if listener.startswith("SASL_") else None
    counters = []
    for i in range(CONNECTIONS):
        client = await AsyncClient.connect("127.0.0.1", broker.ports[listener], ssl_context=ctx, sasl_plain=sasl)
        counter = Counter(client.writer.transport)
        counter.client = client  # a collected StreamWriter closes its transport
        client.writer.transport.set_protocol(counter)
        counters.append((counter, commit_frame(f"bench-{listener}-{i}")))
    stop_at = time.perf_counter() + seconds
    loop = asyncio.get_running_loop()

    async def drive(c: Counter, frame: bytes) -> None:
        while time.perf_counter() < stop_at:
            missing = window - c.in_flight
            if missing > 0:
                c.transport.write(frame * missing)
                c.in_flight += missing
            c.waiter = loop.create_future()
            await c.waiter
        while c.in_flight:
            c.waiter = loop.create_future()
            await c.waiter

    for c, frame in counters:  # warm-up
        c.transport.write(frame)
        c.in_flight += 1
    await asyncio.sleep(0.3)
    for c, _ in counters:
        c.done = 0
    t0 = time.perf_counter()
    await asyncio.gather(*(drive(c, f) for c, f in counters))
    elapsed = time.perf_counter() - t0
    for c, _ in counters:
        c.transport.close()
    return sum(c.done for c, _ in counters) / elapsed


def create_topic(broker: Broker) -> None:
    with SyncClient("127.0.0.1", broker.ports["PLAINTEXT"], timeout=30) as c:
        r = c.request(19, 5, {"topics": [{"name": "bench", "num_partitions": 1, "replication_factor": 1,
                                          "assignments": [], "configs": []}],
                              "timeout_ms": 30000, "validate_only": False})
    assert r.topics[0].error_code in (0, 36), r.topics[0]


def run_loop(coro):
    """The client on uvloop when installed (as the broker): asyncio's pure-Python TLS would make the
    client, not the broker, the bottleneck of the TLS figures on two cores."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--clients", type=int, default=4, help="concurrent handshake loops")
    parser.add_argument("--window", type=int, default=8, help="commits in flight per connection")
    args = parser.parse_args()
    broker = Broker()
    try:
        create_topic(broker)
        print(f"handshakes/s ({args.clients} concurrent clients, connect + get in + ApiVersions + close):")
        for kind in ("tcp", "tls", "plain", "scram", "tls+plain"):
            rates = [run_loop(handshake_rate(broker, kind, args.clients, args.seconds)) for _ in range(args.runs)]
            print(f"  {kind:<10} median {statistics.median(rates):8.0f}/s   runs "
                  + ", ".join(f"{r:.0f}" for r in rates))
        print(f"OffsetCommit v8, 1 partition, {CONNECTIONS} connections x {args.window} in flight (requests/s):")
        ratios, cpu = [], {}
        for run in range(args.runs):
            rates = {}
            for listener in ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL"):
                before = broker.cpu_seconds()
                rates[listener] = run_loop(commit_rate(broker, listener, args.window, args.seconds))
                # the broker's CPU per request over the whole slice (set-up and warm-up included)
                requests = rates[listener] * args.seconds
                cpu.setdefault(listener, []).append((broker.cpu_seconds() - before) / max(requests, 1) * 1e6)
            ratios.append(rates["SASL_SSL"] / rates["PLAINTEXT"])
            print(f"  round {run + 1}: " + "  ".join(f"{k} {v:7.0f}" for k, v in rates.items())
                  + f"  ratio SASL_SSL/PLAINTEXT {ratios[-1]:.2f}")
        print(f"  median ratio SASL_SSL / PLAINTEXT: {statistics.median(ratios):.2f} (target >= 0.70)")
        print("  broker CPU per commit (median, us; includes each slice's connection set-up): "
              + "  ".join(f"{k} {statistics.median(v):.1f}" for k, v in cpu.items()))
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
