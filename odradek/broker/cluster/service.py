"""Several brokers in one process: the layout wired to the broker's topics, logs and listeners.

Every node shares the one store; what differs per node is only what it may
answer, which ``guard.py`` asks this object (``partition_error``,
``coordinator_error``), and what it advertises.  The changes (a leader move,
a broker down or up, an election) follow Kafka's order in ``makeLeader``:
the layout is saved first, then the partition's epoch history gets the new
epoch at the log end, then requests are served under it; a start after a
crash completes what the saved layout says (``recover``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

import structlog

from ...offsets.records import partition_for
from ...protocol.errors import ErrorCode
from ...shares.records import state_partition_for
from ...storage.log_manager import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TRANSACTION_STATE_TOPIC
from ..config import ConfigError, parse_listeners
from ..dataplane.topics import INTERNAL_TOPICS
from .layout import NO_LEADER, Layout, PartitionState, place

if TYPE_CHECKING:
    from pathlib import Path

    from ...storage.log import Log
    from ..config import Config
    from ..dataplane import DataPlane, TopicRegistry
    from ..security.listeners import Endpoint
    from ..security.served import ServedListener

log = structlog.get_logger("odradek.cluster")

INTERNAL_REPLICATION_FACTOR = 3  # offsets.topic.replication.factor / transaction.state.log.replication.factor
UNDEFINED_EPOCH = -1


class ClusterServices(Protocol):
    """What the cluster uses of the broker (``BrokerApp`` wires it): the first node's id, the settings,
    where the layout is kept, and the topics and their logs."""

    node_id: int
    config: Config
    data_dir: Path
    topics: TopicRegistry
    cluster_id: str
    dataplane: DataPlane  # a truncated log's producer state


class Cluster:
    """The layout of ``brokers`` nodes (ids ``node.id`` .. ``node.id + brokers - 1``) over one broker's store."""

    def __init__(self, app: ClusterServices, brokers: int) -> None:
        self.app = app
        self.nodes = [app.node_id + k for k in range(brokers)]
        self.layout = Layout(list(self.nodes))
        self.initial_down: set[int] = set()
        # what each node advertises, by listener name (the first node's is the app's own)
        self.endpoints: dict[int, dict[str, Endpoint]] = {}
        self._initial: dict[tuple[str, int], PartitionState] = {}  # placed, never changed: not saved
        self._changing: set[tuple[str, int]] = set()  # partitions whose log follows a change: no leader yet
        # (topic, partition) -> (the registry's Topic, its state): one dict lookup per request partition;
        # emptied on every change (a re-created topic is another Topic object)
        self._known: dict[tuple[str, int], tuple[object, PartitionState]] = {}
        self._internal_counts: dict[str, int] = {}
        self._lock = asyncio.Lock()

    # --- start-up ---------------------------------------------------------------------------

    def node_listeners(self, first: list[ServedListener]) -> dict[int, list[ServedListener]]:
        """Each node's listeners: ``odradek.cluster.listeners``' entry for it, else the first
        node's with every port (bound and advertised) plus its index; port 0 stays 0 (any)."""
        configured = [s.strip() for s in (self.app.config["odradek.cluster.listeners"] or "").split("|")]
        advertised = [s.strip() for s in (self.app.config["odradek.cluster.advertised.listeners"] or "").split("|")]
        out = {}
        for k, node in enumerate(self.nodes):
            own = []
            for listener in first:
                spec = listener.spec
                host, port = spec.host, spec.port + k if spec.port and k else spec.port
                adv = spec.advertised
                if adv is not None and k:
                    adv = dataclasses.replace(adv, port=adv.port + k if adv.port else 0)
                if k and len(configured) >= k and configured[k - 1]:
                    host, port = _named(configured[k - 1], spec.name, "odradek.cluster.listeners", (host, port))
                if k and len(advertised) >= k and advertised[k - 1]:
                    ah, ap = _named(advertised[k - 1], spec.name, "odradek.cluster.advertised.listeners",
                                    None)
                    adv = dataclasses.replace(spec.advertised or parse_listeners(f"{spec.name}://x:1")[0],
                                              host=ah, port=ap)
                own.append(dataclasses.replace(listener, spec=dataclasses.replace(spec, host=host, port=port,
                                                                                  advertised=adv),
                                               node_id=node))
            out[node] = own
        return out

    async def load(self) -> None:
        """The saved layout, then what a crash left undone: an unclean move's truncation, an epoch
        the history has not got yet; every log then stamps its partition's epoch."""
        self.layout = await asyncio.to_thread(Layout.load, self.app.data_dir, self.nodes)
        for (topic, partition), state in list(self.layout.partitions.items()):
            lg = self.app.topics.log(topic, partition)
            if lg is None or (state.topic_id and state.topic_id != self._topic_id(topic)):
                continue
            await self._apply(lg, state)
            if state.truncate_to is not None:
                state.truncate_to = None
                await self._save()

    # --- reading (event loop, per request) ---------------------------------------------------------

    def state(self, topic: str, partition: int) -> PartitionState | None:
        """The partition's registration, None if it does not exist."""
        key = (topic, partition)
        known = self._known.get(key)
        if known is not None and self.app.topics.get(topic) is known[0]:
            return known[1]
        state = self._lookup(key)
        registered = self.app.topics.get(topic)  # None for the internal topics, which are never deleted
        if state is not None and (registered is not None or topic in INTERNAL_TOPICS):
            self._known[key] = (registered, state)
        return state

    def _lookup(self, key: tuple[str, int]) -> PartitionState | None:
        topic, partition = key
        topic_id = self._topic_id(topic)
        if topic_id is None:
            return None
        state = self.layout.partitions.get(key)
        if state is not None and (not state.topic_id or state.topic_id == topic_id):
            return state
        count = self.app.topics.partition_count(topic) or 0
        if not 0 <= partition < count:
            return None
        state = self._initial.get(key)
        if state is None or state.topic_id != topic_id:
            state = self.layout.initial(topic, partition, self._replication(topic, topic_id), topic_id)
            self._initial[key] = state
        return state

    def _topic_id(self, topic: str) -> str | None:
        t = self.app.topics.get(topic)
        if t is not None:
            return str(t.topic_id)
        if topic in INTERNAL_TOPICS and self.app.topics.partition_count(topic):
            return str(self.app.topics.internal_topic_id(topic, self.app.cluster_id))
        return None

    def _replication(self, topic: str, topic_id: str) -> int:
        """A partition nobody placed (auto-created, or added by CreatePartitions): as many replicas as
        the topic's first partition has, else the default."""
        first = self.layout.partitions.get((topic, 0))
        if first is not None and first.topic_id == topic_id:
            return len(first.replicas)
        return self._default_rf(topic)

    def _default_rf(self, topic: str) -> int:
        rf = INTERNAL_REPLICATION_FACTOR if topic in INTERNAL_TOPICS else self.app.config["default.replication.factor"]
        return min(rf, len(self.nodes))

    def partition_error(self, node: int, topic: str, partition: int, current_epoch: int) -> ErrorCode | None:
        """What ``node`` answers for a partition request instead of serving it, None to serve it:
        Kafka's order (``ReplicaManager.getPartitionOrError``, ``Partition.getLocalLog``) -- not a
        replica: NOT_LEADER_OR_FOLLOWER; a stale or future leader epoch: FENCED / UNKNOWN_LEADER_EPOCH;
        a follower: NOT_LEADER_OR_FOLLOWER.  An unknown partition is left to the handler."""
        state = self.state(topic, partition)
        if state is None:
            return None
        if node not in state.replicas or (self._changing and (topic, partition) in self._changing):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if current_epoch != UNDEFINED_EPOCH and current_epoch is not None:
            if current_epoch < state.epoch:
                return ErrorCode.FENCED_LEADER_EPOCH
            if current_epoch > state.epoch:
                return ErrorCode.UNKNOWN_LEADER_EPOCH
        if node != state.leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return None

    def in_sync(self, topic: str, partition: int) -> tuple[int, int]:
        """(ISR size, replica count): what acks=all is checked against (``min.insync.replicas``)."""
        state = self.state(topic, partition)
        return (1, 1) if state is None else (len(state.isr), len(state.replicas))

    def coordinator(self, key: str, transactional: bool) -> int:
        """The node coordinating a group or transactional id: the leader of the internal topic's
        partition it hashes to (``GroupCoordinatorService.partitionFor``, ``TransactionStateManager``)."""
        topic = TRANSACTION_STATE_TOPIC if transactional else OFFSETS_TOPIC
        state = self.state(topic, partition_for(key, self._internal_count(topic)))
        return NO_LEADER if state is None else state.leader

    def share_coordinator(self, group: str, topic_id: uuid.UUID, partition: int) -> int:
        """The node coordinating a share-partition's state: the leader of the ``__share_group_state``
        partition its key hashes to (``ShareCoordinatorService.partitionFor``)."""
        index = state_partition_for(group, topic_id, partition, self._internal_count(SHARE_STATE_TOPIC))
        state = self.state(SHARE_STATE_TOPIC, index)
        return NO_LEADER if state is None else state.leader

    def _internal_count(self, topic: str) -> int:
        """An internal topic's partitions: fixed once it exists (the key hash depends on it)."""
        count = self._internal_counts.get(topic)
        if count is None:
            count = self._internal_counts[topic] = self.app.topics.partition_count(topic) or 1
        return count

    def endpoint(self, node: int, listener: str) -> Endpoint | None:
        """Where ``node`` listens for ``listener``'s clients; None while it is down."""
        if node in self.layout.down:
            return None
        eps = self.endpoints.get(node) or {}
        return eps.get(listener) or next(iter(eps.values()), None)

    def live_endpoints(self, listener: str) -> list[Endpoint]:
        return [ep for n in self.nodes if (ep := self.endpoint(n, listener)) is not None]

    def controller(self) -> int:
        """Kafka 4 answers a random live broker as ControllerId; ours is the first live one."""
        up = self.layout.up()
        return up[0] if up else -1

    def describe(self, topic: str, partition: int) -> dict:
        """A partition's Metadata / DescribeTopicPartitions fields."""
        state = self.state(topic, partition)
        if state is None:
            return {"leader_id": NO_LEADER, "leader_epoch": -1, "replica_nodes": [], "isr_nodes": [],
                    "offline_replicas": []}
        return {"leader_id": state.leader, "leader_epoch": state.epoch, "replica_nodes": list(state.replicas),
                "isr_nodes": list(state.isr), "offline_replicas": state.offline(self.layout.down)}

    # --- placement --------------------------------------------------------------------------------

    def check_replication(self, rf: int) -> str | None:
        """Why CreateTopics cannot place ``rf`` replicas (INVALID_REPLICATION_FACTOR), else None."""
        if rf > len(self.nodes):
            return (f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} "
                    f"cannot be reached because only {len(self.nodes)} broker(s) are registered.")
        if not self.layout.up():
            return "Unable to replicate the partition: All brokers are currently fenced."
        return None

    async def placed(self, topic: str, count: int, rf: int, assignment: dict[int, list[int]] | None = None) -> None:
        """A created topic's registrations: the given assignment, else the placement for ``rf``."""
        replicas = assignment or place(topic, range(count), self.nodes, rf)
        topic_id = self._topic_id(topic) or ""
        async with self._lock:
            for p, nodes in replicas.items():
                self.layout.partitions[(topic, p)] = self.layout._fresh(nodes, topic_id)
            await self._save()

    # --- moves (test control) ---------------------------------------------------------------------

    async def move_leader(self, topic: str, partition: int, node: int, truncate_to: int | None = None) -> dict:
        """Leadership of a partition to ``node``; ``truncate_to``: an unclean change to a replica that
        never had the offsets from there on (the log is truncated there, as the new leader's; a batch
        holding that offset goes whole, as epochs start at batch boundaries).  Returns the partition's
        layout and its ``log_end_offset``."""
        async with self._lock:
            state = self._stored(topic, partition)
            lg = self.app.topics.log(topic, partition)
            if truncate_to is not None and lg is not None and not lg.log_start_offset <= truncate_to <= lg.log_end_offset:
                raise ValueError(f"truncate_to {truncate_to} outside [{lg.log_start_offset}, {lg.log_end_offset}]")
            if self.layout.move(state, node, unclean=truncate_to is not None):
                state.truncate_to = truncate_to
                await self._save()
                if lg is not None:
                    await self._apply(lg, state)
                if truncate_to is not None:
                    state.truncate_to = None
                    await self._save()
            end = None if lg is None else lg.log_end_offset
            log.warning("cluster.leader_moved", topic=topic, partition=partition, leader=state.leader,
                        epoch=state.epoch, truncated_to=truncate_to, log_end_offset=end)
            return {**self.describe(topic, partition), "log_end_offset": end}

    async def move_coordinator(self, key: str, node: int, transactional: bool = False) -> dict:
        """The coordinator of a group (or transactional id) to ``node``: its internal partition's leader."""
        topic = TRANSACTION_STATE_TOPIC if transactional else OFFSETS_TOPIC
        return await self.move_leader(topic, partition_for(key, self._internal_count(topic)), node)

    async def set_down(self, node: int, down: bool) -> int:
        """A broker fenced (down) or back: its partitions fail over or elect again, Kafka's rules.
        Returns how many partitions changed.  The listeners are the caller's (``BrokerApp``)."""
        if node not in self.nodes:
            raise ValueError(f"no node {node}; nodes: {self.nodes}")
        async with self._lock:
            if (node in self.layout.down) == down:
                return 0
            if down:
                self.layout.down.add(node)
            else:
                self.layout.down.discard(node)
            changed = []
            for topic, partition in self.all_partitions():
                state = self._stored(topic, partition, keep=False)
                before = (state.leader, state.epoch, list(state.isr))
                (self.layout.fence if down else self.layout.unfence)(state, node)
                if (state.leader, state.epoch, state.isr) != before:
                    self.layout.partitions[(topic, partition)] = state
                    changed.append((topic, partition, state))
            await self._save()
            for topic, partition, state in changed:
                lg = self.app.topics.log(topic, partition)
                if lg is not None:
                    await self._apply(lg, state)
            log.warning("cluster.broker_down" if down else "cluster.broker_up", node=node, partitions=len(changed))
            return len(changed)

    async def elect(self, topic: str, partition: int, unclean: bool) -> ErrorCode:
        """ElectLeaders for one partition (UNKNOWN_TOPIC_OR_PARTITION if it does not exist)."""
        async with self._lock:
            if self.state(topic, partition) is None:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            state = self._stored(topic, partition, keep=False)
            code = self.layout.elect(state, unclean)
            if code == ErrorCode.NONE:
                self.layout.partitions[(topic, partition)] = state
                await self._save()
                lg = self.app.topics.log(topic, partition)
                if lg is not None:
                    await self._apply(lg, state)
            return code

    async def reassign(self, topic: str, partition: int, target: list[int]) -> None:
        """AlterPartitionReassignments for one partition, its target already validated; a change of
        leader is stamped on the log as any move's."""
        async with self._lock:
            state = self._stored(topic, partition, keep=False)
            if not self.layout.reassign(state, target):
                return
            self.layout.partitions[(topic, partition)] = state
            await self._save()
            lg = self.app.topics.log(topic, partition)
            if lg is not None:
                await self._apply(lg, state)
            log.warning("cluster.reassigned", topic=topic, partition=partition, replicas=state.replicas,
                        leader=state.leader, epoch=state.epoch)

    async def reset(self) -> None:
        """Back to the initial layout: every node up, every partition as placed (a test's reset)."""
        async with self._lock:
            self.layout = Layout(list(self.nodes))
            self._initial.clear()
            self._known.clear()
            await self._save()

    def all_partitions(self) -> Iterator[tuple[str, int]]:
        topics = self.app.topics
        for name in [*topics.names(), *sorted(INTERNAL_TOPICS)]:
            for p in range(topics.partition_count(name) or 0):
                yield name, p

    def _stored(self, topic: str, partition: int, keep: bool = True) -> PartitionState:
        """The partition's registration to change (a copy when ``keep`` is False: stored by the caller
        only if it changed); ValueError if it does not exist."""
        state = self.state(topic, partition)
        if state is None:
            raise ValueError(f"no partition {topic}-{partition}")
        if (topic, partition) not in self.layout.partitions or not keep:
            state = dataclasses.replace(state, replicas=list(state.replicas), isr=list(state.isr))
            if keep:
                self.layout.partitions[(topic, partition)] = state
        return state

    async def _save(self) -> None:
        self._known.clear()
        await asyncio.to_thread(self.layout.save, self.app.data_dir)

    async def _apply(self, lg: Log, state: PartitionState) -> None:
        """The log under the partition's registration: a pending truncation done, the epoch's start
        (the log end) in its history, and the epoch stamped on what it appends from now on
        (``Partition.makeLeader``).  Meanwhile no node serves it, and a fetch parked on it wakes to
        the new epoch (FENCED_LEADER_EPOCH), never to a half-truncated log."""
        key = (lg.topic, lg.partition)
        self._changing.add(key)
        try:
            lg.leader_epoch = state.epoch
            await self._follow(lg, state)
        finally:
            self._changing.discard(key)

    async def _follow(self, lg: Log, state: PartitionState) -> None:
        if state.truncate_to is not None and lg.log_end_offset > state.truncate_to:
            await lg.truncate_to_async(state.truncate_to)
            self.app.dataplane.truncated(lg)
        epochs = lg.epochs

        def write() -> None:
            if state.truncate_to is not None:  # whole batches go: the log may end below the point asked
                epochs.truncate_from_end(lg.log_end_offset)
            if state.epoch > 0 and (not epochs.entries or epochs.latest_epoch < state.epoch):
                epochs.assign(state.epoch, lg.log_end_offset)

        await asyncio.to_thread(write)


def _named(text: str, name: str, setting: str, default: tuple[str, int] | None) -> tuple[str, int]:
    """The (host, port) of listener ``name`` in one broker's entry of a per-broker setting."""
    try:
        listeners = parse_listeners(text)
    except ValueError as exc:
        raise ConfigError(f"{setting}: {exc}") from None
    for listener in listeners:
        if listener.name == name:
            return listener.host, listener.port
    if default is None:
        raise ConfigError(f"{setting}: {text!r} has no listener {name}")
    return default
