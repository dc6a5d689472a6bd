"""The durable SCRAM credential store: ``<data dir>/scram-credentials.json``.

Kafka keeps one ``UserScramCredentialRecord`` (name, mechanism, salt,
stored key, server key, iterations) per (user, mechanism) in its metadata
log and replays them at start-up (``ScramControlManager``); this broker keeps
the same tuples in one JSON file, rewritten whole with
``storage.files.atomic_write_text`` (readers and a crash see the old or the
new set, never half), so one AlterUserScramCredentials request is atomic as
in Kafka.  Never a password nor a salted password; salt and keys are base64.

The file is read at start-up; ``odradek format --add-scram`` (like
``kafka-storage format --add-scram``) and the testing helpers write it while
no broker runs, AlterUserScramCredentials while one does.
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import TYPE_CHECKING

from ...storage.files import atomic_write_text

if TYPE_CHECKING:
    from .scram import ScramCredential

FILE_NAME = "scram-credentials.json"
VERSION = 1


class CredentialStoreError(RuntimeError):
    """The file cannot be read: start-up stops and names it rather than lose every user."""


class ScramCredentialStore:
    """{user: {mechanism name: ScramCredential}}, persisted on every change.

    ``get`` is what ``ScramSaslServer`` asks (``SaslSettings.credentials``).
    """

    def __init__(self, data_dir: Path | None) -> None:
        self.path = None if data_dir is None else Path(data_dir) / FILE_NAME
        self._users: dict[str, dict[str, ScramCredential]] = {}
        self.lock = asyncio.Lock()  # AlterUserScramCredentials: validate and write as one step

    # --- reading ---------------------------------------------------------------------------
    def load(self) -> None:
        self._users = {}
        if self.path is None or not self.path.exists():
            return
        # SCRAM code only once a credential exists (a broker without users starts without it)
        from .scram import SCRAM_MECHANISMS, ScramCredential  # noqa: PLC0415

        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            for user, mechs in data["users"].items():
                for name, c in mechs.items():
                    if name not in SCRAM_MECHANISMS:
                        raise ValueError(f"unknown mechanism {name!r}")
                    self._users.setdefault(user, {})[name] = ScramCredential(
                        base64.b64decode(c["salt"]), base64.b64decode(c["stored_key"]),
                        base64.b64decode(c["server_key"]), int(c["iterations"]))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CredentialStoreError(f"{self.path} cannot be read: {exc}") from None

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> list[str]:
        return sorted(self._users)

    def mechanisms(self, user: str) -> dict[str, ScramCredential]:
        """The user's credentials by mechanism name, in type order (SHA-256 first)."""
        held = self._users.get(user, {})
        from .scram import BY_TYPE  # noqa: PLC0415 - see load()

        return {m.name: held[m.name] for m in sorted(BY_TYPE.values(), key=lambda m: m.type) if m.name in held}

    def __contains__(self, user: str) -> bool:
        return user in self._users

    # --- writing ---------------------------------------------------------------------------
    def apply(self, upserts: dict[tuple[str, str], ScramCredential], deletes: list[tuple[str, str]]) -> None:
        """Apply one request's changes all together: stored durably first, then visible."""
        users = {u: dict(m) for u, m in self._users.items()}
        for user, mech in deletes:
            users.get(user, {}).pop(mech, None)
            if user in users and not users[user]:
                del users[user]
        for (user, mech), credential in upserts.items():
            users.setdefault(user, {})[mech] = credential
        self._write(users)
        self._users = users

    def put(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        self.apply({(user, mechanism): credential}, [])

    def _write(self, users: dict[str, dict[str, ScramCredential]]) -> None:
        if self.path is None:
            return
        b64 = lambda b: base64.b64encode(b).decode("ascii")  # noqa: E731
        data = {"version": VERSION, "users": {
            user: {name: {"salt": b64(c.salt), "stored_key": b64(c.stored_key),
                          "server_key": b64(c.server_key), "iterations": c.iterations}
                   for name, c in sorted(mechs.items())}
            for user, mechs in sorted(users.items())}}
        atomic_write_text(self.path, json.dumps(data, indent=1) + "\n")
