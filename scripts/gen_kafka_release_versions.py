"""Generate the per-release table of request versions Kafka's brokers served.

Reads ``validVersions`` (and ``listeners``, ``latestVersionUnstable``) of every
``clients/src/main/resources/common/message/*Request.json`` at each release
ref of a bare clone of Kafka's repository, and writes a Python module with,
per release, the repository, ref and commit it came from and {api key:
(name, min, max, listeners)}.  Trees without the JSON specs (Kafka 2.0, 2.1) are read from
``ApiKeys.java`` and each request class's ``schemaVersions()`` instead.

    python scripts/gen_kafka_release_versions.py \\
        --git /work/.mirror/apache+kafka/repo 2.0=2.0.0 2.8=2.8.0 3.0=3.0.0 3.5=3.5.0 3.9=3.9.0-rc3 \\
        --git /work/.mirror/confluentinc+kafka/repo \\
            4.0=4ae681446f18f9a6d7a59f317013ef82379a4ba4 4.1=13f70256db3c994c590e5d262a7cc50b9e973204 \\
            4.2=a18251bae0b825c69794a50dffd4c3100cf5ca5b 4.3=a9ce3221537b8653448750697915607dc7936cf3 \\
        > odradek/protocol/kafka_releases.py

Refs: the bare clone of apache/kafka here (a snapshot of October 2024) has
release tags up to 3.8.0 and 3.9.0-rc3 (whose message specs equal the 3.9
branch's); 4.0 to 4.3 come from confluentinc/kafka, which carries apache's
release branches: 4.0 at 4ae68144 (the branch head when 4.0.0 was released,
the commit before "Bump to 4.0.1-SNAPSHOT"; the 4.0 branch's specs changed on
2025-03-06 and next on 2025-07-08, after 4.0.0), 4.1 at 13f70256
("Bump version to 4.1.0", the last release-candidate commit), 4.2 at a18251ba
and 4.3 at a9ce3221 (likewise the last "Bump version to 4.2.0" / "4.3.0" commits
of the 4.2 and 4.3 branches, 2026-02-10 and 2026-05-13; their request specs equal
the branch heads' of 2026-08).
"""

from __future__ import annotations

import json
import pprint
import re
import subprocess
import sys
from pathlib import Path

SPEC_DIR = "clients/src/main/resources/common/message"


def git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", repo, *args], check=True,
                          capture_output=True, text=True).stdout


def strip_comments(text: str) -> str:
    """Kafka's specs are JSON with ``//`` line comments."""
    return "\n".join(re.sub(r"^\s*//.*$", "", line) for line in text.splitlines())


def versions(valid: str) -> tuple[int, int]:
    lo, _, hi = valid.partition("-")
    hi = hi.rstrip("+") or lo
    return int(lo), int(hi)


JAVA_KEYS = "clients/src/main/java/org/apache/kafka/common/protocol/ApiKeys.java"
JAVA_REQUESTS = "clients/src/main/java/org/apache/kafka/common/requests"
_JAVA_ENTRY = re.compile(r"^\s+[A-Z_]+\((\d+),\s*\"(\w+)\",[^\n]*?(\w+Request)\.schemaVersions\(\)", re.M)
_JAVA_SCHEMAS = re.compile(r"Schema\[\]\s+schemaVersions\(\)\s*\{\s*return\s+new\s+Schema\[\]\s*\{([^}]*)\}")


def java_table(repo: str, commit: str) -> dict:
    """Before the JSON specs (Kafka 2.0, 2.1): ApiKeys.java names each request class,
    whose ``schemaVersions()`` lists one Schema per version from 0."""
    apis = {}
    for key, name, cls in _JAVA_ENTRY.findall(git(repo, "show", f"{commit}:{JAVA_KEYS}")):
        source = git(repo, "show", f"{commit}:{JAVA_REQUESTS}/{cls}.java")
        match = _JAVA_SCHEMAS.search(source)
        if match is None:
            raise SystemExit(f"{cls}: no schemaVersions() array")
        count = len([s for s in match.group(1).split(",") if s.strip()])
        apis[key] = [name, 0, count - 1, []]
    return apis


_PRODUCE_FLOOR = re.compile(r"PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION\s*=\s*(\d+)")


def produce_advertised_min(repo: str, commit: str) -> int | None:
    """Kafka 4's ApiVersions advertises Produce from this version though it serves 3+
    (KAFKA-18659, ``ApiKeys.PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION``); None before."""
    match = _PRODUCE_FLOOR.search(git(repo, "show", f"{commit}:{JAVA_KEYS}"))
    return int(match.group(1)) if match else None


def repository_name(repo: str) -> str:
    """owner/name from a mirror path such as /work/.mirror/apache+kafka/repo."""
    for part in reversed(Path(repo).parts):
        if "+" in part:
            return part.replace("+", "/", 1)
    return repo


def release_table(repo: str, ref: str) -> dict:
    commit = git(repo, "rev-parse", f"{ref}^{{commit}}").strip()
    names = [n for n in git(repo, "ls-tree", "--name-only", commit, SPEC_DIR + "/").split()
             if n.endswith("Request.json")]
    if not names:
        apis = java_table(repo, commit)
        return {"repository": repository_name(repo), "ref": ref, "commit": commit,
                "from": "ApiKeys.java schemaVersions()",
                "apis": dict(sorted(apis.items(), key=lambda kv: int(kv[0])))}
    apis = {}
    for name in sorted(names):
        text = strip_comments(git(repo, "show", f"{commit}:{name}")).strip()
        # the first JSON value, as Kafka's generator (Jackson) reads it: 2.8.0's
        # DescribeProducersRequest.json has stray brackets after it
        spec, _end = json.JSONDecoder().raw_decode(text)
        if spec.get("type") != "request" or "apiKey" not in spec:
            continue
        if spec["validVersions"] == "none":  # removed (Kafka 4: e.g. the ZooKeeper-era APIs)
            continue
        lo, hi = versions(spec["validVersions"])
        if spec.get("latestVersionUnstable"):
            hi -= 1  # the newest version is not enabled on a released broker
        apis[str(spec["apiKey"])] = [spec["name"].removesuffix("Request"), lo, hi,
                                     spec.get("listeners", [])]
    table = {"repository": repository_name(repo), "ref": ref, "commit": commit,
             "from": "message/*Request.json validVersions",
             "apis": dict(sorted(apis.items(), key=lambda kv: int(kv[0])))}
    floor = produce_advertised_min(repo, commit)
    if floor is not None:
        table["produce_advertised_min"] = floor
    return table


HEADER = '''"""Request versions each Kafka release served, read from apache/kafka at a release ref.

Generated by ``python scripts/gen_kafka_release_versions.py``; do not edit.
Per release: the ref and commit read, how, and {api key: (name, min, max,
listeners)} (listeners empty before Kafka 2.8 recorded them).
"""

# fmt: off
'''


def main(argv: list[str]) -> None:
    repo, releases = "", {}
    args = iter(argv)
    for pair in args:
        if pair == "--git":
            repo = next(args)
            continue
        release, _, ref = pair.partition("=")
        table = release_table(repo, ref)
        table["apis"] = {int(k): tuple(v[:3]) + (tuple(v[3]),) for k, v in table["apis"].items()}
        releases[release] = table
    sys.stdout.write(HEADER + "RELEASES = " + pprint.pformat(releases, width=100, sort_dicts=False) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
