"""Client quotas (KIP-546): the entities, Kafka's validation and match rules, and the durable store.

Sans-I/O but for ``QuotaStore.save`` (run off the loop by the handler).
An entity is a sorted tuple of (type, name) pairs, name None for the
default entity, as Kafka's ``ClientQuotaEntity``; its values are
{key: float}.  Validation is ``ClientQuotaControlManager`` (alter) and
``ClientQuotasImage.describe`` (describe); the lookup order of a
(user, client-id) pair is ``ClientQuotaManager.DefaultQuotaCallback``.
The file ``<data dir>/client-quotas.json`` is rewritten whole with
``storage.files.atomic_write_text``: a crash leaves the old or new set.
"""

from __future__ import annotations

import ipaddress
import json
import math
from pathlib import Path

from ..protocol.errors import ErrorCode
from ..storage.files import atomic_write_text

FILE_NAME = "client-quotas.json"
USER, CLIENT_ID, IP = "user", "client-id", "ip"
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE = "producer_byte_rate", "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
# QuotaConfig.userAndClientQuotaConfigs / ipConfigs: key -> (Kafka's type, largest value)
_LONG, _INT = float(2**63 - 1), float(2**31 - 1)
USER_CLIENT_KEYS = {PRODUCER_BYTE_RATE: ("LONG", _LONG), CONSUMER_BYTE_RATE: ("LONG", _LONG),
                    REQUEST_PERCENTAGE: ("DOUBLE", None), "controller_mutation_rate": ("DOUBLE", None)}
IP_KEYS = {"connection_creation_rate": ("INT", _INT)}

Entity = tuple[tuple[str, str | None], ...]


class QuotaError(ValueError):
    """A request Kafka refuses: ``code`` and its message."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _invalid(message: str) -> QuotaError:
    return QuotaError(ErrorCode.INVALID_REQUEST, message)


# --- AlterClientQuotas: validation ---------------------------------------------------------

def entity_of(pairs: list[tuple[str, str | None]]) -> Entity:
    """A validated entity (``ClientQuotaControlManager.validateEntity``)."""
    if not pairs:
        raise _invalid("Invalid empty client quota entity")
    seen: dict[str, str | None] = {}
    for etype, name in pairs:
        if etype in seen:
            raise _invalid(f"Invalid empty client quota entity, duplicate entity entry {etype}")
        if name == "":
            raise _invalid(f"Empty {etype} not supported")
        if etype not in (USER, CLIENT_ID, IP):
            raise _invalid(f"Unhandled client quota entity type: {etype}")
        if etype == IP and name is not None and not _valid_ip(name):
            raise _invalid(f"{name} is not a valid IP or resolvable host.")
        seen[etype] = name
    if IP in seen and (USER in seen or CLIENT_ID in seen):
        raise _invalid("Invalid quota entity combination, IP entity should not be combined with User or ClientId")
    return tuple(sorted(seen.items()))


def _valid_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def check_value(entity: Entity, key: str, value: float) -> None:
    """``ClientQuotaControlManager.validateQuotaKeyValue``: a known key, a value > 0 of its type."""
    keys = IP_KEYS if entity[0][0] == IP else USER_CLIENT_KEYS
    known = keys.get(key)
    if known is None:
        raise _invalid(f"Invalid configuration key {key}")
    kind, largest = known
    if math.isnan(value) or math.isinf(value):
        raise _invalid(f"Invalid value {value} for configuration key {key}")
    if value <= 0:
        raise _invalid(f"Quota {key} must be greater than 0")
    if largest is not None:
        if value > largest:
            raise _invalid(f"Proposed value for {key} is too large for the {kind} type")
        if value != int(value):
            raise _invalid(f"{key} must be a whole number of type {kind}")


# --- DescribeClientQuotas: the filter ------------------------------------------------------

class QuotaFilter:
    """``ClientQuotasImage.describe``'s filter: exact names (None: default) and required types."""

    def __init__(self, components: list[tuple[str, int, str | None]], strict: bool) -> None:
        self.exact: dict[str, str | None] = {}
        self.typed: set[str] = set()
        self.strict = strict
        for etype, match_type, match in components:
            self._add(etype, match_type, match)
        types = set(self.exact) | self.typed
        if IP in types and (USER in types or CLIENT_ID in types):
            raise _invalid("Invalid entity filter component combination. IP filter component should "
                           "not be used with user or clientId filter component.")

    def _add(self, etype: str, match_type: int, match: str | None) -> None:
        if not etype:
            raise _invalid("Invalid empty entity type.")
        if etype in self.exact or etype in self.typed:
            raise _invalid(f"Entity type {etype} cannot appear more than once in the filter.")
        if etype not in (USER, CLIENT_ID, IP):
            raise QuotaError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {etype}")
        if match_type == MATCH_EXACT:
            if match is None:
                raise _invalid("Request specified MATCH_TYPE_EXACT, but set match string to null.")
            self.exact[etype] = match
        elif match_type == MATCH_DEFAULT:
            if match is not None:
                raise _invalid("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            self.exact[etype] = None
        elif match_type == MATCH_SPECIFIED:
            if match is not None:
                raise _invalid("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
            self.typed.add(etype)
        else:
            raise _invalid(f"Unknown match type {match_type}")

    def matches(self, entity: Entity) -> bool:
        names = dict(entity)
        if self.strict and len(names) != len(self.exact) + len(self.typed):
            return False
        return all(t in names and names[t] == n for t, n in self.exact.items()) \
            and all(t in names for t in self.typed)


# --- the store -----------------------------------------------------------------------------

class QuotaStore:
    """{entity: {key: value}}; empty entities are dropped.  ``version`` moves on every change so
    the enforcer can cache its lookups."""

    def __init__(self, data_dir: Path | None) -> None:
        self.path = None if data_dir is None else Path(data_dir) / FILE_NAME
        self.quotas: dict[Entity, dict[str, float]] = {}
        self.version = 0

    def load(self) -> None:
        self.quotas = {}
        if self.path is not None and self.path.exists():
            data = json.loads(self.path.read_text(encoding="utf-8"))
            for row in data["entries"]:
                entity = tuple(sorted((t, n) for t, n in row["entity"]))
                self.quotas[entity] = {k: float(v) for k, v in row["values"].items()}
        self.version += 1

    def changed(self, changes: dict[Entity, dict[str, float | None]]) -> dict[Entity, dict[str, float]]:
        """The quotas after ``changes`` ({entity: {key: value or None to remove}}), not yet applied."""
        out = {e: dict(v) for e, v in self.quotas.items()}
        for entity, ops in changes.items():
            values = out.setdefault(entity, {})
            for key, value in ops.items():
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = value
            if not values:
                del out[entity]
        return out

    def save(self, quotas: dict[Entity, dict[str, float]]) -> None:
        """Durable first (call off the loop), then ``apply``."""
        if self.path is None:
            return
        rows = [{"entity": [list(p) for p in e], "values": v}
                for e, v in sorted(quotas.items(), key=lambda kv: repr(kv[0]))]
        atomic_write_text(self.path, json.dumps({"version": 1, "entries": rows}, indent=1) + "\n")

    def apply(self, quotas: dict[Entity, dict[str, float]]) -> None:
        self.quotas = quotas
        self.version += 1

    def describe(self, flt: QuotaFilter) -> list[tuple[Entity, dict[str, float]]]:
        return [(e, v) for e, v in self.quotas.items() if flt.matches(e)]

    def quota_for(self, user: str, client_id: str, key: str) -> tuple[Entity, float] | None:
        """The first of Kafka's eight levels (``DefaultQuotaCallback``) with ``key`` set: the entity
        whose quota the pair shares, and the bound."""
        for entity in _levels(user, client_id):
            value = self.quotas.get(entity, {}).get(key)
            if value is not None:
                return entity, value
        return None


def _levels(user: str, client_id: str) -> list[Entity]:
    return [((CLIENT_ID, client_id), (USER, user)), ((CLIENT_ID, None), (USER, user)), ((USER, user),),
            ((CLIENT_ID, client_id), (USER, None)), ((CLIENT_ID, None), (USER, None)), ((USER, None),),
            ((CLIENT_ID, client_id),), ((CLIENT_ID, None),)]
