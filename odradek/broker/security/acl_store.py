"""Durable ACLs: one JSON file in the data directory, replaced atomically per change.

Kafka keeps ACLs as ``AccessControlEntryRecord`` / ``RemoveAccessControlEntryRecord``
in ``__cluster_metadata`` and replays them at start-up; a single node needs
only the current set, so each CreateAcls/DeleteAcls rewrites the whole file
(tmp + fsync + rename, ``storage.files.atomic_write_text``) before it is
applied and answered: an answered change survives a crash, an unanswered one
is either whole or absent.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from ...storage.files import atomic_write_text
from ..datadir import DataDirError
from .acls import AclBinding

ACL_FILE = "acls.json"
FORMAT_VERSION = 1


class AclStoreError(DataDirError):
    """The ACL file cannot be read: start-up stops rather than run with fewer ACLs."""


class AclStore:
    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / ACL_FILE

    def load(self) -> list[AclBinding]:
        if not self.path.exists():
            return []
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
            if doc.get("version") != FORMAT_VERSION:
                raise AclStoreError(f"{self.path}: unknown format version {doc.get('version')!r}")
            return [AclBinding.from_json(a) for a in doc["acls"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise AclStoreError(f"{self.path} is not a readable ACL file: {exc}") from exc

    def save(self, acls: Iterable[AclBinding]) -> None:
        doc = {"version": FORMAT_VERSION,
               "acls": [a.to_json() for a in sorted(acls, key=lambda a: json.dumps(a.to_json()))]}
        atomic_write_text(self.path, json.dumps(doc, indent=1) + "\n")
