"""Fault rules: which requests to answer wrongly, and how.

A rule names one or more APIs and, optionally, a version range, a group id,
topic, partition, transactional id or client id; a request matching all of
them gets the rule's act instead of (or on top of) its handler: a Kafka error
code, an added delay, a closed connection before or after the handler ran,
or a ``throttle_time_ms``.  A rule fires ``times`` times, for ``seconds``, or
until removed; the first matching rule in the order added wins.

Everything is validated when the rule is made (:func:`make_rule`): an unknown
API, a version the broker does not serve, an error the API cannot return
(``error_tables.py``) or a filter the request does not carry is a
``ValueError`` at the call, never a broken response later.  The server asks
:meth:`FaultRules.match` only while a rule exists (``KafkaServer.control``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import field
from typing import Any

from ...protocol.errors import ErrorCode
from ...protocol.lean_dataclass import dataclass
from ...protocol.registry import APIS
from ...protocol.schema import F
from .. import partition_errors
from ..error_answers import SHAPES
from .error_tables import allowed_errors

CLOSE_WHEN = ("before", "after")
FILTERS = ("group_id", "topic", "partition", "transactional_id")


@dataclass(slots=True)
class RequestKeys:
    """The group ids, topics, partitions and transactional ids a request names."""

    group_id: set[str] = field(default_factory=set)
    topic: set[str] = field(default_factory=set)
    partition: set[int] = field(default_factory=set)
    transactional_id: set[str] = field(default_factory=set)


def request_keys(request: Any) -> RequestKeys:
    """Walk a decoded request body for the names fault rules and capture queries filter on."""
    keys = RequestKeys()
    _walk(request, keys, in_topic=False)
    if "key_type" in request:  # FindCoordinator v0-3: one key; 0 a group, 1 a transactional id
        if request.get("key") is not None:
            (keys.transactional_id if request["key_type"] == 1 else keys.group_id).add(request["key"])
        for key in request.get("coordinator_keys") or ():  # v4+: a batch of keys of one type
            (keys.transactional_id if request["key_type"] == 1 else keys.group_id).add(key)
    return keys


TOPIC_LISTS = ("topics", "topic_data", "forgotten_topics_data")
# the APIs whose requests name topics only by id, from this version: Produce, Fetch, OffsetCommit,
# OffsetFetch (KIP-516, KIP-848)
BY_ID_FROM = {0: 13, 1: 13, 8: 10, 9: 10}


def name_topics_by_id(api_key: int, version: int, request: Any, name_of: Callable[[Any], str | None]) -> None:
    """Give each topic a request names only by id (``BY_ID_FROM``) the name of its topic (None:
    no topic has the id), so fault rules, their per-partition errors and capture queries filter
    on topic names at every version; the handlers resolve the ids themselves too."""
    if version < BY_ID_FROM.get(api_key, version + 1):
        return
    for list_name in TOPIC_LISTS:
        for item in request.get(list_name) or ():
            _name_item(item, name_of)
    for group in request.get("groups") or ():
        if isinstance(group, dict):
            for item in group.get("topics") or ():
                _name_item(item, name_of)


def _name_item(item: Any, name_of: Callable[[Any], str | None]) -> None:
    if not isinstance(item, dict) or item.get("topic_id") is None:
        return
    field = "name" if "name" in item else "topic"
    if item.get(field) == "":
        item[field] = name_of(item["topic_id"])


def _walk(obj: Any, keys: RequestKeys, in_topic: bool) -> None:
    for name, value in obj.items():
        if value is None:
            continue
        if name == "group_id" and isinstance(value, str):
            keys.group_id.add(value)
        elif name in ("transactional_id", "v3_and_below_transactional_id") and isinstance(value, str):
            keys.transactional_id.add(value)  # AddPartitionsToTxn v0-3 spells it with a prefix
        elif name == "transactional_ids" and isinstance(value, list):  # DescribeTransactions
            keys.transactional_id.update(v for v in value if isinstance(v, str))
        elif name in ("groups", "groups_names", "group_ids") and isinstance(value, list):
            for item in value:
                if isinstance(item, str):
                    keys.group_id.add(item)
                elif isinstance(item, dict):
                    _walk(item, keys, in_topic=False)  # OffsetFetch v8+: groups hold their topics
        elif name in ("topics", "topic_data", "v3_and_below_topics") and isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    _walk(item, keys, in_topic=True)
        elif name == "topic_names" and isinstance(value, list):
            keys.topic.update(v for v in value if isinstance(v, str))
        elif in_topic and name in ("name", "topic") and isinstance(value, str):
            keys.topic.add(value)
        elif in_topic and name in ("partition_index", "index", "partition") and isinstance(value, int):
            keys.partition.add(value)
        elif in_topic and name == "partition_indexes" and isinstance(value, list):
            keys.partition.update(value)
        elif in_topic and name == "partitions" and isinstance(value, list) \
                and all(isinstance(v, int) for v in value):  # AddPartitionsToTxn: plain indexes
            keys.partition.update(value)
        elif name in ("partitions", "partition_data") and isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    _walk(item, keys, in_topic)


def _field_names(fields: list[F], out: set[str]) -> set[str]:
    for f in fields:
        out.add(f.name)
        if f.fields is not None:
            _field_names(f.fields, out)
    return out


def applicable_filters(api_key: int) -> set[str]:
    """Which filters can ever match a request of ``api_key`` (read from its declaration)."""
    names = _field_names(APIS[api_key].request.fields, set())
    out = set()
    if names & {"group_id", "groups", "groups_names", "group_ids"} or api_key == 10:
        out.add("group_id")
    if names & {"topics", "topic_data", "topic_names", "v3_and_below_topics"} and api_key not in (10, 65):
        out.add("topic")
    if names & {"partition_index", "index", "partition", "partition_indexes"} or api_key == 24:
        out.add("partition")
    if names & {"transactional_id", "v3_and_below_transactional_id", "transactional_ids"} or api_key == 10:
        out.add("transactional_id")
    return out


@dataclass(slots=True)
class FaultRule:
    """One rule; ``times_left`` None fires until removed or expired."""

    id: int
    api_keys: frozenset[int]
    versions: tuple[int, int] | None = None
    group_id: str | None = None
    topic: str | None = None
    partition: int | None = None
    transactional_id: str | None = None
    client_id: str | None = None
    error: int | None = None
    delay_ms: int = 0
    close: str | None = None
    throttle_ms: int | None = None
    times_left: int | None = None
    expires: int | None = None  # deadline on the broker's clock (ms): an advance moves it
    fired: int = 0
    per_partition: bool = False  # the error goes on the matching partitions only (partition_errors)
    timer: Any = None  # the clock's handle that removes it at ``expires`` (cancelled when it goes earlier)

    def expired(self, now: float) -> bool:
        """Past its ``seconds=``: gone from the listing and from ``remove`` at once, not only
        when the next request of its API arrives."""
        return self.expires is not None and now >= self.expires

    def matches(self, version: int, client_id: str | None, request: Any) -> bool:
        if self.versions is not None and not self.versions[0] <= version <= self.versions[1]:
            return False
        if self.client_id is not None and client_id != self.client_id:
            return False
        if self.group_id is None and self.topic is None and self.partition is None \
                and self.transactional_id is None:
            return True
        keys = request_keys(request)
        return ((self.group_id is None or self.group_id in keys.group_id)
                and (self.topic is None or self.topic in keys.topic)
                and (self.partition is None or self.partition in keys.partition)
                and (self.transactional_id is None or self.transactional_id in keys.transactional_id))

    def describe(self, now_ms: int) -> dict:
        """A plain summary (the control endpoint's answer to ``faults``); ``now_ms``: the broker's time."""
        return {"id": self.id, "apis": sorted(APIS[k].name for k in self.api_keys),
                "versions": list(self.versions) if self.versions else None,
                "group_id": self.group_id, "topic": self.topic, "partition": self.partition,
                "transactional_id": self.transactional_id, "client_id": self.client_id,
                "error": ErrorCode(self.error).name if self.error is not None else None,
                "delay_ms": self.delay_ms, "close": self.close, "throttle_ms": self.throttle_ms,
                "times_left": self.times_left, "per_partition": self.per_partition,
                "seconds_left": None if self.expires is None else max(0.0, (self.expires - now_ms) / 1000),
                "fired": self.fired}


class FaultRules:
    """The rules in the order added, indexed by API key for the request path."""

    def __init__(self) -> None:
        self._rules: list[FaultRule] = []
        self.by_api: dict[int, list[FaultRule]] = {}

    def __len__(self) -> int:
        return len(self._rules)

    def __iter__(self):
        return iter(list(self._rules))

    def drop_expired(self, now: int) -> None:
        """Forget the rules whose ``seconds=`` are up at broker time ``now`` (before listing or
        removing them)."""
        if any(rule.expired(now) for rule in self._rules):
            self._keep(lambda r: not r.expired(now))

    def add(self, rule: FaultRule) -> None:
        self._rules.append(rule)
        self._reindex()

    def remove(self, rule_id: int, now: int | None = None) -> bool:
        """True if the rule was live; False if spent, expired (at broker time ``now``) or removed."""
        if now is not None:
            self.drop_expired(now)
        before = len(self._rules)
        self._keep(lambda r: r.id != rule_id)
        return len(self._rules) < before

    def clear(self) -> int:
        n = len(self._rules)
        self._keep(lambda _r: False)
        return n

    def _keep(self, keep: Callable[[FaultRule], bool]) -> None:
        """Only the rules ``keep`` says; the others' expiry timers are cancelled (every way a
        rule goes passes here, so no timer outlives its rule)."""
        kept = []
        for rule in self._rules:
            if keep(rule):
                kept.append(rule)
            elif rule.timer is not None:
                rule.timer.cancel()
                rule.timer = None
        self._rules = kept
        self._reindex()

    def _reindex(self) -> None:
        by_api: dict[int, list[FaultRule]] = {}
        for rule in self._rules:
            for key in rule.api_keys:
                by_api.setdefault(key, []).append(rule)
        self.by_api = by_api

    def match(self, api_key: int, version: int, client_id: str | None, request: Any,
              now: int) -> FaultRule | None:
        """The first live rule matching the request at broker time ``now``, counted as fired;
        expired rules go."""
        rules = self.by_api.get(api_key)
        if not rules:
            return None
        for rule in rules:
            if rule.expired(now):
                self.drop_expired(now)
                continue
            if rule.matches(version, client_id, request):
                rule.fired += 1
                if rule.times_left is not None:
                    rule.times_left -= 1
                    if rule.times_left <= 0:
                        self.remove(rule.id)
                return rule
        return None


# --- validation: names and codes to rules ---------------------------------------------------------


def api_key_of(api: str | int, served: Iterable[int]) -> int:
    """An API by Kafka name (``OffsetCommit``, any case, ``_`` ignored) or key; must be served."""
    served = set(served)
    if isinstance(api, bool):
        raise ValueError(f"unknown API {api!r}")
    if isinstance(api, int) or (isinstance(api, str) and api.strip().lstrip("-").isdigit()):
        key = int(api)
        if key not in APIS:
            raise ValueError(f"unknown API key {key}")
    else:
        wanted = str(api).replace("_", "").replace("-", "").lower()
        found = [k for k, s in APIS.items() if s.name.lower() == wanted]
        if not found:
            names = [APIS[k].name for k in sorted(served)]
            guess = _close_matches(str(api), names)
            hint = f"; did you mean {guess[0]}?" if guess else f"; served: {', '.join(names)}"
            raise ValueError(f"unknown API {api!r}{hint}")
        key = found[0]
    if key not in served:
        raise ValueError(f"{APIS[key].name} (key {key}) is not served by this broker")
    return key


def error_code_of(error: str | int) -> ErrorCode:
    """An error by Kafka name (``NOT_COORDINATOR``, any case) or code."""
    if isinstance(error, int) and not isinstance(error, bool):
        try:
            return ErrorCode(error)
        except ValueError:
            raise ValueError(f"unknown error code {error}") from None
    text = str(error).strip()
    if text.lstrip("-").isdigit():
        return error_code_of(int(text))
    try:
        return ErrorCode[text.upper()]
    except KeyError:
        guess = _close_matches(text.upper(), ErrorCode.__members__)
        hint = f"; did you mean {guess[0]}?" if guess else ""
        raise ValueError(f"unknown error {error!r}{hint}") from None


def version_range(versions: Any) -> tuple[int, int] | None:
    """None, an int, ``"3-5"``, ``"3+"`` (to the highest served) or a (lo, hi) pair."""
    if versions is None:
        return None
    if isinstance(versions, int) and not isinstance(versions, bool):
        return versions, versions
    if isinstance(versions, str):
        text = versions.strip()
        if text.endswith("+"):
            return int(text[:-1]), 1 << 15
        lo, sep, hi = text.partition("-")
        return (int(lo), int(hi)) if sep else (int(lo), int(lo))
    lo, hi = versions
    return int(lo), int(hi)


def make_rule(rule_id: int, api: Any, served: dict[int, tuple[int, int]], *, error: Any = None,
              versions: Any = None, group_id: str | None = None, topic: str | None = None,
              partition: int | None = None, transactional_id: str | None = None,
              client_id: str | None = None, delay_ms: int = 0, close: str | None = None,
              throttle_ms: int | None = None, times: int | None = None,
              seconds: float | None = None, now_ms: int = 0, per_partition: bool = False) -> FaultRule:
    """A validated rule; ``served`` maps each served API key to its (min, max) version;
    ``seconds`` count from ``now_ms`` on the broker's clock."""
    apis = api if isinstance(api, list | tuple | set | frozenset) else [api]
    if not apis:
        raise ValueError("no API given")
    keys = frozenset(api_key_of(a, served) for a in apis)
    span = version_range(versions)
    if span is not None:
        lo, hi = span
        for key in keys:
            slo, shi = served[key]
            hi_eff = min(hi, shi) if hi == 1 << 15 else hi
            if lo > hi_eff or lo < slo or hi_eff > shi:
                raise ValueError(f"{APIS[key].name} v{lo}-{hi_eff} is not served (served: v{slo}-{shi})")
        span = (lo, hi)
    code = None
    if error is not None:
        code = error_code_of(error)
        if code == ErrorCode.NONE:
            raise ValueError("error NONE (0) is not an error")
        for key in keys:
            allowed = allowed_errors(key)
            if allowed is not None and code not in allowed:
                names = ", ".join(sorted(e.name for e in allowed))
                raise ValueError(f"{code.name} ({int(code)}) is not an error {APIS[key].name} can return "
                                 f"(it can return: {names})")
            if key not in SHAPES:
                raise ValueError(f"no error answer is known for {APIS[key].name}: cannot inject an error")
    if close is not None and close not in CLOSE_WHEN:
        raise ValueError(f"close must be one of {', '.join(CLOSE_WHEN)}, not {close!r}")
    filters = {"group_id": group_id, "topic": topic, "partition": partition,
               "transactional_id": transactional_id}
    for name, value in filters.items():
        if value is None:
            continue
        for key in keys:
            if name not in applicable_filters(key):
                raise ValueError(f"{APIS[key].name} requests carry no {name}: the rule could never match")
    for name, value in (("delay_ms", delay_ms), ("throttle_ms", throttle_ms), ("times", times)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise ValueError(f"{name} must be a non-negative integer, not {value!r}")
    if times == 0:
        raise ValueError("times must be at least 1 (leave it out to fire until removed)")
    if seconds is not None and (not isinstance(seconds, int | float) or seconds <= 0):
        raise ValueError(f"seconds must be a positive number, not {seconds!r}")
    if code is None and not delay_ms and close is None and throttle_ms is None:
        raise ValueError("the rule does nothing: give error, delay_ms, close or throttle_ms")
    if per_partition:
        _check_per_partition(keys, span, served, code, close)
    return FaultRule(rule_id, keys, span, group_id, topic, partition, transactional_id, client_id,
                     None if code is None else int(code), delay_ms or 0, close, throttle_ms, times,
                     None if seconds is None else now_ms + round(seconds * 1000),
                     per_partition=bool(per_partition))


def _check_per_partition(keys: frozenset[int], span: tuple[int, int] | None,
                         served: dict[int, tuple[int, int]], code: Any, close: str | None) -> None:
    """A per-partition rule needs an error, and APIs whose answers carry one per partition."""
    if code is None or close is not None:
        raise ValueError("per_partition puts an error on some partitions: give error, and no close")
    for key in keys:
        lo, hi = served[key]
        if span is not None:
            lo, hi = max(lo, span[0]), min(hi, span[1])
        missing = [v for v in range(lo, hi + 1) if partition_errors.layout(key, v) is None]
        if missing:
            raise ValueError(f"{APIS[key].name} v{missing[0]}-{missing[-1]} answers no error per partition: "
                             f"per_partition cannot apply (narrow versions= or drop per_partition)")


def _close_matches(word: str, possibilities) -> list[str]:
    """The likeliest meant name of a mistyped one; difflib imported on a typo, not at start."""
    import difflib  # noqa: PLC0415

    return difflib.get_close_matches(word, possibilities, n=1)
