"""The ``_schemas`` topic's records, byte for byte as Confluent Schema Registry writes them.

Keys are JSON objects in a fixed field order (Confluent's ``@JsonPropertyOrder`` on
``SchemaKey``, ``ConfigKey``, ``ModeKey``, ``DeleteSubjectKey``, ``ClearSubjectKey``,
``NoopKey``; empty fields left out since CP 6.2), so compaction merges our records with
Confluent's.  Values are JSON objects (``SchemaValue``, ``ConfigValue``, ``ModeValue``,
``DeleteSubjectValue``, ``ClearSubjectValue``); a null value is a tombstone.  Readers accept
both spellings of a global key (``"subject":null`` as Karapace and CP < 6.2 write it, or no
subject) as the same logical key.
"""

from __future__ import annotations

import json
from typing import Any

from odradek.protocol.lean_dataclass import dataclass

TOPIC = "_schemas"  # kafkastore.topic's default

SCHEMA = "SCHEMA"
CONFIG = "CONFIG"
MODE = "MODE"
DELETE_SUBJECT = "DELETE_SUBJECT"
CLEAR_SUBJECT = "CLEAR_SUBJECT"
NOOP = "NOOP"
CONTEXT = "CONTEXT"
KEY_TYPES = frozenset({SCHEMA, CONFIG, MODE, DELETE_SUBJECT, CLEAR_SUBJECT, NOOP, CONTEXT})

SCHEMA_MAGIC = 1  # SchemaKey.MAGIC_BYTE; every other key type writes 0


@dataclass(frozen=True, slots=True)
class Key:
    """A ``_schemas`` key: its type, subject (None: global) and version (SCHEMA keys only)."""

    keytype: str
    subject: str | None = None
    version: int | None = None

    def encode(self) -> bytes:
        """Confluent's bytes for this key (field order ``keytype, subject, version, magic``)."""
        fields: dict[str, Any] = {"keytype": self.keytype}
        if self.subject is not None:
            fields["subject"] = self.subject
        if self.keytype == SCHEMA:
            fields["version"] = self.version
        fields["magic"] = SCHEMA_MAGIC if self.keytype == SCHEMA else 0
        return dumps(fields)


def dumps(value: Any) -> bytes:
    """Compact JSON as Jackson writes it: no spaces, UTF-8 (non-ASCII unescaped)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class RecordError(ValueError):
    """A key or value that is not one of Confluent's (replay logs and skips it, as Confluent does)."""


def parse_key(data: bytes | None) -> Key:
    try:
        obj = json.loads(data) if data is not None else None
    except (ValueError, UnicodeDecodeError) as exc:
        raise RecordError(f"key is not JSON: {exc}") from None
    if not isinstance(obj, dict) or obj.get("keytype") not in KEY_TYPES:
        raise RecordError(f"not a schema registry key: {data[:200]!r}")
    subject = obj.get("subject")
    version = obj.get("version")
    if subject is not None and not isinstance(subject, str) or version is not None and type(version) is not int:
        raise RecordError(f"malformed key: {data[:200]!r}")
    if obj["keytype"] == SCHEMA and (subject is None or version is None):
        raise RecordError(f"SCHEMA key without subject or version: {data[:200]!r}")
    return Key(obj["keytype"], subject, version if obj["keytype"] == SCHEMA else None)


def parse_value(data: bytes | None) -> dict | None:
    if data is None:
        return None
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RecordError(f"value is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise RecordError(f"value is not a JSON object: {data[:200]!r}")
    return obj


# --- values -----------------------------------------------------------------------------------


def schema_value(subject: str, version: int, schema_id: int, schema: str, schema_type: str,
                 references: list[dict], metadata: dict | None, rule_set: dict | None,
                 deleted: bool = False) -> dict:
    """``SchemaValue`` in Confluent's field order; AVRO's ``schemaType`` left out as CP 7.x does
    (8.x writes it; readers treat a missing type as AVRO either way)."""
    value: dict[str, Any] = {"subject": subject, "version": version, "id": schema_id}
    if schema_type != "AVRO":
        value["schemaType"] = schema_type
    if references:
        value["references"] = references
    if metadata:
        value["metadata"] = metadata
    if rule_set:
        value["ruleSet"] = rule_set
    value["schema"] = schema
    value["deleted"] = deleted
    return value


def config_value(subject: str | None, config: dict) -> dict:
    return ({"subject": subject} if subject is not None else {}) | config


def mode_value(subject: str | None, mode: str) -> dict:
    return ({"subject": subject} if subject is not None else {}) | {"mode": mode}


Record = tuple[bytes, bytes | None]  # (key bytes, value bytes or None for a tombstone)


def record(key: Key, value: dict | None) -> Record:
    return key.encode(), None if value is None else dumps(value)
