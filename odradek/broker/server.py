"""The TCP shell: frames in, handlers, responses out in request order.

Each connection is an asyncio ``Protocol``: the loop hands it what arrived,
it decodes the size-prefixed frames and runs each request's handler at once
(clients pipeline; a JoinGroup may be parked for seconds), and answers go out
strictly in request order, because every Kafka client matches responses by
order and drops the connection on a mismatch.  A bad frame costs that
connection, never the broker.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import mmap
import socket
import struct
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog

from ..protocol import headers
from ..protocol.errors import ErrorCode
from ..protocol.lean_dataclass import dataclass
from ..protocol.primitives import ProtocolError
from ..protocol.registry import APIS
from .clock import Clock, RealClock, TimerHandle, real_ms
from .dispatch import NO_RESPONSE, CloseConnection, HandlerTable, Later, RequestContext
from .error_answers import error_answer
from .faulted import apply_fault
from .runtime.runtime import CoordinatorRuntime
from .security.principal import ANONYMOUS, PrincipalMappingError, ssl_principal, subject_dn

if TYPE_CHECKING:
    from .security import authenticator as authn  # loaded for SASL listeners only (Connection)

log = structlog.get_logger("odradek.server")

_SIZE = struct.Struct(">i")
BIG_FRAME = 1 << 20  # frames from this size up are received into a buffer of their own
MAX_IN_FLIGHT = 128  # stop reading a connection that has this many unanswered requests
# Requests whose work is only waiting: cancelled when their connection goes (a Fetch long poll).
# Every other accepted request runs to its end, as on Kafka; only its answer is dropped.
CANCEL_WHEN_GONE = frozenset({1})
WRITE_BUFFER_HIGH = 4 << 20
TLS_HANDSHAKE_TIMEOUT_S = 60.0  # asyncio's default; a client that never finishes the handshake goes


class FailAuthentication(Exception):
    """Authentication failed: send ``answer`` (if any) after ``connection.failed.authentication.delay.ms``,
    then close (Kafka's ``SaslServerAuthenticator`` delays the failure response the same way)."""

    def __init__(self, reason: str, answer: Any = None, *, delayed: bool = True, message: str | None = None):
        super().__init__(reason)
        self.answer = answer
        self.delayed = delayed
        self.message = message  # what the client is told (SaslAuthenticate's error_message)


class TlsListener:
    """A TLS listener that accepts its sockets itself and completes each TLS handshake before a
    ``Connection`` exists (``loop.connect_accepted_socket(ssl=...)``).

    Why not ``create_server(ssl=...)``: a failed handshake there (a plaintext
    client on the TLS port, an untrusted or missing client certificate)
    vanishes without a word; here it is logged and the socket closed.  Why not
    ``start_tls`` on an accepted transport: uvloop reads the ClientHello into
    the accepting protocol before ``start_tls`` can take the transport over.
    Offers what ``KafkaServer`` uses of an asyncio ``Server``.
    """

    def __init__(self, server: KafkaServer, listener: Any, sockets: list[socket.socket]):
        self.server = server
        self.listener = listener
        self.sockets = sockets
        loop = asyncio.get_running_loop()
        self._accepting = [loop.create_task(self._accept(sock)) for sock in sockets]

    @classmethod
    def bind(cls, server: KafkaServer, listener: Any, host: str, port: int) -> TlsListener:
        if not host and socket.has_dualstack_ipv6():
            sock = socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True)
        elif not host:
            sock = socket.create_server(("", port))
        else:
            family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                          flags=socket.AI_PASSIVE)[0]
            sock = socket.create_server(address[:2], family=family)
        sock.setblocking(False)
        return cls(server, listener, [sock])

    async def _accept(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                client, _address = await loop.sock_accept(sock)
            except OSError as exc:  # out of file descriptors, a reset before accept: keep listening
                log.warning("tls.accept_failed", listener=self.listener.name, error=str(exc))
                await asyncio.sleep(0.1)
                continue
            task = loop.create_task(self._handshake(client))
            self.server._handshakes.add(task)
            task.add_done_callback(self.server._handshakes.discard)

    async def _handshake(self, client: socket.socket) -> None:
        try:
            peer = "{}:{}".format(*client.getpeername()[:2])
        except OSError:
            peer = "?"
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                lambda: Connection(self.server, self.listener), client, ssl=self.listener.ssl_context,
                ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S)
        except asyncio.CancelledError:
            client.close()
            raise
        except (OSError, TimeoutError, EOFError) as exc:  # ssl.SSLError is an OSError
            log.warning("tls.handshake_failed", peer=peer, listener=self.listener.name,
                        error=str(exc) or type(exc).__name__)
            self.server.security_events["tls_handshake_failed", self.listener.name, ""] += 1
            client.close()

    def close(self) -> None:
        for task in self._accepting:
            task.cancel()
        for sock in self.sockets:
            sock.close()

    async def wait_closed(self) -> None:
        await asyncio.gather(*self._accepting, return_exceptions=True)


@dataclass(frozen=True, slots=True)
class Route:
    """Everything ``_process`` needs for one (API key, version), looked up once per server.

    Saves the registry, handler-table and flexibility lookups on every
    request (a measurable share of a 1-partition OffsetCommit).
    """

    api_key: int
    name: str
    fn: Any  # handler(ctx, request)
    read_header: Any  # (frame, pos) -> (header, end)
    read_request: Any  # (frame, pos) -> (request, end)
    build_response: Any  # response -> bytes
    response_header_version: int


class _Pending:
    """A queued answer still being worked out: the handler's future or ``Later``, and how to encode it."""

    __slots__ = ("result", "route", "version", "correlation_id", "started", "request")

    def __init__(self, result: asyncio.Future | Later, route: Route, version: int, correlation_id: int,
                 started: float, request: Any = None):
        self.result = result
        self.route = route
        self.version = version
        self.correlation_id = correlation_id
        self.started = started
        self.request = request  # for Kafka's error answer should the handler fail


class KafkaServer:
    def __init__(self, handlers: HandlerTable, max_request_bytes: int, metrics=None, idle_ms: int = -1,
                 clock: Clock | None = None):
        self.handlers = handlers
        self.metrics = metrics
        self.max_request_bytes = max_request_bytes
        self.idle_ms = idle_ms if idle_ms >= 0 else None  # connections.max.idle.ms; None: never
        self.clock = clock or RealClock()  # the broker's: a test advancing it expires idle connections
        self.now_ms = self.clock.now_ms
        self._sweep: TimerHandle | None = None
        self._servers: list[asyncio.base_events.Server] = []
        self._connections: set[Connection] = set()
        self._ids = itertools.count(1)
        self.open_connections = 0
        self.runtime: CoordinatorRuntime | None = None  # holds answers until their records are in the log
        self._orphans: set[asyncio.Future] = set()  # handlers still working for a closed connection
        # test control (``control/``): consulted per request only while a fault rule or the
        # request capture is on; None otherwise, so a broker without them pays one attribute test
        self.control: Any = None
        # client quotas (``quota_enforcer.QuotaEnforcer``): set only while a quota is configured, so a
        # broker without quotas pays one attribute test per request
        self.quotas: Any = None
        self._handshakes: set[asyncio.Task] = set()  # TLS handshakes under way (``TlsListener``)
        # authentication outcomes for the metrics, by (event, listener, mechanism): Kafka's
        # successful/failed-authentication-total and expired-connections-killed-count
        self.security_events: Counter[tuple[str, str, str]] = Counter()
        self._addresses: list[tuple[str, int, Any]] = []  # where each listener was bound (broker_down)
        self._down: asyncio.TimerHandle | None = None
        self._listener_of: dict[Any, Any] = {}  # each bound server's listener (a cluster's node down)
        self._parked: dict[int, list[tuple[str, int, Any]]] = {}  # a down node's addresses, by node id
        # told the id of every connection that closes (share sessions end with theirs)
        self.connection_closed: Callable[[int], None] | None = None

    def attach_runtime(self, runtime: CoordinatorRuntime) -> None:
        """Answer each loop turn's reads through the coordinator runtime (``runtime/runtime.py``).

        Why a turn and not a read: one iteration often reads several
        connections whose groups share an offsets partition (1 by default),
        and an append per read costs a batch, a CRC and a write syscall each.
        """
        self.runtime = runtime
        runtime.on_writes_failed = self.writes_failed

    def writes_failed(self, exc: Exception, held: list[Connection]) -> None:
        """Staged writes did not reach the log: no answer that relied on them may be sent.

        The shard that failed is Failed (it answers nothing more until
        reloaded); which waiting answers relied on its writes is not
        tracked, so every connection holding or awaiting an answer is closed
        instead of answered -- a failed disk, not a case to be clever in.
        """
        log.error("request.writes_failed", error=str(exc))
        for conn in [*held, *(c for c in self._connections if c.queue)]:
            conn.held.clear()
            conn.close("writes failed")  # a closing transport takes no more answers

    async def listen(self, host: str, port: int, listener: Any = None) -> tuple[str, int]:
        """Bind one listener; returns the bound (host, port) -- port 0 picks one.

        ``listener`` (``security.served.ServedListener``) says its name, TLS
        context and SASL settings; None is a PLAINTEXT listener.  A TLS
        listener is a ``TlsListener``, which logs failed handshakes.
        """
        loop = asyncio.get_running_loop()
        if listener is not None and listener.ssl_context is not None:
            server = TlsListener.bind(self, listener, host, port)
        else:
            server = await loop.create_server(lambda: Connection(self, listener), host or None, port,
                                              reuse_address=True)
        self._servers.append(server)
        self._listener_of[server] = listener
        if self.idle_ms is not None and self._sweep is None:
            self._schedule_sweep()
        sock = server.sockets[0]
        bound = sock.getsockname()
        self._addresses.append((host, bound[1], listener))
        return bound[0], bound[1]

    def go_down(self, seconds: float) -> None:
        """Broker down (the mock cluster's ``rd_kafka_mock_broker_set_down``): refuse connections
        and drop every open one for ``seconds`` of the broker's clock (an advance ends it, a
        frozen clock prolongs it), keeping all data and state.

        In-flight work completes as for any closed connection (``orphan``);
        only the answers are lost.  Listening resumes on the same ports.
        """
        if self._down is not None:
            self._down.cancel()
        else:
            for server in self._servers:
                server.close()
            self._servers = []
        for conn in list(self._connections):
            conn.drop("broker down (test control)")
        log.warning("broker.down", seconds=seconds)
        self._down = self.clock.call_at(self.now_ms() + round(seconds * 1000), self.come_up)

    def close_node(self, node_id: int) -> None:
        """A cluster's node down: its listeners stop accepting and its connections are dropped; the
        other nodes' stay (``cluster``)."""
        mine = [srv for srv in self._servers if getattr(self._listener_of.get(srv), "node_id", None) == node_id]
        parked = self._parked.setdefault(node_id, [])
        for srv in mine:
            srv.close()
            self._servers.remove(srv)
            listener = self._listener_of.pop(srv)
            port = srv.sockets[0].getsockname()[1] if srv.sockets else listener.spec.port
            entry = next((a for a in self._addresses if a[2] is listener), None)
            if entry is not None:
                self._addresses.remove(entry)
                parked.append(entry)
            else:
                parked.append((listener.spec.host, port, listener))
        for conn in list(self._connections):
            if conn.node_id == node_id:
                conn.drop(f"node {node_id} down (test control)")

    async def open_node(self, node_id: int) -> None:
        """End a ``close_node``: listen again on the node's ports."""
        await self._relisten(self._parked.pop(node_id, []))

    def come_up(self) -> None:
        """End a ``go_down``: listen again on the ports bound before."""
        if self._down is None:
            return
        self._down.cancel()
        self._down = None
        addresses, self._addresses = self._addresses, []
        task = asyncio.get_running_loop().create_task(self._relisten(addresses))
        self._orphans.add(task)  # a stop waits for it (finish_orphans)
        task.add_done_callback(self._orphan_done)

    async def _relisten(self, addresses: list[tuple[str, int, Any]]) -> None:
        for host, port, listener in addresses:
            try:
                await self.listen(host, port, listener)
            except OSError as exc:  # another process took the port meanwhile: say so, stay up
                log.error("broker.up_failed", host=host, port=port, error=str(exc))
                self._addresses.append((host, port, listener))
        log.warning("broker.up", listeners=[f"{h}:{p}" for h, p, _ in addresses])

    def _schedule_sweep(self) -> None:
        period = min(max(self.idle_ms // 4, 10), 30_000)
        self._sweep = self.clock.call_every(period, self.close_idle)

    def spare_active(self, heard_since_real_ms: int, shift_ms: int) -> int:
        """Before a sparing advance: connections that received bytes since then stay as idle as
        they were (their idle time is not moved by the advance); returns how many."""
        spared = 0
        for conn in self._connections:
            if conn.heard_real >= heard_since_real_ms:
                conn.last_seen += shift_ms
                if conn.pending_bytes():
                    conn.frame_started += shift_ms
                spared += 1
        return spared

    def close_idle(self) -> None:
        """Close connections idle for ``connections.max.idle.ms`` (Kafka's ``Selector`` idle expiry).

        Idle: nothing arrived for that long, or a frame begun that long ago is
        still incomplete however slowly its bytes trickle in (a client that
        never finishes a request holds a buffer and a socket).  A connection
        we owe an answer (a parked JoinGroup, a long-polling Fetch) is busy,
        not idle.
        """
        limit = self.now_ms() - self.idle_ms
        for conn in list(self._connections):
            if conn.queue or conn.close_reason is not None:
                continue
            partial = conn.pending_bytes()
            if conn.last_seen < limit or (partial and conn.frame_started < limit):
                conn.log.info("connection.idle_closed", idle_ms=self.idle_ms, partial_frame=partial)
                conn.close("idle" if not partial else "incomplete frame past connections.max.idle.ms")

    async def stop_accepting(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
        if self._down is not None:  # a broker stopped while "down" stays down
            self._down.cancel()
            self._down = None
        for server in self._servers:
            server.close()
        for server in self._servers:
            await server.wait_closed()

    def orphan(self, item: _Pending) -> None:
        """The connection of ``item`` is gone: its work still completes (a DeleteTopics cut
        half-way would leave directories the next start adopts), its answer is dropped."""
        result = item.result
        if type(result) is Later or item.route.api_key in CANCEL_WHEN_GONE:
            result.cancel()  # a Later's work is the coordinator's and goes on; a Fetch only waits
            return
        self._orphans.add(result)
        result.add_done_callback(self._orphan_done)

    def _orphan_done(self, result: asyncio.Future) -> None:
        self._orphans.discard(result)
        if not result.cancelled() and (exc := result.exception()) is not None:
            log.error("request.handler_failed", error=str(exc), client="gone")

    async def finish_orphans(self, timeout: float) -> None:
        """Let the work of closed connections end (at most ``timeout`` s), then cancel what is left."""
        if self._orphans:
            await asyncio.wait(list(self._orphans), timeout=timeout)
        for result in list(self._orphans):
            result.cancel()

    async def close_all(self, grace: float = 0.0) -> None:
        """Close connections, letting in-flight requests finish for ``grace`` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while any(c.queue for c in self._connections) and loop.time() < deadline:
            await asyncio.sleep(0.01)
        if self.runtime is not None:
            self.runtime.end_turn()  # what the last reads staged reaches the log; their answers go out
        for task in list(self._handshakes):
            task.cancel()
        for conn in list(self._connections):
            conn.close("broker stopping")
        await asyncio.sleep(0)  # connection_lost callbacks run


class Connection(asyncio.Protocol):
    """One client connection, driven by the event loop's callbacks.

    ``data_received`` answers every whole frame that arrived, synchronously,
    and writes the answers with one call: no reader task to wake per read
    and no stream buffer in between (most requests, including OffsetCommit
    with fsync ``never``, complete without awaiting anything).  Requests that
    must wait (a parked JoinGroup, a commit awaiting fsync) are queued in
    arrival order and sent from their futures' callbacks as they complete; anything
    answered after them queues behind them.  Reading pauses while
    ``MAX_IN_FLIGHT`` requests are unanswered or while the client is not
    reading our answers (``pause_writing``).
    """

    def __init__(self, server: KafkaServer, listener: Any = None):
        self.server = server
        self.id = next(server._ids)
        # the listener it arrived on (``security.served.ServedListener``; None: PLAINTEXT) and who it is
        self.listener = listener
        self.listener_name = "PLAINTEXT" if listener is None else listener.name
        self.node_id = -1 if listener is None else listener.node_id
        self.principal = ANONYMOUS
        self.sasl: authn.SaslAuthenticator | None = None  # the SASL state on a SASL listener
        self.frame_limit = server.max_request_bytes  # sasl.server.max.receive.size until authenticated
        self.process = self._process  # a SASL listener's frames pass its gate first
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()  # an incomplete frame carried over to the next read
        self.need = 0  # bytes ``buf`` must hold before it is worth looking at again
        self.big: mmap.mmap | None = None  # a big frame (BIG_FRAME and up) being received, exactly its size
        self.filled = 0  # bytes of ``big`` received so far
        self.queue: deque[Any] = deque()
        self.write_paused = False
        self.read_paused = False
        self.close_reason: str | None = None
        self.peer = "?"
        self.client_host = "/?"
        self.log = log
        self.log_requests = False
        self.drain_scheduled = False
        self.held: list[bytes] = []  # answers waiting for the end of the turn (``runtime.end_turn``)
        self.last_seen = server.now_ms()  # when bytes last arrived (connections.max.idle.ms)
        self.heard_real = real_ms()  # the same in real time (a sparing advance spares it)
        self.frame_started = 0  # when the incomplete frame in ``buf`` began
        self.muted: Any = None  # a quota throttle (KIP-219): the broker-clock timer that ends it

    # --- transport callbacks ---------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.peer = f"{peer[0]}:{peer[1]}"
        self.client_host = f"/{peer[0]}"
        self.log = log.bind(conn=self.id, peer=self.peer)
        self.log_requests = self.log.is_enabled_for(logging.DEBUG)  # skips building the call's kwargs
        transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)
        self.server._connections.add(self)
        self.server.open_connections += 1
        self.log.info("connection.open", listener=self.listener_name, node=self.node_id)
        if self.listener is not None:
            self._secure(transport)

    def _secure(self, transport) -> None:
        """The principal of a verified client certificate; the SASL gate on a SASL listener."""
        listener = self.listener
        if listener.ssl_context is not None:
            cert = transport.get_extra_info("peercert")
            if cert:
                dn = subject_dn(cert.get("subject", ()))
                try:
                    self.principal = ssl_principal(dn, listener.principal_rules)
                except PrincipalMappingError as exc:
                    self.log.warning("tls.principal_failed", error=str(exc))
                    self.close("no principal for the client certificate")
                    return
                self.log.info("tls.client_certificate", principal=self.principal)
        if listener.sasl is not None:
            from .security import authenticator as authn  # noqa: PLC0415 - SASL code for SASL listeners only

            self.sasl = authn.SaslAuthenticator(listener.sasl, self.server.now_ms)
            self.frame_limit = min(listener.sasl.max_receive_size, self.server.max_request_bytes)
            self.process = self._sasl_process

    def data_received(self, data: bytes) -> None:
        """Collect a big frame into its own buffer, else answer what arrived (``_received``)."""
        if self.close_reason is not None:
            return
        big = self.big
        if big is None:
            self._received(data)
            return
        self.last_seen = self.server.now_ms()
        self.heard_real = real_ms()
        n = min(len(big) - self.filled, len(data))
        big[self.filled:self.filled + n] = memoryview(data)[:n]
        self.filled += n
        if self.filled < len(big):
            return
        self.big = None
        self._received(big, whole=True)
        if n < len(data) and self.close_reason is None:
            self.data_received(data[n:])

    def pending_bytes(self) -> int:
        """Bytes of an incomplete frame held for the next read."""
        return len(self.buf) + (self.filled + 4 if self.big is not None else 0)

    def _received(self, data: bytes | mmap.mmap, whole: bool = False) -> None:
        """Answer every whole frame that arrived; the answers go out together.

        Clients pipeline: one read often holds many requests, and answering a
        burst with one write (instead of a send per response) halves the
        per-request cost of small requests such as OffsetCommit and Heartbeat.
        With a coordinator, the answers are held until the loop turn ends:
        the coordinator writes of every read of this turn are appended to the
        log together (``CoordinatorRuntime.open_turn``), before any answer is sent.

        ``whole``: ``data`` is exactly one frame without its size prefix (a big
        one, collected by ``data_received``), decoded where it lies.  A big
        frame still arriving is collected into a mapping of exactly its size,
        so the broker holds one copy of it, not the chunks, their join and a
        slice (three, for a 50 MiB Produce refused as too large).
        """
        self.last_seen = now = self.server.now_ms()
        self.heard_real = real_ms()
        buf = self.buf
        if buf:  # the rest of a frame that began in an earlier read
            buf += data
            if len(buf) < self.need:
                return  # a large request still arriving: no copy until it is whole
            data = bytes(buf)
            buf.clear()
        server = self.server
        runtime = server.runtime
        if runtime is not None:
            runtime.open_turn()
        pos, answers, reason = self._answer_frames(data, self.frame_limit, whole)
        if pos < len(data) and reason is None:
            self.frame_started = now
            rest = memoryview(data)[pos:]
            size = _SIZE.unpack_from(rest, 0)[0] if len(rest) >= 4 else 0
            if BIG_FRAME <= size and len(rest) - 4 < size:  # incomplete (size checked by _answer_frames)
                # an anonymous mapping: its pages cost memory as bytes arrive, not when a client
                # announces a frame it may never send (``bytearray(size)`` would zero it all now)
                self.big = mmap.mmap(-1, size)
                self.filled = len(rest) - 4
                self.big[:self.filled] = rest[4:]
            else:
                buf += rest
                self.need = 4 + size if len(buf) >= 4 else 4
        if answers:
            if runtime is None:
                self.transport.writelines(answers)
            else:
                if not self.held:
                    runtime.hold(self)
                self.held += answers
        if reason is not None:
            if self.held:  # answered before the bad frame: those answers still go out first
                reason = self._send_now([]) or reason
            self.close(reason)
        elif self.queue:
            self._update_reading()

    def eof_received(self) -> bool:
        """The client half-closed: answer what it sent in this turn, then close our side too.

        The event loop can deliver the last read and the FIN in one callback,
        before the turn ends; a closing transport takes no held answers later.
        """
        self.close_reason = self.close_reason or "client closed"
        if self.held:
            self._send_now([])  # the turn's writes reach the log first
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.held.clear()
        for item in self.queue:
            if type(item) is _Pending:
                self.server.orphan(item)
        self.queue.clear()
        self.server._connections.discard(self)
        self.server.open_connections -= 1
        if self.server.connection_closed is not None:
            self.server.connection_closed(self.id)
        self.log.info("connection.close", reason=self.close_reason or (str(exc) if exc else "client closed"))

    def pause_writing(self) -> None:
        self.write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self.write_paused = False
        self._update_reading()

    # --- helpers -------------------------------------------------------------------------------------

    def close(self, reason: str) -> None:
        if self.close_reason is None:
            self.close_reason = reason
        self.transport.close()  # buffered answers are still sent

    def drop(self, reason: str) -> None:
        """Close at once, discarding buffered answers (a broker that went away sends nothing more)."""
        if self.close_reason is None:
            self.close_reason = reason
        self.held.clear()
        self.transport.abort()

    def send_held(self) -> None:
        """The turn ended and its writes are in the log: send the answers held for it."""
        self._send_now([])

    def _flush_turn(self) -> bool:
        """The open turn's writes reach the log before an answer leaves mid-turn; False if they failed."""
        runtime = self.server.runtime
        return runtime is None or not runtime.turn_open or runtime.flush_turn()

    def _send_now(self, answers: list[bytes]) -> str | None:
        """Send the held answers and ``answers``, the open turn's writes first; a close reason if they failed."""
        if not self._flush_turn():
            return "writes failed"
        out = self.held + answers if self.held else answers
        self.held = []
        if out and not self.transport.is_closing():
            self.transport.writelines(out)
        return None

    def _update_reading(self) -> None:
        """Read only while there is room for more requests and the client takes our answers."""
        pause = self.write_paused or len(self.queue) >= MAX_IN_FLIGHT or self.muted is not None
        if pause is self.read_paused or self.transport.is_closing():
            return
        self.read_paused = pause
        if pause:
            self.transport.pause_reading()
        else:
            self.transport.resume_reading()

    def mute(self, ms: int) -> None:
        """Read nothing more for ``ms`` of broker clock (a quota's throttle, KIP-219's channel muting);
        the answer that carries the throttle time still goes out at once."""
        if self.close_reason is not None:
            return
        clock = self.server.clock
        if self.muted is not None:
            self.muted.cancel()
        self.muted = clock.call_at(clock.now_ms() + ms, self._unmute)
        self._update_reading()

    def _unmute(self) -> None:
        self.muted = None
        if self.transport is None or self.transport.is_closing():
            return
        self._update_reading()
        big = self.big
        if big is not None and self.filled == len(big):  # a big request that arrived while muted
            self.big = None
            self._received(big, whole=True)
        elif len(self.buf) >= max(self.need, 4):  # whole requests that arrived while muted
            self._received(b"")

    def _enqueue(self, item: Any) -> None:
        self.queue.append(item)
        if type(item) is _Pending:
            item.result.add_done_callback(self._drain_soon)

    def _drain_soon(self, _done: Any = None) -> None:
        """A queued request completed: drain once this loop turn is done.

        Everything that completes in the same turn (the commits one fsync
        round made durable) then goes out in one write.
        """
        if not self.drain_scheduled:
            self.drain_scheduled = True
            asyncio.get_running_loop().call_soon(self._drain)

    def _drain(self) -> None:
        """Send the answers at the head of the queue that are ready, in request order."""
        self.drain_scheduled = False
        if not self._flush_turn():
            return  # an answer may rest on what the open turn staged: it reaches the log first
        out: list[bytes] = []
        reason = self._ready_answers(self.queue, out)
        if out and not self.transport.is_closing():
            self.transport.writelines(out)
        if reason is not None:
            self.queue.clear()
            self.close(reason)
            return
        self._update_reading()

    def _ready_answers(self, queue: deque, out: list[bytes]) -> str | None:
        """Move the ready answers at the head of ``queue`` into ``out``; a close reason on failure."""
        while queue:
            item = queue[0]
            if type(item) is _Pending:
                result = item.result
                if not result.done() or result.cancelled():
                    return None  # not yet, or the connection is going away
                try:
                    try:
                        item = self._answer(result.result(), item.route, item.version, item.correlation_id,
                                            item.started)
                    except CloseConnection:
                        raise
                    except Exception:
                        item = self._refuse(item.route, item.version, item.correlation_id, item.request,
                                            item.started)
                except CloseConnection as exc:
                    return str(exc)
            queue.popleft()
            if item is not NO_RESPONSE:
                out.extend(item)
        return None

    def _answer_frames(self, buf: bytes | mmap.mmap, limit: int,
                       whole: bool = False) -> tuple[int, list[bytes], str | None]:
        """Process the whole frames in ``buf`` (``whole``: ``buf`` is one frame without its size
        prefix): (bytes consumed, chunks to write now, close reason)."""
        pos = 0
        answers: list[bytes] = []
        end = len(buf)
        while end - pos >= 4:
            if whole:  # its size was checked when its prefix arrived; no copy of it is made
                frame, size, pos = buf, end, end
            else:
                size = _SIZE.unpack_from(buf, pos)[0]
                if size < 0 or size > limit:
                    if 0 <= size <= self.frame_limit:  # authenticated by a frame of this same read
                        limit = self.frame_limit
                    else:
                        self.log.warning("request.refused", reason="frame size", size=size, limit=limit)
                        return pos, answers, "frame too large"
                if end - pos - 4 < size:
                    break
                if self.muted is not None:  # throttled: the rest (size checked) waits for ``_unmute``
                    break
                frame = buf[pos + 4:pos + 4 + size]
                pos += 4 + size
            try:
                out = self.process(frame)
            except CloseConnection as exc:
                return pos, answers, str(exc)
            except FailAuthentication as exc:
                self._fail_authentication(exc, answers)
                return pos, [], None
            except Exception:  # past every handler's own guard (``_refuse``): close, logged, not asyncio's
                self.log.exception("request.processing_failed", size=size)  # fatal-error path
                return pos, answers, "request processing failed"
            if out is NO_RESPONSE:
                continue
            if not self.queue and type(out) is tuple:
                answers.extend(out)
            else:
                if answers or self.held:  # everything answered so far goes out before the queued item
                    reason = self._send_now(answers)
                    if reason is not None:
                        return pos, [], reason
                    answers = []
                self._enqueue(out)
        return pos, answers, None

    def _process(self, frame: bytes) -> Any:
        """Decode and dispatch one request; returns (head, body), NO_RESPONSE or a ``_Pending``."""
        try:
            api_key, version, correlation_id = headers.peek_request(frame)
        except ValueError:
            self.log.warning("request.refused", reason="short header", size=len(frame))
            raise CloseConnection("malformed header") from None
        route = self.server.handlers.routes.get((api_key, version))
        if route is None:
            route = self._route(api_key, version)
            if route is None:
                return self._api_versions_fallback(correlation_id, self.server.handlers.get(api_key).versions.hi)
        try:
            header, pos = route.read_header(frame, 0)
            body, _ = route.read_request(frame, pos)
        except (ProtocolError, ValueError, UnicodeDecodeError) as exc:
            self.log.warning("request.malformed", api=route.name, version=version, error=str(exc))
            raise CloseConnection("malformed request") from None
        ctx = RequestContext(api_key, version, correlation_id, header["client_id"],
                             self.client_host, self.id, header, self.principal, self.listener_name,
                             self.node_id)
        if self.log_requests:
            self.log.debug("request", api=route.name, version=version, correlation_id=correlation_id,
                           client_id=header["client_id"])
        started = time.perf_counter()
        try:
            control = self.server.control
            if control is None or (rule := control.on_request(ctx, body)) is None:
                result = route.fn(ctx, body)
            elif rule.error is not None and api_key == headers.API_VERSIONS_KEY and rule.close is None:
                # as for UNSUPPORTED_VERSION: clients read an ApiVersions error answer as v0
                return self._api_versions_fallback(correlation_id, self.server.handlers.get(api_key).versions.hi,
                                                   rule.error)
            else:
                result = apply_fault(rule, route.api_key, route.fn, ctx, body, self.log, route.name,
                                     control.leader_endpoint)
            quotas = self.server.quotas
            if quotas is not None:
                result = quotas.throttle(self.mute, ctx, len(frame) + 4, result, started)
            if type(result) is not dict:
                if type(result) is Later:  # the coordinator answers later (a commit awaiting fsync)
                    return _Pending(result, route, version, correlation_id, started, body)
                if type(result) is not bytes and inspect.isawaitable(result):  # a coroutine needs a task
                    return _Pending(asyncio.ensure_future(result), route, version, correlation_id, started,
                                    body)
            return self._answer(result, route, version, correlation_id, started)
        except CloseConnection:
            raise
        except Exception:
            return self._refuse(route, version, correlation_id, body, started)

    # --- SASL (the sans-I/O ``security/authenticator.py`` decides; this sends) ------------------------

    def _sasl_process(self, frame: bytes) -> Any:
        """A SASL listener's frames: the exchange until authenticated, then ordinary requests.

        The authenticator says what each frame is for (``SaslAuthenticator.receive``);
        the connection decodes, encodes, logs and closes.
        """
        from .security import authenticator as authn  # noqa: PLC0415 - loaded by connection_made

        auth = self.sasl
        step = auth.receive(frame)
        action = step.action
        if action == authn.SERVE:
            return self._process(frame)
        if action == authn.DO_TOKEN:
            return self._sasl_raw_token(frame)
        if action == authn.DO_HANDSHAKE:
            if step.event is not None:
                self.log.info(step.event, principal=self.principal)
            return self._sasl_handshake(frame, step.version, step.correlation_id)
        if action == authn.DO_AUTHENTICATE:
            return self._sasl_authenticate(frame, step.version, step.correlation_id)
        if action == authn.SERVE_API_VERSIONS:
            out = self._process(frame)
            handler = self.server.handlers.get(step.api_key)
            auth.api_versions_served(handler is not None and step.version in handler.versions)
            return out
        if action == authn.REFUSE:
            self.log.warning(step.event, api_key=step.api_key, state=auth.state, expected="SaslAuthenticate")
            failure = auth.refused()
            raise FailAuthentication(failure.reason, self._illegal_state_answer(
                frame, step.api_key, step.version, step.correlation_id), delayed=failure.delayed)
        if step.expired:
            self.log.info(step.event, principal=self.principal, api_key=step.api_key)
            self.server.security_events["expired_connection_killed", self.listener_name, ""] += 1
        elif step.api_key is None:
            self.log.warning(step.event, state=auth.state, size=len(frame))
        else:
            self.log.warning(step.event, api_key=step.api_key, state=auth.state, note=step.note)
        raise CloseConnection(step.reason)

    def _sasl_decode(self, frame: bytes, api_key: int, version: int) -> tuple[Route, Any]:
        route = self.server.handlers.routes.get((api_key, version)) or self._route(api_key, version)
        if route is None:
            raise CloseConnection(f"unsupported version {version} of API {api_key}")
        try:
            _header, pos = route.read_header(frame, 0)
            body, _ = route.read_request(frame, pos)
        except (ProtocolError, ValueError, UnicodeDecodeError) as exc:
            self.log.warning("request.malformed", api=route.name, version=version, error=str(exc))
            raise CloseConnection("malformed request") from None
        return route, body

    def _sasl_handshake(self, frame: bytes, version: int, correlation_id: int) -> Any:
        from .security.authenticator import SASL_HANDSHAKE_KEY  # noqa: PLC0415 - loaded by connection_made

        route, body = self._sasl_decode(frame, SASL_HANDSHAKE_KEY, version)
        started = time.perf_counter()
        reply = self.sasl.handshake(body.mechanism, version)
        answer = self._answer(reply.answer, route, version, correlation_id, started)
        if reply.failure is None:
            self.log.info("sasl.handshake", mechanism=body.mechanism, version=version)
            return answer
        self.log.warning("sasl.unsupported_mechanism", mechanism=body.mechanism,
                         enabled=reply.answer["mechanisms"])
        raise FailAuthentication(reply.failure.reason, answer)

    def _sasl_authenticate(self, frame: bytes, version: int, correlation_id: int) -> Any:
        from .security.authenticator import SASL_AUTHENTICATE_KEY  # noqa: PLC0415 - loaded by connection_made

        route, body = self._sasl_decode(frame, SASL_AUTHENTICATE_KEY, version)
        started = time.perf_counter()
        reply = self.sasl.authenticate(bytes(body.auth_bytes))
        self._sasl_outcome(reply)
        answer = self._answer(reply.answer, route, version, correlation_id, started)
        if reply.failure is not None:
            raise FailAuthentication(reply.failure.reason, answer, message=reply.failure.message)
        return answer

    def _sasl_raw_token(self, frame: bytes) -> tuple[bytes, bytes]:
        """After a v0 SaslHandshake: tokens are bare size-prefixed frames each way; a failure just closes."""
        reply = self.sasl.token(bytes(frame))
        self._sasl_outcome(reply)
        if reply.failure is not None:
            raise FailAuthentication(reply.failure.reason, message=reply.failure.message)
        return _SIZE.pack(len(reply.answer)), reply.answer

    def _sasl_outcome(self, reply: authn.Reply) -> None:
        """Log and count a token's outcome; once authenticated, the connection serves as its principal."""
        sasl = self.sasl
        failure = reply.failure
        if failure is not None:
            if failure.bug:
                self.log.error("sasl.mechanism_failed", mechanism=sasl.mechanism, exc_info=failure.error)
            else:
                self.log.warning("sasl.authentication_failed", mechanism=sasl.mechanism, error=str(failure.error),
                                 detail=getattr(failure.error, "detail", None),
                                 reauthentication=sasl.reauthenticating)
            self.server.security_events["failed", self.listener_name, sasl.mechanism or ""] += 1
            return
        if reply.lifetime_ms is None:
            return
        self.principal = sasl.principal
        self.frame_limit = self.server.max_request_bytes
        if sasl.expires_at is None:  # no session end: nothing more to watch, requests go straight in
            self.process = self._process
        self.log.info("sasl.authenticated", principal=sasl.principal, mechanism=sasl.mechanism,
                      session_lifetime_ms=reply.lifetime_ms)
        self.server.security_events["succeeded", self.listener_name, sasl.mechanism] += 1

    def _illegal_state_answer(self, frame: bytes, api_key: int, version: int, correlation_id: int) -> Any:
        """That request's own error answer with ILLEGAL_SASL_STATE (None: close unanswered)."""
        try:
            route, body = self._sasl_decode(frame, api_key, version)
            answer = error_answer(api_key, version, body, ErrorCode.ILLEGAL_SASL_STATE)
            if answer is None:
                return None
            return self._answer(answer, route, version, correlation_id, time.perf_counter())
        except CloseConnection:
            return None

    def _fail_authentication(self, exc: FailAuthentication, answers: list[bytes]) -> None:
        """Send what was answered before, then -- after ``connection.failed.authentication.delay.ms``
        for a failed authentication -- the failure's answer, and close."""
        self._send_now(answers)
        self.close_reason = str(exc)
        if not self.transport.is_closing():
            self.transport.pause_reading()
        delay = self.sasl.listener.failed_delay_ms / 1000 if exc.delayed and self.sasl is not None else 0

        def finish() -> None:
            if exc.answer is not None and not self.transport.is_closing():
                self.transport.writelines(exc.answer)
            self.transport.close()

        if delay > 0:
            asyncio.get_running_loop().call_later(delay, finish)
        else:
            finish()

    def _route(self, api_key: int, version: int) -> Route | None:
        """The route for a request kind seen for the first time (None: ApiVersions fallback)."""
        spec = APIS.get(api_key)
        handler = self.server.handlers.get(api_key)
        if handler is None or spec is None:
            self.log.warning("request.refused", reason="unknown api key", api_key=api_key,
                             version=version)
            raise CloseConnection(f"unknown api key {api_key}")
        if version not in handler.versions:
            if api_key == headers.API_VERSIONS_KEY:
                return None
            self.log.warning("request.refused", reason="unsupported version", api=spec.name,
                             version=version)
            raise CloseConnection(f"unsupported version {spec.name} v{version}")
        flexible = spec.is_flexible(version)
        route = Route(api_key, spec.name, handler.fn,
                      headers.REQUEST_HEADER.codec(headers.request_header_version(flexible))[0],
                      spec.request.codec(version)[0], spec.response.codec(version)[1],
                      headers.response_header_version(api_key, flexible))
        self.server.handlers.routes[(api_key, version)] = route
        return route

    def _answer(self, result, route: Route, version: int, correlation_id: int, started: float):
        """The encoded answer (or NO_RESPONSE), counted in the request metrics; a handler's
        ``bytes`` are the body already encoded (``dispatch.HandlerFn``)."""
        if result is NO_RESPONSE:
            out = NO_RESPONSE
        else:
            body = result if type(result) is bytes else route.build_response(result)
            out = headers.encode_response_parts(correlation_id, route.response_header_version, body)
            control = self.server.control
            if control is not None:  # capturing: the answer joins its request
                control.on_answer(self.id, correlation_id, body)
        metrics = self.server.metrics
        if metrics is not None:
            metrics.observe(route.api_key, version, time.perf_counter() - started)
        return out

    def _refuse(self, route: Route, version: int, correlation_id: int, request: Any, started: float):
        """Kafka's error answer for a request whose handler failed or whose answer cannot be encoded.

        The one guard for every API (``KafkaApis.handleError``): the client
        gets UNKNOWN_SERVER_ERROR where the request's answer carries error
        codes, the connection stays, and the traceback is logged as the bug
        it is.  Only when there is no such answer (acks=0 Produce) or it
        cannot be built either is the connection closed.
        """
        self.log.exception("request.handler_failed", api=route.name, version=version)
        try:
            body = error_answer(route.api_key, version, request)
            if body is not None:
                return self._answer(body, route, version, correlation_id, started)
        except Exception:
            self.log.exception("request.error_answer_failed", api=route.name, version=version)
        raise CloseConnection("handler failed")

    def _api_versions_fallback(self, correlation_id: int, max_version: int,
                               code: int = ErrorCode.UNSUPPORTED_VERSION) -> tuple[bytes, bytes]:
        """An unsupported ApiVersions version gets a v0 body and v0 header naming our range."""
        self.log.info("request.api_versions_fallback", correlation_id=correlation_id)
        body = APIS[headers.API_VERSIONS_KEY].response.build({
            "error_code": code,
            "api_keys": [{"api_key": headers.API_VERSIONS_KEY, "min_version": 0,
                          "max_version": max_version}],
        }, 0)
        return headers.encode_response_parts(correlation_id, 0, body)
