"""kill -9 at any point of a partition's move between log dirs loses nothing.

A child process runs a broker on two log dirs, writes records to a partition
(fsync always), raises its log start offset (DeleteRecords), then asks
AlterReplicaLogDirs to move it, with a tripwire on the file-system calls that
change what is on disk (``os.replace``, ``os.fsync``, ``os.unlink``,
``os.rmdir``): the k-th call SIGKILLs the process.  A broker restarted on the
same dirs must hold every record and the raised start, in exactly one dir, and
finish the move (Kafka resumes a future replica after a restart).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from odradek.broker.wire_client import SyncClient
from odradek.testing import ThreadedBroker

pytestmark = pytest.mark.integration

RECORDS, START = 40, 7
CRASH_POINTS = 12

CHILD = textwrap.dedent('''
    import os, signal, sys, time
    from odradek.broker.wire_client import SyncClient
    from odradek.protocol.records import encode_pairs_batch
    from odradek.testing import ThreadedBroker

    root, kill_at, records, start = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    a, b = f"{root}/a", f"{root}/b"
    broker = ThreadedBroker(data_dir=a, overrides={"log.dirs": f"{a},{b}", "log.fsync.mode": "always",
                                                   "log.segment.bytes": "1024"}).start()
    with SyncClient("127.0.0.1", broker.app.endpoint.port, timeout=30) as c:
        c.request(19, 5, {"topics": [{"name": "moving", "num_partitions": 1, "replication_factor": -1,
                                      "assignments": [], "configs": []}],
                          "timeout_ms": 30000, "validate_only": False})
        for i in range(records):
            batch = encode_pairs_batch([(b"k", b"v%d" % i)], base_offset=0, timestamp=int(time.time() * 1000))
            c.request(0, 8, {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
                             "topic_data": [{"name": "moving", "partition_data": [{"index": 0, "records": batch}]}]})
        c.request(21, 2, {"topics": [{"name": "moving", "partitions": [{"partition_index": 0, "offset": start}]}],
                          "timeout_ms": 5000})
        here = broker.call(lambda: broker.app.logs.get("moving", 0).directory.parent)
        dest = os.path.realpath(b if str(here) == a else a)
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
        c.request(34, 2, {"dirs": [{"path": dest, "topics": [{"name": "moving", "partitions": [0]}]}]})
    deadline = time.monotonic() + 30
    while broker.call(lambda: broker.app.logs.moves()) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)  # the old copy's removal and the checkpoint after the switch
    print(calls[0], flush=True)
    os._exit(0)
''')


def _run_child(root: Path, kill_at: int) -> subprocess.CompletedProcess:
    root.mkdir(parents=True, exist_ok=True)
    return subprocess.run([sys.executable, "-c", CHILD, str(root), str(kill_at), str(RECORDS), str(START)],
                          capture_output=True, text=True, timeout=120)


def _state(root: Path) -> tuple[int, int, str, list[str]]:
    """(log start, log end, the dir holding the partition once any move finished, stray dirs)."""
    a, b = root / "a", root / "b"
    with ThreadedBroker(a, overrides={"log.dirs": f"{a},{b}"}) as broker:
        deadline = time.monotonic() + 20
        while broker.call(lambda: broker.app.logs.moves()) and time.monotonic() < deadline:
            time.sleep(0.05)
        lg = broker.call(lambda: broker.app.logs.get("moving", 0))
        with SyncClient("127.0.0.1", broker.app.endpoint.port, timeout=30) as c:
            ends = [c.request(2, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": "moving", "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                   "timestamp": ts}]}]}).topics[0].partitions[0].offset
                    for ts in (-2, -1)]
        held = lg.directory.parent.name
    stray = [p.name for d in (a, b) for p in d.iterdir() if p.name.startswith("moving-") and p.name != "moving-0"]
    copies = [d.name for d in (a, b) if (d / "moving-0").exists()]
    assert copies == [held], copies
    return ends[0], ends[1], held, stray


def _counted(tmp_path: Path) -> tuple[int, str]:
    """The file-system calls of a whole move, and the dir the partition ends in."""
    counted = _run_child(tmp_path / "count", 0)
    assert counted.returncode == 0, counted.stderr[-3000:]
    total = int(counted.stdout.split()[-1])
    assert total > 5
    start, end, final, _stray = _state(tmp_path / "count")
    assert (start, end) == (START, RECORDS)
    return total, final


def test_kill_9_in_the_middle_of_a_move_loses_nothing(tmp_path):
    """A short run: one kill half-way through the move's calls, the restart, the checks."""
    total, final = _counted(tmp_path)
    run = _run_child(tmp_path / "kill", total // 2)
    assert run.returncode in (-9, 0), run.stderr[-3000:]
    assert _state(tmp_path / "kill") == (START, RECORDS, final, [])


@pytest.mark.slow
def test_kill_9_at_any_point_of_a_move_loses_nothing(tmp_path):
    total, final = _counted(tmp_path)
    points = sorted({1 + round(i * (total - 1) / (CRASH_POINTS - 1)) for i in range(CRASH_POINTS)})
    for k in points:
        root = tmp_path / f"kill-{k}"
        run = _run_child(root, k)
        assert run.returncode in (-9, 0), (k, run.returncode, run.stderr[-3000:])
        assert _state(root) == (START, RECORDS, final, []), k
