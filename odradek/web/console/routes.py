"""The console's routes: parse the request, call ``reads``/``actions`` or ``BrokerControl``, render.

Pages are Jinja2 templates with autoescape on (topic names, group ids, keys, values and headers are
untrusted input and are only ever shown as text); the live parts (lag, overview rates) are partials
that htmx (vendored under ``static/``) polls.  Every change is a POST that first answers a
confirmation page naming what will happen; only the confirmed POST acts.  A POST from another
origin is refused (a web page the developer visits must not drive a loopback console), and in
read-only mode every POST is.
"""

from __future__ import annotations

import asyncio
import json
from importlib.resources import files
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import jinja2
from aiohttp import web

from ...broker.control.capture import CaptureOff, to_plain
from ..kafka_local import LocalKafka
from . import actions, reads
from .reads import Rates, ReadServices
from .render import FORMATS, human_bytes, iso_ms

if TYPE_CHECKING:
    from ...broker.control import BrokerControl
    from ...broker.dispatch import HandlerTable

HTMX = "htmx.min.js"
CAPTURED_SHOWN = 200  # newest captured requests on the test page


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("odradek.web.console", "templates"),
                             autoescape=True)
    env.filters["bytes"] = human_bytes
    env.filters["iso"] = iso_ms
    env.filters["json"] = lambda v: json.dumps(v, indent=1, default=str)
    return env


class ConsoleServices(ReadServices, Protocol):
    """What the console uses of the broker: what its pages read, the handlers its Kafka requests go
    to, and test control (``BrokerApp`` wires it)."""

    handlers: HandlerTable
    control: BrokerControl


class ConsolePages:
    """The handlers; ``routes()`` is the table to mount (at the root of an HTTP listener)."""

    def __init__(self, app: ConsoleServices, read_only: bool = False) -> None:
        self.app = app
        self.read_only = read_only
        self.kafka = LocalKafka(app.handlers, app.config["odradek.console.principal"],
                                next(iter(app.endpoints), "PLAINTEXT"))
        self.env = _environment()
        self.rates = Rates()
        self._htmx: bytes | None = None

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/", self.overview), web.get("/overview/live", self.overview_live),
                web.get("/topics", self.topics), web.get("/topic", self.topic),
                web.get("/messages", self.messages),
                web.get("/groups", self.groups), web.get("/group", self.group),
                web.get("/group/lag", self.group_lag), web.get("/group/timeline", self.timeline),
                web.get("/test", self.test_view), web.get("/schemas", self.schemas),
                web.get(f"/static/{HTMX}", self.htmx),
                web.post("/action/{name}", self.action)]

    def application(self) -> web.Application:
        """The console as an aiohttp application (a listener's, or a sub-application)."""
        application = web.Application(middlewares=[_same_origin_posts])
        application.add_routes(self.routes())
        return application

    def render(self, template: str, status: int = 200, **values: Any) -> web.Response:
        values.setdefault("page", "")
        html = self.env.get_template(template).render(read_only=self.read_only, formats=FORMATS, **values)
        return web.Response(text=html, content_type="text/html", status=status,
                            headers={"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
                                     "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"})

    # --- pages --------------------------------------------------------------------------------

    async def overview(self, request: web.Request) -> web.Response:
        return self.render("overview.html", page="overview", o=await reads.overview(self.app, self.kafka, self.rates))

    async def overview_live(self, request: web.Request) -> web.Response:
        return self.render("overview_live.html", o=await reads.overview(self.app, self.kafka, self.rates))

    async def topics(self, request: web.Request) -> web.Response:
        return self.render("topics.html", page="topics",
                           topics=await reads.topic_list(self.app, self.kafka, _start(request)))

    async def topic(self, request: web.Request) -> web.Response:
        detail = await reads.topic_detail(self.app, self.kafka, request.query.get("name", ""))
        return self.render("topic.html", page="topics", t=detail, status=404 if detail["error"] else 200)

    async def messages(self, request: web.Request) -> web.Response:
        q = request.query
        name = q.get("topic", "")
        try:
            partition = int(q.get("partition", "0"))
            at = int(q["at"]) if q.get("at", "").strip() else None
        except ValueError:
            raise web.HTTPBadRequest(text="partition and at are numbers") from None
        fmt = q.get("format", "text") if q.get("format") in FORMATS else "text"
        start = q.get("start", "offset")
        newest = q.get("order", "oldest") == "newest"
        page = await reads.browse(self.app, self.kafka, name, partition, start=start, at=at, newest_first=newest, fmt=fmt)
        return self.render("messages.html", page="topics", topic=name, partition=partition, p=page, fmt=fmt,
                           start=start, at=at, order="newest" if newest else "oldest")

    async def groups(self, request: web.Request) -> web.Response:
        return self.render("groups.html", page="groups",
                           groups=reads.window(await reads.group_list(self.kafka), _start(request)))

    async def group(self, request: web.Request) -> web.Response:
        g = await reads.group_detail(self.app, self.kafka, request.query.get("id", ""))
        return self.render("group.html", page="groups", g=g)

    async def group_lag(self, request: web.Request) -> web.Response:
        group = request.query.get("id", "")
        kind = request.query.get("type", "")
        return self.render("lag.html", g={"id": group, "type": kind, "lag": await reads.group_lag(self.kafka, group, kind)})

    async def timeline(self, request: web.Request) -> web.Response:
        group = request.query.get("id", "")
        return self.render("timeline.html", page="groups", group=group, t=await reads.timeline(self.app, group))

    async def schemas(self, request: web.Request) -> web.Response:
        subject = request.query.get("subject")
        return self.render("schemas.html", page="schemas", subject=subject,
                           s=await reads.schemas(self.app, subject))

    async def test_view(self, request: web.Request) -> web.Response:
        control = self.app.control
        q = {k: v for k, v in request.query.items() if v.strip() and k in ("api", "client_id", "group_id", "topic")}
        try:
            captured = control.captured(**q)[-CAPTURED_SHOWN:]
            captured_error = None
        except (CaptureOff, ValueError) as exc:
            captured, captured_error = [], str(exc)
        return self.render("test.html", page="test", faults=control.faults(), clock=control.clock(),
                           capture=control.capture(), filters=q, captured_error=captured_error,
                           captured=[{"api": c.api, "version": c.version, "client_id": c.client_id,
                                      "connection": c.connection, "time": c.time_ms, "ok": c.ok,
                                      "errors": c.errors, "body": to_plain(c.body)} for c in reversed(captured)])

    async def htmx(self, request: web.Request) -> web.Response:
        if self._htmx is None:  # read once (52 KB), off the loop
            self._htmx = await asyncio.to_thread(files("odradek.web.console").joinpath("static", HTMX).read_bytes)
        return web.Response(body=self._htmx, content_type="application/javascript",
                            headers={"Cache-Control": "max-age=3600"})

    # --- actions ------------------------------------------------------------------------------

    async def action(self, request: web.Request) -> web.Response:
        if self.read_only:
            return self.render("result.html", status=403, ok=False, text="the console is read-only "
                               "(odradek.console.read.only)", back=request.headers.get("Referer", "/"))
        name = request.match_info["name"]
        spec = ACTIONS.get(name)
        form = dict(await request.post())
        if spec is None:
            raise web.HTTPNotFound(text=f"no action {name}")
        fields = {k: str(v) for k, v in form.items() if k not in ("confirm", "back")}
        back = str(form.get("back") or "/")
        if not back.startswith("/") or back.startswith("//"):
            back = "/"
        if form.get("confirm") != "yes":
            return self.render("confirm.html", action=name, what=spec[0].format_map(_Missing(fields)),
                               fields=fields, back=back)
        try:
            outcome = await spec[1](self, fields)
        except (KeyError, ValueError) as exc:
            outcome = actions.Outcome(False, f"bad input: {exc}")
        return self.render("result.html", status=200 if outcome.ok else 409, ok=outcome.ok, text=outcome.text,
                           back=back)


def _start(request: web.Request) -> int:
    try:
        return max(0, int(request.query.get("start", "0")))
    except ValueError:
        return 0


class _Missing(dict):
    def __missing__(self, key: str) -> str:
        return "?"


def _int(fields: dict, key: str) -> int:
    return int(fields[key].strip())


def _opt_bytes(fields: dict, key: str) -> bytes | None:
    value = fields.get(key, "")
    return None if fields.get(f"{key}_null") == "on" else value.encode()


def _headers(text: str) -> list[tuple[str, bytes]]:
    """``name: value`` lines."""
    out = []
    for line in text.splitlines():
        if line.strip():
            name, _, value = line.partition(":")
            out.append((name.strip(), value.strip().encode()))
    return out


def _configs(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if line.strip():
            key, sep, value = line.partition("=")
            if not sep:
                raise ValueError(f"{line!r} is not key=value")
            out[key.strip()] = value.strip()
    return out


async def _reset(p: ConsolePages, f: dict) -> actions.Outcome:
    to = f["to"]
    value = None
    if to == "timestamp":
        value = _int(f, "value")
    elif to == "offset":
        value = _int(f, "value")
    return await actions.reset_offsets(p.kafka, f["group"], f.get("topic") or None, to, value)


async def _advance(p: ConsolePages, f: dict) -> actions.Outcome:
    now = await p.app.control.advance_clock(ms=_int(f, "ms"))
    return actions.Outcome(True, f"the broker's clock is now {now} ms")


async def _reset_broker(p: ConsolePages, f: dict) -> actions.Outcome:
    gone = await p.app.control.reset()
    return actions.Outcome(True, f"reset: {gone}")


async def _set_capture(p: ConsolePages, f: dict) -> actions.Outcome:
    p.app.control.set_capture(_int(f, "max_requests"))
    return actions.Outcome(True, f"capturing the last {f['max_requests']} requests")


async def _remove_fault(p: ConsolePages, f: dict) -> actions.Outcome:
    gone = p.app.control.remove_fault(_int(f, "id"))
    return actions.Outcome(gone, f"fault rule {f['id']} removed" if gone else f"fault rule {f['id']} was gone")


# name -> (what the confirmation says, what it does)
ACTIONS = {
    "create-topic": ("Create topic {name} with {partitions} partition(s)",
                     lambda p, f: actions.create_topic(p.kafka, f["name"], _int(f, "partitions"),
                                                       _configs(f.get("configs", "")))),
    "delete-topic": ("Delete topic {name} and all its data",
                     lambda p, f: actions.delete_topic(p.kafka, f["name"])),
    "add-partitions": ("Grow topic {name} to {count} partitions",
                       lambda p, f: actions.add_partitions(p.kafka, f["name"], _int(f, "count"))),
    "delete-records": ("Delete the records of {name}-{partition} before offset {before}",
                       lambda p, f: actions.delete_records(p.kafka, f["name"], _int(f, "partition"),
                                                           _int(f, "before"))),
    "alter-config": ("Set {key} = {value} on topic {name} (empty: back to the default)",
                     lambda p, f: actions.alter_config(p.kafka, f["name"], f["key"].strip(),
                                                       f.get("value") or None)),
    "produce": ("Write one message to {topic}-{partition}",
                lambda p, f: actions.produce(p.kafka, f["topic"], _int(f, "partition"), _opt_bytes(f, "key"),
                                             _opt_bytes(f, "value"), _headers(f.get("headers", "")))),
    "reset-offsets": ("Reset the offsets of group {group} (topic: {topic}) to {to} {value}", _reset),
    "delete-offsets": ("Delete the committed offsets of group {group} for topic {topic}",
                       lambda p, f: actions.delete_offsets(p.kafka, f["group"], f["topic"])),
    "delete-group": ("Delete group {group} and its committed offsets",
                     lambda p, f: actions.delete_group(p.kafka, f["group"])),
    "advance-clock": ("Move the broker's clock forward by {ms} ms (sessions, rebalances, retention fire)",
                      _advance),
    "reset-broker": ("Reset the broker to empty: every topic, group, offset, fault and capture goes",
                     _reset_broker),
    "set-capture": ("Capture the last {max_requests} requests (0: off)", _set_capture),
    "remove-fault": ("Remove fault rule {id}", _remove_fault),
}

# scripts only from this origin (the vendored htmx); no inline script can run, whatever a page shows
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")


@web.middleware
async def _same_origin_posts(request: web.Request, handler: Any) -> web.StreamResponse:
    """A POST whose Origin (or Sec-Fetch-Site) says another site sent it is refused: a page on the web
    must not drive the console a developer's browser can reach on loopback."""
    if request.method == "POST":
        origin = request.headers.get("Origin")
        if origin and origin != "null" and urlsplit(origin).netloc != request.host:
            raise web.HTTPForbidden(text="cross-origin POST refused")
        if request.headers.get("Sec-Fetch-Site") == "cross-site":
            raise web.HTTPForbidden(text="cross-site POST refused")
    return await handler(request)
