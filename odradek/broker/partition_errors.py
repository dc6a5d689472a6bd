"""Error answers for some partitions of a request, the rest answered by its handler.

A partial failure -- an OffsetCommit whose one partition gets
OFFSET_METADATA_TOO_LARGE, a Produce whose one partition gets
NOT_LEADER_OR_FOLLOWER -- is an ordinary Kafka answer: the error code sits
on the partition and the others succeed.  Which APIs can answer that way is
read from their declarations, not written per API: a request that lists
topics, each listing partitions, whose answer lists topics, each listing
partitions with an error code (Produce, Fetch, ListOffsets, OffsetCommit,
OffsetFetch v1-7, DeleteRecords, OffsetForLeaderEpoch, AddPartitionsToTxn
v0-3, TxnOffsetCommit, ElectLeaders, DescribeProducers ...).  ``split``
takes the chosen partitions out of the request, the handler answers the
rest, and ``merge`` adds the chosen ones to its answer with the error, and in
their other fields what Kafka puts in an error partition (``ERROR_VALUES``)
where that is not the declaration's default.
"""

from __future__ import annotations

import functools
from typing import Any

from ..protocol.fastcodec import EncodedArray
from ..protocol.lean_dataclass import dataclass
from ..protocol.registry import APIS
from ..protocol.schema import F

TOPIC_NAMES = ("name", "topic")
TOPIC_IDENTITY = (*TOPIC_NAMES, "topic_id")
PARTITION_KEYS = ("partition_index", "index", "partition", "partition_id")
ERROR_FIELDS = ("error_code", "partition_error_code")
# the fields of an error partition where Kafka does not write the declaration's default, by API
# key: Produce's PartitionResponse(error) (INVALID_OFFSET), Fetch's partitionResponse(error)
# (INVALID_HIGH_WATERMARK, empty records: librdkafka refuses null ones), OffsetFetch's PartitionData(INVALID_OFFSET, empty epoch,
# NO_METADATA), DeleteRecords' INVALID_LOW_WATERMARK, ShareFetch's empty records; the rest's defaults (-1, "", null) are Kafka's
ERROR_VALUES: dict[int, dict[str, Any]] = {
    0: {"base_offset": -1},
    1: {"high_watermark": -1, "records": b""},
    9: {"committed_offset": -1, "committed_leader_epoch": -1, "metadata": ""},
    21: {"low_watermark": -1},
    78: {"records": b""},  # ShareFetch: empty records, as its handler's rows
}


@dataclass(frozen=True, slots=True)
class Layout:
    """Where one API version keeps its topics and partitions, in the request and in the answer."""

    request_topics: str
    request_partitions: str
    request_index: str | None  # None: the partitions are plain indexes
    answer_topics: str
    answer_identity: tuple[str, ...]  # the answer topic's fields naming it (name/topic, topic_id)
    answer_partitions: str
    answer_index: str
    answer_error: str
    answer_values: tuple[tuple[str, Any], ...] = ()  # ERROR_VALUES the answer version has


def _at(fields: list[F] | None, version: int) -> dict[str, F]:
    return {f.name: f for f in fields or () if version in f.versions}


def _nested_lists(fields: dict[str, F], version: int):
    """(topic list, partition list, partition fields) candidates: arrays of topics holding arrays."""
    for topics in fields.values():
        if not topics.is_array or topics.fields is None:
            continue
        inner = _at(topics.fields, version)
        if not set(inner) & set(TOPIC_IDENTITY):
            continue
        for parts in inner.values():
            if parts.is_array:
                yield topics, inner, parts


@functools.cache
def layout(api_key: int, version: int) -> Layout | None:
    """The API version's layout, or None when its partitions cannot fail one by one."""
    spec = APIS.get(api_key)
    if spec is None:
        return None
    request = answer = None
    for topics, _inner, parts in _nested_lists(_at(spec.request.fields, version), version):
        if parts.fields is None and parts.elem_type.startswith("int"):
            request = (topics.name, parts.name, None)
        elif parts.fields is not None:
            index = next((k for k in PARTITION_KEYS if k in _at(parts.fields, version)), None)
            if index is not None:
                request = (topics.name, parts.name, index)
        if request:
            break
    for topics, inner, parts in _nested_lists(_at(spec.response.fields, version), version):
        pfields = _at(parts.fields, version)
        index = next((k for k in PARTITION_KEYS if k in pfields), None)
        error = next((k for k in ERROR_FIELDS if k in pfields), None)
        if index and error:
            identity = tuple(k for k in TOPIC_IDENTITY if k in inner)
            values = tuple((k, v) for k, v in ERROR_VALUES.get(api_key, {}).items() if k in pfields)
            answer = (topics.name, identity, parts.name, index, error, values)
            break
    if request is None or answer is None:
        return None
    return Layout(*request, *answer)


def _index(layout: Layout, item: Any) -> int:
    return item if layout.request_index is None else item[layout.request_index]


def _topic_name(topic: Any) -> str | None:
    return next((topic[k] for k in TOPIC_NAMES if topic.get(k) is not None), None)


def split(layout: Layout, request: Any, topic: str | None, partition: int | None) -> tuple[Any, list]:
    """(the request without the chosen partitions, [(request topic, [chosen indexes])])."""
    kept_topics, chosen = [], []
    for t in request[layout.request_topics] or ():
        name = _topic_name(t)
        parts = t[layout.request_partitions] or []
        hit = [p for p in parts if (topic is None or name == topic)
               and (partition is None or _index(layout, p) == partition)]
        if hit:
            chosen.append((t, [_index(layout, p) for p in hit]))
        rest = [p for p in parts if not any(p is h for h in hit)]
        if rest or not hit:
            kept = type(t)(t)
            kept[layout.request_partitions] = rest
            kept_topics.append(kept)
    remaining = type(request)(request)
    remaining[layout.request_topics] = kept_topics
    return remaining, chosen


def merge(layout: Layout, answer: dict, chosen: list, code: int) -> dict:
    """``answer`` with the chosen partitions added, each carrying ``code``."""
    topics = list(answer.get(layout.answer_topics) or [])
    for req_topic, indexes in chosen:
        ident = {k: req_topic[k] for k in layout.answer_identity if req_topic.get(k) is not None}
        name_field = next((k for k in layout.answer_identity if k in TOPIC_NAMES), None)  # none: by id
        if name_field is not None and name_field not in ident and (name := _topic_name(req_topic)) is not None:
            ident[name_field] = name
        parts = [{**dict(layout.answer_values), layout.answer_index: i, layout.answer_error: code}
                 for i in indexes]
        for n, existing in enumerate(topics):
            if all(existing.get(k) == v for k, v in ident.items()):
                written = existing[layout.answer_partitions]
                merged = written.extended(parts) if type(written) is EncodedArray else [*written, *parts]
                topics[n] = {**existing, layout.answer_partitions: merged}
                break
        else:
            topics.append({**ident, layout.answer_partitions: parts})
    return {**answer, layout.answer_topics: topics}
