"""Consumer groups (KIP-848) and share groups (KIP-932) replay their parallel records by the same
rules (``coordinator/modern_group.py``), as Kafka's ``GroupMetadataManager.replay`` does: what one
sequence of group-epoch, member, target and current-assignment records builds is the same for both
kinds, and every record kind of each has a rule (a tombstone of each is taken)."""

from __future__ import annotations

import uuid

import pytest

from odradek.broker.coordinator.consumer_group import replay_consumer
from odradek.broker.coordinator.share_group import ReplayError, replay_share
from odradek.offsets import consumer_records as cg
from odradek.offsets import share_group_records as sg

T = uuid.UUID("10000000-0000-0000-0000-000000000001")


def consumer(groups: dict, key, value) -> str | None:
    return replay_consumer(groups, key, value)


def share(groups: dict, key, value) -> str | None:
    return replay_share(groups, key, value, 0)


KINDS = {
    "consumer": (consumer, cg.CGMetadataKey, cg.CGMetadataValue, cg.CGMemberKey, cg.CGMemberValue,
                 cg.CGTargetMetadataKey, cg.CGTargetMetadataValue, cg.CGTargetMemberKey, cg.CGTargetMemberValue,
                 cg.CGAssignmentKey,
                 lambda epoch, assigned: cg.CGAssignmentValue(member_epoch=epoch, previous_member_epoch=epoch - 1,
                                                              state=0, assigned=assigned, pending_revocation={})),
    "share": (share, sg.SGMetadataKey, sg.SGMetadataValue, sg.SGMemberKey, sg.SGMemberValue,
              sg.SGTargetMetadataKey, sg.SGTargetMetadataValue, sg.SGTargetMemberKey, sg.SGTargetMemberValue,
              sg.SGAssignmentKey,
              lambda epoch, assigned: sg.SGAssignmentValue(member_epoch=epoch, previous_member_epoch=epoch - 1,
                                                           assigned=assigned)),
}


def shared_state(group) -> tuple:
    """(A new member's previous epoch differs by kind before its first assignment: 0 or -1.)"""
    return (group.group_epoch, group.metadata_hash, group.assignment_epoch, dict(group.targets),
            {m.member_id: (m.member_epoch, m.previous_member_epoch if m.member_epoch else None, m.assigned)
             for m in group.members.values()})


def build(kind: str) -> list[tuple]:
    """A group's life: two members join and get partitions, one leaves (tombstones in replay's order)."""
    _, meta_k, meta_v, member_k, member_v, tmeta_k, tmeta_v, tmember_k, tmember_v, assign_k, assign_v = KINDS[kind]
    a, b = {T: frozenset({0})}, {T: frozenset({1})}
    states = []
    groups: dict = {}
    replay = KINDS[kind][0]
    for key, value in [
        (meta_k("g"), meta_v(1, 11)), (member_k("g", "m1"), member_v(subscribed_topic_names=("t",))),
        (member_k("g", "m2"), member_v(subscribed_topic_names=("t",))), (meta_k("g"), meta_v(2, 12)),
        (tmember_k("g", "m1"), tmember_v(a)), (tmember_k("g", "m2"), tmember_v(b)), (tmeta_k("g"), tmeta_v(2)),
        (assign_k("g", "m1"), assign_v(2, a)), (assign_k("g", "m2"), assign_v(2, b)),
        (assign_k("g", "m2"), None), (tmember_k("g", "m2"), None), (member_k("g", "m2"), None),
        (meta_k("g"), meta_v(3, 13)), (assign_k("g", "gone"), None), (member_k("g", "gone"), None),
    ]:
        assert replay(groups, key, value) == "g"
        states.append(shared_state(groups["g"]))
    return states


def test_both_kinds_build_the_same_group_from_the_same_records():
    consumer_states, share_states = build("consumer"), build("share")
    assert consumer_states == share_states
    assert consumer_states[-1] == (3, 13, 2, {"m1": {T: frozenset({0})}}, {"m1": (2, 1, {T: frozenset({0})})})


@pytest.mark.parametrize("kind", ["consumer", "share"])
def test_every_record_kind_has_a_rule_and_the_group_epoch_tombstone_removes_the_group(kind):
    replay, meta_k, meta_v = KINDS[kind][:3]
    names = cg.CG_RECORD_NAMES if kind == "consumer" else sg.SG_RECORD_NAMES
    groups: dict = {}
    replay(groups, meta_k("g"), meta_v(1))
    for key_class in sorted(names, key=lambda k: k is meta_k):  # the group's own record last
        fields = {"group": "g", "member": "m", "regex": "r.*"}
        key = key_class(*(fields[name] for name in key_class.__dataclass_fields__))
        assert replay(groups, key, None) == "g"
    assert groups == {}
    assert replay(groups, meta_k("g"), None) is None  # a tombstone of an unknown group is ignored


def test_a_share_group_refuses_removals_its_state_contradicts():
    groups: dict = {}
    share(groups, sg.SGMemberKey("g", "m"), sg.SGMemberValue())
    share(groups, sg.SGAssignmentKey("g", "m"), sg.SGAssignmentValue(member_epoch=1, previous_member_epoch=0,
                                                                      assigned={}))
    with pytest.raises(ReplayError):
        share(groups, sg.SGMemberKey("g", "m"), None)  # its current assignment is still there
    with pytest.raises(ReplayError):
        share(groups, sg.SGMetadataKey("g"), None)  # it still has a member
