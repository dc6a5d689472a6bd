"""``odradek offsets`` on the data dir of a running broker: no lock taken, live commits visible."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.integration.test_offsets_clients import new_topic, unique

pytestmark = pytest.mark.integration


def test_offsets_command_reads_a_running_brokers_data_dir(broker):
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.structs import OffsetAndMetadata

    bs = broker.bootstrap_servers
    topic, group = new_topic(bs, 3), unique("g")
    admin = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=10000)
    try:
        admin.alter_group_offsets(group, {TopicPartition(topic, p): OffsetAndMetadata(10 + p, "x", 1)
                                          for p in range(3)})
    finally:
        admin.close()
    out = subprocess.run([sys.executable, "-m", "odradek.broker.cli", "offsets", "--data-dir",
                          str(broker.data_dir), "--group", group, "--json", "--expiry-preview"],
                         capture_output=True, text=True, timeout=60, check=True)
    doc = json.loads(out.stdout)
    (g,) = doc["groups"]
    assert g["group"] == group and g["state"] == "Empty" and g["protocol_type"] is None
    assert [(o["topic"], o["partition"], o["offset"], o["leader_epoch"], o["metadata"])
            for o in g["offsets"]] == [(topic, p, 10 + p, 1, "x") for p in range(3)]
    assert {e["reason"] for e in doc["expiry_preview"]} == {"simple-group", "last offset expired"}
    assert broker.app is not None  # still serving: the command took no lock
