"""``__share_group_state`` records byte for byte as Kafka 4.2 writes them.

The expected bytes are written out below field by field from Kafka's record
definitions (``ShareSnapshotKey/Value.json``, ``ShareUpdateKey/Value.json``,
coordinator-record framing: int16 apiKey / int16 version prefixes), so they
do not depend on our codec; the ``shared`` test also holds our declarations
to Kafka's JSON when the reference folder is beside the checkout.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.shares import records as r

TOPIC = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
TOPIC_HEX = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"

# ShareSnapshotKey("g1", TOPIC, 3): int16 apiKey 0 | int16 len "g1" | uuid | int32 3
SNAPSHOT_KEY = bytes.fromhex("0000" "0002" "6731" + TOPIC_HEX + "00000003")
UPDATE_KEY = bytes.fromhex("0001" "0002" "6731" + TOPIC_HEX + "00000003")

# an Initialize snapshot: epochs 0/5/0, start 100, created=written at 1700000000000, no batches,
# delivery_complete_count 0 (tag 0 present because it differs from the default -1)
INIT_SNAPSHOT = bytes.fromhex(
    "0000"                  # value version 0
    "00000000"              # snapshot_epoch 0
    "00000005"              # state_epoch 5
    "00000000"              # leader_epoch 0
    "0000000000000064"      # start_offset 100
    "0000018bcfe56800"      # create_timestamp 1700000000000
    "0000018bcfe56800"      # write_timestamp
    "01"                    # state_batches: compact length 0 + 1
    "01" "00" "04" "00000000"  # tagged fields: one, tag 0, size 4, delivery_complete_count 0
)

# a snapshot with two batches and no delivery_complete_count (-1: what 4.1 wrote, no tag)
SNAPSHOT_BATCHES = bytes.fromhex(
    "0000" "00000002" "00000005" "00000001" "000000000000000a"
    "0000018bcfe56800" "0000018bcfe56be8"
    "03"                                                     # two batches
    "000000000000000a" "000000000000000c" "02" "0001" "00"  # 10..12 ACKNOWLEDGED x1
    "000000000000000d" "000000000000000d" "00" "0003" "00"  # 13 AVAILABLE x3
    "00"                                                     # no tagged fields
)

# an update: snapshot epoch 2, leader epoch -1 (unchanged), start -1 (unchanged), dcc 3, one batch
UPDATE = bytes.fromhex(
    "0000" "00000002" "ffffffff" "ffffffffffffffff"
    "02" "0000000000000014" "0000000000000016" "04" "0005" "00"  # 20..22 ARCHIVED x5
    "01" "00" "04" "00000003"
)


def test_keys_byte_exact():
    assert r.encode_key(r.ShareSnapshotKey("g1", TOPIC, 3)) == SNAPSHOT_KEY
    assert r.encode_key(r.ShareUpdateKey("g1", TOPIC, 3)) == UPDATE_KEY
    assert r.decode_key(SNAPSHOT_KEY) == r.ShareSnapshotKey("g1", TOPIC, 3)
    assert r.decode_key(UPDATE_KEY) == r.ShareUpdateKey("g1", TOPIC, 3)


def test_unknown_key_type_is_skipped_not_an_error():
    assert r.decode_key(bytes.fromhex("0002") + SNAPSHOT_KEY[2:]) is None


def test_initialize_snapshot_byte_exact():
    value = r.ShareSnapshotValue(snapshot_epoch=0, state_epoch=5, leader_epoch=0, start_offset=100,
                                 delivery_complete_count=0, create_timestamp=1_700_000_000_000,
                                 write_timestamp=1_700_000_000_000)
    assert r.encode_value(value) == INIT_SNAPSHOT
    assert r.decode_value(r.ShareSnapshotKey("g1", TOPIC, 3), INIT_SNAPSHOT) == value


def test_snapshot_with_batches_and_no_complete_count_byte_exact():
    value = r.ShareSnapshotValue(
        snapshot_epoch=2, state_epoch=5, leader_epoch=1, start_offset=10,
        create_timestamp=1_700_000_000_000, write_timestamp=1_700_000_001_000,
        state_batches=[r.StateBatch(10, 12, 2, 1), r.StateBatch(13, 13, 0, 3)])
    assert r.encode_value(value) == SNAPSHOT_BATCHES
    decoded = r.decode_value(r.ShareSnapshotKey("g1", TOPIC, 3), SNAPSHOT_BATCHES)
    assert decoded == value and decoded.delivery_complete_count == -1


def test_update_byte_exact():
    value = r.ShareUpdateValue(snapshot_epoch=2, leader_epoch=-1, start_offset=-1, delivery_complete_count=3,
                               state_batches=[r.StateBatch(20, 22, 4, 5)])
    assert r.encode_value(value) == UPDATE
    assert r.decode_value(r.ShareUpdateKey("g1", TOPIC, 3), UPDATE) == value


def test_tombstone_and_bad_values():
    key = r.ShareSnapshotKey("g1", TOPIC, 3)
    assert r.encode_value(None) is None and r.decode_value(key, None) is None
    with pytest.raises(r.ShareRecordDecodeError):
        r.decode_value(key, b"\x00")
    with pytest.raises(r.ShareRecordDecodeError):
        r.decode_value(key, b"\x00\x01" + INIT_SNAPSHOT[2:])
    with pytest.raises(r.ShareRecordDecodeError):
        r.decode_value(key, INIT_SNAPSHOT[:-3])
    with pytest.raises(r.ShareRecordEncodeError):
        r.encode_value(r.ShareUpdateValue(snapshot_epoch=0, leader_epoch=0, start_offset=0,
                                          state_batches=[r.StateBatch(0, 0, 0, 40000)]))


def test_unknown_tags_and_trailing_bytes_are_skipped():
    # tag 7 (2 bytes) beside tag 0; Kafka's reader skips tags it does not know
    data = UPDATE[:-7] + bytes.fromhex("02" "00" "04" "00000003" "07" "02" "abcd") + b"trailing"
    assert r.decode_value(r.ShareUpdateKey("g1", TOPIC, 3), data).delivery_complete_count == 3


def test_state_partition_is_javas_hash_of_group_topic_partition():
    # "g1:Dx4tPEtaaXiHlqW0w9Lh8A:3": java hashCode computed by hand below, Utils.abs, mod 50
    text = "g1:" + r.kafka_uuid_text(TOPIC) + ":3"
    assert r.kafka_uuid_text(TOPIC) == "Dx4tPEtaaXiHlqW0w9Lh8A"
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) % 2**32
    h = h - 2**32 if h >= 2**31 else h
    assert r.state_partition_for("g1", TOPIC, 3, 50) == abs(h) % 50


_batch = st.builds(r.StateBatch, st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1),
                   st.sampled_from([0, 2, 4]), st.integers(0, 2**15 - 1))


@given(st.builds(r.ShareUpdateValue, snapshot_epoch=st.integers(-1, 2**31 - 1),
                 leader_epoch=st.integers(-1, 2**31 - 1), start_offset=st.integers(-1, 2**63 - 1),
                 delivery_complete_count=st.integers(-1, 2**31 - 1), state_batches=st.lists(_batch, max_size=5)))
def test_update_roundtrip(value):
    assert r.decode_value(r.ShareUpdateKey("g", TOPIC, 0), r.encode_value(value)) == value


SPECS = Path(__file__).resolve().parents[2].parent / "shared" / "kafka-spec" / "kafka-4.2" / "records"


@pytest.mark.shared
@pytest.mark.skipif(not SPECS.is_dir(), reason=f"Kafka 4.2's record specs not found at {SPECS} "
                                               "(optional; kept outside the repository)")
@pytest.mark.parametrize("name,ours", [
    ("ShareSnapshotKey", r.SHARE_SNAPSHOT_KEY), ("ShareUpdateKey", r.SHARE_UPDATE_KEY),
    ("ShareSnapshotValue", r.SHARE_SNAPSHOT_VALUE), ("ShareUpdateValue", r.SHARE_UPDATE_VALUE)])
def test_declared_as_kafka_42_json(name, ours):
    text = (SPECS / f"{name}.json").read_text(encoding="utf-8")
    spec = json.loads("\n".join(ln for ln in text.splitlines() if not ln.strip().startswith("//")))

    def shape(fields):
        return [(re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", f["name"]).lower(),
                 f["type"].replace("[]StateBatch", "[]"), f.get("tag"), shape(f.get("fields", [])))
                for f in fields]

    def ours_shape(fields):
        return [(f.name, f.type, f.tag, ours_shape(f.fields or [])) for f in fields]

    assert ours_shape(ours.fields) == shape(spec["fields"])
    assert spec["apiKey"] == (r.SNAPSHOT_KEY_TYPE if "Snapshot" in name else r.UPDATE_KEY_TYPE)
    assert (spec["flexibleVersions"] == "none") == name.endswith("Key")
