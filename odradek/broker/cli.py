"""``odradek`` command line: serve, format, health, dump-log, import, offsets, control.

Ordinary mistakes (a missing file, a bad address, an unusable data dir, a
reader that closes the pipe) end with one line naming what to fix and a
non-zero exit, from one handler in :func:`main`; ``--debug`` or
``ODRADEK_DEBUG=1`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
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
    config = Config.load(args.config, overrides=_overrides(args))
    if getattr(args, "port", None) is None:
        return config
    from .config import port_overrides

    try:
        shorthand = port_overrides(config, args.port)
    except ValueError as exc:  # advertised.listeners unreadable: say so as start-up would
        raise ConfigError(f"advertised.listeners: {exc}") from None
    return Config.load(args.config, overrides=[*_overrides(args), *(f"{k}={v}" for k, v in shorthand.items())])


def _overrides(args) -> list[str]:
    """``--override`` items, with ``--data-dir`` (every subcommand's one way to name it) as log.dirs."""
    overrides = list(getattr(args, "override", None) or ())
    if getattr(args, "data_dir", None):
        overrides.append("log.dirs=" + ",".join(args.data_dir))
    if getattr(args, "brokers", None) is not None:
        overrides.append(f"odradek.brokers={args.brokers}")
    return overrides


def _unknown_setting_note(name: str) -> str:
    from .config import closest_setting

    guess = closest_setting(name)
    return f"unknown setting, ignored; did you mean {guess}?" if guess else "unknown setting, ignored"


def cmd_serve(args) -> int:
    try:
        config = _load_config(args)
    except (ConfigError, OSError) as exc:
        print(f"odradek: {describe_error(exc)}", file=sys.stderr)
        return 2
    if args.print_config:
        from .config import SETTINGS_BY_NAME, scoped_setting

        width = max(len(s.name) for s in SETTINGS)
        for name, value in config.items():
            shown = "[hidden]" if SETTINGS_BY_NAME[name].sensitive and value else value
            print(f"{name:<{width}}  {shown!s:<40}  ({config.sources[name]})")
        for name, value in sorted(config.scoped.items()):  # listener.name.<l>.<key> overrides
            shown = "[hidden]" if scoped_setting(name).sensitive and value else value
            print(f"{name:<{width}}  {shown!s:<40}  ({config.sources[name]})")
        for name, source in sorted(config.unknown.items()):
            print(f"{name:<{width}}  ({_unknown_setting_note(name)})  ({source})")
        return 0
    gc.disable()  # no collections while the modules load: GcPolicy.imported turns them back on
    try:
        _spare_logging_extras()
        from . import logging_setup
        logging_setup.configure(config["log.format"], config["log.level"], levels=config["log.levels"])
        return _run(_serve(config))
    finally:
        gc.enable()  # on already once the broker imported; this is for a start that failed before


# structlog's package imports its integrations whether a program uses them or not: greenlet for
# greenlet-local context (``structlog.threadlocal``, deprecated), Twisted's log observer (a failed
# search of every path entry where Twisted is absent) and colorama, which only Windows consoles need
# (elsewhere ``ConsoleRenderer`` writes the same ANSI codes itself).  ``odradek serve``'s process
# uses none of them: marked absent before structlog loads, 5-7 ms of a start's CPU (BENCHMARKS.md).
_LOGGING_EXTRAS = ("greenlet", "twisted") + (() if sys.platform == "win32" else ("colorama",))


def _spare_logging_extras() -> None:
    """Make structlog's unused integrations absent in this process (``sys.modules[name] = None``
    is Python's "not importable"); one already imported, or structlog itself, is left alone."""
    if "structlog" in sys.modules:
        return
    for name in _LOGGING_EXTRAS:
        sys.modules.setdefault(name, None)


async def _serve(config: Config) -> int:
    import structlog

    from .app import BrokerApp
    from .datadir import DataDirError
    from .gcpolicy import GcPolicy

    gc_policy = GcPolicy()  # this process is ours: keep full collections off the request path
    gc_policy.imported()
    log = structlog.get_logger("odradek.cli")
    for name, source in sorted(config.unknown.items()):
        log.warning("config.unknown_setting", setting=name, source=source, note=_unknown_setting_note(name))
    app = BrokerApp(config)
    try:
        await app.start()
    except (DataDirError, OSError, ConfigError) as exc:
        log.error("broker.start_failed", error=str(exc))
        return 1
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
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
    from .health import check, first_listener_tls, local_bootstrap

    bootstrap, tls = args.bootstrap, args.tls
    if bootstrap is None:
        try:
            config = _load_config(args)
            bootstrap, tls = local_bootstrap(config), tls or first_listener_tls(config)
        except (ConfigError, OSError) as exc:
            print(f"odradek: {describe_error(exc)}", file=sys.stderr)
            return 2
    ok, message = check(bootstrap, timeout=args.timeout, tls=tls)
    print(message, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


def cmd_dump_log(args) -> int:
    from .dump_log import dump

    return dump(args.paths, sys.stdout, as_json=args.json)


def cmd_import(args) -> int:
    from .datadir import DataDirError, DirLock, prepare_data_dir
    from .import_kafka import ImportError_, import_offsets

    try:
        config = _load_config(args)
    except (ConfigError, OSError) as exc:
        print(f"odradek: {describe_error(exc)}", file=sys.stderr)
        return 2
    data_dir = config.data_dirs[0]
    lock = DirLock(data_dir)
    try:
        prepare_data_dir(data_dir)
        lock.acquire()
    except DataDirError as exc:
        print(f"odradek: {describe_error(exc)}", file=sys.stderr)
        return 1
    try:
        stats = import_offsets(args.kafka_log_dir, data_dir, config["offsets.topic.num.partitions"],
                               config.data_dirs[1:])
    except (ImportError_, OSError, ValueError) as exc:
        print(f"odradek: import failed: {describe_error(exc)}", file=sys.stderr)
        return 1
    finally:
        lock.release()
    print(f"imported {stats.records} records of {len(stats.groups)} groups from "
          f"{stats.source_partitions} into {stats.target_partitions} partitions of {data_dir} "
          f"(skipped {stats.skipped_unknown} records of other key types, "
          f"{stats.aborted_txn_records} of aborted or unfinished transactions)")
    return 0


def cmd_format(args) -> int:
    """``kafka-storage format --add-scram``: prepare the data dir and add SCRAM users before start."""
    from .datadir import DataDirError, DirLock, prepare_data_dir
    from .security.scram_users import add_users_offline, parse_add_scram

    try:
        config = _load_config(args)
        users = [parse_add_scram(text) for text in args.add_scram or ()]
    except (ConfigError, OSError, ValueError) as exc:
        print(f"odradek: {describe_error(exc)}", file=sys.stderr)
        return 2
    data_dir = config.data_dirs[0]
    lock = DirLock(data_dir)
    try:
        prepare_data_dir(data_dir)
        lock.acquire()  # a running broker would overwrite the file: refuse, naming its holder
    except DataDirError as exc:
        print(f"odradek: {describe_error(exc)}", file=sys.stderr)
        return 1
    try:
        add_users_offline(data_dir, users)
    finally:
        lock.release()
    for user in users:
        print(f"added {user.mechanism} credential for user {user.name!r} ({user.iterations} iterations) "
              f"to {data_dir}")
    return 0


def cmd_offsets(args) -> int:
    from .offsets_view import run

    return run(args)


def cmd_control(args) -> int:
    """Call one test-control operation on a running broker's control endpoint; print its JSON result."""
    import json
    import urllib.error
    import urllib.request

    from .config import WILDCARD_HOSTS, parse_address

    endpoint = args.endpoint
    if endpoint is None:
        try:
            configured = _load_config(args)["odradek.control.listener"]
        except (ConfigError, OSError) as exc:
            print(f"odradek: {describe_error(exc)}", file=sys.stderr)
            return 2
        if not configured:
            print("odradek control: no endpoint: give --endpoint HOST:PORT, or set odradek.control.listener "
                  "in the config this command reads", file=sys.stderr)
            return 2
        endpoint = configured
    host, port = parse_address(endpoint)
    if host in WILDCARD_HOSTS:  # bound to every interface (the container image): this machine's loopback
        host = "127.0.0.1"
    url = f"http://{host if ':' not in host else f'[{host}]'}:{port}/v1/{args.operation or ''}"
    kwargs = dict(_control_argument(item) for item in args.arguments)
    data = json.dumps(kwargs).encode() if args.operation else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=args.timeout) as answer:
            payload = json.load(answer)
    except urllib.error.HTTPError as exc:
        payload = json.load(exc)
        print(f"odradek control {args.operation}: {payload.get('error', exc.reason)}", file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        print(f"odradek control: cannot reach the control endpoint at {host}:{port}: {reason}", file=sys.stderr)
        return 1
    print(json.dumps(payload["result"], indent=2 if args.pretty else None))
    return 0


def _control_argument(item: str) -> tuple[str, object]:
    """``name=value``; the value is read as JSON (numbers, lists, null) or else kept as a string."""
    import json

    name, sep, value = item.partition("=")
    if not sep or not name:
        raise ValueError(f"{item!r} is not NAME=VALUE")
    try:
        return name, json.loads(value)
    except json.JSONDecodeError:
        return name, value


DESCRIPTION = """\
A Kafka-protocol broker (consumer groups, committed offsets, topics) for tests
and development. Each command has its own --help."""

DATA_DIR_HELP = "data dir (log.dirs); repeatable; default: log.dirs from the config"


def _host_port(text: str) -> str:
    """argparse type for --bootstrap: a bad address is a usage error, not a traceback."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536 or not host.strip("[]"):
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT (e.g. 127.0.0.1:9092)")
    return text


def _port(text: str) -> int:
    """argparse type for --port: 0..65535 (0 picks a free one)."""
    if not text.isdigit() or not 0 <= int(text) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0-65535)")
    return int(text)


class _Formatter(argparse.HelpFormatter):
    """argparse's help formatter, without argparse's ``import shutil``: argparse makes a formatter
    on every ``add_argument`` and reads the terminal's width through shutil, which loads bz2 and
    lzma, ~3 ms of every start.  The width is ``shutil.get_terminal_size``'s, read the same way."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         _terminal_columns() - 2 if width is None else width)


def _terminal_columns() -> int:
    """``shutil.get_terminal_size().columns``: $COLUMNS, else stdout's terminal, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` formatting with :class:`_Formatter` (its subcommands' parsers too)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    # --debug is accepted before or after the subcommand; SUPPRESS keeps a subcommand's
    # absent flag from overwriting one given before it
    debug = _Parser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show the Python traceback of an error (also: ODRADEK_DEBUG=1)")
    parser = _Parser(prog="odradek", description=DESCRIPTION, parents=[debug])
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the broker", parents=[debug])
    serve.add_argument("config", nargs="?", help="server.properties file")
    serve.add_argument("--override", action="append", metavar="KEY=VALUE",
                       help="set a property (repeatable); beats the file and KAFKA_* variables")
    serve.add_argument("--print-config", action="store_true",
                       help="print the effective settings and where each came from, then exit")
    serve.add_argument("--data-dir", action="append", metavar="DIR", help=DATA_DIR_HELP)
    serve.add_argument("--port", type=_port, metavar="N",
                       help="listen on port N (the first listener's port, and its advertised one if set)")
    serve.add_argument("--brokers", type=int, metavar="N",
                       help="emulate a cluster of N brokers in this process (odradek.brokers): broker k on "
                            "the first one's ports plus k (docs/CLUSTER.md)")
    serve.set_defaults(func=cmd_serve)

    fmt = sub.add_parser("format", help="prepare a data dir; add SCRAM users (as kafka-storage format)",
                         parents=[debug])
    fmt.add_argument("config", nargs="?", help="server.properties file (for log.dirs)")
    fmt.add_argument("--data-dir", action="append", metavar="DIR", help=DATA_DIR_HELP)
    fmt.add_argument("--override", action="append", metavar="KEY=VALUE", help=argparse.SUPPRESS)
    fmt.add_argument("--add-scram", "-S", action="append", metavar="SPEC",
                     help="a SCRAM credential, e.g. 'SCRAM-SHA-256=[name=alice,password=alice-secret]' "
                          "(iterations=N optional, 4096..16384; repeatable)")
    fmt.set_defaults(func=cmd_format)

    health = sub.add_parser("health", help="send ApiVersions to a broker; exit 0 if it answers",
                            parents=[debug])
    health.add_argument("config", nargs="?", help="server.properties file (to find the listener)")
    health.add_argument("--bootstrap", default=None, type=_host_port,
                        help="host:port (default: this machine's first configured listener)")
    health.add_argument("--override", action="append", metavar="KEY=VALUE", help=argparse.SUPPRESS)
    health.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the answer (default: %(default)s)")
    health.add_argument("--tls", action="store_true",
                        help="speak TLS (without verifying the certificate: a liveness probe); "
                             "implied when the first listener is SSL or SASL_SSL")
    health.set_defaults(func=cmd_health)
    dump_log = sub.add_parser("dump-log", help="print the batches and records of .log files",
                              parents=[debug])
    dump_log.add_argument("paths", nargs="+", help=".log files, partition dirs or data dirs")
    dump_log.add_argument("--json", action="store_true", help="one JSON object per batch")
    dump_log.set_defaults(func=cmd_dump_log)

    imp = sub.add_parser("import", help="copy a Kafka __consumer_offsets into our data dir",
                         parents=[debug])
    imp.add_argument("kafka_log_dir", help="a Kafka log dir holding __consumer_offsets-N dirs")
    imp.add_argument("config", nargs="?", help="server.properties file (for log.dirs etc.)")
    imp.add_argument("--override", action="append", metavar="KEY=VALUE",
                     help="set a property (repeatable), as for serve")
    imp.add_argument("--data-dir", action="append", metavar="DIR", help=DATA_DIR_HELP)
    imp.set_defaults(func=cmd_import)

    offsets = sub.add_parser("offsets", help="committed offsets of a data dir, at any point of its "
                             "history (reads the logs; no broker needed)", parents=[debug])
    offsets.add_argument("config", nargs="?", help="server.properties file (log.dirs, retention)")
    offsets.add_argument("--data-dir", action="append", metavar="DIR", help=DATA_DIR_HELP)
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

    control = sub.add_parser(
        "control", parents=[debug],
        help="test control of a running broker (faults, capture): calls its control endpoint",
        description="Call a test-control operation on a broker serving the control endpoint "
                    "(odradek.control.listener; a testing tool, never for production). Without an "
                    "operation, list the operations. Arguments are NAME=VALUE, VALUE read as JSON "
                    "when it parses (5, [1,2], null) and as a string otherwise. Examples: "
                    "odradek control add_fault api=OffsetCommit error=NOT_COORDINATOR times=2; "
                    "odradek control broker_down seconds=5; odradek control advance_clock seconds=60; "
                    "odradek control captured api=JoinGroup (capture is off unless "
                    "odradek.control.capture.requests or set_capture turns it on)")
    control.add_argument("operation", nargs="?", help="add_fault, remove_fault, clear_faults, faults, "
                         "coordinator_unavailable, broker_down, broker_up, captured, clear_capture, ...")
    control.add_argument("arguments", nargs="*", metavar="NAME=VALUE")
    control.add_argument("--endpoint", type=_host_port, default=None,
                         help="HOST:PORT of the control endpoint (default: odradek.control.listener "
                              "of the config)")
    control.add_argument("--config", dest="config", default=None, help="server.properties file")
    control.add_argument("--override", action="append", metavar="KEY=VALUE", help=argparse.SUPPRESS)
    control.add_argument("--timeout", type=float, default=10.0, help="seconds to wait (default: %(default)s)")
    control.add_argument("--pretty", action="store_true", help="indent the JSON result")
    control.set_defaults(func=cmd_control)
    return parser


def _parse(argv: list[str] | None) -> argparse.Namespace:
    """Like ``parse_args``, but an unknown flag after a subcommand gets that subcommand's usage
    (argparse reports it from the top-level parser, whose usage lists only the subcommands)."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        sub.choices[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    debug = getattr(args, "debug", False) or os.environ.get("ODRADEK_DEBUG", "") not in ("", "0")
    try:
        status = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
        return status
    except BrokenPipeError:
        return _reader_went_away()
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the one place an error becomes a message instead of a traceback
        if debug:
            raise
        print(f"odradek {args.command}: {describe_error(exc)} "
              "(--debug or ODRADEK_DEBUG=1 shows the traceback)", file=sys.stderr)
        return 1


def describe_error(exc: BaseException) -> str:
    """One line a user can act on: the path and the reason for OS errors, else the message."""
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}"
    return str(exc) or type(exc).__name__


def _reader_went_away() -> int:
    """stdout's reader closed early (``odradek dump-log ... | head``): stop quietly, as cat does.

    Later writes (the interpreter's final flush) go to /dev/null so Python prints nothing more;
    141 is what a shell reports for a program ended by SIGPIPE."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 141


if __name__ == "__main__":
    sys.exit(main())
