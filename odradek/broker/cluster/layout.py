"""The layout of a cluster in one process: which node holds, leads and is in sync for each partition.

Kafka's controller keeps it as ``PartitionRegistration`` records (replicas,
ISR, leader, leader epoch) and per broker a registration and a fenced flag;
every change is a record that bumps what it must.  Here it is one small
state, changed only by the operations below (each mirrors the controller's
rules: ``PartitionChangeBuilder``, ``ReplicationControlManager``), and kept
durably as a JSON snapshot written atomically after each change.

A partition nobody moved is not stored: its replicas come from the placement
(``place``), deterministic per topic name, its leader is the first live
replica and its epoch 0 -- so a broker that never moves anything writes
nothing.  Storage is shared: every replica has every byte, the ISR is a label
(the replicas on live nodes), and an unclean leader change is emulated by
truncating the one log (``truncate_to``, completed by a restart if a crash cut
it short).
"""

from __future__ import annotations

import json
import zlib
from dataclasses import asdict, field
from pathlib import Path

from ...protocol.errors import ErrorCode
from ...protocol.lean_dataclass import dataclass
from ...storage.files import atomic_write_text

LAYOUT_FILE = "cluster-layout.json"
NO_LEADER = -1


@dataclass
class PartitionState:
    """One partition's registration: replicas (the first is the preferred leader), ISR, leader, epoch."""

    replicas: list[int]
    isr: list[int]
    leader: int
    epoch: int = 0
    topic_id: str = ""  # the topic this entry belongs to: a re-created topic starts afresh
    truncate_to: int | None = None  # an unclean move's truncation not yet done (crash-safe)

    def offline(self, down: set[int]) -> list[int]:
        return [r for r in self.replicas if r in down]


def place(topic: str, partitions: range, nodes: list[int], rf: int) -> dict[int, list[int]]:
    """Replicas per partition as Kafka's ``StripedReplicaPlacer`` lays them out on one rack:
    consecutive brokers from a start that moves by one per partition, the first the preferred
    leader.  Kafka's start is random; ours is the topic name's CRC, so a partition's replicas
    need not be stored to be known."""
    if not 1 <= rf <= len(nodes):
        raise ValueError(f"replication factor {rf} for {len(nodes)} broker(s)")
    n = len(nodes)
    start = zlib.crc32(topic.encode()) % n
    return {p: [nodes[(start + p + j) % n] for j in range(rf)] for p in partitions}


@dataclass
class Layout:
    """Nodes, the ones down, and every partition whose registration differs from the placement's."""

    nodes: list[int]
    down: set[int] = field(default_factory=set)
    partitions: dict[tuple[str, int], PartitionState] = field(default_factory=dict)

    # --- reading ---------------------------------------------------------------------------

    def initial(self, topic: str, partition: int, rf: int, topic_id: str = "") -> PartitionState:
        """The registration a partition gets at creation: leader the first live replica, ISR the
        live replicas (``ReplicationControlManager.createTopic``)."""
        replicas = place(topic, range(partition, partition + 1), self.nodes, min(rf, len(self.nodes)))[partition]
        return self._fresh(replicas, topic_id)

    def _fresh(self, replicas: list[int], topic_id: str) -> PartitionState:
        isr = [r for r in replicas if r not in self.down] or replicas[-1:]
        leader = next((r for r in isr if r not in self.down), NO_LEADER)
        return PartitionState(list(replicas), isr, leader, 0, topic_id)

    def up(self) -> list[int]:
        return [n for n in self.nodes if n not in self.down]

    # --- changes (each returns whether the partition changed) ---------------------------------

    def set_leader(self, state: PartitionState, leader: int) -> bool:
        """A new leader bumps the epoch; the same one does not (``PartitionChangeBuilder.tryElection``)."""
        if leader == state.leader:
            return False
        state.leader = leader
        state.epoch += 1
        return True

    def move(self, state: PartitionState, node: int, unclean: bool = False) -> bool:
        """Leadership to ``node`` (made a replica if it was not: a reassignment); an unclean move
        leaves it alone in the ISR, as Kafka's unclean election does."""
        if node not in self.nodes:
            raise ValueError(f"no node {node}; nodes: {self.nodes}")
        if node in self.down:
            raise ValueError(f"node {node} is down")
        if node not in state.replicas:
            state.replicas.append(node)
        if unclean:
            state.isr = [node]
        elif node not in state.isr:
            state.isr = [r for r in state.replicas if r in state.isr or r == node]
        return self.set_leader(state, node) or unclean

    def reassign(self, state: PartitionState, target: list[int]) -> bool:
        """A reassignment to ``target``, completed at once: with shared storage every added replica
        is caught up (``ReplicationControlManager.changePartitionReassignment`` then its completion
        by ``PartitionChangeBuilder``).  The ISR becomes the target's live replicas (a down one joins
        when it is up again, as ``unfence``), and a leader outside it gives way to the first of
        them, bumping the epoch; the same replicas change nothing."""
        if list(target) == state.replicas:
            return False
        state.replicas = list(target)
        state.isr = [r for r in target if r not in self.down] or state.replicas[-1:]
        if state.leader not in state.isr or state.leader in self.down:
            self.set_leader(state, next((r for r in state.isr if r not in self.down), NO_LEADER))
        return True

    def fence(self, state: PartitionState, node: int) -> bool:
        """``handleBrokerFenced``: out of the ISR (which keeps its last member), and a leader on
        it replaced by the first ISR replica that is up, else none."""
        if node not in state.replicas:
            return False
        changed = False
        if node in state.isr and len(state.isr) > 1:
            state.isr = [r for r in state.isr if r != node]
            changed = True
        if state.leader == node:
            leader = next((r for r in state.replicas if r in state.isr and r not in self.down), NO_LEADER)
            changed = self.set_leader(state, leader) or changed
        return changed

    def unfence(self, state: PartitionState, node: int) -> bool:
        """Back in the ISR at once (shared storage: always caught up); a leaderless partition
        elects again (``handleBrokerUnfenced``)."""
        if node not in state.replicas:
            return False
        changed = False
        if node not in state.isr:
            state.isr = [r for r in state.replicas if r in state.isr or r == node]
            changed = True
        if state.leader == NO_LEADER:
            leader = next((r for r in state.replicas if r in state.isr and r not in self.down), NO_LEADER)
            changed = self.set_leader(state, leader) or changed
        return changed

    def elect(self, state: PartitionState, unclean: bool) -> ErrorCode:
        """ElectLeaders' per-partition outcome (``ReplicationControlManager.electLeader``)."""
        if not unclean:
            preferred = state.replicas[0]
            if state.leader == preferred:
                return ErrorCode.ELECTION_NOT_NEEDED
            if preferred in state.isr and preferred not in self.down:
                self.set_leader(state, preferred)
                return ErrorCode.NONE
            return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        if state.leader != NO_LEADER:
            return ErrorCode.ELECTION_NOT_NEEDED
        leader = next((r for r in state.replicas if r not in self.down), NO_LEADER)
        if leader == NO_LEADER:
            return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
        state.isr = [leader]
        self.set_leader(state, leader)
        return ErrorCode.NONE

    # --- durability ----------------------------------------------------------------------------

    def to_json(self) -> str:
        return json.dumps({"version": 0, "nodes": self.nodes, "down": sorted(self.down),
                           "partitions": [{"topic": t, "partition": p, **asdict(s)}
                                          for (t, p), s in sorted(self.partitions.items())]}, indent=1)

    def save(self, data_dir: Path) -> None:
        """Blocking (tmp, fsync, rename): callers run it in a worker thread."""
        atomic_write_text(data_dir / LAYOUT_FILE, self.to_json())

    @classmethod
    def load(cls, data_dir: Path, nodes: list[int]) -> Layout:
        """The saved layout, restricted to ``nodes`` (the brokers configured now); a fresh one if none."""
        path = data_dir / LAYOUT_FILE
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError:
            return cls(list(nodes))
        layout = cls(list(nodes), {n for n in raw.get("down", ()) if n in nodes})
        for entry in raw.get("partitions", ()):
            topic, partition = entry.pop("topic"), entry.pop("partition")
            state = PartitionState(**entry)
            if set(state.replicas) <= set(nodes):
                layout.partitions[(topic, partition)] = state
        return layout
