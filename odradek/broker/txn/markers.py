"""Where a transaction marker goes: the group coordinator for ``__consumer_offsets`` (it also
completes the group's pending transactional offsets), the data plane for every other topic.

On one node Kafka's WriteTxnMarkers round trip is this local call (``MarkerTarget``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ...protocol.errors import ErrorCode
from ...storage.log_manager import OFFSETS_TOPIC
from ..txn_contracts import TxnMarker

if TYPE_CHECKING:
    from ..coordinator.service import Coordinator
    from ..dataplane import DataPlane


class MarkerServices(Protocol):
    """The two marker writers, as the broker holds them (``BrokerApp`` wires it)."""

    coordinator: Coordinator | None
    dataplane: DataPlane


class MarkerRouter:
    """``MarkerTarget`` over the broker's two marker writers, looked up on each call (the
    group coordinator is replaced when the broker restarts its storage)."""

    def __init__(self, app: MarkerServices) -> None:
        self.app = app

    async def write_txn_marker(self, topic: str, partition: int, marker: TxnMarker) -> ErrorCode:
        target = self.app.coordinator if topic == OFFSETS_TOPIC else self.app.dataplane
        if target is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE  # retried by the coordinator
        return await target.write_txn_marker(topic, partition, marker)
