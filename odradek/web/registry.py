"""The schema registry's REST API (Confluent's), routes over ``broker.schema_registry.SchemaStore``.

A route parses the path, the query and the body, calls one of the registry's operations
(``registry.operations``) through the store, and renders JSON in Confluent's content type;
a ``RegistryError`` becomes Confluent's error body (``{"error_code": ..., "message": ...}``),
anything unexpected a logged 500 with code 50001, never a traceback.  Paths, parameters and
answers follow Confluent's ``*Resource`` classes; boolean parameters are read as Java's
``Boolean.valueOf`` (the Python client writes ``True``/``False``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any

import structlog
from aiohttp import web

from ..broker.schema_registry import SchemaStore
from ..registry import errors
from ..registry.errors import RegistryError
from ..registry.operations import Registry, SchemaRequest, check_subject, flag, parse_version
from ..registry.schemas import TYPES
from .http import basic_auth

log = structlog.get_logger("odradek.registry")

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
MAX_BODY = 16 << 20  # a schema beyond the topic's max.message.bytes is refused later, with 42209
BY_ID_CACHE = 10_000  # rendered GET /schemas/ids/{id} bodies kept
VERSION = "7.6.0"  # the Confluent Platform release whose API and answers are served


def _json(payload: Any, status: int = 200) -> web.Response:
    return web.Response(body=json.dumps(payload, ensure_ascii=False).encode("utf-8"), status=status,
                        content_type=CONTENT_TYPE)


def _error(exc: RegistryError) -> web.Response:
    return _json(exc.body(), exc.status)


@web.middleware
async def _errors(request: web.Request, handler) -> web.StreamResponse:
    """Every failure in Confluent's error body."""
    try:
        return await handler(request)
    except RegistryError as exc:
        return _error(exc)
    except web.HTTPRequestEntityTooLarge:
        return _error(errors.schema_too_large())
    except web.HTTPException as exc:  # no such route (404), method (405)
        if exc.status < 400:
            raise
        return _json({"error_code": exc.status, "message": f"HTTP {exc.status} {exc.reason}"}, exc.status)
    except Exception:
        log.exception("registry.request_failed", method=request.method, path=request.path)
        return _error(errors.store_error("Internal Server Error"))


HEAVY_BODY = 64 << 10  # a schema this big is parsed in a worker thread, off the loop


async def _body(request: web.Request) -> Any:
    raw = await request.read()
    try:
        return await asyncio.to_thread(json.loads, raw) if len(raw) > HEAVY_BODY else json.loads(raw or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        raise errors.bad_request(f"Unexpected character in the request body: {exc}") from None
    except RecursionError:
        raise errors.bad_request("The request body nests too deeply") from None


def _heavy(request: web.Request) -> bool:
    return (request.content_length or 0) > HEAVY_BODY


def _int(text: str, error: Callable[[], RegistryError]) -> int:
    try:
        return int(text)
    except ValueError:
        raise error() from None


def _page(items: list, query: Mapping[str, str]) -> list:
    """``offset`` and ``limit`` (a limit <= 0 is no limit), as Confluent's ``normalizeLimit``."""
    offset = max(0, _int(query.get("offset", "0") or "0", lambda: errors.bad_request("offset must be a number")))
    limit = _int(query.get("limit", "-1") or "-1", lambda: errors.bad_request("limit must be a number"))
    return items[offset:] if limit <= 0 else items[offset:offset + limit]


class RegistryRoutes:
    """The routes, bound to a store and the cluster's id."""

    def __init__(self, store: SchemaStore, cluster_id: str):
        self.store = store
        self.cluster_id = cluster_id
        self._by_id: dict[tuple, bytes] = {}  # GET /schemas/ids/{id}'s bodies, while the state is unchanged
        self._cached_at = -1  # the state's ``applied`` count they were rendered at

    def application(self, users: Mapping[str, str] | None = None) -> web.Application:
        middlewares = [_errors]
        if users:
            middlewares.append(basic_auth(users, "SchemaRegistry", lambda: _json(
                {"error_code": 401, "message": "Unauthorized"}, 401)))
        app = web.Application(client_max_size=MAX_BODY, middlewares=middlewares)
        r = app.router
        r.add_get("/", self.root)
        r.add_get("/schemas/types", self.types)
        r.add_get("/schemas", self.schemas)
        r.add_get("/schemas/ids/{id}", self.schema_by_id)
        r.add_get("/schemas/ids/{id}/schema", self.raw_schema_by_id)
        r.add_get("/schemas/ids/{id}/subjects", self.subjects_by_id)
        r.add_get("/schemas/ids/{id}/versions", self.versions_by_id)
        r.add_get("/schemas/guids/{guid}", self.schema_by_guid)
        r.add_get("/subjects", self.subjects)
        r.add_get("/subjects/{subject}/metadata", self.latest_with_metadata)
        r.add_post("/subjects/{subject}", self.lookup)
        r.add_delete("/subjects/{subject}", self.delete_subject)
        r.add_get("/subjects/{subject}/versions", self.versions)
        r.add_post("/subjects/{subject}/versions", self.register)
        r.add_get("/subjects/{subject}/versions/{version}", self.get_version)
        r.add_delete("/subjects/{subject}/versions/{version}", self.delete_version)
        r.add_get("/subjects/{subject}/versions/{version}/schema", self.raw_version)
        r.add_get("/subjects/{subject}/versions/{version}/referencedby", self.referenced_by)
        r.add_post("/compatibility/subjects/{subject}/versions", self.compatibility)
        r.add_post("/compatibility/subjects/{subject}/versions/{version}", self.compatibility)
        for path in ("/config", "/config/{subject}"):
            r.add_get(path, self.get_config)
            r.add_put(path, self.set_config)
            r.add_delete(path, self.delete_config)
        for path in ("/mode", "/mode/{subject}"):
            r.add_get(path, self.get_mode)
            r.add_put(path, self.set_mode)
            r.add_delete(path, self.delete_mode)
        r.add_get("/contexts", self.contexts)
        r.add_get("/v1/metadata/id", self.metadata_id)
        r.add_get("/v1/metadata/version", self.metadata_version)
        return app

    async def _read(self, fn: Callable[[Registry], Any], heavy: bool = False) -> web.Response:
        return _json(await self.store.read(fn, heavy))

    async def _write(self, fn, heavy: bool = False) -> web.Response:
        return _json(await self.store.write(fn, heavy))

    # --- root, schemas by id ------------------------------------------------------------------------

    async def root(self, request: web.Request) -> web.Response:
        return _json({})

    async def types(self, request: web.Request) -> web.Response:
        return _json(list(TYPES))

    @staticmethod
    def _id(request: web.Request) -> int:
        text = request.match_info["id"]
        return _int(text, lambda: errors.schema_not_found(text))

    async def schema_by_id(self, request: web.Request) -> web.Response:
        """The deserializers' one call per id: answered from a cache of rendered bodies, which
        any change of the state empties."""
        q = request.query
        fetch_max_id = flag(q, "fetchMaxId")
        key = (request.match_info["id"], q.get("subject"), q.get("format"), fetch_max_id)
        applied = self.store.state.applied
        if self._cached_at != applied:
            self._by_id.clear()
            self._cached_at = applied
        body = self._by_id.get(key)
        if body is None:
            answer = await self.store.read(lambda r: r.schema_by_id(self._id(request), q.get("subject"),
                                                                     q.get("format")))
            if fetch_max_id:  # the Java client's id cache asks for the highest id too
                answer["maxId"] = self.store.state.max_id
            body = json.dumps(answer, ensure_ascii=False).encode("utf-8")
            if self.store.state.applied == applied and len(self._by_id) < BY_ID_CACHE:
                self._by_id[key] = body
        return web.Response(body=body, content_type=CONTENT_TYPE)

    async def raw_schema_by_id(self, request: web.Request) -> web.Response:
        q = request.query
        return await self._read(lambda r: r.schema_by_id(self._id(request), q.get("subject"),
                                                          q.get("format"))["schema"])

    async def schema_by_guid(self, request: web.Request) -> web.Response:
        guid, fmt = request.match_info["guid"], request.query.get("format")
        return await self._read(lambda r: r.schema_by_guid(guid, fmt))

    async def latest_with_metadata(self, request: web.Request) -> web.Response:
        """``?key=k1&value=v1&key=k2&value=v2``: the keys and values pair up in order."""
        q, subject = request.query, self._subject(request)
        keys, values = q.getall("key", []), q.getall("value", [])
        if len(keys) != len(values):
            raise errors.bad_request("each key needs a value")
        wanted = dict(zip(keys, values, strict=True))
        return await self._read(lambda r: r.latest_with_metadata(subject, wanted, flag(q, "deleted"), q.get("format")))

    async def subjects_by_id(self, request: web.Request) -> web.Response:
        q = request.query
        return await self._read(lambda r: _page(sorted({s for s, _v in r.subjects_of(
            self._id(request), q.get("subject"), flag(q, "deleted"))}), q))

    async def versions_by_id(self, request: web.Request) -> web.Response:
        q = request.query
        return await self._read(lambda r: _page([{"subject": s, "version": v} for s, v in r.subjects_of(
            self._id(request), q.get("subject"), flag(q, "deleted"))], q))

    async def schemas(self, request: web.Request) -> web.Response:
        """``GET /schemas``: every version's schema (``subjectPrefix``, ``deleted``, ``latestOnly``)."""
        q = request.query
        prefix, deleted, latest = q.get("subjectPrefix", ""), flag(q, "deleted"), flag(q, "latestOnly")

        def listing(r: Registry) -> list:
            found = []
            for subject in r.state.subject_names(deleted=True):
                if subject.startswith(prefix):
                    versions = r.state.versions(subject, deleted=deleted)
                    found += [r.render(sv) for sv in (versions[-1:] if latest else versions)]
            return _page(found, q)

        return await self._read(listing)

    # --- subjects ------------------------------------------------------------------------------------

    @staticmethod
    def _subject(request: web.Request) -> str:
        return request.match_info["subject"]

    @staticmethod
    def _version(request: web.Request) -> int:
        return parse_version(request.match_info["version"])

    async def subjects(self, request: web.Request) -> web.Response:
        q = request.query
        prefix = q.get("subjectPrefix", "")
        deleted_only = flag(q, "deletedOnly", "deleted_only")

        def listing(r: Registry) -> list:
            names = r.state.subject_names(deleted=deleted_only or flag(q, "deleted"))
            if deleted_only:
                live = set(r.state.subject_names())
                names = [n for n in names if n not in live]
            return _page([n for n in names if n.startswith(prefix)], q)

        return await self._read(listing)

    async def lookup(self, request: web.Request) -> web.Response:
        q, subject = request.query, self._subject(request)
        schema = SchemaRequest.from_body(await _body(request))
        return await self._read(lambda r: r.lookup(subject, schema, flag(q, "normalize"), flag(q, "deleted")),
                                _heavy(request))

    async def delete_subject(self, request: web.Request) -> web.Response:
        subject, permanent = self._subject(request), flag(request.query, "permanent")
        return await self._write(lambda r: r.delete_subject(subject, permanent))

    async def versions(self, request: web.Request) -> web.Response:
        q, subject = request.query, self._subject(request)
        deleted_only = flag(q, "deletedOnly", "deleted_only")

        def listing(r: Registry) -> list:
            every = r.state.versions(subject, deleted=True)
            if not every or not deleted_only and not flag(q, "deleted") and all(sv.deleted for sv in every):
                raise errors.subject_not_found(subject)
            chosen = [sv for sv in every if sv.deleted] if deleted_only else \
                r.state.versions(subject, deleted=flag(q, "deleted"))
            negative = flag(q, "deletedAsNegative")
            return _page([-sv.version if negative and sv.deleted else sv.version for sv in chosen], q)

        return await self._read(listing)

    async def register(self, request: web.Request) -> web.Response:
        q, subject = request.query, self._subject(request)
        schema = SchemaRequest.from_body(await _body(request))
        return await self._write(lambda r: r.register(subject, schema, normalize=flag(q, "normalize"),
                                                      force=flag(q, "force")), _heavy(request))

    async def get_version(self, request: web.Request) -> web.Response:
        q, subject, version = request.query, self._subject(request), self._version(request)
        return await self._read(lambda r: r.render(r.version(subject, version, flag(q, "deleted")), q.get("format")))

    async def raw_version(self, request: web.Request) -> web.Response:
        q, subject, version = request.query, self._subject(request), self._version(request)
        return await self._read(lambda r: r.render(r.version(subject, version, flag(q, "deleted")),
                                                   q.get("format"))["schema"])

    async def referenced_by(self, request: web.Request) -> web.Response:
        q, subject, version = request.query, self._subject(request), self._version(request)

        def referrers(r: Registry) -> list[int]:
            sv = r.version(subject, version, deleted=True)
            return _page(r.state.referrers(sv.subject, sv.version, flag(q, "deleted")), q)

        return await self._read(referrers)

    async def delete_version(self, request: web.Request) -> web.Response:
        subject, version, permanent = self._subject(request), self._version(request), flag(request.query, "permanent")
        return await self._write(lambda r: r.delete_version(subject, version, permanent))

    async def compatibility(self, request: web.Request) -> web.Response:
        q, subject = request.query, self._subject(request)
        version = self._version(request) if "version" in request.match_info else None
        schema = SchemaRequest.from_body(await _body(request))
        return await self._read(lambda r: r.test_compatibility(subject, version, schema,
                                                               normalize=flag(q, "normalize"),
                                                               verbose=flag(q, "verbose")), _heavy(request))

    # --- config and mode -----------------------------------------------------------------------------

    async def get_config(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        return await self._read(lambda r: r.get_config(subject, flag(request.query, "defaultToGlobal")))

    async def set_config(self, request: web.Request) -> web.Response:
        subject, body = request.match_info.get("subject"), await _body(request)
        return await self._write(lambda r: r.set_config(subject, body))

    async def delete_config(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        return await self._write(lambda r: r.delete_config(subject))

    async def get_mode(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        return await self._read(lambda r: r.get_mode(subject, flag(request.query, "defaultToGlobal")))

    async def set_mode(self, request: web.Request) -> web.Response:
        subject, body = request.match_info.get("subject"), await _body(request)
        if subject is not None:
            check_subject(subject)
        return await self._write(lambda r: r.set_mode(subject, body, flag(request.query, "force")))

    async def delete_mode(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        return await self._write(lambda r: r.delete_mode(subject))

    # --- contexts and server metadata ----------------------------------------------------------------

    async def contexts(self, request: web.Request) -> web.Response:
        return _json(_page(["."], request.query))

    async def metadata_id(self, request: web.Request) -> web.Response:
        """Confluent's ``ServerClusterId``: the Kafka cluster this registry keeps its state in."""
        return _json({"scope": {"path": [], "clusters": {"kafka-cluster": self.cluster_id,
                                                         "schema-registry-cluster": "schema-registry"}},
                      "id": self.cluster_id})

    async def metadata_version(self, request: web.Request) -> web.Response:
        return _json({"version": VERSION, "commitId": "odradek"})
