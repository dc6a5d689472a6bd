"""HTTP for the schema registry's tests: a request and its JSON answer, and waiting for it to serve."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request


def http(url: str, method: str = "GET", body: object = None, raw: bytes | None = None) -> tuple[int, object]:
    """(status, JSON answer) of one request; ``body`` is sent as JSON, ``raw`` as it is."""
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def wait_serving(url: str, timeout: float = 30.0) -> tuple[int, object]:
    """``GET /subjects`` once the registry answers (a process just started binds it after its Kafka port)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return http(f"{url}/subjects")
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
