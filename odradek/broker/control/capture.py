"""Request capture: the last N requests the broker received, decoded, for tests to assert on.

"The consumer committed offset 42 for partition 3 before it closed" is a
query over this buffer.  It is bounded (the oldest request goes first) and
off unless asked for (``odradek.control.capture.requests``; the in-process
test brokers keep 1,000): recording costs a tuple per request.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any

from ...protocol.registry import APIS
from .faults import request_keys


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ costs ~1 us more per request
class CapturedRequest:
    """One received request; ``body`` is the decoded request (attribute access: ``body.topics``)."""

    api: str
    api_key: int
    version: int
    client_id: str | None
    connection: int
    correlation_id: int
    time_ms: int
    body: Any


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

    def resize(self, max_requests: int) -> None:
        self.buffer = deque(self.buffer, maxlen=max(max_requests, 1))
        self.enabled = max_requests > 0

    def state(self) -> dict:
        """On or off, how many requests it keeps, how many it holds."""
        return {"enabled": self.enabled, "max_requests": self.buffer.maxlen if self.enabled else 0,
                "held": len(self.buffer)}

    def record(self, api_key: int, version: int, client_id: str | None, connection: int,
               correlation_id: int, time_ms: int, body: Any) -> None:
        self.buffer.append(CapturedRequest(APIS[api_key].name, api_key, version, client_id, connection,
                                           correlation_id, time_ms, body))

    def clear(self) -> int:
        n = len(self.buffer)
        self.buffer.clear()
        return n

    def query(self, api_keys: set[int] | None = None, *, version: int | None = None,
              client_id: str | None = None, connection: int | None = None, group_id: str | None = None,
              topic: str | None = None, partition: int | None = None,
              transactional_id: str | None = None) -> list[CapturedRequest]:
        """The captured requests matching every filter given, oldest first; ``CaptureOff`` if off."""
        if not self.enabled:
            raise CaptureOff()
        out = []
        for req in self.buffer:
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
