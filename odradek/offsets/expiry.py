"""KIP-211 offset-expiry rules (Kafka's ``GroupMetadata.removeExpiredOffsets``), as pure functions of persisted facts.

The broker's live sweep, ``odradek offsets --expiry-preview`` and the Spark
expiry audit all decide with these functions, so they cannot drift apart.
They take a group's protocol type, state name, state timestamp and
subscribed topics -- what the broker holds live and what a reader of the
log can reconstruct (a group rebuilt from its last record is Stable with
members, Empty without).

| group                                          | base time                  | offsets |
| ---------------------------------------------- | -------------------------- | ------- |
| protocol type set, Empty                       | when it became Empty       | all     |
|   (no state timestamp: value v0/v1)            | the offset's commit time   | all     |
| ``consumer``, Stable, subscription known       | the offset's commit time   | topics not subscribed |
| no protocol type (simple, commit-only group)   | the offset's commit time   | all     |
| anything else (rebalancing, unknown subscription, other protocol) | -  | none    |

An offset carrying its own ``expire_timestamp`` (value v1) expires at that
time instead, when its group's row lets it expire at all.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from .consumer_protocol import CONSUMER_PROTOCOL_TYPE
from .records import OffsetValue

EMPTY_GROUP = "empty-group"
UNSUBSCRIBED_TOPIC = "unsubscribed-topic"
SIMPLE_GROUP = "simple-group"


class Rule(NamedTuple):
    """How a group's offsets expire in its current state."""

    reason: str  # EMPTY_GROUP, UNSUBSCRIBED_TOPIC or SIMPLE_GROUP
    state_base: int  # the group's base time (Empty since), -1: each offset's commit time
    kept_topics: frozenset[str]  # topics whose offsets never expire in this state


def rule_for(protocol_type: str | None, state: str, current_state_timestamp: int,
             subscribed_topics: Iterable[str] | None) -> Rule | None:
    """Which row of the KIP-211 table applies (None: nothing expires in this state).

    ``protocol_type`` None or "" is a simple group; ``state`` is Kafka's name
    (``Empty``, ``Stable``, ...); ``subscribed_topics`` None means unknown.
    """
    if protocol_type and state == "Empty":
        return Rule(EMPTY_GROUP, current_state_timestamp, frozenset())
    if protocol_type == CONSUMER_PROTOCOL_TYPE and state == "Stable" and subscribed_topics is not None:
        return Rule(UNSUBSCRIBED_TOPIC, -1, frozenset(subscribed_topics))
    if not protocol_type:
        return Rule(SIMPLE_GROUP, -1, frozenset())
    return None


def expires_at(rule: Rule, topic: str, value: OffsetValue, retention_ms: int) -> int | None:
    """When this offset expires while its group stays as it is (None: not in this state)."""
    if topic in rule.kept_topics:
        return None
    if value.expire_timestamp != -1:
        return value.expire_timestamp  # an explicit expiry (pre-KIP-211 commit semantics)
    base = rule.state_base if rule.state_base != -1 else value.commit_timestamp
    return base + retention_ms
