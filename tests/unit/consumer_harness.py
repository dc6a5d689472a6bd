"""Drive KIP-848 consumer groups without a network: the classic ``Harness`` (ManualClock, a real
Log, restartable) plus a table of topics and a ``heartbeat`` call.  Shared by the
``test_consumer_group_*`` modules."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from odradek.broker.coordinator import consumer_heartbeat
from odradek.broker.coordinator.consumer_group import ConsumerGroup
from odradek.broker.coordinator.consumer_heartbeat import HeartbeatRequest, HeartbeatResult
from odradek.protocol.errors import ErrorCode
from tests.unit.coordinator_harness import Harness

E = ErrorCode
GROUP = "cg"


class ConsumerHarness(Harness):
    """A coordinator over one offsets partition, with topics name -> (id, partitions)."""

    def __init__(self, directory: Path, **config: Any):
        self.topic_table: dict[str, tuple[uuid.UUID, int]] = {}
        self.topics_version = 0
        super().__init__(directory, **config)

    def _load(self, hooks: bool = True):
        coordinator = super()._load(hooks=False)
        coordinator.topics.lookup = self.topic_table.get
        coordinator.topics.names = lambda: sorted(self.topic_table)
        coordinator.topics.version = lambda: self.topics_version
        if hooks:
            for listener in coordinator.load_listeners:
                listener(coordinator.shards[0])
        return coordinator

    def restart(self, hooks: bool = True):
        consumer_heartbeat.unload_shard(self.shard)
        return super().restart(hooks)

    def topic(self, name: str, partitions: int) -> uuid.UUID:
        """Create (or grow) a topic; the topics' version moves as the data plane's does."""
        tid = self.topic_table[name][0] if name in self.topic_table else uuid.uuid5(uuid.NAMESPACE_DNS, name)
        self.topic_table[name] = (tid, partitions)
        self.topics_version += 1
        return tid

    def delete_topic(self, name: str) -> None:
        del self.topic_table[name]
        self.topics_version += 1

    def cg(self, group_id: str = GROUP) -> ConsumerGroup:
        return self.shard.consumer_groups[group_id]

    def hb(self, member_id: str, epoch: int, *, group: str = GROUP, topics: list[str] | None = None,
           owned: dict | None = None, rebalance_timeout: int = -1, **kw: Any) -> HeartbeatResult:
        req = HeartbeatRequest(group_id=group, member_id=member_id, member_epoch=epoch,
                               subscribed_topic_names=topics, owned=owned,
                               rebalance_timeout_ms=rebalance_timeout, client_id="client", client_host="/127.0.0.1",
                               **kw)
        promise = consumer_heartbeat.consumer_heartbeat(self.coordinator, self.coordinator.topics, req)
        assert promise.done
        return promise.result()

    def subscribe(self, member_id: str, topics: list[str], **kw: Any) -> HeartbeatResult:
        kw.setdefault("owned", {})
        kw.setdefault("rebalance_timeout", 30_000)
        return self.hb(member_id, 0, topics=topics, **kw)


def owned_twice(group: ConsumerGroup) -> list:
    """Partitions held (assigned or pending revocation) by more than one member."""
    seen: dict = {}
    twice = []
    for m in group.members.values():
        for t, ps in m.owned().items():
            for p in ps:
                if (t, p) in seen:
                    twice.append((t, p, seen[(t, p)], m.member_id))
                seen[(t, p)] = m.member_id
    return twice
