"""``__transaction_state`` keys and values, byte for byte as Kafka's ``TransactionLog`` writes them."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.protocol.schema import Versions
from odradek.transactions.records import (
    TRANSACTION_LOG_KEY,
    TRANSACTION_LOG_VALUE,
    TxnKey,
    TxnRecordError,
    TxnValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    value_version,
)
from odradek.transactions.replay import TxnMetadata, replay
from odradek.transactions.state import ALLOWED_SOURCES, IllegalTransition, TxnState, check_transition

SPEC_RECORDS = Path(__file__).resolve().parents[2].parent / "shared" / "kafka-spec" / "records"

EMPTY = TxnValue(producer_id=1000, producer_epoch=0, timeout_ms=60000, state=TxnState.EMPTY,
                 partitions=None, last_update_ms=0x0102030405060708, start_ms=-1)


# --- embedded bytes (Kafka's TransactionLog.valueToBytes at transaction.version 0) -----------

def test_key_bytes():
    assert encode_key(TxnKey("txn-1")) == bytes.fromhex("0000 0005 74786e2d31")


def test_empty_value_bytes_carry_a_null_partition_list():
    assert encode_value(EMPTY) == bytes.fromhex(
        "0000" "00000000000003e8" "0000" "0000ea60" "00" "ffffffff" "0102030405060708" "ffffffffffffffff")


def test_ongoing_value_bytes_group_partitions_by_topic():
    value = TxnValue(producer_id=7, producer_epoch=3, timeout_ms=1000, state=TxnState.ONGOING,
                     partitions=(("b", 2), ("a", 1), ("a", 0)), last_update_ms=5, start_ms=4)
    assert encode_value(value) == bytes.fromhex(
        "0000" "0000000000000007" "0003" "000003e8" "01"
        "00000002" "0001" "61" "00000002" "00000000" "00000001" "0001" "62" "00000001" "00000002"
        "0000000000000005" "0000000000000004")
    assert decode_value(encode_value(value)).partitions == (("a", 0), ("a", 1), ("b", 2))


def test_complete_values_carry_an_empty_list_and_tombstones_are_null():
    value = TxnValue(producer_id=7, producer_epoch=3, timeout_ms=1000, state=TxnState.COMPLETE_COMMIT,
                     partitions=(), last_update_ms=5, start_ms=4)
    assert encode_value(value)[16:21] == bytes.fromhex("04 00000000")
    assert encode_value(None) is None and decode_value(None) is None


def test_v1_values_are_read_with_their_tagged_fields():
    # Kafka 4 with transaction.version >= 1: compact strings/arrays, tag 2 = client version 2
    body = (struct.pack(">qhib", 9, 1, 500, 1) + bytes([2, 2]) + b"t" + bytes([2]) + struct.pack(">i", 3)
            + b"\x00" + struct.pack(">qq", 11, 10) + bytes([1, 2, 2]) + struct.pack(">h", 2))
    value = decode_value(struct.pack(">h", 1) + body)
    assert (value.producer_id, value.producer_epoch, value.timeout_ms, value.state, value.partitions,
            value.last_update_ms, value.start_ms, value.client_tv) == (9, 1, 500, TxnState.ONGOING,
                                                                         (("t", 3),), 11, 10, 2)
    # and written back byte for byte, as Kafka's TransactionLog.valueToBytes at transaction.version >= 1
    assert encode_value(value, value_version(2)) == struct.pack(">h", 1) + body


def test_v1_values_written_by_a_classic_client_carry_no_tag():
    value = TxnValue(producer_id=9, producer_epoch=1, timeout_ms=500, state=TxnState.EMPTY, partitions=None,
                     last_update_ms=11, start_ms=-1)
    assert encode_value(value, value_version(1)) == (struct.pack(">hqhib", 1, 9, 1, 500, 0) + b"\x00"
                                                     + struct.pack(">qq", 11, -1) + b"\x00")
    assert value_version(0) == 0 and encode_value(value, 0) == encode_value(value)


def test_v1_previous_and_next_producer_ids_are_read_and_dropped():
    # tags 0 and 1 (Kafka reads them; its writer never sets them)
    body = (struct.pack(">qhib", 9, 0, 500, 0) + b"\x00" + struct.pack(">qq", 11, -1)
            + bytes([2, 0, 8]) + struct.pack(">q", 7) + bytes([1, 8]) + struct.pack(">q", 8))
    value = decode_value(struct.pack(">h", 1) + body)
    assert (value.producer_id, value.client_tv) == (9, 0)


def test_unknown_key_versions_are_skipped_and_bad_values_refused():
    assert decode_key(struct.pack(">h", 1) + b"\x00\x01x") is None
    with pytest.raises(TxnRecordError):
        decode_value(struct.pack(">h", 2) + encode_value(EMPTY)[2:])
    with pytest.raises(TxnRecordError):
        decode_value(encode_value(EMPTY)[:10])
    with pytest.raises(TxnRecordError):
        decode_value(encode_value(EMPTY)[:16] + b"\x09" + encode_value(EMPTY)[17:])  # no state 9


names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)


@given(tid=names, pid=st.integers(-1, 2**63 - 1), epoch=st.integers(-1, 32767),
       timeout=st.integers(0, 2**31 - 1), state=st.sampled_from(list(TxnState)),
       parts=st.sets(st.tuples(names, st.integers(0, 2**31 - 1)), max_size=6),
       update=st.integers(-1, 2**62), start=st.integers(-1, 2**62))
def test_round_trip(tid, pid, epoch, timeout, state, parts, update, start):
    value = TxnValue(producer_id=pid, producer_epoch=epoch, timeout_ms=timeout, state=state,
                     partitions=None if state is TxnState.EMPTY else tuple(sorted(parts)),
                     last_update_ms=update, start_ms=start)
    assert decode_key(encode_key(TxnKey(tid))) == TxnKey(tid)
    assert decode_value(encode_value(value)) == value


# --- replay and the state table -------------------------------------------------------------

def test_replay_last_record_wins_and_a_tombstone_removes():
    txns: dict[str, TxnMetadata] = {}
    replay(txns, TxnKey("a"), EMPTY)
    ongoing = TxnValue(**{**{f: getattr(EMPTY, f) for f in TxnValue.__slots__},
                          "state": TxnState.ONGOING, "partitions": (("t", 0),), "start_ms": 9})
    replay(txns, TxnKey("a"), ongoing)
    assert txns["a"].persisted() == ongoing
    replay(txns, None, None)  # an unknown key version
    replay(txns, TxnKey("a"), None)
    assert txns == {}


def test_transitions_follow_kafkas_table():
    check_transition(TxnState.ONGOING, TxnState.PREPARE_COMMIT)
    with pytest.raises(IllegalTransition):
        check_transition(TxnState.EMPTY, TxnState.PREPARE_COMMIT)
    assert ALLOWED_SOURCES[TxnState.COMPLETE_ABORT] == {TxnState.PREPARE_ABORT}
    assert [s.kafka_name for s in TxnState] == ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort",
                                                 "CompleteCommit", "CompleteAbort", "Dead",
                                                 "PrepareEpochFence"]


# --- against Kafka's JSON definitions (optional reference data) -----------------------------

def _load(name: str) -> dict:
    path = SPEC_RECORDS / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"{path} not found (optional reference data kept outside the repository)")
    text = "\n".join(line for line in path.read_text().splitlines() if not line.strip().startswith("//"))
    return json.loads(text)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _compare(ours, fields: list[dict]) -> None:
    assert [f.name for f in ours] == [_snake(f["name"]) for f in fields]
    for mine, theirs in zip(ours, fields, strict=True):
        kind = theirs["type"]
        assert mine.type == ("[]" if kind.startswith("[]") and "fields" in theirs else kind)
        if "tag" in theirs:
            assert (mine.tag, mine.tagged) == (theirs["tag"], Versions.parse(theirs["taggedVersions"]))
        else:
            assert mine.versions == Versions.parse(theirs["versions"])
        if "nullableVersions" in theirs:
            assert mine.nullable == Versions.parse(theirs["nullableVersions"])
        if "fields" in theirs:
            _compare(mine.fields, theirs["fields"])


@pytest.mark.parametrize("message,name", [(TRANSACTION_LOG_KEY, "TransactionLogKey"),
                                          (TRANSACTION_LOG_VALUE, "TransactionLogValue")])
def test_declarations_match_kafkas_json(message, name):
    spec = _load(name)
    _compare(message.fields, spec["fields"])
