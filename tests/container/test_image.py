"""The image as built: its user, its health check, its KAFKA_* configuration, its refusals."""

from __future__ import annotations

import os
import signal

import pytest

pytestmark = [pytest.mark.container, pytest.mark.timeout(600)]


def test_image_keeps_its_health_check_and_runs_as_one_user_and_group(engine):
    image = engine.inspect_image()
    check = image.get("Healthcheck") or image["Config"].get("Healthcheck")  # podman, docker
    assert check and check["Test"][:3] == ["CMD", "odradek", "health"], image
    out = engine("run", "--rm", "--entrypoint", "id", engine.image)
    assert out.stdout.split() == ["uid=10001(odradek)", "gid=10001(odradek)", "groups=10001(odradek)"]
    c = engine.run(mount=engine.volume())
    c.wait_healthy()
    owners = engine("exec", c.name, "stat", "-c", "%u:%g %n", "/var/lib/odradek",
                    "/var/lib/odradek/meta.properties", "/var/lib/odradek/.lock").stdout.splitlines()
    assert [line.split()[0] for line in owners] == ["10001:10001"] * 3, owners


def test_kafka_variables_are_applied(engine):
    from confluent_kafka.admin import AdminClient, ConfigResource
    from kafka import KafkaProducer

    c = engine.run(env={"KAFKA_NUM_PARTITIONS": "3", "KAFKA_OFFSETS_RETENTION_MINUTES": "7",
                        "KAFKA_NODE_ID": "5"})
    c.wait_healthy()
    # advertised listeners: clients are sent to the published port, or nothing below would work
    producer = KafkaProducer(bootstrap_servers=c.bootstrap)
    try:
        assert producer.partitions_for("auto-created") == {0, 1, 2}  # auto-created: num.partitions
        producer.send("auto-created", b"x").get(timeout=30)
        brokers = producer._metadata.brokers()
        assert {(b.node_id, b.host, b.port) for b in brokers} == {(5, "127.0.0.1", c.port)}
    finally:
        producer.close()
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    resource = ConfigResource(ConfigResource.Type.BROKER, "5")
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    assert configs["offsets.retention.minutes"].value == "7"
    assert configs["num.partitions"].value == "3"


def test_health_follows_a_listener_moved_by_argument_and_fails_when_the_broker_stops_answering(engine):
    c = engine.run("--override", "listeners=PLAINTEXT://0.0.0.0:9093", inner_port=9093)
    c.wait_healthy(timeout=30)  # before the fix: probes 127.0.0.1:9092, "Connection refused"
    pid = c.host_pid()
    os.kill(pid, signal.SIGSTOP)  # the process lives but answers nothing
    try:
        result = c.health()
        assert result.returncode == 1, result.stdout + result.stderr
    finally:
        os.kill(pid, signal.SIGCONT)
    c.wait_healthy(timeout=30)


def test_second_container_on_the_same_volume_refuses_naming_the_holder(engine):
    volume = engine.volume()
    first = engine.run(mount=volume)
    first.wait_healthy()
    second = engine.run(mount=volume)
    assert second.wait_exit() == 1
    logs = second.logs()
    holder = first.inspect()["Config"]["Hostname"]
    assert "in use by another broker" in logs
    assert holder in logs, logs  # the first container's hostname (its id), not only "pid 1"
    assert first.running()


def test_root_owned_bind_mount_says_to_chown_then_works_once_chowned(engine, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to make a root-owned directory and chown it")
    data = tmp_path / "data"
    data.mkdir()
    os.chown(data, 0, 0)
    data.chmod(0o755)
    refused = engine.run(mount=str(data))
    assert refused.wait_exit() == 1
    assert "chown -R 10001:10001" in refused.logs(), refused.logs()
    os.chown(data, 10001, 10001)
    c = engine.run(mount=str(data))
    c.wait_healthy()
    assert (data / "meta.properties").stat().st_uid == 10001
