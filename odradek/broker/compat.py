"""The compatibility table (APIs and versions served), generated from the handler table."""

from __future__ import annotations

from ..protocol.registry import APIS
from .config import Config

CLIENTS_TESTED = [
    ("kafka-python", "3.0.12"),
    ("aiokafka", "0.14.0"),
    ("confluent-kafka (librdkafka)", "2.16.1 (2.16.0)"),
]


def served_table() -> list[tuple[int, str, str, str]]:
    """(key, name, versions served, versions declared) for every API in the registry."""
    from .app import BrokerApp

    app = BrokerApp(Config.load(None, environ={}))
    served = {k: (lo, hi) for k, lo, hi in app.handlers.served()}
    rows = []
    for key, spec in sorted(APIS.items()):
        lo_hi = served.get(key)
        rows.append((key, spec.name, f"{lo_hi[0]}–{lo_hi[1]}" if lo_hi else "not yet",
                     str(spec.declared).replace("-", "–")))
    return rows


def markdown() -> str:
    lines = ["| API | key | served | declared |", "|---|---:|---|---|"]
    for key, name, served, declared in served_table():
        lines.append(f"| {name} | {key} | {served} | {declared} |")
    lines.append("")
    lines.append("Clients tested in CI: " + ", ".join(f"{n} {v}" for n, v in CLIENTS_TESTED) + ".")
    return "\n".join(lines)
