"""Ordinary mistakes with the ``odradek`` command, as a user makes them: a real process each time.

A mistake ends with one line naming what to fix and a non-zero exit, never a Python traceback
(``--debug`` / ``ODRADEK_DEBUG=1`` bring it back); plus the small things a newcomer trips on.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys

import pytest

from odradek.protocol.records import Record, encode_batch
from tests.integration.test_cli import _serve, _wait_started
from tests.kafka_captures import KONSUMER

pytestmark = pytest.mark.integration

ODRADEK = [sys.executable, "-m", "odradek.broker.cli"]


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(ODRADEK + list(args), capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


def assert_one_line_error(out: subprocess.CompletedProcess, *names: str) -> None:
    """Non-zero exit, no traceback, and the message names each of ``names``."""
    assert out.returncode != 0, out
    assert "Traceback" not in out.stderr, out.stderr
    for name in names:
        assert name in out.stderr, out.stderr


# --- no tracebacks ----------------------------------------------------------------------------

def test_dump_log_into_a_pipe_closed_early(tmp_path):
    """``odradek dump-log … | head``: the reader leaves; we stop quietly."""
    segment = tmp_path / "t-0" / f"{0:020d}.log"
    segment.parent.mkdir()
    segment.write_bytes(b"".join(encode_batch([Record(i, 1000 + i, b"k", b"v" * 100)], base_offset=i)
                                 for i in range(3000)))  # ~0.5 MB of text: more than a pipe holds
    proc = subprocess.Popen(ODRADEK + ["dump-log", str(segment)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("Dumping")
    proc.stdout.close()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err, err


def test_dump_log_of_a_missing_file_names_it(tmp_path):
    missing = str(tmp_path / "nope.log")
    out = run("dump-log", missing)
    assert_one_line_error(out, missing, "No such file")
    assert len(out.stderr.strip().splitlines()) == 1


def test_debug_flag_and_variable_show_the_traceback(tmp_path):
    missing = str(tmp_path / "nope.log")
    for out in (run("dump-log", missing, "--debug"), run("--debug", "dump-log", missing),
                run("dump-log", missing, env={"ODRADEK_DEBUG": "1"})):
        assert out.returncode != 0
        assert "Traceback" in out.stderr and "FileNotFoundError" in out.stderr


def test_health_with_a_bad_address_says_what_it_expects():
    out = run("health", "--bootstrap", "nonsense")
    assert_one_line_error(out, "--bootstrap", "HOST:PORT")


def test_dump_log_of_a_file_that_is_not_a_log_says_so(tmp_path):
    text = tmp_path / "notes.log"
    text.write_text("these are my notes, not a Kafka log segment at all\n" * 3)
    out = run("dump-log", str(text))
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "not a Kafka log segment" in out.stdout
    assert "torn tail" not in out.stdout


def test_dump_log_of_a_dir_without_logs_says_so(tmp_path):
    out = run("dump-log", str(tmp_path))
    assert_one_line_error(out, str(tmp_path), "no .log files")


def test_a_log_dirs_that_is_a_file_names_the_setting(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    serve = run("serve", "--override", f"log.dirs={a_file}", "--override",
                "listeners=PLAINTEXT://127.0.0.1:0")
    assert_one_line_error(serve, "log.dirs", str(a_file), "not a directory")
    under = run("serve", "--data-dir", str(a_file / "sub"), "--override", "listeners=PLAINTEXT://127.0.0.1:0")
    assert_one_line_error(under, "log.dirs", str(a_file / "sub"))
    imp = run("import", str(tmp_path), "--data-dir", str(a_file))
    assert_one_line_error(imp, "--data-dir", str(a_file))


def test_import_of_a_missing_kafka_dir_names_it(tmp_path):
    out = run("import", str(tmp_path / "no-such-kafka"), "--data-dir", str(tmp_path / "data"))
    assert_one_line_error(out, str(tmp_path / "no-such-kafka"))


# --- small things a newcomer trips on ------------------------------------------------------------

def test_shutdown_says_groups_are_unloaded_and_kept(tmp_path):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    proc = _serve(tmp_path, env={"KAFKA_LOG_FORMAT": "json"})
    try:
        bootstrap = _wait_started(proc)["advertised"]
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        producer.send("orders", b"x").get(timeout=30)
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="billing", enable_auto_commit=False)
        consumer.assign([TopicPartition("orders", 0)])
        consumer.commit({TopicPartition("orders", 0): OffsetAndMetadata(1, "", -1)})
        consumer.close()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    events = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    unloaded = [e for e in events if e.get("group") == "billing" and e["event"] == "group.unloaded"]
    assert len(unloaded) == 1 and "kept on disk" in unloaded[0]["note"], events
    assert not [e for e in events if e.get("group") == "billing" and e.get("to") == "Dead"]


def test_import_takes_data_dir_like_offsets(tmp_path):
    """One way for every subcommand to name the data dir: --data-dir."""
    kafka_part = tmp_path / "kafka-logs" / "__consumer_offsets-0"
    kafka_part.mkdir(parents=True)
    key, value = KONSUMER["offset_commit", "03"]
    kafka_part.joinpath(f"{0:020d}.log").write_bytes(encode_batch([Record(0, 1672788047244, key, value)]))
    data = tmp_path / "data"
    out = run("import", str(tmp_path / "kafka-logs"), "--data-dir", str(data))
    assert out.returncode == 0, out.stderr
    assert (data / "__consumer_offsets-0").is_dir()
    shown = run("offsets", "--data-dir", str(data), "--json")
    assert shown.returncode == 0 and "kafkesc-devcluster-group-id" in shown.stdout
    for command in ("serve", "import", "offsets"):
        assert "--data-dir" in run(command, "--help").stdout, command


def test_health_timeout_help_shows_its_default():
    out = run("health", "--help")
    assert out.returncode == 0
    assert "(default: 5.0)" in " ".join(out.stdout.split())


def test_top_level_help_is_plain_text():
    out = run("--help")
    assert out.returncode == 0
    assert "``" not in out.stdout and ":func:" not in out.stdout
    assert "serve" in out.stdout and "--debug" in out.stdout


def test_a_misspelt_setting_warns_with_the_closest_name(tmp_path):
    out = run("serve", "--override", "num.partition=3", "--print-config")
    assert out.returncode == 0  # like Kafka: an unknown name is only a warning
    line = next(x for x in out.stdout.splitlines() if x.startswith("num.partition "))
    assert "unknown setting" in line and "did you mean num.partitions?" in line


# --- conveniences (issue 28) ---------------------------------------------------------------------

def _occupied_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def test_a_port_in_use_names_the_setting_to_change(tmp_path):
    with _occupied_port() as sock:
        port = sock.getsockname()[1]
        out = run("serve", "--data-dir", str(tmp_path), "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}")
        assert out.returncode == 1 and "Traceback" not in out.stderr
        failed = [json.loads(line) for line in out.stderr.splitlines() if '"broker.start_failed"' in line]
        assert failed, out.stderr
        error = failed[0]["error"]
        assert f"127.0.0.1:{port}" in error and "in use" in error and "listeners" in error and "--port" in error
        control = run("serve", "--data-dir", str(tmp_path), "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                      "--override", f"odradek.control.listener={port}")
        assert "odradek.control.listener" in control.stderr and "in use" in control.stderr, control.stderr


def test_serve_port_sets_the_listener_and_the_advertised_listener(tmp_path):
    from odradek.broker.wire_client import SyncClient

    with _occupied_port() as sock:
        port = sock.getsockname()[1]
    # the container image's settings: every interface, advertised as localhost:9092
    image = {"KAFKA_LISTENERS": "PLAINTEXT://0.0.0.0:9092", "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://localhost:9092",
             "KAFKA_LOG_FORMAT": "json"}
    proc = subprocess.Popen(ODRADEK + ["serve", "--port", str(port), "--data-dir", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **image})
    try:
        started = _wait_started(proc)
        assert started["advertised"] == f"localhost:{port}"
        assert started["listeners"][0].endswith(f"=0.0.0.0:{port}")
        with SyncClient("127.0.0.1", port) as c:
            brokers = c.request(3, 9, {"topics": None, "allow_auto_topic_creation": False}).brokers
        assert [(b.host, b.port) for b in brokers] == [("localhost", port)]
    finally:
        proc.kill()
        proc.wait()
    shown = run("serve", "--port", "19999", "--print-config")  # the default listener, on that port
    assert "PLAINTEXT://127.0.0.1:19999" in shown.stdout, shown.stdout
    assert_one_line_error(run("serve", "--port", "70000"), "--port")


def test_a_bad_flag_shows_the_subcommands_usage():
    out = run("serve", "--bogus")
    assert out.returncode == 2
    assert out.stderr.startswith("usage: odradek serve"), out.stderr
    assert "--bogus" in out.stderr and "{serve,format" not in out.stderr
    out = run("offsets", "--nope")
    assert out.stderr.startswith("usage: odradek offsets"), out.stderr


def test_offsets_on_a_path_that_is_not_a_config_file_says_so(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    out = run("offsets", str(data))
    assert_one_line_error(out, str(data), "not a config file", "--data-dir")
    notes = tmp_path / "notes.txt"
    notes.write_text("these are my notes\nnot a config\n")
    out = run("offsets", str(notes))
    assert_one_line_error(out, str(notes), "not a config file")
    binary = tmp_path / "00000000000000000000.log"
    binary.write_bytes(b"\x00\xff\xfe" * 10)
    assert_one_line_error(run("offsets", str(binary)), str(binary), "not a config file")
    config = tmp_path / "server.properties"
    config.write_text(f"# mine\nlog.dirs={data}\n")
    real = run("offsets", str(config))  # a real config file is read: its (empty) data dir, not the default
    assert "not a config file" not in real.stderr and f"no __consumer_offsets-N directories in {data}" in real.stderr


def _unshare_works() -> bool:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True, timeout=30).returncode == 0


@pytest.mark.skipif(not _unshare_works(), reason="needs root and unshare -m to mount a read-only file system")
def test_a_read_only_file_system_is_reported_as_such(tmp_path):
    mount = tmp_path / "ro"
    mount.mkdir()
    for data_dir in (mount, mount / "sub"):
        script = (f"mount -t tmpfs -o ro none {mount} && exec {sys.executable} -m odradek.broker.cli serve "
                  f"--data-dir {data_dir} --override listeners=PLAINTEXT://127.0.0.1:0")
        out = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")})
        assert_one_line_error(out, str(data_dir), "read-only file system", "log.dirs")
        assert "chown" not in out.stderr, out.stderr
