"""``odradek dump-log``: every batch and record of segment files, like ``kafka-dump-log``.

Reads ``.log`` files directly (no broker, no lock), so it also works on a
real Kafka partition directory and on a damaged one: a batch that fails
validation is reported and the dump stops there, as recovery would.
Records of ``__consumer_offsets-N`` directories are decoded into their key
and value fields (Kafka's ``--offsets-decoder``), those of
``__transaction_state-N`` too (``--transaction-log-decoder``), and those of
``__share_group_state-N`` (``--share-group-state-decoder``: topic ids in
Kafka's text form, delivery states by name).
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any, TextIO

from ..offsets.consumer_protocol import decode_assignment, decode_subscription
from ..offsets.consumer_records import CG_RECORD_NAMES, decode_cg_record
from ..offsets.records import GroupValue, RecordDecodeError, decode_key, decode_value
from ..offsets.share_group_records import SG_RECORD_NAMES, decode_sg_record
from ..protocol.records import CorruptRecordError, Record, batch_size_at, decode_batch
from ..registry.records import TOPIC as SCHEMAS_TOPIC
from ..registry.records import RecordError, parse_key, parse_value
from ..shares import records as share_records
from ..storage.files import LOG_SUFFIX, parse_partition_dir
from ..storage.log_manager import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from ..transactions import records as txn_records

RECORD_NAMES = {**CG_RECORD_NAMES, **SG_RECORD_NAMES}


def segment_files(paths: list[str]) -> list[Path]:
    """Expand directories (partition dirs or data dirs) into their .log files, in order."""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            logs = sorted(path.glob(f"*{LOG_SUFFIX}"))
            if not logs:
                logs = sorted(path.glob(f"*/*{LOG_SUFFIX}"))
            if not logs:  # an empty dump would look like an empty log
                raise ValueError(f"no {LOG_SUFFIX} files in {path} "
                                 "(expected a .log file, a partition dir or a data dir)")
            out.extend(logs)
        else:
            out.append(path)
    return out


def _topic_of(path: Path) -> str | None:
    parsed = parse_partition_dir(path.parent.name)
    return None if parsed is None else parsed[0]


def _blob(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(data).decode()


def _jsonable(obj: Any) -> Any:
    if is_dataclass(obj):
        return {k: _jsonable(v) for k, v in asdict(obj).items()}
    if isinstance(obj, bytes):
        return "base64:" + base64.b64encode(obj).decode()
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, set | frozenset):
        return sorted(_jsonable(v) for v in obj)
    if isinstance(obj, dict):  # a KIP-848 assignment is keyed by topic id
        return {str(k) if isinstance(k, uuid.UUID) else k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, uuid.UUID):
        return str(obj)
    return obj


def _member_blobs(value: GroupValue) -> list[dict]:
    members = []
    for m in value.members:
        entry = _jsonable(m)
        if value.protocol_type == "consumer":
            try:
                entry["subscription"] = _jsonable(decode_subscription(m.subscription))
                entry["assignment"] = _jsonable(decode_assignment(m.assignment))
            except ValueError:
                pass  # not a valid consumer blob: keep the raw bytes
        members.append(entry)
    return members


def decode_offsets_record(record: Record) -> dict:
    """The decoded key/value of one ``__consumer_offsets`` record."""
    try:
        key = decode_key(record.key)
    except RecordDecodeError as exc:
        return {"key_error": str(exc)}
    if key is None:
        return _decode_consumer_group_record(record)
    out: dict[str, Any] = {"key": {"type": type(key).__name__, **_jsonable(key)}}
    try:
        value = decode_value(key, record.value)
    except RecordDecodeError as exc:
        out["value_error"] = str(exc)
        return out
    if value is None:
        out["value"] = None
    elif isinstance(value, GroupValue):
        out["value"] = {**_jsonable(value), "members": _member_blobs(value)}
    else:
        out["value"] = _jsonable(value)
    return out


def _decode_consumer_group_record(record: Record) -> dict:
    """A KIP-848 consumer-group record (key types 3-8, 16) or a KIP-932 share-group record (10-15),
    named after Kafka's record types."""
    try:
        decoded = decode_cg_record(record.key, record.value)
        if decoded is None:
            decoded = decode_sg_record(record.key, record.value)
    except RecordDecodeError as exc:
        return {"value_error": str(exc)}
    if decoded is None:
        return {"key": "unknown key type (skipped by the coordinator)"}
    key, value = decoded
    return {"key": {"type": RECORD_NAMES[type(key)], **_jsonable(key)},
            "value": None if value is None else _jsonable(value)}


def decode_txn_record(record: Record) -> dict:
    """The decoded key/value of one ``__transaction_state`` record (state by its Kafka name)."""
    try:
        key = txn_records.decode_key(record.key or b"")
        value = txn_records.decode_value(record.value)
    except txn_records.TxnRecordError as exc:
        return {"value_error": str(exc)}
    if key is None:
        return {"key": "unknown key version (skipped by the coordinator)"}
    out: dict[str, Any] = {"key": {"type": "TxnKey", "transactional_id": key.transactional_id}}
    if value is None:
        out["value"] = None
    else:
        out["value"] = {**_jsonable(value), "state": value.state.kafka_name,
                        "partitions": None if value.partitions is None else [list(tp) for tp in value.partitions]}
    return out


_DELIVERY_STATES = {0: "AVAILABLE", 1: "ACQUIRED", 2: "ACKNOWLEDGED", 4: "ARCHIVED"}


def decode_share_state_record(record: Record) -> dict:
    """The decoded key/value of one ``__share_group_state`` record (ShareSnapshot or ShareUpdate)."""
    try:
        key = share_records.decode_key(record.key or b"")
        value = None if key is None else share_records.decode_value(key, record.value)
    except share_records.ShareRecordDecodeError as exc:
        return {"value_error": str(exc)}
    if key is None:
        return {"key": "unknown key type (skipped by the share coordinator)"}
    out: dict[str, Any] = {"key": {"type": type(key).__name__, "group_id": key.group_id,
                                   "topic_id": share_records.kafka_uuid_text(key.topic_id),
                                   "partition": key.partition}}
    if value is None:
        out["value"] = None
        return out
    out["value"] = {**_jsonable(value), "state_batches": [
        {**_jsonable(b), "delivery_state": _DELIVERY_STATES.get(b.delivery_state, b.delivery_state)}
        for b in value.state_batches]}
    return out


def decode_schemas_record(record: Record) -> dict:
    """One ``_schemas`` record in Confluent's JSON (the schema registry's key and value, as
    Confluent's ``kafka-console-consumer`` on that topic would print them)."""
    try:
        parse_key(record.key)
        return {"key": parse_value(record.key), "value": parse_value(record.value)}
    except RecordError as exc:
        return {"value_error": str(exc)}


_DECODERS = {OFFSETS_TOPIC: decode_offsets_record, TRANSACTION_STATE_TOPIC: decode_txn_record,
             SCHEMAS_TOPIC: decode_schemas_record, share_records.STATE_TOPIC: decode_share_state_record}


def _starts_like_a_batch(data: bytes) -> bool:
    """A segment's first bytes: base offset >= 0, a plausible length, magic 0, 1 or 2 at byte 16.

    Tells a file that is not a log at all from a real segment whose first batch is torn."""
    if len(data) < 17:
        return False
    base_offset = int.from_bytes(data[0:8], "big", signed=True)
    length = int.from_bytes(data[8:12], "big", signed=True)
    return base_offset >= 0 and length >= 14 and data[16] in (0, 1, 2)


def iter_dump(path: Path) -> Iterator[dict]:
    """One dict per batch (with its records), then a final error entry if the tail is bad."""
    data = path.read_bytes()
    decoder = _DECODERS.get(_topic_of(path))
    pos = 0
    while pos < len(data):
        size = batch_size_at(data, pos)
        if pos == 0 and not _starts_like_a_batch(data):
            yield {"position": 0, "error": f"not a Kafka log segment: {path} does not start with a "
                   "record batch (expected a .log file of a partition directory)"}
            return
        if size is None or pos + size > len(data):
            yield {"position": pos, "error": f"torn tail: {len(data) - pos} bytes"}
            return
        try:
            header, records = decode_batch(data, pos)
        except CorruptRecordError as exc:
            yield {"position": pos, "error": str(exc)}
            return
        batch = {"position": pos, **asdict(header), "records": []}
        for r in records:
            entry: dict[str, Any] = {"offset": r.offset, "timestamp": r.timestamp,
                                     "key": _blob(r.key), "value": _blob(r.value),
                                     "headers": [[k, _blob(v)] for k, v in r.headers]}
            if decoder is not None and not header.is_control:
                entry.update(decoder(r))
            batch["records"].append(entry)
        yield batch
        pos += size


def dump(paths: list[str], out: TextIO, as_json: bool = False) -> int:
    """Write the dump; returns 1 if any file had an invalid batch, else 0."""
    status = 0
    for path in segment_files(paths):
        if not as_json:
            out.write(f"Dumping {path}\n")
        for entry in iter_dump(path):
            if "error" in entry:
                status = 1
            if as_json:
                out.write(json.dumps({"file": str(path), **entry}) + "\n")
            else:
                out.write(_text(entry))
    return status


def _text(entry: dict) -> str:
    if "error" in entry:
        return f"  INVALID at position {entry['position']}: {entry['error']}\n"
    lines = [f"baseOffset: {entry['base_offset']} lastOffset: "
             f"{entry['base_offset'] + entry['last_offset_delta']} count: {entry['records_count']} "
             f"position: {entry['position']} size: {entry['batch_length'] + 12} "
             f"compression: {entry['attributes'] & 7} crc: {entry['crc']} "
             f"producerId: {entry['producer_id']} baseSequence: {entry['base_sequence']} "
             f"isControl: {bool(entry['attributes'] & 0x20)}"]
    for r in entry["records"]:
        if "key" in r and isinstance(r.get("key"), dict):
            lines.append(f"| offset: {r['offset']} CreateTime: {r['timestamp']} "
                         f"key: {json.dumps(r['key'])} payload: {json.dumps(r.get('value'))}")
        else:
            lines.append(f"| offset: {r['offset']} CreateTime: {r['timestamp']} "
                         f"key: {r['key']} payload: {r['value']}")
    return "\n".join(lines) + "\n"
