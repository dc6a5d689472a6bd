"""``odradek serve`` loads only what its configuration uses.

A default broker (one PLAINTEXT listener, no metrics port, no authorizer, no
control endpoint, no log to clean) must not import the metrics exporter, the
TLS/SASL/ACL code, the control endpoint, the cleaner, the pipeline or their
third-party packages: each costs start-up time every test suite pays again and
again.  The child runs the ``odradek serve`` command (on a loop of its own),
answers a request over TCP, and reports its ``sys.modules``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from odradek.testing.process import free_port

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import asyncio, gc, json, os, signal, socket, struct, sys
from odradek.broker import cli

# each collection: whether it ran while the serve command loaded its modules (logging set up, the
# broker's modules not all imported yet: gcpolicy is the last _serve imports)
collections = []
gc.callbacks.append(lambda phase, info: phase == "start" and collections.append(
    "structlog" in sys.modules and "odradek.broker.gcpolicy" not in sys.modules))

async def drive(coro):
    serving = asyncio.ensure_future(coro)
    while True:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", PORT)
            break
        except OSError:
            await asyncio.sleep(0.01)
    writer.write(struct.pack(">ihhih", 10, 18, 0, 1, 0))  # ApiVersions v0
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    await reader.readexactly(size)
    writer.close()
    loaded = sorted(name for name, module in sys.modules.items() if module is not None)
    collector = {"enabled": gc.isenabled(), "frozen": gc.get_freeze_count(),
                 "while_importing": sum(collections), "after": len(collections) - sum(collections)}
    os.kill(os.getpid(), signal.SIGTERM)
    await serving
    print(json.dumps({"modules": loaded, "gc": collector}))
    return 0

cli._run = lambda coro: asyncio.run(drive(coro))  # the serve command itself, on a loop of ours
sys.exit(cli.main(sys.argv[1:]))
"""

# (module, what would have loaded it): none of these may be in a default broker
UNNEEDED = [
    "prometheus_client",  # metrics only with metrics.port
    "odradek.broker.metrics_families",
    "scramp",
    "odradek.broker.security.tls",  # TLS only for a TLS listener
    "odradek.broker.security.oauthbearer",  # SASL only for a SASL listener
    "odradek.broker.security.plain",
    "odradek.broker.security.authenticator",
    "odradek.broker.security.mechanism",
    "odradek.broker.security.jaas",
    "odradek.broker.security.scram",  # also for SCRAM credentials: only once a user exists
    "odradek.broker.security.authorizer",  # ACLs only with authorizer.class.name
    "odradek.broker.security.guards",
    "odradek.broker.security.acls",
    "odradek.web.control",  # only with odradek.control.listener
    "odradek.storage.cleaner",  # only when a log needs cleaning
    "odradek.broker.otlp",  # client telemetry: protobuf only on the first PushTelemetry
    "google.protobuf",
    "opentelemetry",
    "crc32c",  # only on the first checksum
    "odradek.pipeline",
    "pyspark",
    "aiohttp",  # the schema registry (on by default): its HTTP stack on its first connection
    "odradek.web.http",
    "odradek.web.registry",
    "jinja2",  # the web console (on by default): built on its first connection too
    "odradek.web.console",
    "fastavro",  # ... and its parsers on the first schema of their type
    "jsonschema",
    "re2",  # google-re2: only on a consumer group's first regex subscription (KIP-848)
    "greenlet",  # structlog's integrations serve never uses (cli._LOGGING_EXTRAS)
    "twisted",
    "shutil",  # (and bz2, lzma): argparse's help formatter and rare file operations (cli._Formatter)
    "bz2",
    "lzma",
    "difflib",  # a typo's suggestion only
    "random",  # the first incremental fetch session
    "xxhash",  # consumer groups' (KIP-848) metadata hash
    "ctypes",  # kernel AIO fsync: with the first fsync (log.fsync.mode=never by default)
] + ([] if sys.platform == "win32" else ["colorama"])

# the schema registry's store and its modules: only with odradek.schema.registry.listener set
REGISTRY = ["odradek.broker.schema_registry", "odradek.registry.operations", "odradek.registry.state",
            "odradek.registry.schemas"]


def loaded_modules(tmp_path: Path, *settings: str) -> set[str]:
    return set(serve_child(tmp_path, *settings)["modules"])


def serve_child(tmp_path: Path, *settings: str) -> dict:
    """What the child reports once its broker answered: ``modules`` and ``gc``."""
    port = free_port()
    args = ["serve", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", f"log.dirs={tmp_path / 'data'}"]
    for setting in settings:
        args += ["--override", setting]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", CHILD.replace("PORT", str(port)), *args], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_default_serve_does_not_import_unneeded_modules(tmp_path):
    loaded = loaded_modules(tmp_path)
    assert "odradek.broker.app" in loaded  # the child really ran the broker
    assert [m for m in UNNEEDED if m in loaded] == []


def test_serve_loads_its_modules_without_collecting_and_serves_with_the_collector_on(tmp_path):
    """The ~80 young collections an import ran found nothing to free (BENCHMARKS.md): the serve
    command turns the collector off while it imports, and on again, the imports frozen, before
    the broker loads its state and answers."""
    report = serve_child(tmp_path)["gc"]
    assert report["while_importing"] == 0
    assert report["enabled"] is True
    assert report["after"] >= 1  # GcPolicy.install's collection, before the first answer
    assert report["frozen"] > 0


def test_a_broker_without_the_schema_registry_does_not_load_it(tmp_path):
    loaded = loaded_modules(tmp_path, "odradek.schema.registry.listener=", "odradek.console.listener=")
    assert "odradek.broker.app" in loaded
    assert [m for m in REGISTRY if m in loaded] == []


def test_the_control_endpoint_binds_without_loading_aiohttp(tmp_path):
    loaded = loaded_modules(tmp_path, "odradek.control.listener=0")
    assert "odradek.web.control" in loaded and "aiohttp" not in loaded


def test_metrics_port_loads_the_exporter(tmp_path):
    loaded = loaded_modules(tmp_path, "metrics.port=0")
    assert "prometheus_client" in loaded



@pytest.mark.parametrize("argv", [["--print-config"], ["--override", "log.dirs="]])
def test_a_serve_that_returns_before_serving_leaves_the_collector_on(tmp_path, argv):
    """The serve command, run in someone else's process, never leaves it without collections:
    not when it only prints the configuration, nor when the configuration is unusable."""
    child = ("import gc, sys\nfrom odradek.broker import cli\n"
             "status = cli.main(sys.argv[1:])\nprint(status, gc.isenabled())\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", child, "serve", "--override",
                          f"listeners=PLAINTEXT://127.0.0.1:{free_port()}", *argv],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.split()[-1] == "True", out.stderr
