"""One CreateTopics of many topics: one durable round for the whole request, and every topic
there after a restart.  (How long it takes is in ``scripts/bench_create_topics.py``.)"""

from __future__ import annotations

import pytest

from odradek.broker.dataplane import topics as registry_module
from odradek.broker.dataplane.topics import PARTITION_METADATA, read_partition_metadata
from odradek.broker.wire_client import SyncClient
from odradek.protocol.errors import ErrorCode as E
from odradek.testing import ThreadedBroker

pytestmark = pytest.mark.integration

CREATE, METADATA = 19, 3


def _create(b, names: list[str], partitions: int = 1, extra: list[dict] = ()):
    body = {"topics": [{"name": n, "num_partitions": partitions, "replication_factor": -1, "assignments": [],
                        "configs": []} for n in names] + list(extra),
            "timeout_ms": 60000, "validate_only": False}
    with SyncClient("127.0.0.1", b.app.endpoint.port, timeout=120) as c:
        return c.request(CREATE, 7, body).topics


def _listed(b) -> dict[str, int]:
    with SyncClient("127.0.0.1", b.app.endpoint.port, timeout=60) as c:
        r = c.request(METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                     "include_topic_authorized_operations": False})
    return {t.name: len(t.partitions) for t in r.topics if not t.is_internal}


def test_a_thousand_topics_in_one_request_are_one_registry_write_and_survive_a_restart(monkeypatch):
    writes: list[int] = []
    real_write = registry_module._write_json

    def counting(path, data):
        writes.append(len(data["topics"]))
        real_write(path, data)

    metadata_rounds: list[int] = []
    real_metadata = registry_module._write_metadata_round

    async def counting_metadata(jobs):
        metadata_rounds.append(len(jobs))
        await real_metadata(jobs)

    names = [f"bulk-{i:04d}" for i in range(1000)]
    with ThreadedBroker() as b:
        monkeypatch.setattr(registry_module, "_write_json", counting)
        monkeypatch.setattr(registry_module, "_write_metadata_round", counting_metadata)
        answers = _create(b, names, extra=[{"name": "bad name", "num_partitions": 1, "replication_factor": -1,
                                            "assignments": [], "configs": []}])
        monkeypatch.undo()
        assert [(t.name, t.error_code) for t in answers] == [(n, E.NONE) for n in names] + [
            ("bad name", E.INVALID_TOPIC_EXCEPTION)]
        assert writes == [1000] and metadata_rounds == [1000]  # one round for the request
        ids = {t.name: t.topic_id for t in answers[:-1]}
        assert _listed(b) == dict.fromkeys(names, 1)
        data_dir = b.app.config.data_dirs[0]
        b.restart()
        assert _listed(b) == dict.fromkeys(names, 1)
        assert {n: b.app.topics.get(n).topic_id for n in names} == ids
        assert read_partition_metadata(data_dir / "bulk-0999-0") == ids["bulk-0999"]


def test_a_torn_partition_metadata_is_rewritten_at_start():
    """partition.metadata is not fsynced file by file: a start rewrites one a crash left
    empty or wrong from the registry's topic id."""
    with ThreadedBroker() as b:
        (answer,) = _create(b, ["torn"], partitions=2)
        d = b.app.config.data_dirs[0]
        (d / "torn-0" / PARTITION_METADATA).write_text("")
        (d / "torn-1" / PARTITION_METADATA).write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n")
        b.restart()
        assert read_partition_metadata(d / "torn-0") == answer.topic_id
        assert read_partition_metadata(d / "torn-1") == answer.topic_id


def test_a_failed_topic_does_not_take_the_others_down(monkeypatch):
    """A storage failure on one topic's logs answers it KAFKA_STORAGE_ERROR; the rest of the
    request is created and the registry keeps only those."""
    with ThreadedBroker() as b:
        logs = b.app.logs
        real_create = logs.open_new

        def failing(topic, partition, *args, **kwargs):
            if topic == "doomed":
                raise OSError(24, "Too many open files")
            return real_create(topic, partition, *args, **kwargs)

        monkeypatch.setattr(logs, "open_new", failing)
        answers = _create(b, ["ok-a", "doomed", "ok-b"])
        monkeypatch.undo()
        assert [(t.name, t.error_code) for t in answers] == [
            ("ok-a", E.NONE), ("doomed", E.KAFKA_STORAGE_ERROR), ("ok-b", E.NONE)]
        b.restart()
        assert _listed(b) == {"ok-a": 1, "ok-b": 1}
