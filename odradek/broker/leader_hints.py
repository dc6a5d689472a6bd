"""KIP-951's leader hints in Produce (v10+), Fetch (v16+), ShareFetch and ShareAcknowledge answers.

Kafka fills a partition's tagged ``CurrentLeader`` and the answer's
``NodeEndpoints`` only beside NOT_LEADER_OR_FOLLOWER (and, on Fetch,
FENCED_LEADER_EPOCH), from its metadata cache (``KafkaApis.handleProduceRequest``,
``handleFetchRequest``'s ``getCurrentLeader``), so the client moves to the new
leader without a Metadata round trip.  This one node leads every partition and
never answers those errors itself; a fault rule that injects one gets the hint
Kafka would send: this node, leader epoch 0, at the listener the request came in on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..protocol.errors import ErrorCode

if TYPE_CHECKING:
    from .security.listeners import Endpoint

LEADER_EPOCH = 0  # this node's leader epoch of every partition (handlers/fetch.py's)
# api key -> (first version with the hints, the partitions' answer list, the errors that carry one)
HINTED = {0: (10, "partition_responses", frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER})),
          1: (16, "partitions", frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})),
          # ShareFetch / ShareAcknowledge: every version (KafkaApis.handleShareFetchRequest)
          78: (0, "partitions", frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER})),
          79: (0, "partitions", frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER}))}


def hinted(api_key: int, version: int, code: int | None) -> bool:
    """Whether an answer of this API version carrying ``code`` gets leader hints."""
    spec = HINTED.get(api_key)
    return spec is not None and version >= spec[0] and code in spec[2]


def add_leader_hints(api_key: int, leader: Endpoint, answer: Any) -> Any:
    """``answer`` with the hints on each partition whose error calls for one (an answer of a
    ``hinted`` API version)."""
    _first, parts_field, codes = HINTED[api_key]
    hit = False
    for topic in answer.get("responses") or ():
        for p in topic[parts_field]:
            if p.get("error_code") in codes:
                p["current_leader"] = {"leader_id": leader.node_id, "leader_epoch": LEADER_EPOCH}
                hit = True
    if hit:
        answer["node_endpoints"] = [{"node_id": leader.node_id, "host": leader.host, "port": leader.port,
                                     "rack": None}]
    return answer
