"""A cluster's layout and leader epochs survive restarts, and a start completes a move a crash cut
short (the layout is saved first, then the log truncated and the epoch history written)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from odradek.broker.cluster.layout import LAYOUT_FILE
from odradek.testing.handle import BrokerHandle
from odradek.testing.process import free_ports
from tests.integration.test_cluster_clients import fill, other_node, unique

pytestmark = pytest.mark.integration


def last_epoch(cluster, topic: str) -> tuple[int, int, int | None]:
    """(log start, log end, leader epoch of the last record) of ``topic``-0, as a confluent consumer sees it."""
    from confluent_kafka import Consumer, TopicPartition  # noqa: PLC0415

    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": unique("r")})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), 10)
        c.assign([TopicPartition(topic, 0, high - 1)])
        m = None
        for _ in range(50):
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                break
        return low, high, None if m is None else m.leader_epoch()
    finally:
        c.close()


def test_epochs_and_layout_survive_a_restart(tmp_path):
    with BrokerHandle(data_dir=tmp_path, brokers=3) as cluster:
        topic = unique("restart")
        cluster.create_topic(topic, 1, replication_factor=3)
        fill(cluster, topic, [b"a"] * 3, batch_each=True)
        node = other_node(cluster, topic)
        cluster.move_leader(topic, 0, node)
        down = next(n for n in (1, 2, 3) if n != node)
        cluster.node_down(down)
        before = cluster.layout(topic)
        cluster.restart()
        assert cluster.layout(topic) == before
        fill(cluster, topic, [b"b"], batch_each=True)
        assert last_epoch(cluster, topic) == (0, 4, 1)  # stamped with the epoch from before the restart
        cluster.node_up(down)


@pytest.mark.parametrize("crash_after", ["layout saved", "log truncated", "history written"])
def test_a_start_completes_an_unclean_move_a_crash_cut_short(tmp_path, crash_after):
    """A move saves the layout (epoch 1, the log to be cut at 2), truncates the log, writes the epoch
    history, then clears the pending cut; killed after any step, the next start ends in the same state."""
    from odradek.storage.leader_epochs import LeaderEpochCache  # noqa: PLC0415
    from odradek.storage.log import Log  # noqa: PLC0415

    with BrokerHandle(data_dir=tmp_path, brokers=3) as cluster:
        topic = unique("crash")
        cluster.create_topic(topic, 1, replication_factor=3)
        fill(cluster, topic, [b"a"] * 4, batch_each=True)
        state = cluster.layout(topic)["partitions"][f"{topic}-0"]
        node = other_node(cluster, topic)
        cluster._broker.stop()
        path = tmp_path / LAYOUT_FILE
        saved = json.loads(path.read_text())
        entry = next(e for e in saved["partitions"] if e["topic"] == topic)
        entry.update(leader=node, epoch=1, isr=[node], truncate_to=2)
        path.write_text(json.dumps(saved))
        partition_dir = tmp_path / f"{topic}-0"
        if crash_after != "layout saved":
            log = Log.open(partition_dir)
            log.truncate_to(2)
            log.close()
        if crash_after == "history written":
            LeaderEpochCache(partition_dir).assign(1, 2)
        cluster._broker.start()
        after = cluster.layout(topic)["partitions"][f"{topic}-0"]
        assert (after["leader_id"], after["leader_epoch"], after["isr_nodes"]) == (node, 1, [node])
        assert after["replica_nodes"] == state["replica_nodes"]
        assert (partition_dir / "leader-epoch-checkpoint").read_text() == "0\n1\n1 2\n"
        assert json.loads(path.read_text())["partitions"][0]["truncate_to"] is None
        fill(cluster, topic, [b"b"], batch_each=True)
        assert last_epoch(cluster, topic) == (0, 3, 1)


def test_reset_returns_to_the_initial_layout(tmp_path):
    with BrokerHandle(data_dir=tmp_path, brokers=3) as cluster:
        cluster.create_topic("kept-name", 1, replication_factor=3)
        initial = cluster.layout("kept-name")["partitions"]["kept-name-0"]
        cluster.move_leader("kept-name", 0, other_node(cluster, "kept-name"))
        cluster.move_coordinator(other_node(cluster, "__consumer_offsets"), group="g")
        cluster.node_down(initial["leader_id"])
        cluster.reset()
        layout = cluster.layout("__consumer_offsets")
        assert layout["down"] == [] and all(p["leader_epoch"] == 0 for p in layout["partitions"].values())
        cluster.create_topic("kept-name", 1, replication_factor=3)
        assert cluster.layout("kept-name")["partitions"]["kept-name-0"] == initial
        fill(cluster, "kept-name", [b"x"], batch_each=True)  # every broker listens again


def _start_serve(cli: list[str], tmp_path: Path, attempts: int = 5) -> tuple[subprocess.Popen, int, int]:
    """``odradek serve --brokers 3`` on a run of free ports, with its control endpoint on another:
    (process, first port, control port) once the broker says it started.  A start that fails (a
    port taken after all) is retried on other ports; the last failure's log is in the message."""
    lines: list[str] = []
    for _ in range(attempts):
        port = free_ports(3)
        control_port = free_ports(1)
        if control_port in range(port, port + 3):
            continue
        proc = subprocess.Popen(cli + ["serve", "--brokers", "3",
                                       "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                                       "--override", f"log.dirs={tmp_path}",
                                       "--override", f"odradek.control.listener=127.0.0.1:{control_port}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        lines = []
        for line in proc.stderr:  # ends at the start, or at EOF when the start failed
            lines.append(line)
            if json.loads(line)["event"] == "broker.started":
                threading.Thread(target=proc.stderr.read, daemon=True).start()  # the pipe never fills up
                return proc, port, control_port
        proc.wait(30)
    raise AssertionError("odradek serve --brokers 3 did not start:\n" + "".join(lines))


def test_serve_brokers_three_and_the_control_cli_take_a_broker_down(tmp_path):
    """``odradek serve --brokers 3`` on port P serves P, P+1 and P+2; ``odradek control node_down``
    closes one broker's port until ``node_up``."""
    cli = [sys.executable, "-m", "odradek.broker.cli"]
    proc, port, control_port = _start_serve(cli, tmp_path)
    try:
        def control(*argv: str) -> subprocess.CompletedProcess:
            return subprocess.run(cli + ["control", "--endpoint", f"127.0.0.1:{control_port}", *argv],
                                  capture_output=True, text=True, timeout=30)

        def listening(p: int) -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", p)) == 0

        assert all(listening(p) for p in (port, port + 1, port + 2))
        assert control("node_down", "node=2").returncode == 0
        assert not listening(port + 1) and listening(port)
        layout = json.loads(control("layout").stdout)
        assert layout["nodes"] == [1, 2, 3] and layout["down"] == [2]
        assert control("node_up", "node=2").returncode == 0
        assert listening(port + 1)
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("release", ["2.0", "3.5"])
def test_an_emulated_older_release_works_as_a_cluster(release):
    """Older Metadata/Produce/Fetch versions (no leader epochs before Metadata v7, no KIP-951 hints)
    route kafka-python across a leader move just the same."""
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition  # noqa: PLC0415
    from kafka.admin import NewTopic  # noqa: PLC0415

    with BrokerHandle(brokers=3, overrides={"odradek.emulate.kafka.version": release}) as cluster:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        admin.create_topics([NewTopic("old", 1, 2)])
        admin.close()
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
        for i in range(10):
            producer.send("old", str(i).encode(), partition=0).get(10)
            if i == 4:
                cluster.move_leader("old", 0, other_node(cluster, "old"))
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest",
                                 consumer_timeout_ms=3000)
        consumer.assign([TopicPartition("old", 0)])
        assert [int(m.value) for m in consumer] == list(range(10))
        consumer.close()


def test_a_crash_right_after_a_reset_keeps_the_initial_layout(tmp_path, monkeypatch):
    """The layout returns to the initial one while the reset's marker stands: killed the moment the
    reset is durable (its marker gone), the next start has every node up and every partition as placed."""
    from odradek.broker.control import reset as reset_module  # noqa: PLC0415

    with BrokerHandle(data_dir=tmp_path, brokers=3) as cluster:
        cluster.move_coordinator(other_node(cluster, "__consumer_offsets"), group="g")
        cluster.node_down(3)
        real = reset_module._remove_marker

        def crash(data_dir):
            real(data_dir)
            raise OSError("killed right after the reset's marker went")

        monkeypatch.setattr(reset_module, "_remove_marker", crash)
        with pytest.raises(Exception):  # noqa: B017  (however the control call reports it)
            cluster.reset()
        monkeypatch.setattr(reset_module, "_remove_marker", real)
        cluster._broker.stop()
        cluster._broker.start()
        layout = cluster.layout("__consumer_offsets")
        assert layout["down"] == [] and all(p["leader_epoch"] == 0 for p in layout["partitions"].values())
