"""kill -9 in the middle of a reset leaves the old state or the empty one, never a mix.

A child process fills a broker (topics with records, groups with committed
offsets), then resets it with a tripwire on the file-system calls that
change what is on disk (``os.replace``, ``os.fsync``, ``os.unlink``,
``os.rmdir``): the k-th call SIGKILLs the process.  A new broker on the same
directory must then hold everything (every topic with its records, every
group's offsets) or nothing.  The first run counts the calls; the crash
points are spread over all of them, first and last included (the removal of
the old directories runs in a worker thread, so the count varies a little).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from odradek.broker.wire_client import SyncClient
from odradek.testing import ThreadedBroker

pytestmark = pytest.mark.integration

TOPICS, GROUPS, RECORDS = 8, 4, 3
CRASH_POINTS = 9

CHILD = textwrap.dedent('''
    import os, signal, sys, asyncio, time
    from odradek.broker.wire_client import SyncClient
    from odradek.protocol.records import encode_pairs_batch
    from odradek.testing import ThreadedBroker

    data_dir, kill_at, topics, groups, records = sys.argv[1], int(sys.argv[2]), *map(int, sys.argv[3:6])
    b = ThreadedBroker(data_dir=data_dir, overrides={"log.fsync.mode": "always"}).start()
    names = [f"crash-{i}" for i in range(topics)]
    with SyncClient("127.0.0.1", b.app.endpoint.port, timeout=30) as c:
        c.request(19, 5, {"topics": [{"name": n, "num_partitions": 1, "replication_factor": -1,
                                      "assignments": [], "configs": []} for n in names],
                          "timeout_ms": 30000, "validate_only": False})
        batch = encode_pairs_batch([(b"k", b"v")] * records, base_offset=0, timestamp=int(time.time() * 1000))
        c.request(0, 8, {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
                         "topic_data": [{"name": n, "partition_data": [{"index": 0, "records": batch}]}
                                        for n in names]})
        for g in range(groups):
            c.request(8, 7, {"group_id": f"crash-group-{g}", "generation_id_or_member_epoch": -1,
                             "member_id": "", "group_instance_id": None, "retention_time_ms": -1,
                             "topics": [{"name": names[g], "partitions": [
                                 {"partition_index": 0, "committed_offset": g + 1,
                                  "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
    calls = [0]
    def tripwire(real):
        def call(*args, **kwargs):
            calls[0] += 1
            if calls[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)
        return call
    for name in ("replace", "fsync", "unlink", "rmdir"):
        setattr(os, name, tripwire(getattr(os, name)))
    b.reset()
    print(calls[0], flush=True)
    os._exit(0)
''')


def _run_child(data_dir: Path, kill_at: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD, str(data_dir), str(kill_at),
                           str(TOPICS), str(GROUPS), str(RECORDS)],
                          capture_output=True, text=True, timeout=120)


def _committed(data_dir: Path) -> dict:
    """Every topic's log end offset and every group's committed offset, as a restarted broker has them."""
    out = {}
    with ThreadedBroker(data_dir=data_dir) as b:
        b._call(b.app.wait_loaded())
        with SyncClient("127.0.0.1", b.app.endpoint.port, timeout=30) as c:
            for g in range(GROUPS):
                resp = c.request(9, 7, {"group_id": f"crash-group-{g}", "topics": None,
                                        "require_stable": False})
                got = [p.committed_offset for t in resp.topics for p in t.partitions
                       if p.committed_offset >= 0]
                if got:
                    out[f"crash-group-{g}"] = got[0]
            meta = c.request(3, 9, {"topics": None, "allow_auto_topic_creation": False,
                                    "include_cluster_authorized_operations": False,
                                    "include_topic_authorized_operations": False})
            topics = sorted(t.name for t in meta.topics if not t.is_internal)
            ends = {}
            for name in topics:
                lo = c.request(2, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
                    {"name": name, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                   "timestamp": -1}]}]})
                ends[name] = lo.topics[0].partitions[0].offset
    return {"topics": ends, "groups": out}


OLD = {"topics": {f"crash-{i}": RECORDS for i in range(TOPICS)},
       "groups": {f"crash-group-{g}": g + 1 for g in range(GROUPS)}}
EMPTY: dict = {"topics": {}, "groups": {}}


def test_kill_9_at_any_point_of_a_reset_leaves_the_old_or_the_empty_state(tmp_path):
    counted = _run_child(tmp_path / "count", 0)
    assert counted.returncode == 0, counted.stderr[-2000:]
    total = int(counted.stdout.split()[-1])
    assert total > 3
    assert _committed(tmp_path / "count") == EMPTY  # a reset that ran to its end
    points = sorted({1 + round(i * (total - 1) / (CRASH_POINTS - 1)) for i in range(CRASH_POINTS)})
    outcomes = {}
    for k in points:
        d = tmp_path / f"kill-{k}"
        run = _run_child(d, k)
        # the cleanup thread's calls race the reset's: a late point may not come before the exit
        assert run.returncode in (-9, 0), (k, run.returncode, run.stderr[-2000:])
        state = _committed(d)
        assert state in (OLD, EMPTY), (k, state)
        outcomes[k] = "old" if state == OLD else "empty"
        assert not (d / "reset.pending").exists()  # the start finished or never saw a reset
    assert set(outcomes.values()) == {"old", "empty"}, outcomes  # both sides of the marker were hit
