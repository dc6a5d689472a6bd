"""SCRAM users created without a client: ``odradek format --add-scram`` and the testing helpers.

Kafka provisions the first users before the broker starts with
``kafka-storage format --add-scram 'SCRAM-SHA-256=[name=alice,password=alice-secret]'``
(iterations default to 4096; ``iterations=N`` may be given).  The same text
is accepted here and the credential written to the data dir's store.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    credential_from_password,
)
from .scram_store import ScramCredentialStore

_SPEC = re.compile(r"(?P<mech>[A-Z0-9-]+)=\[(?P<body>.*)\]", re.S)
_ITEM = re.compile(r'\s*(?P<key>[A-Za-z]+)=(?:"(?P<quoted>[^"]*)"|(?P<plain>[^,]*))\s*(?:,|$)')


@dataclass(frozen=True)
class ScramUser:
    mechanism: str
    name: str
    password: str
    iterations: int = DEFAULT_ITERATIONS

    def __repr__(self) -> str:  # the password never reaches a log line
        return f"ScramUser({self.mechanism}, name={self.name!r}, iterations={self.iterations})"


def parse_add_scram(text: str) -> ScramUser:
    """``SCRAM-SHA-256=[name=alice,password=alice-secret,iterations=8192]``; values may be "quoted"."""
    m = _SPEC.fullmatch(text.strip())
    if m is None:
        raise ValueError("expected MECHANISM=[name=NAME,password=PASSWORD], e.g. "
                         "'SCRAM-SHA-256=[name=alice,password=alice-secret]'")
    mech = m.group("mech")
    if mech not in SCRAM_MECHANISMS:
        raise ValueError(f"unknown SCRAM mechanism {mech!r}; use one of {', '.join(SCRAM_MECHANISMS)}")
    items: dict[str, str] = {}
    body, pos = m.group("body"), 0
    while pos < len(body):
        im = _ITEM.match(body, pos)
        if im is None or im.end() == pos:
            raise ValueError(f"cannot read {body[pos:]!r} (items are key=value, separated by commas)")
        items[im.group("key")] = im.group("quoted") if im.group("quoted") is not None else im.group("plain")
        pos = im.end()
    unknown = set(items) - {"name", "password", "iterations"}
    if unknown:
        raise ValueError(f"unknown item(s) {', '.join(sorted(unknown))}; use name, password, iterations")
    if not items.get("name"):
        raise ValueError("name= is required and must not be empty")
    if "password" not in items:
        raise ValueError("password= is required")
    return ScramUser(mech, items["name"], items["password"],
                     check_iterations(items.get("iterations", str(DEFAULT_ITERATIONS))))


def check_iterations(value: str | int) -> int:
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"iterations must be a number, not {value!r}") from None
    if not MIN_ITERATIONS <= n <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, not {n}")
    return n


def add_users(store: ScramCredentialStore, users: list[ScramUser]) -> None:
    """Salt and store each user's credential (all in one write)."""
    store.apply({(u.name, u.mechanism): credential_from_password(SCRAM_MECHANISMS[u.mechanism], u.password,
                                                                 iterations=u.iterations)
                 for u in users}, [])


def add_users_offline(data_dir: Path, users: list[ScramUser]) -> None:
    """Write users into a data dir no broker is running on (the caller holds its lock)."""
    store = ScramCredentialStore(data_dir)
    store.load()
    add_users(store, users)
