"""The registry's state, rebuilt by replaying ``_schemas`` (Confluent's ``KafkaStoreMessageHandler``
and ``InMemoryCache``): subjects and their versions (soft-deleted ones kept and marked), the
schema behind each id, configs and modes.  The only way state changes is :meth:`apply` of a
record, at start-up replay and after each write is durable, so replay and live writes cannot
disagree.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import field

import structlog

from ..protocol.lean_dataclass import dataclass
from .records import (
    CLEAR_SUBJECT,
    CONFIG,
    DELETE_SUBJECT,
    MODE,
    SCHEMA,
    Key,
    RecordError,
    parse_key,
    parse_value,
)

log = structlog.get_logger("odradek.registry")

DEFAULT_COMPATIBILITY = "BACKWARD"
DEFAULT_MODE = "READWRITE"


@dataclass(slots=True)
class SchemaVersion:
    """One (subject, version): its schema id and the schema as stored (``SchemaValue``)."""

    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: list[dict] = field(default_factory=list)
    metadata: dict | None = None
    rule_set: dict | None = None
    deleted: bool = False
    ts: int | None = None
    identity: str = ""  # what makes it the same schema as another (computed once)

    def __post_init__(self) -> None:
        if not self.identity:
            self.identity = identity(self.schema, self.references, self.metadata, self.rule_set)


def identity(schema: str, references: list[dict], metadata: dict | None, rule_set: dict | None) -> str:
    """What makes two registrations the same schema (one id): Confluent's ``Schema.updateHash``,
    the MD5 of the canonical text, each reference, the metadata and the rule set (not the
    type).  Printed as a UUID it is the schema's ``guid``."""
    digest = hashlib.md5(schema.encode("utf-8"), usedforsecurity=False)
    for ref in references:
        digest.update(f"{ref.get('name')}\0{ref.get('subject')}\0{ref.get('version')}".encode())
    for extra in (metadata, rule_set):
        if extra:
            digest.update(b"\x01" + json.dumps(extra, sort_keys=True, separators=(",", ":")).encode())
    return digest.hexdigest()


def decode(key: bytes | None, value: bytes | None) -> tuple[Key, dict | None] | None:
    """A stored record's key and value, or None (logged) for one Confluent's reader would skip:
    a key or value that does not deserialize."""
    try:
        return parse_key(key), parse_value(value)
    except RecordError as exc:
        log.warning("registry.record_skipped", error=str(exc))
        return None


class RegistryState:
    """Subjects, versions, ids, configs and modes as the replayed records say."""

    def __init__(self, default_compatibility: str = DEFAULT_COMPATIBILITY) -> None:
        self.default_compatibility = default_compatibility  # schema.compatibility.level
        self.clear()

    def clear(self) -> None:
        self.subjects: dict[str, dict[int, SchemaVersion]] = {}
        self.by_id: dict[int, SchemaVersion] = {}  # the schema behind an id (its first version seen)
        self.users: dict[int, set[tuple[str, int]]] = {}  # id -> the (subject, version)s using it
        self.ids: dict[str, int] = {}  # identity -> id
        self.configs: dict[str | None, dict] = {}  # subject (None: global) -> ConfigValue fields
        self.modes: dict[str | None, str] = {}
        self.max_id = 0
        self.referenced_by: dict[tuple[str, int], set[int]] = {}
        self.parsed: dict[int, object] = {}  # id -> ParsedSchema, parsed on first need
        self.applied = 0  # records applied (replay's and writes')

    # --- replay ---------------------------------------------------------------------------------

    def apply_bytes(self, key: bytes | None, value: bytes | None) -> None:
        """Apply one ``_schemas`` record as stored."""
        decoded = decode(key, value)
        if decoded is not None:
            self.apply(*decoded)

    def apply(self, key: Key, value: dict | None) -> None:
        """Apply one decoded record; one whose fields are not Confluent's is logged and skipped."""
        try:
            self._apply(key, value)
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("registry.record_skipped", error=f"{type(exc).__name__}: {exc}", key=key)

    def _apply(self, key: Key, value: dict | None) -> None:
        self.applied += 1
        if key.keytype == SCHEMA:
            if value is None:
                self._tombstone(key.subject, key.version)
            else:
                self._schema(value, key)
        elif key.keytype == CONFIG:
            self._set(self.configs, key.subject, None if value is None else
                      {k: v for k, v in value.items() if k not in ("subject", "offset", "ts")})
        elif key.keytype == MODE:
            self._set(self.modes, key.subject, None if value is None else value["mode"])
        elif key.keytype == DELETE_SUBJECT and value is not None:
            for v, sv in self.subjects.get(key.subject, {}).items():
                if v <= value["version"]:
                    sv.deleted = True
        elif key.keytype == CLEAR_SUBJECT and value is not None:
            for versions in self.subjects.values():
                for sv in [sv for sv in versions.values() if sv.deleted and sv.subject == value.get("subject")]:
                    self._tombstone(sv.subject, sv.version)

    @staticmethod
    def _set(table: dict, subject: str | None, value) -> None:
        if value is None:
            table.pop(subject, None)
        else:
            table[subject] = value

    def _schema(self, value: dict, key: Key) -> None:
        sv = SchemaVersion(key.subject, key.version, int(value["id"]), value["schema"],
                           value.get("schemaType") or "AVRO", list(value.get("references") or ()),
                           value.get("metadata"), value.get("ruleSet"), bool(value.get("deleted", False)),
                           value.get("ts"))
        known = self.by_id.get(sv.id)
        if known is not None and known.identity != sv.identity:
            # Confluent's validateUpdate: an id already holding another schema is not taken over
            log.warning("registry.id_conflict_skipped", id=sv.id, subject=sv.subject, version=sv.version)
            return
        old = self.subjects.get(sv.subject, {}).get(sv.version)
        if old is not None and old.id != sv.id:
            self._tombstone(sv.subject, sv.version)
        self.subjects.setdefault(sv.subject, {})[sv.version] = sv
        if known is None:
            self.by_id[sv.id] = sv
        self.users.setdefault(sv.id, set()).add((sv.subject, sv.version))
        self.ids.setdefault(sv.identity, sv.id)
        self.max_id = max(self.max_id, sv.id)
        for ref in sv.references:
            self.referenced_by.setdefault((ref["subject"], ref["version"]), set()).add(sv.id)

    def _tombstone(self, subject: str | None, version: int | None) -> None:
        versions = self.subjects.get(subject)
        sv = versions.pop(version, None) if versions is not None else None
        if sv is None:
            return
        if not versions:
            del self.subjects[subject]
        users = self.users.get(sv.id, set())
        users.discard((subject, version))
        if not users:  # nothing uses the id any more: it is gone (Confluent's schemaTombstoned)
            for ref in sv.references:  # an id's users share its references (they are in its identity)
                self.referenced_by.get((ref["subject"], ref["version"]), set()).discard(sv.id)
            self.users.pop(sv.id, None)
            gone = self.by_id.pop(sv.id, None)
            self.parsed.pop(sv.id, None)
            if gone is not None and self.ids.get(gone.identity) == sv.id:
                del self.ids[gone.identity]
        elif self.by_id.get(sv.id) is sv:
            s, v = next(iter(users))
            self.by_id[sv.id] = self.subjects[s][v]

    # --- queries --------------------------------------------------------------------------------

    def versions(self, subject: str, deleted: bool = False) -> list[SchemaVersion]:
        """The subject's versions, ascending; soft-deleted ones only with ``deleted``."""
        found = self.subjects.get(subject, {})
        return [found[v] for v in sorted(found) if deleted or not found[v].deleted]

    def latest(self, subject: str) -> SchemaVersion | None:
        live = self.versions(subject)
        return live[-1] if live else None

    def subject_names(self, deleted: bool = False) -> list[str]:
        return sorted(s for s, versions in self.subjects.items()
                      if deleted or any(not sv.deleted for sv in versions.values()))

    def compatibility(self, subject: str | None) -> str:
        """The level in scope: the subject's, else the global one, else the server default."""
        for scope in (subject, None):
            level = self.configs.get(scope, {}).get("compatibilityLevel")
            if level:
                return level
        return self.default_compatibility

    def config(self, subject: str | None, key: str, default=None):
        for scope in (subject, None):
            if key in self.configs.get(scope, {}):
                return self.configs[scope][key]
        return default

    def mode(self, subject: str | None) -> str:
        for scope in (subject, None):
            if scope in self.modes:
                return self.modes[scope]
        return DEFAULT_MODE

    def referrers(self, subject: str, version: int, deleted: bool = False) -> list[int]:
        """Ids of the schemas that reference (subject, version) (soft-deleted referrers too with ``deleted``)."""
        found = []
        for schema_id in sorted(self.referenced_by.get((subject, version), ())):
            live = [self.subjects[s][v] for s, v in self.users.get(schema_id, ())]
            if any(deleted or not sv.deleted for sv in live):
                found.append(schema_id)
        return found
