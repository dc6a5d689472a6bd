"""``odradek`` command line: serve, health, dump-log, import, offsets."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys

from .config import SETTINGS, Config, ConfigError


def _run(coro) -> int:
    try:
        import uvloop  # noqa: PLC0415 - optional speed-up, absent on some platforms
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def _load_config(args) -> Config:
    return Config.load(args.config, overrides=args.override or ())


def cmd_serve(args) -> int:
    try:
        config = _load_config(args)
    except (ConfigError, OSError) as exc:
        print(f"odradek: {exc}", file=sys.stderr)
        return 2
    if args.print_config:
        width = max(len(s.name) for s in SETTINGS)
        for name, value in config.items():
            print(f"{name:<{width}}  {value!s:<40}  ({config.sources[name]})")
        for name, source in sorted(config.unknown.items()):
            print(f"{name:<{width}}  (unknown setting, ignored)  ({source})")
        return 0
    from . import logs
    logs.configure(config["log.format"], config["log.level"], levels=config["log.levels"])
    return _run(_serve(config))


async def _serve(config: Config) -> int:
    import structlog

    from .app import BrokerApp
    from .datadir import DataDirError
    from .gcpolicy import GcPolicy

    log = structlog.get_logger("odradek.cli")
    for name, source in sorted(config.unknown.items()):
        log.warning("config.unknown_setting", setting=name, source=source)
    app = BrokerApp(config)
    try:
        await app.start()
    except (DataDirError, OSError) as exc:
        log.error("broker.start_failed", error=str(exc))
        return 1
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    gc_policy = GcPolicy()  # this process is ours: keep full collections off the request path
    gc_policy.install(loop)
    signals = 0

    def on_signal(signum: int) -> None:
        nonlocal signals
        signals += 1
        if signals > 1:
            log.warning("broker.exit_now", signal=signal.Signals(signum).name)
            os._exit(1)
        log.info("broker.stopping", signal=signal.Signals(signum).name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    await stop.wait()
    gc_policy.uninstall()
    await app.stop()
    return 0


def cmd_health(args) -> int:
    from .health import check, local_bootstrap

    bootstrap = args.bootstrap
    if bootstrap is None:
        try:
            bootstrap = local_bootstrap(_load_config(args))
        except (ConfigError, OSError) as exc:
            print(f"odradek: {exc}", file=sys.stderr)
            return 2
    ok, message = check(bootstrap, timeout=args.timeout)
    print(message, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


def cmd_dump_log(args) -> int:
    from .dump_log import dump

    return dump(args.paths, sys.stdout, as_json=args.json)


def cmd_import(args) -> int:
    from .datadir import DataDirError, DirLock
    from .import_kafka import ImportError_, import_offsets

    try:
        config = _load_config(args)
    except (ConfigError, OSError) as exc:
        print(f"odradek: {exc}", file=sys.stderr)
        return 2
    data_dir = config.data_dirs[0]
    data_dir.mkdir(parents=True, exist_ok=True)
    lock = DirLock(data_dir)
    try:
        lock.acquire()
    except DataDirError as exc:
        print(f"odradek: {exc}", file=sys.stderr)
        return 1
    try:
        stats = import_offsets(args.kafka_log_dir, data_dir, config["offsets.topic.num.partitions"])
    except (ImportError_, OSError, ValueError) as exc:
        print(f"odradek: import failed: {exc}", file=sys.stderr)
        return 1
    finally:
        lock.release()
    print(f"imported {stats.records} records of {len(stats.groups)} groups from "
          f"{stats.source_partitions} into {stats.target_partitions} partitions of {data_dir} "
          f"(skipped {stats.skipped_unknown} records of other key types, "
          f"{stats.aborted_txn_records} of aborted or unfinished transactions)")
    return 0


def cmd_offsets(args) -> int:
    from .offsets_view import run

    return run(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="odradek", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the broker")
    serve.add_argument("config", nargs="?", help="server.properties file")
    serve.add_argument("--override", action="append", metavar="KEY=VALUE",
                       help="set a property (repeatable); beats the file and KAFKA_* variables")
    serve.add_argument("--print-config", action="store_true",
                       help="print the effective settings and where each came from, then exit")
    serve.set_defaults(func=cmd_serve)

    health = sub.add_parser("health", help="send ApiVersions to a broker; exit 0 if it answers")
    health.add_argument("config", nargs="?", help="server.properties file (to find the listener)")
    health.add_argument("--bootstrap", default=None,
                        help="host:port (default: this machine's first configured listener)")
    health.add_argument("--override", action="append", metavar="KEY=VALUE", help=argparse.SUPPRESS)
    health.add_argument("--timeout", type=float, default=5.0, help="seconds")
    health.set_defaults(func=cmd_health)
    dump_log = sub.add_parser("dump-log", help="print the batches and records of .log files")
    dump_log.add_argument("paths", nargs="+", help=".log files, partition dirs or data dirs")
    dump_log.add_argument("--json", action="store_true", help="one JSON object per batch")
    dump_log.set_defaults(func=cmd_dump_log)

    imp = sub.add_parser("import", help="copy a Kafka __consumer_offsets into our data dir")
    imp.add_argument("kafka_log_dir", help="a Kafka log dir holding __consumer_offsets-N dirs")
    imp.add_argument("config", nargs="?", help="server.properties file (for log.dirs etc.)")
    imp.add_argument("--override", action="append", metavar="KEY=VALUE",
                     help="set a property, e.g. log.dirs=/path")
    imp.set_defaults(func=cmd_import)

    offsets = sub.add_parser("offsets", help="committed offsets of a data dir, at any point of its "
                             "history (reads the logs; no broker needed)")
    offsets.add_argument("config", nargs="?", help="server.properties file (log.dirs, retention)")
    offsets.add_argument("--data-dir", action="append", metavar="DIR",
                         help="log dir holding __consumer_offsets-N (repeatable; default: log.dirs)")
    offsets.add_argument("--group", help="only this group (reads only its offsets partition)")
    point = offsets.add_mutually_exclusive_group()
    point.add_argument("--at", metavar="TIME",
                       help="replay records written up to TIME (epoch ms or ISO 8601, UTC if no zone)")
    point.add_argument("--offset", type=int, metavar="N", help="replay log offsets up to N inclusive")
    offsets.add_argument("--expiry-preview", action="store_true",
                         help="list when each offset expires under offsets.retention.minutes (KIP-211)")
    offsets.add_argument("--retention-minutes", type=int, metavar="M",
                         help="override offsets.retention.minutes for the preview")
    offsets.add_argument("--override", action="append", metavar="KEY=VALUE",
                         help="set a property, as for serve")
    offsets.add_argument("--json", action="store_true", help="one JSON document")
    offsets.set_defaults(func=cmd_offsets)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
