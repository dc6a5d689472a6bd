"""Per-API authorization: what ``KafkaApis`` checks before each request is served.

One mechanism for every API: a guard sees the request, asks the authorizer,
and either answers a denied request outright (Kafka's error answer for it,
``error_answers.error_answer``) or hands the handler the part it may serve
(the topics, partitions or groups allowed) and merges the denied entries
into the handler's answer.  Handlers stay unaware of security; ``install``
wraps the registered handlers only when an authorizer is configured, so a
broker without ACLs pays nothing.

Kafka checks authorization before existence (an unauthorized unknown topic
gets TOPIC_AUTHORIZATION_FAILED, never UNKNOWN_TOPIC_OR_PARTITION), and so
do the guards: they run before the handler.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from ...protocol.errors import ErrorCode
from ...protocol.primitives import ZERO_UUID
from ..dispatch import AUTHORIZED_TOPICS, NO_RESPONSE, HandlerTable, RequestContext, after
from ..error_answers import error_answer
from .acls import AclOperation as Op
from .acls import ResourceType as R
from .authorizer import Authorizer

if TYPE_CHECKING:
    from ..config import Config
    from ..coordinator.service import Coordinator
    from ..dataplane import TopicRegistry
    from ..security.authorizer import Authorizer


class GuardServices(Protocol):
    """What the guards use of the broker (``BrokerApp`` wires it): the authorizer, the topics
    and settings a guard consults (auto-creation), and the group coordinator (whether share
    groups are on: Kafka answers that before any ACL check)."""

    authorizer: Authorizer | None
    config: Config
    topics: TopicRegistry
    coordinator: Coordinator | None


OMITTED = -2147483648
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
TXN_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
AUTH_FAILED_MESSAGE = "Authorization failed."

Inner = Callable[[RequestContext, Any], Any]
Guard = Callable[["Guarded", RequestContext, Any], Any]
GUARDS: dict[int, Guard] = {}


def guard(*api_keys: int) -> Callable[[Guard], Guard]:
    def add(fn: Guard) -> Guard:
        for key in api_keys:
            GUARDS[key] = fn
        return fn
    return add


def install(table: HandlerTable, app: GuardServices) -> None:
    """Wrap every served API that has a guard (after all handlers are registered)."""
    authz = app.authorizer
    if authz is None:
        return
    for key, fn in GUARDS.items():
        handler = table.get(key)
        if handler is not None:
            handler.fn = partial(fn, Guarded(authz, app, handler.fn))
    table.routes.clear()


class Guarded:
    """What a guard works with: the authorizer, the app and the handler it protects."""

    __slots__ = ("authz", "app", "inner")

    def __init__(self, authz: Authorizer, app: GuardServices, inner: Inner) -> None:
        self.authz = authz
        self.app = app
        self.inner = inner

    def share_groups_off(self) -> bool:
        coordinator = self.app.coordinator
        return coordinator is not None and not coordinator.share_groups_enabled()


# --- plumbing ------------------------------------------------------------------------------

def _with(req: Any, **fields: Any) -> Any:
    """A shallow copy of the decoded request with some fields replaced."""
    out = copy.copy(req)
    for k, v in fields.items():
        out[k] = v
    return out


def _denied(ctx: RequestContext, req: Any, code: ErrorCode) -> Any:
    """Kafka's whole-request error answer (None: acks=0, nothing is sent)."""
    body = error_answer(ctx.api_key, ctx.api_version, req, code)
    return NO_RESPONSE if body is None else body


def _split(g: Guarded, ctx: RequestContext, req: Any, list_field: str, name: Callable[[Any], str],
           op: Op, rtype: R, code: ErrorCode, answer_field: str,
           serve: Callable[[Any], Any] | None = None) -> Any:
    """The common case: a list of named items, each allowed or answered with ``code``; an item
    ``name`` gives None (a topic id no topic has) is served, as Kafka resolves ids before ACLs.

    The handler serves the allowed items (not called at all when none is);
    the denied ones get Kafka's error entries, appended to its answer.
    """
    items = req[list_field] or []
    allowed = g.authz.allowed_names(ctx, op, rtype, (n for i in items if (n := name(i)) is not None))
    allowed.add(None)  # an item without a name (an unknown topic id) is the handler's to answer
    kept = [i for i in items if name(i) in allowed]
    if len(kept) == len(items):
        return (serve or partial(g.inner, ctx))(req)
    refused = _denied(ctx, _with(req, **{list_field: [i for i in items if name(i) not in allowed]}), code)
    if not kept:
        return refused
    served = (serve or partial(g.inner, ctx))(_with(req, **{list_field: kept}))
    if refused is NO_RESPONSE:  # acks=0: nothing is answered anyway
        return served

    def merge(body: dict) -> dict:
        body[answer_field] = list(body[answer_field]) + list(refused[answer_field])
        return body
    return after(served, merge)


# --- data plane ----------------------------------------------------------------------------

def _transactional(req: Any) -> bool:
    """Any batch flagged transactional (attributes bit 4), as ``ProduceRequest.hasTransactionalRecords``."""
    for t in req.topic_data:
        for p in t.partition_data:
            records = p.records
            if isinstance(records, (bytes, bytearray, memoryview)) and len(records) >= 23 \
                    and records[16] == 2 and records[22] & 0x10:
                return True
    return False


@guard(0)
def produce(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    """WRITE on the transactional id when transactional, then WRITE on each topic."""
    txn = req.transactional_id if ctx.api_version >= 3 else None
    if txn is not None or _transactional(req):
        if txn is None or not g.authz.allowed(ctx, Op.WRITE, R.TRANSACTIONAL_ID, txn):
            return _denied(ctx, req, TXN_DENIED)
    if ctx.api_version >= 13:  # by topic id: resolved before the ACLs, an unknown id is UNKNOWN_TOPIC_ID
        g.app.topics.name_items_by_id(req.topic_data, g.app.cluster_id)
    return _split(g, ctx, req, "topic_data", lambda t: t.name, Op.WRITE, R.TOPIC, TOPIC_DENIED,
                  "responses")


@guard(1)
def fetch(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    """A replica's fetch needs CLUSTER_ACTION; a consumer's READ on each topic it reads, checked
    by the handler (``AUTHORIZED_TOPICS``) once topic ids are resolved and a session's partitions
    known; a denied one is TOPIC_AUTHORIZATION_FAILED there (``KafkaApis.handleFetchRequest``)."""
    replica = req.replica_state.replica_id if ctx.api_version >= 15 else req.replica_id
    if replica >= 0:
        if not g.authz.cluster(ctx, Op.CLUSTER_ACTION):
            return _denied(ctx, req, TOPIC_DENIED)
        return g.inner(ctx, req)
    req[AUTHORIZED_TOPICS] = partial(g.authz.allowed_names, ctx, Op.READ, R.TOPIC)
    return g.inner(ctx, req)


@guard(2)
def list_offsets(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    return _split(g, ctx, req, "topics", lambda t: t.name, Op.DESCRIBE, R.TOPIC, TOPIC_DENIED, "topics")


@guard(21)
def delete_records(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    return _split(g, ctx, req, "topics", lambda t: t.name, Op.DELETE, R.TOPIC, TOPIC_DENIED, "topics")


@guard(23)
def offset_for_leader_epoch(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    if g.authz.cluster(ctx, Op.CLUSTER_ACTION, audit=False):
        return g.inner(ctx, req)
    return _split(g, ctx, req, "topics", lambda t: t.topic, Op.DESCRIBE, R.TOPIC, TOPIC_DENIED, "topics")


@guard(22)
def init_producer_id(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    """Transactional: WRITE on the id; idempotent: IDEMPOTENT_WRITE on the cluster or WRITE on
    any topic (``KafkaApis.handleInitProducerIdRequest``)."""
    txn = req.transactional_id
    if txn is not None:
        if not g.authz.allowed(ctx, Op.WRITE, R.TRANSACTIONAL_ID, txn):
            return _denied(ctx, req, TXN_DENIED)
    elif not (g.authz.cluster(ctx, Op.IDEMPOTENT_WRITE, audit=False)
              or g.authz.any_of_type(ctx, Op.WRITE, R.TOPIC)):
        return _denied(ctx, req, CLUSTER_DENIED)
    return g.inner(ctx, req)


# --- metadata and topics -------------------------------------------------------------------

def _topic_ops(g: Guarded, ctx: RequestContext, entries: list) -> None:
    """Fill the requested topic bit fields with what this principal may do."""
    for e in entries:
        if e.get("topic_authorized_operations", OMITTED) != OMITTED and e.get("name") is not None \
                and e.get("error_code", 0) == 0:
            e["topic_authorized_operations"] = g.authz.operations(ctx, R.TOPIC, e["name"])


def _cluster_ops(g: Guarded, ctx: RequestContext) -> int:
    if not g.authz.cluster(ctx, Op.DESCRIBE, audit=False):
        return 0
    return g.authz.operations(ctx, R.CLUSTER, "kafka-cluster")


def _topic_denied_entry(name: str | None, topic_id: Any = ZERO_UUID) -> dict:
    return {"error_code": TOPIC_DENIED, "name": name, "topic_id": topic_id, "is_internal": False,
            "partitions": [], "topic_authorized_operations": OMITTED}


@guard(3)
def metadata(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    """DESCRIBE filters the topics (all-topics: silently); auto-creation needs CREATE on the
    cluster or on the topic (``KafkaApis.handleTopicMetadataRequest``)."""
    app, authz = g.app, g.authz
    all_topics = req.topics is None or (ctx.api_version == 0 and not req.topics)
    denied: list[dict] = []
    if not all_topics:
        kept = []
        for t in req.topics:
            name = t.name
            if name is None:  # by id (v12+): resolved for the check, the handler answers unknown ids
                found = app.topics.name_by_id(t.topic_id, app.cluster_id) if ctx.api_version >= 12 else None
                if found is not None and not authz.allowed(ctx, Op.DESCRIBE, R.TOPIC, found):
                    denied.append(_topic_denied_entry(None, t.topic_id))
                    continue
                kept.append(t)
                continue
            if not authz.allowed(ctx, Op.DESCRIBE, R.TOPIC, name):
                denied.append(_topic_denied_entry(name))
            elif _would_create(app, req, name) and not _may_create(g, ctx, name):
                denied.append(_topic_denied_entry(name))
            else:
                kept.append(t)
        if denied:
            req = _with(req, topics=kept)

    def shape(body: dict) -> dict:
        topics = list(body["topics"])
        if all_topics:
            visible = authz.allowed_names(ctx, Op.DESCRIBE, R.TOPIC, (t["name"] for t in topics), audit=False)
            topics = [t for t in topics if t["name"] in visible]
        topics.extend(denied)
        _topic_ops(g, ctx, topics)
        body["topics"] = topics
        if 8 <= ctx.api_version <= 10 and req.include_cluster_authorized_operations:
            body["cluster_authorized_operations"] = _cluster_ops(g, ctx)
        return body
    return after(g.inner(ctx, req), shape)


def _would_create(app: GuardServices, req: Any, name: str) -> bool:
    return (bool(req.allow_auto_topic_creation) and app.config["auto.create.topics.enable"]
            and app.topics.get(name) is None)


def _may_create(g: Guarded, ctx: RequestContext, name: str) -> bool:
    return g.authz.cluster(ctx, Op.CREATE, audit=False) or g.authz.allowed(ctx, Op.CREATE, R.TOPIC, name)


@guard(75)
def describe_topic_partitions(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    authz = g.authz
    if not req.topics:  # all topics: the ones not describable are left out
        def visible(body: dict) -> dict:
            names = authz.allowed_names(ctx, Op.DESCRIBE, R.TOPIC, (t["name"] for t in body["topics"]),
                                        audit=False)
            body["topics"] = [t for t in body["topics"] if t["name"] in names]
            _topic_ops(g, ctx, body["topics"])
            return body
        return after(g.inner(ctx, req), visible)

    def ops(body: dict) -> dict:
        _topic_ops(g, ctx, body["topics"])
        return body
    return after(_split(g, ctx, req, "topics", lambda t: t.name, Op.DESCRIBE, R.TOPIC, TOPIC_DENIED,
                        "topics"), ops)


@guard(19)
def create_topics(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    """CREATE on the cluster, else on each topic; configs shown only with DESCRIBE_CONFIGS."""
    authz = g.authz
    counts = Counter(t.name for t in req.topics)
    if not authz.cluster(ctx, Op.CREATE, audit=False):
        # a name given twice is the handler's INVALID_REQUEST, whatever the ACLs
        allowed = authz.allowed_names(ctx, Op.CREATE, R.TOPIC, (t.name for t in req.topics if counts[t.name] == 1))
        refused = [t for t in req.topics if counts[t.name] == 1 and t.name not in allowed]
        if refused:
            kept = [t for t in req.topics if t not in refused]
            denied = _denied(ctx, _with(req, topics=refused), TOPIC_DENIED)["topics"]
            for d in denied:
                d["error_message"] = AUTH_FAILED_MESSAGE
            served = g.inner(ctx, _with(req, topics=kept)) if kept else {"throttle_time_ms": 0, "topics": []}
            return after(served, lambda body: _configs_visible(g, ctx, body, denied))
    return after(g.inner(ctx, req), lambda body: _configs_visible(g, ctx, body, []))


def _configs_visible(g: Guarded, ctx: RequestContext, body: dict, denied: list[dict]) -> dict:
    topics = list(body["topics"])
    for t in topics:
        if t.get("error_code", 0) == 0 and \
                not g.authz.allowed(ctx, Op.DESCRIBE_CONFIGS, R.TOPIC, t["name"], audit=False):
            t["topic_config_error_code"] = TOPIC_DENIED
            t["configs"] = []
    body["topics"] = topics + denied
    return body


@guard(20)
def delete_topics(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    """DELETE on the cluster, else DESCRIBE and DELETE on each topic (by name or id)."""
    authz, app = g.authz, g.app
    if authz.cluster(ctx, Op.DELETE, audit=False):
        return g.inner(ctx, req)
    by_id = ctx.api_version >= 6
    items = list(req.topics) if by_id else list(req.topic_names)
    kept, refused = [], []
    for item in items:
        name = item.name if by_id else item
        if by_id and name is None:
            name = app.topics.name_by_id(item.topic_id, app.cluster_id)
            if name is None:  # the handler answers UNKNOWN_TOPIC_ID
                kept.append(item)
                continue
            if not authz.allowed(ctx, Op.DESCRIBE, R.TOPIC, name):
                refused.append({"name": None, "topic_id": item.topic_id, "error_code": TOPIC_DENIED,
                                "error_message": AUTH_FAILED_MESSAGE})
                continue
        elif not authz.allowed(ctx, Op.DESCRIBE, R.TOPIC, name):
            refused.append(_delete_denied(item, name, by_id))
            continue
        if not authz.allowed(ctx, Op.DELETE, R.TOPIC, name):
            refused.append(_delete_denied(item, item.name if by_id else name, by_id))
            continue
        kept.append(item)
    if not refused:
        return g.inner(ctx, req)
    field = "topics" if by_id else "topic_names"
    served = g.inner(ctx, _with(req, **{field: kept})) if kept else {"throttle_time_ms": 0, "responses": []}

    def merge(body: dict) -> dict:
        body["responses"] = list(body["responses"]) + refused
        return body
    return after(served, merge)


def _delete_denied(item: Any, name: str | None, by_id: bool) -> dict:
    return {"name": name, "topic_id": item.topic_id if by_id else ZERO_UUID, "error_code": TOPIC_DENIED,
            "error_message": AUTH_FAILED_MESSAGE}


@guard(37)
def create_partitions(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    return _split(g, ctx, req, "topics", lambda t: t.name, Op.ALTER, R.TOPIC, TOPIC_DENIED, "results")


# APIs that need one operation on the cluster, else Kafka's whole-request error answer:
# ElectLeaders (ALTER), client quotas (DESCRIBE_CONFIGS / ALTER_CONFIGS, as
# ``KafkaApis.handleDescribeClientQuotasRequest`` / ``ControllerApis.handleAlterClientQuotas``),
# ListConfigResources (DESCRIBE_CONFIGS, ``KafkaApis.handleListConfigResources``), reassignments
# (ALTER to change, DESCRIBE to list: ``ControllerApis.handleAlterPartitionReassignments``)
# AlterReplicaLogDirs (ALTER, ``KafkaApis.handleAlterReplicaLogDirsRequest``) and UpdateFeatures
# (ALTER, ``ControllerApis.handleUpdateFeatures``)
CLUSTER_OPERATIONS = {43: Op.ALTER, 48: Op.DESCRIBE_CONFIGS, 49: Op.ALTER_CONFIGS, 74: Op.DESCRIBE_CONFIGS,
                      45: Op.ALTER, 46: Op.DESCRIBE, 34: Op.ALTER, 57: Op.ALTER}


@guard(*CLUSTER_OPERATIONS)
def cluster_operation(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    if not g.authz.cluster(ctx, CLUSTER_OPERATIONS[ctx.api_key]):
        return _denied(ctx, req, CLUSTER_DENIED)
    return g.inner(ctx, req)


@guard(35)
def describe_log_dirs(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    """Without DESCRIBE on the cluster: no results (v3+ also a top-level error)."""
    if not g.authz.cluster(ctx, Op.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": CLUSTER_DENIED if ctx.api_version >= 3 else 0,
                "results": []}
    return g.inner(ctx, req)


# --- configs -------------------------------------------------------------------------------

TOPIC_CONFIG, BROKER_CONFIG, BROKER_LOGGER_CONFIG, CLIENT_METRICS_CONFIG, GROUP_CONFIG = 2, 4, 8, 16, 32


def _config_resource_allowed(g: Guarded, ctx: RequestContext, op: Op, r: Any) -> ErrorCode | None:
    """The error for a config resource the principal may not ``op``, else None."""
    if r.resource_type in (BROKER_CONFIG, BROKER_LOGGER_CONFIG, CLIENT_METRICS_CONFIG):  # AuthHelper
        return None if g.authz.cluster(ctx, op) else CLUSTER_DENIED
    if r.resource_type == TOPIC_CONFIG:
        return None if g.authz.allowed(ctx, op, R.TOPIC, r.resource_name) else TOPIC_DENIED
    if r.resource_type == GROUP_CONFIG:
        return None if g.authz.allowed(ctx, op, R.GROUP, r.resource_name) else GROUP_DENIED
    return None  # the handler refuses unknown types


def _configs(g: Guarded, ctx: RequestContext, req: Any, op: Op, answer_field: str) -> Any:
    refused: list[dict] = []
    kept = []
    for r in req.resources:
        code = _config_resource_allowed(g, ctx, op, r)
        if code is None:
            kept.append(r)
        else:
            entry = _denied(ctx, _with(req, resources=[r]), code)[answer_field][0]
            entry["error_message"] = AUTH_FAILED_MESSAGE
            refused.append(entry)
    if not refused:
        return g.inner(ctx, req)
    served = g.inner(ctx, _with(req, resources=kept)) if kept else {"throttle_time_ms": 0, answer_field: []}

    def merge(body: dict) -> dict:
        body[answer_field] = list(body[answer_field]) + refused
        return body
    return after(served, merge)


@guard(32)
def describe_configs(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    return _configs(g, ctx, req, Op.DESCRIBE_CONFIGS, "results")


@guard(33, 44)
def alter_configs(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    return _configs(g, ctx, req, Op.ALTER_CONFIGS, "responses")


# --- cluster -------------------------------------------------------------------------------

@guard(60)
def describe_cluster(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    def ops(body: dict) -> dict:
        if req.include_cluster_authorized_operations:
            body["cluster_authorized_operations"] = _cluster_ops(g, ctx)
        return body
    return after(g.inner(ctx, req), ops)


GROUP_KEY, TXN_KEY, SHARE_KEY = 0, 1, 2


@guard(10)
def find_coordinator(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    """DESCRIBE on the group (key type 0) or transactional id (1); CLUSTER_ACTION for a share
    coordinator (2), which only brokers look up (``KafkaApis.getCoordinator``)."""
    key_type = req.key_type if ctx.api_version >= 1 else GROUP_KEY
    if key_type == SHARE_KEY:
        if not g.authz.cluster(ctx, Op.CLUSTER_ACTION):
            return _denied(ctx, req, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        return g.inner(ctx, req)
    if key_type == TXN_KEY:
        rtype, code = R.TRANSACTIONAL_ID, TXN_DENIED
    elif key_type == GROUP_KEY:
        rtype, code = R.GROUP, GROUP_DENIED
    else:
        return g.inner(ctx, req)  # the handler refuses the key type
    if ctx.api_version < 4:
        if not g.authz.allowed(ctx, Op.DESCRIBE, rtype, req.key):
            return _denied(ctx, req, code)
        return g.inner(ctx, req)
    return _split(g, ctx, req, "coordinator_keys", lambda k: k, Op.DESCRIBE, rtype, code, "coordinators")


# --- groups --------------------------------------------------------------------------------

@guard(11, 12, 13, 14)
def group_member(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    """JoinGroup, Heartbeat, LeaveGroup, SyncGroup: READ on the group."""
    if not g.authz.allowed(ctx, Op.READ, R.GROUP, req.group_id):
        body = _denied(ctx, req, GROUP_DENIED)
        if ctx.api_key == 11:
            body["member_id"] = req.member_id
        return body
    return g.inner(ctx, req)


SHARE_APIS = frozenset({76, 77, 78, 79, 90, 91, 92})  # every share-group API KafkaApis gates


def _share_groups_off(g: Guarded, ctx: RequestContext) -> bool:
    """A share-group API while share groups are off: its handler answers UNSUPPORTED_VERSION
    before any ACL is checked (``KafkaApis.isShareGroupProtocolEnabled`` comes first)."""
    return ctx.api_key in SHARE_APIS and g.share_groups_off()


@guard(68, 76)
def consumer_group_heartbeat(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    """READ on the group, then DESCRIBE on every subscribed topic name (KafkaApis
    ``handleConsumerGroupHeartbeat`` / ``handleShareGroupHeartbeat``: TOPIC_AUTHORIZATION_FAILED
    otherwise)."""
    if _share_groups_off(g, ctx):
        return g.inner(ctx, req)
    if not g.authz.allowed(ctx, Op.READ, R.GROUP, req.group_id):
        return _denied(ctx, req, GROUP_DENIED)
    names = list(req.subscribed_topic_names or [])
    if names and len(g.authz.allowed_names(ctx, Op.DESCRIBE, R.TOPIC, names)) < len(set(names)):
        return _denied(ctx, req, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return g.inner(ctx, req)


@guard(69)
def consumer_group_describe(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    """DESCRIBE on each group (the others answered GROUP_AUTHORIZATION_FAILED)."""
    def ops(body: dict) -> dict:
        for d in body["groups"]:
            if d.get("authorized_operations", OMITTED) != OMITTED:
                d["authorized_operations"] = g.authz.operations(ctx, R.GROUP, d["group_id"])
        return body
    return after(_split(g, ctx, req, "group_ids", lambda n: n, Op.DESCRIBE, R.GROUP, GROUP_DENIED, "groups"),
                 ops)


@guard(77)
def share_group_describe(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    """DESCRIBE on each group (the others answered GROUP_AUTHORIZATION_FAILED); a group whose members
    hold a topic the principal may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED without its
    members (KafkaApis ``handleShareGroupDescribe``)."""
    if _share_groups_off(g, ctx):
        return g.inner(ctx, req)

    def check(body: dict) -> dict:
        for i, d in enumerate(body["groups"]):
            names = {tp["topic_name"] for m in d.get("members") or () for tp in m["assignment"]["topic_partitions"]}
            if names and len(g.authz.allowed_names(ctx, Op.DESCRIBE, R.TOPIC, names)) < len(names):
                body["groups"][i] = {  # a fresh error entry: nothing of the group shows
                    "error_code": TOPIC_DENIED, "group_id": d["group_id"], "group_state": "", "group_epoch": 0,
                    "assignment_epoch": 0, "assignor_name": "", "members": [], "authorized_operations": OMITTED,
                    "error_message": "The group has described topic(s) that the client is not authorized to "
                                     "describe."}
            elif d.get("authorized_operations", OMITTED) != OMITTED:
                d["authorized_operations"] = g.authz.operations(ctx, R.GROUP, d["group_id"])
        return body
    return after(_split(g, ctx, req, "group_ids", lambda n: n, Op.DESCRIBE, R.GROUP, GROUP_DENIED, "groups"),
                 check)


@guard(15)
def describe_groups(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    def ops(body: dict) -> dict:
        for d in body["groups"]:
            if d.get("authorized_operations", OMITTED) != OMITTED:
                d["authorized_operations"] = g.authz.operations(ctx, R.GROUP, d["group_id"])
        return body
    return after(_split(g, ctx, req, "groups", lambda n: n, Op.DESCRIBE, R.GROUP, GROUP_DENIED, "groups"),
                 ops)


@guard(16)
def list_groups(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    """All groups with DESCRIBE on the cluster, else those the principal may describe."""
    if g.authz.cluster(ctx, Op.DESCRIBE, audit=False):
        return g.inner(ctx, req)

    def visible(body: dict) -> dict:
        names = g.authz.allowed_names(ctx, Op.DESCRIBE, R.GROUP, (x["group_id"] for x in body["groups"]),
                                      audit=False)
        body["groups"] = [x for x in body["groups"] if x["group_id"] in names]
        return body
    return after(g.inner(ctx, req), visible)


@guard(42)
def delete_groups(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    return _split(g, ctx, req, "groups_names", lambda n: n, Op.DELETE, R.GROUP, GROUP_DENIED, "results")


@guard(8)
def offset_commit(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    """READ on the group (else every partition 30), then READ on each topic."""
    if not g.authz.allowed(ctx, Op.READ, R.GROUP, req.group_id):
        return _denied(ctx, req, GROUP_DENIED)
    if ctx.api_version >= 10:
        g.app.topics.name_items_by_id(req.topics, g.app.cluster_id)
    return _split(g, ctx, req, "topics", lambda t: t.name, Op.READ, R.TOPIC, TOPIC_DENIED, "topics")


@guard(47)
def offset_delete(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    """DELETE on the group (top-level 30), then READ on each topic (29 per partition)."""
    if not g.authz.allowed(ctx, Op.DELETE, R.GROUP, req.group_id):
        return _denied(ctx, req, GROUP_DENIED)
    items = list(req.topics)
    allowed = g.authz.allowed_names(ctx, Op.READ, R.TOPIC, (t.name for t in items))
    refused = [{"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": TOPIC_DENIED}
                                               for p in t.partitions]} for t in items if t.name not in allowed]
    if not refused:
        return g.inner(ctx, req)
    kept = [t for t in items if t.name in allowed]
    served = g.inner(ctx, _with(req, topics=kept)) if kept else \
        {"throttle_time_ms": 0, "error_code": 0, "topics": []}

    def merge(body: dict) -> dict:
        body["topics"] = list(body["topics"]) + refused
        return body
    return after(served, merge)


def _offset_fetch_denied_topic(t: Any) -> dict:
    return {"name": t.name, "topic_id": t.get("topic_id"), "partitions": [
        {"partition_index": i, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
         "error_code": TOPIC_DENIED} for i in t.partition_indexes]}


@guard(9)
def offset_fetch(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    """DESCRIBE on the group, then DESCRIBE on each topic: named topics denied get 29, an
    all-partitions fetch silently leaves them out (``KafkaApis.handleOffsetFetchRequest``)."""
    authz = g.authz
    if ctx.api_version < 8:
        if not authz.allowed(ctx, Op.DESCRIBE, R.GROUP, req.group_id):
            return _denied(ctx, req, GROUP_DENIED)
        topics = req.topics
        refused: list[dict] = []
        if topics is not None:
            allowed = authz.allowed_names(ctx, Op.DESCRIBE, R.TOPIC, (t.name for t in topics))
            refused = [_offset_fetch_denied_topic(t) for t in topics if t.name not in allowed]
            if refused:
                req = _with(req, topics=[t for t in topics if t.name in allowed])

        def one(body: dict) -> dict:
            body["topics"] = _visible_topics(g, ctx, body["topics"], topics is None) + refused
            return body
        return after(g.inner(ctx, req), one)
    groups = list(req.groups)
    allowed_groups = authz.allowed_names(ctx, Op.DESCRIBE, R.GROUP, (x.group_id for x in groups))
    refused_groups = [{"group_id": x.group_id, "error_code": GROUP_DENIED, "topics": []}
                      for x in groups if x.group_id not in allowed_groups]
    kept, refused_topics, fetch_all = [], {}, {}
    for x in groups:
        if x.group_id not in allowed_groups:
            continue
        fetch_all[x.group_id] = x.topics is None
        if x.topics is not None:
            if ctx.api_version >= 10:  # by id: an id no topic has is the handler's UNKNOWN_TOPIC_ID
                g.app.topics.name_items_by_id(x.topics, g.app.cluster_id)
            allowed = authz.allowed_names(ctx, Op.DESCRIBE, R.TOPIC, (t.name for t in x.topics if t.name is not None))
            allowed.add(None)
            refused_topics[x.group_id] = [_offset_fetch_denied_topic(t) for t in x.topics if t.name not in allowed]
            x = _with(x, topics=[t for t in x.topics if t.name in allowed])
        kept.append(x)
    served = g.inner(ctx, _with(req, groups=kept)) if kept else {"throttle_time_ms": 0, "groups": []}

    def many(body: dict) -> dict:
        out = []
        for entry in body["groups"]:
            gid = entry["group_id"]
            entry["topics"] = (_visible_topics(g, ctx, entry["topics"], fetch_all.get(gid, False))
                               + refused_topics.get(gid, []))
            out.append(entry)
        body["groups"] = out + refused_groups
        return body
    return after(served, many)


def _visible_topics(g: Guarded, ctx: RequestContext, topics: list, fetch_all: bool) -> list:
    topics = list(topics)
    if not fetch_all:
        return topics
    names = g.authz.allowed_names(ctx, Op.DESCRIBE, R.TOPIC, (t["name"] for t in topics), audit=False)
    return [t for t in topics if t["name"] in names]


# --- transactions --------------------------------------------------------------------------
# Field names are Kafka's JSON names in snake case, as every declaration here spells them.

NOT_ATTEMPTED = ErrorCode.OPERATION_NOT_ATTEMPTED


def _txn_allowed(g: Guarded, ctx: RequestContext, txn: str | None) -> bool:
    return txn is not None and g.authz.allowed(ctx, Op.WRITE, R.TRANSACTIONAL_ID, txn)


def _partition_exists(g: Guarded, topic: str, partition: int) -> bool:
    t = g.app.topics.get(topic)
    return t is not None and 0 <= partition < t.partitions


@guard(24)
def add_partitions_to_txn(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    """v0-3 (producers): WRITE on the transactional id (else 53 everywhere), WRITE on each
    topic; when one is denied nothing is added: 29 for it, UNKNOWN_TOPIC_OR_PARTITION for a
    missing partition, OPERATION_NOT_ATTEMPTED for the rest.  v4+ (brokers verifying):
    CLUSTER_ACTION on the cluster (``KafkaApis.handleAddPartitionsToTxnRequest``)."""
    if ctx.api_version >= 4:
        if not g.authz.cluster(ctx, Op.CLUSTER_ACTION):
            return {"throttle_time_ms": 0, "error_code": CLUSTER_DENIED, "results_by_transaction": []}
        return g.inner(ctx, req)
    topics = list(req.v3_and_below_topics)

    def answer(code_of: Callable[[str, int], ErrorCode]) -> dict:
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
            {"name": t.name, "results_by_partition": [
                {"partition_index": p, "partition_error_code": code_of(t.name, p)} for p in t.partitions]}
            for t in topics]}
    if not _txn_allowed(g, ctx, req.v3_and_below_transactional_id):
        return answer(lambda _t, _p: TXN_DENIED)
    allowed = g.authz.allowed_names(ctx, Op.WRITE, R.TOPIC, (t.name for t in topics))
    if len(allowed) == len({t.name for t in topics}):
        return g.inner(ctx, req)

    def code(topic: str, partition: int) -> ErrorCode:
        if topic not in allowed:
            return TOPIC_DENIED
        if not _partition_exists(g, topic, partition):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return NOT_ATTEMPTED
    return answer(code)


@guard(25)
def add_offsets_to_txn(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    if not _txn_allowed(g, ctx, req.transactional_id):
        return {"throttle_time_ms": 0, "error_code": TXN_DENIED}
    if not g.authz.allowed(ctx, Op.READ, R.GROUP, req.group_id):
        return {"throttle_time_ms": 0, "error_code": GROUP_DENIED}
    return g.inner(ctx, req)


@guard(26)
def end_txn(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    if not _txn_allowed(g, ctx, req.transactional_id):
        return {"throttle_time_ms": 0, "error_code": TXN_DENIED, "producer_id": -1, "producer_epoch": -1}
    return g.inner(ctx, req)


@guard(28)
def txn_offset_commit(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    """WRITE on the transactional id (53 everywhere), READ on the group (30 everywhere), READ
    on each topic (29 for its partitions, the others committed)."""
    if not _txn_allowed(g, ctx, req.transactional_id):
        return _denied(ctx, req, TXN_DENIED)
    if not g.authz.allowed(ctx, Op.READ, R.GROUP, req.group_id):
        return _denied(ctx, req, GROUP_DENIED)
    if ctx.api_version >= 10:
        g.app.topics.name_items_by_id(req.topics, g.app.cluster_id)
    return _split(g, ctx, req, "topics", lambda t: t.name, Op.READ, R.TOPIC, TOPIC_DENIED, "topics")


@guard(61)
def describe_producers(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    """READ on each topic; a denied one answers 29 on every partition asked for."""
    return _split(g, ctx, req, "topics", lambda t: t.name, Op.READ, R.TOPIC, TOPIC_DENIED, "topics")


@guard(65)
def describe_transactions(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    """DESCRIBE on each transactional id (53 for a denied one); the topics of a described
    transaction are only those the principal may describe."""
    ids = list(req.transactional_ids)
    allowed = g.authz.allowed_names(ctx, Op.DESCRIBE, R.TRANSACTIONAL_ID, ids)
    refused = [{"error_code": TXN_DENIED, "transactional_id": t, "transaction_state": "",
                "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
                "producer_epoch": -1, "topics": []} for t in ids if t not in allowed]
    kept = [t for t in ids if t in allowed]
    served = g.inner(ctx, _with(req, transactional_ids=kept)) if kept else \
        {"throttle_time_ms": 0, "transaction_states": []}

    def shape(body: dict) -> dict:
        for state in body["transaction_states"]:
            topics = list(state.get("topics") or [])
            names = g.authz.allowed_names(ctx, Op.DESCRIBE, R.TOPIC, (t["topic"] for t in topics), audit=False)
            state["topics"] = [t for t in topics if t["topic"] in names]
        body["transaction_states"] = list(body["transaction_states"]) + refused
        return body
    return after(served, shape)


@guard(66)
def list_transactions(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    """Only the transactional ids the principal may describe are listed."""
    def visible(body: dict) -> dict:
        states = list(body["transaction_states"])
        names = g.authz.allowed_names(ctx, Op.DESCRIBE, R.TRANSACTIONAL_ID,
                                      (s["transactional_id"] for s in states), audit=False)
        body["transaction_states"] = [s for s in states if s["transactional_id"] in names]
        return body
    return after(g.inner(ctx, req), visible)


# --- share groups (KIP-932) ------------------------------------------------------------------

@guard(78, 79)
def share_data(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    """ShareFetch, ShareAcknowledge: READ on the group (top-level 30), then READ on each topic,
    checked by the handler once topic ids are resolved and the session's partitions known
    (``KafkaApis.handleShareFetchRequest``: TOPIC_AUTHORIZATION_FAILED per partition)."""
    if _share_groups_off(g, ctx):
        return g.inner(ctx, req)
    if not g.authz.allowed(ctx, Op.READ, R.GROUP, req.group_id or ""):
        return _denied(ctx, req, GROUP_DENIED)
    req[AUTHORIZED_TOPICS] = partial(g.authz.allowed_names, ctx, Op.READ, R.TOPIC)
    return g.inner(ctx, req)


@guard(90)
def describe_share_group_offsets(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    """DESCRIBE on each group (the others answered 30 at group level), DESCRIBE on each topic
    (29 per partition, by the handler)."""
    if _share_groups_off(g, ctx):
        return g.inner(ctx, req)
    req[AUTHORIZED_TOPICS] = partial(g.authz.allowed_names, ctx, Op.DESCRIBE, R.TOPIC)
    return _split(g, ctx, req, "groups", lambda grp: grp.group_id, Op.DESCRIBE, R.GROUP, GROUP_DENIED, "groups")


@guard(91, 92)
def alter_share_group_offsets(g: Guarded, ctx: RequestContext, req: Any) -> Any:
    """AlterShareGroupOffsets: READ on the group; DeleteShareGroupOffsets: DELETE on it (top-level
    30); then READ on each topic (29, by the handler)."""
    if _share_groups_off(g, ctx):
        return g.inner(ctx, req)
    op = Op.READ if ctx.api_key == 91 else Op.DELETE
    if not g.authz.allowed(ctx, op, R.GROUP, req.group_id):
        return _denied(ctx, req, GROUP_DENIED)
    req[AUTHORIZED_TOPICS] = partial(g.authz.allowed_names, ctx, Op.READ, R.TOPIC)
    return g.inner(ctx, req)
