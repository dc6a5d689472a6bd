"""Request capture: the last N requests the broker received and its answers, decoded, for tests.

"The consumer committed offset 42 for partition 3 before it closed" and "the
first two commits got NOT_COORDINATOR, the third succeeded" are queries over
this buffer.  Each request is paired with the answer the client got, decoded
from the bytes sent (``answer``), and the error codes in it at every level
(``errors``).  It is bounded (the oldest request goes first) and off unless
asked for (``odradek.control.capture.requests``; the in-process test brokers
keep 1,000): recording costs a small object per request and a decode per answer.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import uuid
from collections import deque
from dataclasses import field
from typing import Any

from ...protocol.errors import ErrorCode
from ...protocol.lean_dataclass import dataclass
from ...protocol.registry import APIS
from .faults import request_keys


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ costs ~1 us more per request
class CapturedRequest:
    """One received request; ``body`` is the decoded request (attribute access: ``body.topics``).

    ``answer`` is the decoded answer the client was sent (None: not answered yet, never -- the
    connection closed first -- or an acks=0 Produce); ``errors`` maps where in the answer each
    non-zero error code sits to its Kafka name: ``{"error_code": "NOT_COORDINATOR"}`` for a
    top-level code, ``{"topics[orders].partitions[3]": "NOT_LEADER_OR_FOLLOWER"}`` for one
    partition's.  ``ok``: answered, with no error anywhere.
    """

    api: str
    api_key: int
    version: int
    client_id: str | None
    connection: int
    correlation_id: int
    time_ms: int
    body: Any
    answer_bytes: bytes | None = field(default=None, repr=False)  # as sent; decoded when first read
    _decoded: tuple[Any, dict[str, str]] | None = field(default=None, repr=False, compare=False)

    @property
    def answer(self) -> Any:
        return self._decode()[0]

    @property
    def errors(self) -> dict[str, str] | None:
        return self._decode()[1]

    def _decode(self) -> tuple[Any, dict[str, str] | None]:
        """Decoding costs ~40 us, more than handling most requests: only for answers a test reads."""
        if self.answer_bytes is None:
            return None, None
        if self._decoded is None:
            answer, _ = APIS[self.api_key].response.codec(self.version)[0](self.answer_bytes, 0)
            self._decoded = (answer, answer_errors(answer))
        return self._decoded

    def plain(self) -> dict[str, Any]:
        """JSON-ready (the control endpoint): the header fields, ``body``, ``answer`` and ``errors``."""
        return {"api": self.api, "api_key": self.api_key, "version": self.version,
                "client_id": self.client_id, "connection": self.connection,
                "correlation_id": self.correlation_id, "time_ms": self.time_ms,
                "body": to_plain(self.body), "answer": to_plain(self.answer), "errors": self.errors}

    @property
    def answered(self) -> bool:
        return self.answer_bytes is not None

    @property
    def ok(self) -> bool:
        return self.errors == {}

    def error_names(self) -> set[str]:
        """Every error in the answer, whatever its level (empty: answered without one)."""
        return set((self.errors or {}).values())


def answer_errors(answer: Any, path: str = "") -> dict[str, str]:
    """The non-zero ``error_code`` fields of a decoded answer, by where they sit.

    A list item is named by its ``name``/``topic``/``group_id``/``partition_index`` (what
    Kafka's answers key their levels by), else by its position."""
    out: dict[str, str] = {}
    for key, value in answer.items():
        if key.startswith("_"):
            continue
        if key == "error_code" or key.endswith("_error_code"):
            if value:
                out[f"{path}.{key}" if path and key != "error_code" else (path or key)] = _error_name(value)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    label = next((item[k] for k in _LABELS if item.get(k) is not None), i)
                    out.update(answer_errors(item, f"{path + '.' if path else ''}{key}[{label}]"))
    return out


_LABELS = ("name", "topic", "group_id", "partition_index", "index", "partition", "transactional_id")


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class CaptureOff(RuntimeError):
    """``captured`` on a broker that records nothing (``odradek serve`` unless asked): an empty
    list would read as "no such request" (as ``tracemalloc.take_snapshot`` refuses when off)."""

    def __init__(self) -> None:
        super().__init__("capture is off on this broker, so nothing was recorded: turn it on with "
                         "set_capture(1000) (odradek control set_capture max_requests=1000) or the "
                         "setting odradek.control.capture.requests=1000, then make the requests")


class RequestCapture:
    def __init__(self, max_requests: int) -> None:
        self.buffer: deque[CapturedRequest] = deque(maxlen=max(max_requests, 1))
        self.enabled = max_requests > 0
        self._awaiting: dict[tuple[int, int], CapturedRequest] = {}  # (connection, correlation id)

    def resize(self, max_requests: int) -> None:
        self.buffer = deque(self.buffer, maxlen=max(max_requests, 1))
        self.enabled = max_requests > 0

    def state(self) -> dict:
        """On or off, how many requests it keeps, how many it holds."""
        return {"enabled": self.enabled, "max_requests": self.buffer.maxlen if self.enabled else 0,
                "held": len(self.buffer)}

    def record(self, api_key: int, version: int, client_id: str | None, connection: int,
               correlation_id: int, time_ms: int, body: Any) -> None:
        req = CapturedRequest(APIS[api_key].name, api_key, version, client_id, connection,
                              correlation_id, time_ms, body)
        self.buffer.append(req)
        awaiting = self._awaiting
        awaiting[connection, correlation_id] = req
        if len(awaiting) > 2 * (self.buffer.maxlen or 1):  # answers that never came (closed connections)
            for key in list(awaiting)[:len(awaiting) // 2]:
                del awaiting[key]

    def record_answer(self, connection: int, correlation_id: int, body: bytes) -> None:
        """Pair the answer sent (its encoded body) with the request it answers."""
        req = self._awaiting.pop((connection, correlation_id), None)
        if req is not None:
            req.answer_bytes = bytes(body)

    def clear(self) -> int:
        n = len(self.buffer)
        self.buffer.clear()
        self._awaiting.clear()
        return n

    def query(self, api_keys: set[int] | None = None, *, version: int | None = None,
              client_id: str | None = None, connection: int | None = None, group_id: str | None = None,
              topic: str | None = None, partition: int | None = None,
              transactional_id: str | None = None, error: str | None = None) -> list[CapturedRequest]:
        """The captured requests matching every filter given, oldest first; ``error``: answered
        with that error somewhere (``"NONE"``: answered without any); ``CaptureOff`` if off."""
        if not self.enabled:
            raise CaptureOff()
        out = []
        for req in self.buffer:
            if error is not None and (not req.answered or (
                    req.errors if error == "NONE" else error not in req.errors.values())):
                continue
            if api_keys is not None and req.api_key not in api_keys:
                continue
            if version is not None and req.version != version:
                continue
            if client_id is not None and req.client_id != client_id:
                continue
            if connection is not None and req.connection != connection:
                continue
            if group_id is not None or topic is not None or partition is not None \
                    or transactional_id is not None:
                keys = request_keys(req.body)
                if (group_id is not None and group_id not in keys.group_id) \
                        or (topic is not None and topic not in keys.topic) \
                        or (partition is not None and partition not in keys.partition) \
                        or (transactional_id is not None and transactional_id not in keys.transactional_id):
                    continue
            out.append(req)
        return out


def to_plain(value: Any) -> Any:
    """JSON-ready: dataclasses and decoded messages to dicts, bytes to base64, UUIDs to strings."""
    if isinstance(value, CapturedRequest):
        return value.plain()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items() if not str(k).startswith("_")}
    if isinstance(value, list | tuple | set | frozenset | deque):
        return [to_plain(v) for v in value]
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    return value
