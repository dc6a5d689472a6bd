"""The authorizer as the handlers see it: ``authorize(ctx, op, type, name)`` and friends.

``Authorizer`` joins the sans-I/O decision (``acls.AclAuthorizer``) to the
durable store and to the request context (principal, client host, API name
for the audit line).  The app holds one only when ``authorizer.class.name``
names Kafka's authorizer; with none, handlers skip every check (Kafka's
``authorizer: Option[Authorizer]`` is ``None``), so security off costs nothing.
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from ...protocol.registry import APIS
from ..config import Config, parse_super_users
from .acl_store import AclStore
from .acls import AclAuthorizer, AclBinding, AclOperation, ResourceType

if TYPE_CHECKING:
    from ..dispatch import RequestContext


class Authorizer:
    def __init__(self, data_dir: Path, super_users: Iterable[str] = (),
                 allow_if_no_acl: bool = False) -> None:
        self.acls = AclAuthorizer(super_users, allow_if_no_acl)
        self.store = AclStore(data_dir)
        self._writing = asyncio.Lock()  # one change at a time: each saves the set the last one left

    @classmethod
    def from_config(cls, config: Config, data_dir: Path) -> Authorizer | None:
        if not config["authorizer.class.name"]:
            return None
        return cls(data_dir, parse_super_users(config["super.users"]),
                   config["allow.everyone.if.no.acl.found"])

    def load(self) -> None:
        self.acls.replace_all(self.store.load())

    # --- changes: durable first (the file written and fsynced off the loop), then applied ---

    async def create(self, bindings: list[AclBinding]) -> None:
        async with self._writing:
            await asyncio.to_thread(self.store.save, set(self.acls.acls()) | set(bindings))
            self.acls.add(bindings)

    async def delete(self, bindings: list[AclBinding]) -> None:
        async with self._writing:
            await asyncio.to_thread(self.store.save, set(self.acls.acls()) - set(bindings))
            self.acls.remove(bindings)

    # --- checks ---------------------------------------------------------------------------

    def allowed(self, ctx: RequestContext, op: AclOperation, rtype: ResourceType, name: str,
                *, audit: bool = True) -> bool:
        return self.acls.authorize(ctx.principal, _host(ctx), op, rtype, name,
                                   _request_name(ctx), audit=audit)

    def allowed_names(self, ctx: RequestContext, op: AclOperation, rtype: ResourceType,
                      names: Iterable[str], *, audit: bool = True) -> set[str]:
        """The subset of ``names`` allowed (Kafka's ``AuthHelper.filterByAuthorized``)."""
        return {n for n in set(names) if self.allowed(ctx, op, rtype, n, audit=audit)}

    def cluster(self, ctx: RequestContext, op: AclOperation, *, audit: bool = True) -> bool:
        return self.allowed(ctx, op, ResourceType.CLUSTER, "kafka-cluster", audit=audit)

    def any_of_type(self, ctx: RequestContext, op: AclOperation, rtype: ResourceType) -> bool:
        return self.acls.authorize_any(ctx.principal, _host(ctx), op, rtype)

    def operations(self, ctx: RequestContext, rtype: ResourceType, name: str) -> int:
        return self.acls.authorized_operations(ctx.principal, _host(ctx), rtype, name)


def _host(ctx: RequestContext) -> str:
    """The client's address as ACL hosts are written: ``InetAddress.getHostAddress()``, which
    has no leading ``/`` (the connection keeps Kafka's ``/1.2.3.4`` form for DescribeGroups)."""
    host = ctx.client_host.lstrip("/")
    return java_host_address(host) if ":" in host else host


@lru_cache(maxsize=1024)
def java_host_address(host: str) -> str:
    """An IPv6 peer as Java prints it: eight groups, no ``::`` compression, no leading zeros
    (``::1`` -> ``0:0:0:0:0:0:0:1``); an IPv4-mapped one as the IPv4 address Java makes of it."""
    address, sep, scope = host.partition("%")
    try:
        ip = ipaddress.IPv6Address(address)
    except ValueError:
        return host
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    text = ":".join(f"{int(group, 16):x}" for group in ip.exploded.split(":"))
    return text + sep + scope


def _request_name(ctx: RequestContext) -> str:
    spec = APIS.get(ctx.api_key)
    return spec.name if spec is not None else str(ctx.api_key)
