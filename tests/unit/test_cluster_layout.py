"""The cluster layout's rules (placement, elections, epochs) and the leader-epoch history, without a broker."""

from __future__ import annotations

import pytest

from odradek.broker.cluster.layout import NO_LEADER, Layout, place
from odradek.protocol.errors import ErrorCode
from odradek.storage.leader_epochs import LEADER_EPOCH_FILE, LeaderEpochCache

NODES = [1, 2, 3]


def test_placement_is_striped_with_the_preferred_leader_first():
    """Consecutive brokers from a start that moves by one per partition (StripedReplicaPlacer on one
    rack): every broker leads as many partitions, and no partition has a replica twice."""
    placed = place("orders", range(6), NODES, 3)
    firsts = [replicas[0] for replicas in placed.values()]
    assert sorted(firsts) == [1, 1, 2, 2, 3, 3]
    for p in range(1, 6):
        assert placed[p][0] == NODES[(NODES.index(placed[p - 1][0]) + 1) % 3]
    assert all(len(set(r)) == 3 for r in placed.values())
    assert place("orders", range(6), NODES, 3) == placed  # deterministic: not stored until it changes


@pytest.mark.parametrize("rf", [0, 4])
def test_placement_refuses_a_factor_the_brokers_cannot_hold(rf):
    with pytest.raises(ValueError):
        place("t", range(1), NODES, rf)


def test_a_new_leader_bumps_the_epoch_the_same_one_does_not():
    layout = Layout(list(NODES))
    state = layout.initial("t", 0, 3)
    leader = state.leader
    assert state.epoch == 0 and state.isr == state.replicas
    assert not layout.move(state, leader)
    assert state.epoch == 0
    other = next(n for n in NODES if n != leader)
    assert layout.move(state, other)
    assert (state.leader, state.epoch) == (other, 1)


def test_a_broker_down_fails_its_partitions_over_and_preferred_election_brings_them_back():
    layout = Layout(list(NODES))
    state = layout.initial("t", 0, 3)
    preferred = state.replicas[0]
    layout.down.add(preferred)
    assert layout.fence(state, preferred)
    assert state.leader == state.replicas[1] and state.epoch == 1
    assert preferred not in state.isr and state.offline(layout.down) == [preferred]
    assert layout.elect(state, unclean=False) == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    layout.down.discard(preferred)
    layout.unfence(state, preferred)
    assert state.isr == state.replicas and state.leader == state.replicas[1]  # no automatic return
    assert layout.elect(state, unclean=False) == ErrorCode.NONE
    assert (state.leader, state.epoch) == (preferred, 2)
    assert layout.elect(state, unclean=False) == ErrorCode.ELECTION_NOT_NEEDED


def test_a_reassignment_completes_at_once_and_a_down_target_joins_the_isr_when_up():
    layout = Layout(list(NODES))
    state = layout.initial("t", 0, 2)
    leader, follower = state.replicas
    outsider = next(n for n in NODES if n not in state.replicas)
    assert not layout.reassign(state, [leader, follower])  # the same replicas: nothing changes
    layout.down.add(outsider)
    assert layout.reassign(state, [outsider, follower])
    assert (state.replicas, state.isr, state.leader, state.epoch) == ([outsider, follower], [follower], follower, 1)
    layout.down.discard(outsider)
    assert layout.unfence(state, outsider)
    assert state.isr == [outsider, follower] and state.leader == follower
    assert layout.elect(state, unclean=False) == ErrorCode.NONE and state.leader == outsider


def test_the_last_replica_down_leaves_no_leader_until_it_returns():
    layout = Layout(list(NODES))
    state = layout.initial("t", 0, 1)
    only = state.leader
    layout.down.add(only)
    layout.fence(state, only)
    assert state.leader == NO_LEADER and state.isr == [only] and state.epoch == 1  # the ISR keeps its last
    assert layout.elect(state, unclean=True) == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    layout.down.discard(only)
    layout.unfence(state, only)
    assert (state.leader, state.epoch) == (only, 2)


def test_an_unclean_move_leaves_the_new_leader_alone_in_sync():
    layout = Layout(list(NODES))
    state = layout.initial("t", 0, 3)
    other = state.replicas[2]
    assert layout.move(state, other, unclean=True)
    assert state.isr == [other] and state.epoch == 1


def test_the_layout_survives_a_restart(tmp_path):
    layout = Layout(list(NODES), {2})
    state = layout.initial("t", 0, 3, "id-1")
    layout.move(state, 3)
    layout.partitions[("t", 0)] = state
    layout.save(tmp_path)
    again = Layout.load(tmp_path, NODES)
    assert again.down == {2} and again.partitions[("t", 0)] == state
    assert Layout.load(tmp_path, [1, 2]).partitions == {}  # a node no longer configured: placed afresh


# --- leader-epoch-checkpoint (LeaderEpochFileCache) ------------------------------------------

def test_the_checkpoint_file_is_kafkas_format(tmp_path):
    cache = LeaderEpochCache(tmp_path)
    cache.assign(0, 0)
    cache.assign(1, 2)
    assert (tmp_path / LEADER_EPOCH_FILE).read_text() == "0\n2\n0 0\n1 2\n"
    assert LeaderEpochCache.load(tmp_path).entries == [(0, 0), (1, 2)]


def test_assign_replaces_epochs_at_the_same_start_offset(tmp_path):
    """Elections with nothing appended in between: only the newest epoch per start offset stays."""
    cache = LeaderEpochCache(tmp_path)
    cache.assign(1, 5)
    cache.assign(2, 5)
    assert cache.entries == [(2, 5)]
    assert not cache.assign(2, 7)  # the latest epoch already covers it


def test_end_offset_for_answers_as_kafka(tmp_path):
    cache = LeaderEpochCache(tmp_path, [(0, 0), (2, 10), (5, 20)])
    assert cache.end_offset_for(5, 0, 30) == (5, 30)  # the latest: the log end
    assert cache.end_offset_for(3, 0, 30) == (2, 20)  # the floor epoch, the next one's start
    assert cache.end_offset_for(0, 0, 30) == (0, 10)
    assert cache.end_offset_for(6, 0, 30) == (-1, -1)  # above every epoch
    assert cache.end_offset_for(-1, 0, 30) == (-1, -1)
    assert LeaderEpochCache(tmp_path, [(3, 7)]).end_offset_for(1, 0, 9) == (1, 7)  # below every epoch


def test_truncation_drops_the_epochs_that_started_past_it(tmp_path):
    cache = LeaderEpochCache(tmp_path, [(0, 0), (2, 10), (5, 20)])
    cache.truncate_from_end(15)
    assert LeaderEpochCache.load(tmp_path).entries == [(0, 0), (2, 10)]
    assert cache.epoch_at(12) == 2 and cache.epoch_at(3) == 0


def test_a_damaged_checkpoint_reads_as_no_history(tmp_path):
    (tmp_path / LEADER_EPOCH_FILE).write_text("1\n1\n0 0\n")
    assert LeaderEpochCache.load(tmp_path).entries == []


# --- each broker's listeners ------------------------------------------------------------------

def _listeners(overrides: dict[str, str]):
    from types import SimpleNamespace  # noqa: PLC0415

    from odradek.broker.cluster.service import Cluster  # noqa: PLC0415
    from odradek.broker.config import Config  # noqa: PLC0415
    from odradek.broker.security.served import build_listeners  # noqa: PLC0415

    config = Config.load(None, overrides=[f"{k}={v}" for k, v in overrides.items()], environ={})
    app = SimpleNamespace(node_id=config["node.id"], config=config)
    cluster = Cluster(app, config["odradek.brokers"])
    out = cluster.node_listeners(build_listeners(config))
    return {node: [(li.name, li.spec.host, li.spec.port, li.spec.advertised and li.spec.advertised.port, li.node_id)
                   for li in listeners] for node, listeners in out.items()}


def test_broker_k_listens_on_the_first_brokers_ports_plus_k():
    got = _listeners({"odradek.brokers": "3", "listeners": "PLAINTEXT://127.0.0.1:9092,SSLX://127.0.0.1:9192",
                      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSLX:PLAINTEXT",
                      "advertised.listeners": "PLAINTEXT://localhost:19092"})
    assert got[1] == [("PLAINTEXT", "127.0.0.1", 9092, 19092, 1), ("SSLX", "127.0.0.1", 9192, None, 1)]
    assert got[3] == [("PLAINTEXT", "127.0.0.1", 9094, 19094, 3), ("SSLX", "127.0.0.1", 9194, None, 3)]


def test_a_brokers_own_listeners_win():
    got = _listeners({"odradek.brokers": "3", "listeners": "PLAINTEXT://127.0.0.1:0",
                      "odradek.cluster.listeners": "PLAINTEXT://127.0.0.1:7001|",
                      "odradek.cluster.advertised.listeners": "|PLAINTEXT://far:8003"})
    assert got[2] == [("PLAINTEXT", "127.0.0.1", 7001, None, 2)]
    assert got[3] == [("PLAINTEXT", "127.0.0.1", 0, 8003, 3)]  # port 0 stays "any free port"
