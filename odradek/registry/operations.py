"""The registry's operations: a request and the state in, the records to write and the answer out.

Nothing here touches the state: a write returns :class:`Write` (records plus the answer), the
broker appends the records to ``_schemas`` and, once they are durable, applies them to the
state as replay would.  Writes run one at a time (the broker holds a lock around compute,
append and apply), so two registrations of the same schema get one id.  Reads answer from
the state at once.  Confluent's ``AbstractSchemaRegistry``/``KafkaSchemaRegistry`` give the
order of the checks and each error.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from ..protocol.lean_dataclass import dataclass
from . import errors
from .compatibility import check as check_compatibility
from .compatibility import level_named
from .records import (
    CONFIG,
    DELETE_SUBJECT,
    MODE,
    SCHEMA,
    Key,
    Record,
    config_value,
    mode_value,
    record,
    schema_value,
)
from .schemas import TYPES, Dependency, ParsedSchema, SchemaParseError, formatted, parse
from .state import RegistryState, SchemaVersion, identity

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT", "FORWARD")
CONTEXT = "."  # the default context, the only one served
MAX_VERSION = 2**31 - 1
CONFIG_FIELDS = ("compatibilityLevel", "compatibilityPolicy", "normalize", "validateFields", "validateRules",
                 "alias", "compatibilityGroup", "defaultMetadata", "overrideMetadata", "defaultRuleSet",
                 "overrideRuleSet")


@dataclass(slots=True)
class Write:
    """Records to append to ``_schemas`` (none: nothing changes) and the answer once they are durable."""

    records: list[Record] = field(default_factory=list)
    answer: Any = None


# --- request parsing ---------------------------------------------------------------------------


def parse_version(text: str) -> int:
    """A version path segment: ``latest`` (or -1) is -1, else an int in [1, 2^31-1]; else 42202."""
    value = text.strip()
    if value.lower() == "latest":
        return -1
    try:
        number = int(value)
    except ValueError:
        raise errors.invalid_version(text) from None
    if number == -1 or 1 <= number <= MAX_VERSION:
        return number
    raise errors.invalid_version(text)


def check_subject(subject: str) -> None:
    """Confluent's ``QualifiedSubject.isValidSubject``: no control characters, not the global context's name."""
    if not subject or any(ord(c) < 32 or 127 <= ord(c) < 160 for c in subject) or subject == "__GLOBAL":
        raise errors.invalid_subject(subject)


@dataclass(slots=True)
class SchemaRequest:
    """A register / lookup / compatibility body (Confluent's ``RegisterSchemaRequest``)."""

    schema: str
    schema_type: str = "AVRO"
    references: list[dict] = field(default_factory=list)
    metadata: dict | None = None
    rule_set: dict | None = None
    id: int | None = None
    version: int | None = None

    @classmethod
    def from_body(cls, body: Any) -> SchemaRequest:
        if not isinstance(body, dict):
            raise errors.bad_request("Unrecognized request body: a JSON object is expected")
        schema = body.get("schema")
        if not isinstance(schema, str) or not schema.strip():
            raise errors.invalid_schema("Empty schema")
        schema_type = body.get("schemaType") or "AVRO"
        if not isinstance(schema_type, str) or schema_type.upper() not in TYPES:
            raise errors.invalid_schema(f"Invalid schema type {schema_type}")
        references = body.get("references") or []
        if not isinstance(references, list) or not all(
                isinstance(r, dict) and isinstance(r.get("name"), str) and isinstance(r.get("subject"), str)
                and type(r.get("version")) is int for r in references):
            raise errors.invalid_schema("Invalid schema references: each needs a name, a subject and a version")
        metadata, rule_set = body.get("metadata"), body.get("ruleSet", body.get("ruleset"))
        if metadata is not None and not isinstance(metadata, dict) or rule_set is not None and \
                not isinstance(rule_set, dict):
            raise errors.bad_request("metadata and ruleSet must be JSON objects")
        schema_id, version = body.get("id"), body.get("version")
        for name, value in (("id", schema_id), ("version", version)):
            if value is not None and (type(value) is not int or not 0 <= value <= MAX_VERSION):
                raise errors.bad_request(f"{name} must be a non-negative integer")
        refs = [{"name": r["name"], "subject": r["subject"], "version": r["version"]} for r in references]
        return cls(schema, schema_type.upper(), refs, metadata or None, rule_set or None,
                   schema_id or None, version or None)


# --- the operations ----------------------------------------------------------------------------


class Registry:
    """Confluent's registry operations over a :class:`RegistryState`."""

    def __init__(self, state: RegistryState):
        self.state = state

    # parsing, with the state's references

    def dependencies(self, references: list[dict], seen: frozenset[tuple[str, int]] = frozenset()
                     ) -> tuple[Dependency, ...]:
        """The referenced schemas, transitively, deepest first; a missing one is 42201."""
        found: list[Dependency] = []
        for ref in references:
            sv = self._version_or_none(ref["subject"], ref["version"], deleted=True)
            if sv is None:
                raise errors.invalid_schema(f"Invalid schema references: {ref['subject']} version "
                                            f"{ref['version']} not found")
            key = (sv.subject, sv.version)
            if key in seen:
                continue
            found += self.dependencies(sv.references, seen | {key})
            found.append(Dependency(ref["name"], sv.schema_type, sv.schema, sv.subject, sv.version))
        return tuple(found)

    def parse_request(self, request: SchemaRequest, normalize: bool) -> ParsedSchema:
        try:
            return parse(request.schema_type, request.schema, self.dependencies(request.references),
                         normalize=normalize)
        except SchemaParseError as exc:
            raise errors.invalid_schema(str(exc)) from None

    def parsed(self, sv: SchemaVersion) -> ParsedSchema:
        """A stored schema, parsed once per id (compatibility checks compare with it again and again)."""
        found = self.state.parsed.get(sv.id)
        if found is None:
            found = parse(sv.schema_type, sv.schema, self.dependencies(sv.references))
            self.state.parsed[sv.id] = found
        return found  # type: ignore[return-value]

    def _normalize(self, subject: str | None, asked: bool) -> bool:
        return asked or bool(self.state.config(subject, "normalize", False))

    # lookups

    def _version_or_none(self, subject: str, version: int, deleted: bool = False) -> SchemaVersion | None:
        if version == -1:
            return self.state.latest(subject)
        sv = self.state.subjects.get(subject, {}).get(version)
        return sv if sv is not None and (deleted or not sv.deleted) else None

    def version(self, subject: str, version: int, deleted: bool = False) -> SchemaVersion:
        """``GET /subjects/{s}/versions/{v}``'s subject and version checks (40401, 40402): a subject
        whose versions are all soft-deleted is not found unless ``deleted`` (Confluent's ``hasSubjects``)."""
        if not self.state.versions(subject, deleted=deleted):
            raise errors.subject_not_found(subject)
        sv = self._version_or_none(subject, version, deleted)
        if sv is None:
            raise errors.version_not_found(version)
        return sv

    def schema_by_id(self, schema_id: int, subject: str | None = None, fmt: str | None = None) -> dict:
        sv = self.state.by_id.get(schema_id)
        if sv is None:
            raise errors.schema_not_found(schema_id)
        answer = self.render(sv, fmt, with_subject=False)
        if subject:
            mine = [v for s, v in self.state.users.get(schema_id, ()) if s == subject]
            if mine:
                answer = {"subject": subject, "version": min(mine)} | answer
        return answer

    def schema_by_guid(self, guid: str, fmt: str | None = None) -> dict:
        """``GET /schemas/guids/{guid}``: the guid is the schema's identity printed as a UUID."""
        try:
            wanted = uuid.UUID(guid).hex
        except ValueError:
            raise errors.schema_not_found(guid) from None
        schema_id = self.state.ids.get(wanted)
        if schema_id is None or schema_id not in self.state.by_id:
            raise errors.schema_not_found(guid)
        return {"id": schema_id} | self.render(self.state.by_id[schema_id], fmt, with_subject=False)

    def latest_with_metadata(self, subject: str, wanted: Mapping[str, str], deleted: bool = False,
                             fmt: str | None = None) -> dict:
        """``GET /subjects/{s}/metadata``: the newest version whose metadata properties hold every
        ``key=value`` asked (confluent-kafka's ``use.latest.with.metadata``)."""
        versions = self.state.versions(subject, deleted=deleted)
        if not versions:
            raise errors.subject_not_found(subject)
        for sv in reversed(versions):
            properties = (sv.metadata or {}).get("properties") or {}
            if all(properties.get(k) == v for k, v in wanted.items()):
                return self.render(sv, fmt)
        raise errors.schema_not_found()

    def render(self, sv: SchemaVersion, fmt: str | None = None, with_subject: bool = True) -> dict:
        """A schema entity as Confluent renders it (empty and null fields left out; AVRO's type
        too); without the subject, ``SchemaString`` (``GET /schemas/ids/{id}``: no id, no version)."""
        out: dict[str, Any] = {"subject": sv.subject, "version": sv.version, "id": sv.id} if with_subject else {}
        out["guid"] = str(uuid.UUID(sv.identity))
        if sv.schema_type != "AVRO":
            out["schemaType"] = sv.schema_type
        if sv.references:
            out["references"] = sv.references
        if sv.metadata:
            out["metadata"] = sv.metadata
        if sv.rule_set:
            out["ruleSet"] = sv.rule_set
        out["schema"] = formatted(self.parsed(sv), fmt) if fmt else sv.schema
        if with_subject and sv.deleted:
            out["deleted"] = True
        return out

    def subjects_of(self, schema_id: int, subject: str | None, deleted: bool) -> list[tuple[str, int]]:
        if schema_id not in self.state.by_id:
            raise errors.schema_not_found(schema_id)
        found = sorted((s, v) for s, v in self.state.users.get(schema_id, ())
                       if (deleted or not self.state.subjects[s][v].deleted) and (not subject or s == subject))
        return found

    def lookup(self, subject: str, request: SchemaRequest, normalize: bool, deleted: bool) -> dict:
        """``POST /subjects/{s}``: the version of ``subject`` holding this schema (40401, 40403)."""
        if not self.state.versions(subject, deleted=deleted):
            raise errors.subject_not_found(subject)
        parsed = self.parse_request(request, self._normalize(subject, normalize))
        wanted = identity(parsed.canonical, request.references, request.metadata, request.rule_set)
        for sv in reversed(self.state.versions(subject, deleted=deleted)):
            if sv.identity == wanted:
                return self.render(sv)
        raise errors.schema_not_found()

    # register

    def register(self, subject: str, request: SchemaRequest, *, normalize: bool = False,
                 force: bool = False) -> Write:
        """``POST /subjects/{s}/versions`` (Confluent's ``KafkaSchemaRegistry.register``)."""
        check_subject(subject)
        mode = self.state.mode(subject)
        if mode in ("READONLY", "READONLY_OVERRIDE"):
            raise errors.not_permitted(f"Subject {subject} in context {CONTEXT} is in read-only mode")
        importing = mode in ("IMPORT", "FORWARD")
        if request.id is not None and not importing:
            raise errors.not_permitted(f"Subject {subject} in context {CONTEXT} is not in import mode")
        if request.id is None and mode != "READWRITE":
            raise errors.not_permitted(f"Subject {subject} in context {CONTEXT} is not in read-write mode")
        parsed = self.parse_request(request, self._normalize(subject, normalize))
        wanted = identity(parsed.canonical, request.references, request.metadata, request.rule_set)
        every = self.state.versions(subject, deleted=True)
        live = [sv for sv in every if not sv.deleted]
        for sv in reversed(live):
            if sv.identity == wanted and (request.version is None or request.version == sv.version):
                return Write([], self._registered(sv.id, sv.version, parsed, request))
        if not importing and not force:
            level = self.state.compatibility(subject)
            previous = [(sv.version, self.parsed(sv)) for sv in reversed(live)]
            messages = check_compatibility(level, parsed, previous)
            if messages:
                messages.append(f"{{validateFields: '{str(bool(self.state.config(subject, 'validateFields'))).lower()}'"
                                f", compatibility: '{level}'}}")
                raise errors.incompatible(subject, messages)
        next_version = (every[-1].version + 1) if every else 1
        version = request.version or next_version
        if not importing and version != next_version:
            raise errors.invalid_schema("Version is not one more than previous version")
        if version in self.state.subjects.get(subject, {}):
            raise errors.not_permitted(f"Overwrite new schema with version {version} in context {CONTEXT} "
                                       "is not permitted.")
        schema_id = self._id_for(wanted, request.id)
        value = schema_value(subject, version, schema_id, parsed.canonical, parsed.schema_type,
                             request.references, request.metadata, request.rule_set)
        return Write([record(Key(SCHEMA, subject, version), value)],
                     self._registered(schema_id, version, parsed, request))

    def _id_for(self, wanted: str, asked: int | None) -> int:
        existing = self.state.ids.get(wanted)
        if asked is None:
            return existing if existing is not None else self.state.max_id + 1
        if existing is not None and existing != asked:
            raise errors.id_mismatch()
        holder = self.state.by_id.get(asked)
        if holder is not None and holder.identity != wanted:
            raise errors.not_permitted(f"Overwrite new schema with id {asked} in context {CONTEXT} is not permitted.")
        return asked

    @staticmethod
    def _registered(schema_id: int, version: int, parsed: ParsedSchema, request: SchemaRequest) -> dict:
        answer: dict[str, Any] = {"id": schema_id, "version": version}
        if parsed.schema_type != "AVRO":
            answer["schemaType"] = parsed.schema_type
        if request.references:
            answer["references"] = request.references
        answer["schema"] = parsed.canonical
        return answer

    # compatibility

    def test_compatibility(self, subject: str, version: int | None, request: SchemaRequest, *,
                           normalize: bool = False, verbose: bool = False) -> dict:
        """``POST /compatibility/subjects/{s}/versions[/{v}]``."""
        if version is None:
            previous = [(sv.version, sv) for sv in reversed(self.state.versions(subject))]
        elif version == -1 and self.state.latest(subject) is None:
            return {"is_compatible": True}
        else:
            sv = self.version(subject, version)
            previous = [(sv.version, sv)]
        try:
            parsed = self.parse_request(request, self._normalize(subject, normalize))
        except errors.RegistryError as exc:
            if verbose and exc.code == 42201:
                return {"is_compatible": False, "messages": [exc.message]}
            raise
        level = self.state.compatibility(subject)
        if version is not None and level.endswith("_TRANSITIVE"):
            level = level.removesuffix("_TRANSITIVE")
        messages = check_compatibility(level, parsed, [(v, self.parsed(sv)) for v, sv in previous])
        answer: dict[str, Any] = {"is_compatible": not messages}
        if verbose:
            answer["messages"] = messages
        return answer

    # deletes

    def delete_subject(self, subject: str, permanent: bool) -> Write:
        every = self.state.versions(subject, deleted=True)
        if not every:
            raise errors.subject_not_found(subject)
        self._check_writable(subject)
        live = [sv for sv in every if not sv.deleted]
        if not permanent:
            if not live:
                raise errors.subject_soft_deleted(subject)
            self._check_unreferenced(live, deleted=False, own=subject)
            value = {"subject": subject, "version": live[-1].version}
            return Write([record(Key(DELETE_SUBJECT, subject), value)], [sv.version for sv in live])
        if live:
            raise errors.subject_not_soft_deleted(subject)
        self._check_unreferenced(every, deleted=True, own=subject)
        records = [record(Key(SCHEMA, subject, sv.version), None) for sv in reversed(every)]
        return Write(records + self._subject_settings_gone(subject), [sv.version for sv in every])

    def delete_version(self, subject: str, version: int, permanent: bool) -> Write:
        if not self.state.versions(subject, deleted=True):
            raise errors.subject_not_found(subject)
        self._check_writable(subject)
        sv = self._version_or_none(subject, version, deleted=True)
        if sv is None:
            raise errors.version_not_found(version)
        if not permanent:
            if sv.deleted:
                raise errors.version_soft_deleted(subject, sv.version)
            self._check_unreferenced([sv], deleted=False)
            value = schema_value(subject, sv.version, sv.id, sv.schema, sv.schema_type, sv.references,
                                 sv.metadata, sv.rule_set, deleted=True)
            return Write([record(Key(SCHEMA, subject, sv.version), value)], sv.version)
        if not sv.deleted:
            raise errors.version_not_soft_deleted(subject, sv.version)
        self._check_unreferenced([sv], deleted=True)
        records = [record(Key(SCHEMA, subject, sv.version), None)]
        if len(self.state.versions(subject, deleted=True)) == 1:
            records += self._subject_settings_gone(subject)
        return Write(records, sv.version)

    def _check_writable(self, subject: str) -> None:
        if self.state.mode(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise errors.not_permitted(f"Subject {subject} in context {CONTEXT} is in read-only mode")

    def _check_unreferenced(self, versions: list[SchemaVersion], deleted: bool, own: str | None = None) -> None:
        for sv in versions:
            referrers = self.state.referrers(sv.subject, sv.version, deleted)
            if own is not None:
                referrers = [i for i in referrers if all(s != own for s, _v in self.state.users.get(i, ()))]
            if referrers:
                raise errors.references_exist(f"{{subject={sv.subject},version={sv.version}}}")

    def _subject_settings_gone(self, subject: str) -> list[Record]:
        """Tombstones for a subject's config and mode, once none of its versions is left."""
        return [record(Key(kind, subject), None) for kind, table in ((MODE, self.state.modes),
                                                                     (CONFIG, self.state.configs))
                if subject in table]

    # config and mode

    def get_config(self, subject: str | None, default_to_global: bool = False) -> dict:
        if subject is not None and not default_to_global:
            own = self.state.configs.get(subject)
            if own is None:
                raise errors.subject_config_not_found(subject)
            return dict(own)
        merged = dict(self.state.configs.get(None, {}))
        if subject is not None:
            merged |= self.state.configs.get(subject, {})
        merged.setdefault("compatibilityLevel", self.state.compatibility(subject))
        return merged

    def set_config(self, subject: str | None, body: Any) -> Write:
        if not isinstance(body, dict):
            raise errors.bad_request("Unrecognized request body: a JSON object is expected")
        if subject is not None:
            check_subject(subject)
            self._check_writable(subject)
        update = {k: v for k, v in body.items() if k in CONFIG_FIELDS and v is not None}
        if "compatibility" in body and body["compatibility"] is not None:
            level = level_named(body["compatibility"])
            if level is None:
                raise errors.invalid_compatibility_level()
            update["compatibilityLevel"] = level
        elif "compatibilityLevel" in update:
            level = level_named(update["compatibilityLevel"])
            if level is None:
                raise errors.invalid_compatibility_level()
            update["compatibilityLevel"] = level
        new = dict(self.state.configs.get(subject, {})) | update
        answer = {("compatibility" if k == "compatibilityLevel" else k): v for k, v in update.items()}
        return Write([record(Key(CONFIG, subject), config_value(subject, new))], answer)

    def delete_config(self, subject: str | None) -> Write:
        old = self.state.configs.get(subject)
        if subject is not None and old is None:
            raise errors.subject_not_found(subject)
        answer = dict(old) if old else {"compatibilityLevel": self.state.compatibility(None)}
        return Write([record(Key(CONFIG, subject), None)] if old is not None else [], answer)

    def get_mode(self, subject: str | None, default_to_global: bool = False) -> dict:
        if subject is not None and not default_to_global and subject not in self.state.modes:
            raise errors.subject_mode_not_found(subject)
        return {"mode": self.state.mode(subject)}

    def set_mode(self, subject: str | None, body: Any, force: bool = False) -> Write:
        if not isinstance(body, dict):
            raise errors.bad_request("Unrecognized request body: a JSON object is expected")
        mode = str(body.get("mode", "")).strip().upper()
        if mode not in MODES or mode == "FORWARD" and subject is not None:
            raise errors.invalid_mode()
        if subject is not None:
            check_subject(subject)
        if mode == "IMPORT" and not force:
            live = self.state.subject_names() if subject is None else \
                [subject] if self.state.versions(subject) else []
            if live:
                raise errors.not_permitted("Cannot import since found existing subjects")
        return Write([record(Key(MODE, subject), mode_value(subject, mode))], {"mode": mode})

    def delete_mode(self, subject: str | None) -> Write:
        old = self.state.modes.get(subject)
        answer = {"mode": self.state.mode(subject)}
        return Write([record(Key(MODE, subject), None)] if old is not None else [], answer)


def flag(query: Mapping[str, str], *names: str) -> bool:
    """A boolean query parameter, read as Java's ``Boolean.valueOf`` (``true`` in any case)."""
    return any(query.get(n, "").strip().lower() == "true" for n in names)
