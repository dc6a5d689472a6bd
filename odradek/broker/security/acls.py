"""ACLs and the authorization decision, sans I/O (Kafka's ``StandardAuthorizer``).

An ACL binds a resource pattern (type, name, LITERAL or PREFIXED) to an
entry (principal, host, operation, ALLOW/DENY).  ``AclAuthorizer.authorize``
decides one (principal, host, operation, resource) the way
``StandardAuthorizerData.authorize`` does: super users first, then the ACLs
whose pattern matches the resource (LITERAL equal name, LITERAL ``*``,
PREFIXED prefix), of which those for the principal (or ``User:*``) and host
(or ``*``) whose operation matches apply; any DENY wins, else any ALLOW;
with no ACL on the resource at all, ``allow.everyone.if.no.acl.found``.
Filters (``AclFilter``) follow ``AclBindingFilter.matches``: ANY/MATCH
pattern filters and exact principal/host strings.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

import structlog

from ..logging_setup import enabled

AUDIT_COMPONENT = "odradek.authorizer"
log = structlog.get_logger(AUDIT_COMPONENT)

WILDCARD = "*"  # a LITERAL resource name, a host: every one
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


Op = AclOperation
# an ALLOW of one of these also allows DESCRIBE / DESCRIBE_CONFIGS (StandardAuthorizerData)
IMPLIES_DESCRIBE = frozenset({Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS})

# what the authorized-operations bit fields report per type (AclEntry.supportedOperations)
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER,
                         Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    ResourceType.GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    ResourceType.CLUSTER: (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                           Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (Op.DESCRIBE, Op.WRITE),
    ResourceType.DELEGATION_TOKEN: (Op.DESCRIBE,),
    ResourceType.USER: (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS),
}


def bit_field(ops: Iterable[AclOperation]) -> int:
    """Kafka's ``Utils.to32BitField``: bit n set for operation code n."""
    return sum(1 << int(op) for op in set(ops))


def _pascal(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One stored ACL (Kafka's ``StandardAcl``)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermission

    def to_json(self) -> dict:
        return {"resource_type": self.resource_type.name, "resource_name": self.resource_name,
                "pattern_type": self.pattern_type.name, "principal": self.principal,
                "host": self.host, "operation": self.operation.name,
                "permission": self.permission.name}

    @classmethod
    def from_json(cls, d: dict) -> AclBinding:
        return cls(ResourceType[d["resource_type"]], d["resource_name"], PatternType[d["pattern_type"]],
                   d["principal"], d["host"], AclOperation[d["operation"]], AclPermission[d["permission"]])

    def __str__(self) -> str:
        return (f"StandardAcl(resourceType={self.resource_type.name}, resourceName={self.resource_name}, "
                f"patternType={self.pattern_type.name}, principal={self.principal}, host={self.host}, "
                f"operation={self.operation.name}, permissionType={self.permission.name})")


class InvalidAcl(ValueError):
    """A binding or filter Kafka refuses with INVALID_REQUEST (the message is Kafka's)."""


def validate_binding(b: AclBinding) -> None:
    """``AclControlManager.validateNewAcl``: what CreateAcls refuses, per creation."""
    if b.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise InvalidAcl(f"Invalid resourceType {b.resource_type.name}")
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidAcl(f"Invalid patternType {b.pattern_type.name}")
    if b.operation in (Op.UNKNOWN, Op.ANY):
        raise InvalidAcl(f"Invalid operation {b.operation.name}")
    if b.permission not in (AclPermission.ALLOW, AclPermission.DENY):
        raise InvalidAcl(f"Invalid permissionType {b.permission.name}")
    if not b.resource_name:
        raise InvalidAcl("Resource name should not be empty")
    if b.resource_type is ResourceType.CLUSTER and b.resource_name != CLUSTER_NAME:
        raise InvalidAcl("The only valid name for the CLUSTER resource is kafka-cluster")
    if ":" not in b.principal:
        raise InvalidAcl(f"Could not parse principal from `{b.principal}` (no colon is present separating "
                         "the principal type from the principal name)")


def _enum(cls, value: int):
    """An out-of-range wire code reads as UNKNOWN, as Kafka's ``fromCode`` does."""
    try:
        return cls(value)
    except ValueError:
        return cls.UNKNOWN


def binding(resource_type: int, name: str, pattern_type: int, principal: str, host: str,
            operation: int, permission: int) -> AclBinding:
    return AclBinding(_enum(ResourceType, resource_type), name, _enum(PatternType, pattern_type),
                      principal, host, _enum(AclOperation, operation), _enum(AclPermission, permission))


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Kafka's ``AclBindingFilter``: None / ANY match anything, MATCH what applies to a name."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermission

    @classmethod
    def of(cls, resource_type: int, name: str | None, pattern_type: int, principal: str | None,
           host: str | None, operation: int, permission: int) -> AclFilter:
        return cls(_enum(ResourceType, resource_type), name, _enum(PatternType, pattern_type),
                   principal, host, _enum(AclOperation, operation), _enum(AclPermission, permission))

    def unknown_field(self) -> str | None:
        """Why Kafka refuses the filter (``AclControlManager.validateFilter``), or None."""
        if self.resource_type is ResourceType.UNKNOWN or self.pattern_type is PatternType.UNKNOWN:
            return "Unknown patternFilter."
        if self.operation is Op.UNKNOWN or self.permission is AclPermission.UNKNOWN:
            return "Unknown entryFilter."
        return None

    def matches(self, b: AclBinding) -> bool:
        return self._pattern_matches(b) and self._entry_matches(b)

    def _pattern_matches(self, b: AclBinding) -> bool:
        """``ResourcePatternFilter.matches``."""
        if self.resource_type is not ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        pt = self.pattern_type
        if pt not in (PatternType.ANY, PatternType.MATCH) and pt != b.pattern_type:
            return False
        name = self.resource_name
        if name is None:
            return True
        if pt is PatternType.ANY or pt == b.pattern_type:
            return name == b.resource_name
        # MATCH: the ACLs that apply to a resource named `name`
        if b.pattern_type is PatternType.LITERAL:
            return name == b.resource_name or b.resource_name == WILDCARD
        return name.startswith(b.resource_name)

    def _entry_matches(self, b: AclBinding) -> bool:
        """``AccessControlEntryFilter.matches``: exact strings, ANY codes."""
        return ((self.principal is None or self.principal == b.principal)
                and (self.host is None or self.host == b.host)
                and (self.operation is Op.ANY or self.operation == b.operation)
                and (self.permission is AclPermission.ANY or self.permission == b.permission))


def _operation_applies(acl: AclBinding, op: AclOperation) -> bool:
    """``StandardAuthorizerData.findResult``'s operation test: ALL, equal, or implied by an ALLOW."""
    if acl.operation is Op.ALL or acl.operation == op:
        return True
    if acl.permission is AclPermission.ALLOW:
        if op is Op.DESCRIBE:
            return acl.operation in IMPLIES_DESCRIBE
        if op is Op.DESCRIBE_CONFIGS:
            return acl.operation in IMPLIES_DESCRIBE_CONFIGS
    return False


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    rule: str  # what decided, for the audit line


class AclAuthorizer:
    """The ACL set, indexed by resource type, and the decision over it.

    Decisions are cached per (principal, host, operation, type, name) until
    the ACL set changes: a produce or fetch loop asks the same question on
    every request.
    """

    CACHE_LIMIT = 20_000

    def __init__(self, super_users: Iterable[str] = (), allow_if_no_acl: bool = False) -> None:
        self.super_users = frozenset(s.strip() for s in super_users if s.strip())
        self.allow_if_no_acl = allow_if_no_acl
        self._acls: set[AclBinding] = set()
        self._literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._prefixed: dict[ResourceType, list[AclBinding]] = {}
        self._cache: dict[tuple, Decision] = {}

    # --- the ACL set -------------------------------------------------------------------

    def acls(self) -> list[AclBinding]:
        return list(self._acls)

    def replace_all(self, acls: Iterable[AclBinding]) -> None:
        self._acls = set(acls)
        self._reindex()

    def add(self, acls: Iterable[AclBinding]) -> None:
        self._acls.update(acls)
        self._reindex()

    def remove(self, acls: Iterable[AclBinding]) -> None:
        self._acls.difference_update(acls)
        self._reindex()

    def _reindex(self) -> None:
        literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        prefixed: dict[ResourceType, list[AclBinding]] = {}
        for acl in self._acls:
            if acl.pattern_type is PatternType.PREFIXED:
                prefixed.setdefault(acl.resource_type, []).append(acl)
            else:
                literal.setdefault((acl.resource_type, acl.resource_name), []).append(acl)
        self._literal, self._prefixed = literal, prefixed
        self._cache = {}

    def matching(self, flt: AclFilter) -> list[AclBinding]:
        return sorted((a for a in self._acls if flt.matches(a)), key=_sort_key)

    # --- decisions ---------------------------------------------------------------------

    def resource_acls(self, rtype: ResourceType, name: str) -> list[AclBinding]:
        """Every ACL whose pattern matches the resource (any principal, host, operation)."""
        out = list(self._literal.get((rtype, name), ()))
        if name != WILDCARD:
            out.extend(self._literal.get((rtype, WILDCARD), ()))
        out.extend(a for a in self._prefixed.get(rtype, ()) if name.startswith(a.resource_name))
        return out

    def decide(self, principal: str, host: str, op: AclOperation, rtype: ResourceType,
               name: str) -> Decision:
        key = (principal, host, op, rtype, name)
        found = self._cache.get(key)
        if found is None:
            found = self._decide(principal, host, op, rtype, name)
            if len(self._cache) >= self.CACHE_LIMIT:
                self._cache = {}
            self._cache[key] = found
        return found

    def _decide(self, principal: str, host: str, op: AclOperation, rtype: ResourceType,
                name: str) -> Decision:
        if principal in self.super_users:
            return Decision(True, "SuperUser")
        acls = self.resource_acls(rtype, name)
        allow: AclBinding | None = None
        for acl in acls:
            if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.host != WILDCARD and acl.host != host:
                continue
            if not _operation_applies(acl, op):
                continue
            if acl.permission is AclPermission.DENY:
                return Decision(False, f"MatchingAcl(acl={acl})")
            allow = allow or acl
        if allow is not None:
            return Decision(True, f"MatchingAcl(acl={allow})")
        if not acls:  # no ACL names the resource: allow.everyone.if.no.acl.found decides
            return Decision(self.allow_if_no_acl, "DefaultAllow" if self.allow_if_no_acl else "DefaultDeny")
        return Decision(False, "DefaultDeny")

    def authorize(self, principal: str, host: str, op: AclOperation, rtype: ResourceType, name: str,
                  request: str = "", *, audit: bool = True) -> bool:
        """The decision, with Kafka's audit line (``kafka.authorizer.logger``): debug when
        allowed, info when denied; ``audit=False`` for bit fields and filtering, as Kafka's
        ``logIfAllowed``/``logIfDenied`` flags."""
        d = self.decide(principal, host, op, rtype, name)
        if audit and enabled(AUDIT_COMPONENT, logging.DEBUG if d.allowed else logging.INFO):
            line = log.debug if d.allowed else log.info
            line("authorizer.decision",
                 message=(f"Principal = {principal} is {'Allowed' if d.allowed else 'Denied'} "
                          f"operation = {op.name} from host = {host} on resource = "
                          f"{_pascal(rtype.name)}:LITERAL:{name} for request = {request} with "
                          f"resourceRefCount = 1 based on rule {d.rule}"))
        return d.allowed

    def authorize_any(self, principal: str, host: str, op: AclOperation, rtype: ResourceType) -> bool:
        """``authorizeByResourceType``: may the principal ``op`` on *some* resource of the type?

        Allowed when allowed on a resource no ACL names (super users,
        allow-everyone), else when an applying ALLOW exists that no DENY
        cancels: LITERAL ``*``, or a name not denied by a DENY LITERAL of
        that name or a DENY PREFIXED of its prefix.  A DENY LITERAL ``*``
        denies everything.
        """
        if self.decide(principal, host, op, rtype, "hardcode").allowed:
            return True

        def applies(acl: AclBinding) -> bool:
            return ((acl.principal == principal or acl.principal == WILDCARD_PRINCIPAL)
                    and (acl.host == WILDCARD or acl.host == host)
                    and (acl.operation is Op.ALL or acl.operation == op))

        mine = [a for a in self._acls if a.resource_type == rtype and applies(a)]
        denies = [a for a in mine if a.permission is AclPermission.DENY]
        if any(a.pattern_type is PatternType.LITERAL and a.resource_name == WILDCARD for a in denies):
            return False
        for a in mine:
            if a.permission is not AclPermission.ALLOW:
                continue
            if a.pattern_type is PatternType.LITERAL and a.resource_name == WILDCARD:
                return True
            if not any(_covers(d, a) for d in denies):
                return True
        return False

    def authorized_operations(self, principal: str, host: str, rtype: ResourceType, name: str) -> int:
        """The bit field of the type's supported operations the principal may perform."""
        return bit_field(op for op in SUPPORTED_OPERATIONS[rtype]
                         if self.decide(principal, host, op, rtype, name).allowed)


def _covers(deny: AclBinding, allow: AclBinding) -> bool:
    """Does the DENY shadow every resource the ALLOW pattern names?"""
    if deny.pattern_type is PatternType.LITERAL:
        return allow.pattern_type is PatternType.LITERAL and deny.resource_name == allow.resource_name
    return allow.resource_name.startswith(deny.resource_name)


def _sort_key(a: AclBinding) -> tuple:
    return (a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation,
            a.permission)
