"""The tables generated into the docs: docs/compatibility.md's table (APIs and versions served,
from the handler table) and docs/CONFIGURATION.md (from the settings).  ``scripts/gen_docs.py`` writes
them (with the test-control pages of ``control/reference.py``)."""

from __future__ import annotations

from ..protocol.registry import APIS
from .config import SETTINGS, Config
from .dataplane.topic_configs import TOPIC_CONFIGS
from .dynamic_config import DYNAMIC_SETTINGS

CLIENTS_TESTED = [
    ("kafka-python", "3.0.12"),
    ("aiokafka", "0.14.0"),
    ("confluent-kafka", "2.16.1 (its bundled librdkafka: 2.16.0)"),
]


# settings that make the broker serve more APIs than its default configuration does (as Kafka's
# ApiVersionManager leaves the telemetry keys out without a client-telemetry receiver)
OPT_IN_SETTINGS = {"client.telemetry.enable": "true"}


def served_table() -> list[tuple[int, str, str, str]]:
    """(key, name, versions served, versions declared) for every API in the registry; an API
    served only with an opt-in setting names it."""
    versions = served()
    opt_in = {name: _served({name: value}) for name, value in OPT_IN_SETTINGS.items()}
    rows = []
    for key, spec in sorted(APIS.items()):
        lo_hi = versions.get(key)
        text = f"{lo_hi[0]}–{lo_hi[1]}" if lo_hi else "not yet"
        for name, with_setting in opt_in.items():
            if lo_hi is None and key in with_setting:
                lo, hi = with_setting[key]
                text = f"{lo}–{hi} with `{name}`"
        rows.append((key, spec.name, text, str(spec.declared).replace("-", "–")))
    return rows


def _served(overrides: dict[str, str]) -> dict[int, tuple[int, int]]:
    """{api key: (min, max)} a broker with ``overrides`` serves."""
    from .app import served_apis  # what the wiring registers

    return served_apis(Config.load(None, environ={}, overrides=overrides))


def served() -> dict[int, tuple[int, int]]:
    """{api key: (min, max)} a broker with the default configuration serves."""
    return _served({})


def emulation_markdown() -> list[str]:
    """What each ``odradek.emulate.kafka.version`` serves, with the Kafka ref each column read."""
    from ..protocol.kafka_releases import RELEASES

    columns = {r: _served({"odradek.emulate.kafka.version": r}) for r in RELEASES}
    keys = sorted(_served({}))
    lines = ["With `odradek.emulate.kafka.version` (versions served; — not served):", "",
             "| API | key | " + " | ".join(columns) + " |",
             "|---|---:|" + "---|" * len(columns)]
    for key in keys:
        cells = [f"{c[key][0]}–{c[key][1]}" if key in c else "—" for c in columns.values()]
        lines.append(f"| {APIS[key].name} | {key} | " + " | ".join(cells) + " |")
    lines.append("")
    floored = [r for r, t in RELEASES.items() if t.get("produce_advertised_min") is not None]
    lines.append(f"Produce is listed from v0 under {', '.join(floored)}, as Kafka 4's ApiVersions does "
                 "(KAFKA-18659); v0–2 are refused.")
    lines.append("")
    lines.append("Columns read from: " + ", ".join(
        f"{r} = {t['repository']} `{t['ref'][:12]}` ({t['commit'][:12]})"
        for r, t in RELEASES.items()) + ".")
    return lines


def markdown() -> str:
    lines = ["| API | key | served | declared |", "|---|---:|---|---|"]
    for key, name, served, declared in served_table():
        lines.append(f"| {name} | {key} | {served} | {declared} |")
    lines.append("")
    lines.extend(emulation_markdown())
    lines.append("")
    lines.append("Clients tested in CI: " + ", ".join(f"{n} {v}" for n, v in CLIENTS_TESTED) + ".")
    return "\n".join(lines)


def configuration_markdown() -> str:
    """docs/CONFIGURATION.md: every setting the broker reads, from the one settings table."""
    lines = [
        "# Configuration",
        "",
        "Generated from `odradek/broker/config.py` by `python scripts/gen_docs.py`; do not edit.",
        "",
        "Settings use Kafka's property names. Sources, in rising priority: defaults, a",
        "`server.properties` file, `KAFKA_*` environment variables (`KAFKA_LOG_DIRS` ->",
        "`log.dirs`; `__` stands for `_`, `___` for `-`), and `--override key=value`.",
        "`odradek serve --print-config` shows the effective values and their sources.",
        "",
        "| setting | type | default | Kafka's default | meaning |",
        "|---|---|---|---|---|",
    ]
    for s in SETTINGS:
        default = ("(unset)" if s.default is None else "(empty)" if s.default == ""
                   else f"`{s.default}`")
        if s.name == "log.dirs":
            default = "`$XDG_DATA_HOME/odradek` (`~/.local/share/odradek`)"
        kafka = "" if s.kafka_default is None else f"`{s.kafka_default}`"
        bounds = ""
        if s.low is not None or s.high is not None:
            lo = "" if s.low is None else _num(s.low)
            hi = "" if s.high is None else _num(s.high)
            bounds = f" Range: {lo}..{hi}."
        dynamic = " **Dynamic.**" if s.name in DYNAMIC_SETTINGS else ""
        lines.append(f"| `{s.name}` | {s.type_name} | {default} | {kafka} | {s.doc}{bounds}{dynamic} |")
    lines.append("")
    lines += _dynamic_markdown()
    return "\n".join(lines)


def _dynamic_markdown() -> list[str]:
    """The runtime-changeable part: dynamic broker settings and topic configs."""
    lines = [
        "## Changing settings at runtime",
        "",
        "Settings marked **Dynamic** can be changed while the broker runs, with the admin clients'",
        "`alter_configs` / `incremental_alter_configs` (AlterConfigs v0-2, IncrementalAlterConfigs",
        "v0-1) on the BROKER resource: resource name = this node's `node.id` for this broker, or",
        "`\"\"` for the cluster-wide default. A value is looked up in that order, then in the static",
        "sources above, then the default; DescribeConfigs reports which one is in force",
        "(`DYNAMIC_BROKER_CONFIG`, `DYNAMIC_DEFAULT_BROKER_CONFIG`, `STATIC_BROKER_CONFIG`,",
        "`DEFAULT_CONFIG`) and, when asked, the synonyms (`log.retention.ms`/`.minutes`/`.hours`).",
        "Dynamic values are stored in `broker-configs.json` in the first data directory (written",
        "whole and fsynced, so a crash leaves the old set or the new one) and apply at once to every",
        "topic without its own override. Any other setting is refused with INVALID_REQUEST, as",
        "Kafka refuses its static settings; unlike Kafka, names Odradek does not know are refused",
        "too rather than stored without effect.",
        "",
        "### Topic configs",
        "",
        "Set at creation (CreateTopics) or changed at runtime on the TOPIC resource; stored in",
        "`topics.json` before they take effect on the live logs (retention from the next retention",
        "check, segment size and age from the next append, compaction from the next cleaner pass).",
        "Unknown names and invalid values get INVALID_CONFIG, an unknown topic",
        "UNKNOWN_TOPIC_OR_PARTITION. The internal topics' configs are fixed (INVALID_REQUEST).",
        "",
        "| topic config | type | falls back to | meaning |",
        "|---|---|---|---|",
    ]
    for name, d in sorted(TOPIC_CONFIGS.items()):
        fallback = ", ".join(f"`{b}`" for b in d.broker_names) or (f"`{d.default}`" if d.default else "(empty)")
        lines.append(f"| `{name}` | {d.type.name.lower()} | {fallback} | {d.doc} |")
    lines.append("")
    return lines


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)
