"""``dataclass``: the standard library's decorator, without compiling each class's methods anew.

Why: ``odradek serve`` creates about a hundred dataclasses while it imports, and Python 3.11's
``dataclasses`` compiles every generated method of every class from its own source text (an
``exec`` per method, 70 % of the ~500 µs a frozen, slotted class costs) — about a third of the CPU
a broker spent importing itself (docs/BENCHMARKS.md, issue 30).  Most of those sources differ only
in the fields' names: ``hash((self.a,self.b,))`` and ``hash((self.x,self.y,))`` compile to the same
bytecode but for two names.

So this decorator runs the standard library's own class processing — a copy of
``dataclasses._process_class`` bound to a copy of the module's namespace, so fields,
``__dataclass_fields__``, ``__dataclass_params__``, defaults, ``default_factory``, ``kw_only``, slots,
the generated docstring, ``__match_args__`` and every error are the standard library's — with two
differences on the way to each generated method:

- the method's source is generated for placeholder names in place of the fields' names (the
  standard library's text generators, given copies of the ``Field`` objects renamed);
- that source is compiled once per shape (``_TEMPLATES``; kept between processes beside this
  module's bytecode, ``_Store``: one process meets few shapes twice), and each class gets the
  compiled code with the placeholders renamed back (``CodeType.replace``): the instructions the
  standard library compiles from its own text (closure cells may sit in another order, as the
  compiler orders them by name), so the methods behave and run as its.

Where a field's name could change what the source means (it equals another identifier of the
source: a field named ``name`` in ``__setattr__(self,name,value)``), that method is compiled from the
real text as the standard library does.  On a Python without the 3.11/3.12 internals this relies on,
``dataclass`` is the standard library's decorator itself.
"""

import atexit
import contextlib
import dataclasses
import importlib.util
import marshal
import os
import re
import sys
import threading
import types
from collections.abc import Callable
from typing import Any, NamedTuple

_std = dataclasses
# the internals this module hooks; the same names and roles in CPython 3.11 and 3.12
_HOOKED = ("_process_class", "_create_fn", "_init_fn", "_repr_fn", "_frozen_get_del_attr", "_cmp_fn",
           "_hash_fn", "_hash_add", "_hash_action", "_tuple_str", "Field")
SUPPORTED = sys.version_info[:2] in ((3, 11), (3, 12)) and all(hasattr(_std, n) for n in _HOOKED)

_PLACEHOLDER = "__lean_dc_f{}__"
_MARK = "__lean_dc_f"
_PLACEHOLDER_RE = re.compile(r"__lean_dc_f\d+__")
_IDENTIFIER_RE = re.compile(r"[A-Za-z_]\w*")


class _Template(NamedTuple):
    """A generated method's source, compiled once for every class of its shape."""

    code: types.CodeType  # of the __create_fn__ wrapper
    placeholders: tuple[str, ...]  # those in the source
    identifiers: tuple[str, ...]  # the source's other identifiers (string contents included); a tuple: ~20, smaller than a set


_TEMPLATES: dict[str, _Template] = {}  # by source text
_current = threading.local()  # .names: the _Names of the class being processed on this thread


class _Names:
    """One class's placeholders: field name <-> placeholder, and renamed copies of its ``Field``s."""

    def __init__(self) -> None:
        self.placeholder: dict[str, str] = {}
        self.real: dict[str, str] = {}
        self._copies: dict[int, Any] = {}

    def field(self, f: Any) -> Any:
        """A copy of ``f`` named by its placeholder (the same copy for the same field)."""
        copy = self._copies.get(id(f))
        if copy is None:
            placeholder = self.placeholder.get(f.name)
            if placeholder is None:
                placeholder = self.placeholder[f.name] = _PLACEHOLDER.format(len(self.placeholder))
                self.real[placeholder] = sys.intern(f.name)
            copy = object.__new__(_std.Field)
            for slot in _std.Field.__slots__:
                object.__setattr__(copy, slot, getattr(f, slot))
            copy.name = placeholder
            self._copies[id(f)] = (copy, f)  # the original kept alive so its id stays its own
            return copy
        return copy[0]

    def fields(self, fields: Any) -> list[Any]:
        return [self.field(f) for f in fields]

    def substitute(self, text: str) -> str:
        """``text`` with this class's field names for the placeholders in it."""
        real = self.real.get(text)
        if real is not None:
            return real
        if _MARK not in text:
            return text
        return sys.intern(self.substitute_all(text))

    def substitute_all(self, text: str) -> str:
        return _PLACEHOLDER_RE.sub(lambda m: self.real[m.group()], text)


def _names() -> "_Names":
    return _current.names


def _rename(code: types.CodeType, sub: Callable[[str], str], depth: int) -> types.CodeType:
    """``code`` with this class's field names for the placeholders: in strings at every depth; in
    names (attributes, parameters, closure cells) only in the method inside the ``__create_fn__``
    wrapper (depth 2; the wrapper is depth 1), whose parameters keep their placeholder names as
    ``_create_fn`` calls it with the placeholder-named locals it was given."""
    consts = tuple(_rename_const(c, sub, depth + 1) for c in code.co_consts)
    if depth < 2:
        return code.replace(co_consts=consts)
    return code.replace(co_consts=consts, co_names=tuple(map(sub, code.co_names)),
                        co_varnames=tuple(map(sub, code.co_varnames)),
                        co_freevars=tuple(map(sub, code.co_freevars)),
                        co_cellvars=tuple(map(sub, code.co_cellvars)))


def _rename_const(value: Any, sub: Callable[[str], str], depth: int) -> Any:
    kind = type(value)
    if kind is str:
        return sub(value)
    if kind is tuple or kind is frozenset:  # ``name in ('a','b',)``: a tuple (3.11), a frozenset (3.12)
        return kind(_rename_const(v, sub, depth) for v in value)
    if kind is types.CodeType:
        return _rename(value, sub, depth)
    return value


def _template(text: str) -> _Template:
    """The ``__create_fn__`` function ``text`` defines, compiled: from the store, else compiled now
    (and kept for the store)."""
    raw = _STORED.pop(text, None)
    if raw is not None:
        with contextlib.suppress(EOFError, ValueError, TypeError):
            outer, placeholders, identifiers = marshal.loads(raw)
            if isinstance(outer, types.CodeType):
                return _Template(outer, tuple(placeholders), tuple(identifiers))
    # dont_inherit: compiled as dataclasses' own exec compiles it (no __future__ of this module)
    module = compile(text, "<string>", "exec", dont_inherit=True)
    outer = next(c for c in module.co_consts if isinstance(c, types.CodeType))
    placeholders = tuple(sorted(set(_PLACEHOLDER_RE.findall(text))))
    identifiers = tuple(sorted(set(_IDENTIFIER_RE.findall(_PLACEHOLDER_RE.sub(" ", text)))))
    _NEW[text] = marshal.dumps((outer, placeholders, identifiers))
    return _Template(outer, placeholders, identifiers)


def _exec(text: str, globals: dict, ns: dict) -> None:
    """``exec`` as ``_create_fn`` calls it, for a source naming fields by placeholder: compiled once
    per source, renamed to this class's fields (``ns["__create_fn__"]`` defined as ``exec`` would)."""
    names = _names()
    template = _TEMPLATES.get(text)
    if template is None:
        template = _TEMPLATES[text] = _template(text)
    if any(names.real[p] in template.identifiers for p in template.placeholders):
        # a field's name is also another identifier of the source: renaming the compiled code
        # could differ from compiling the real text, so compile the real text (kept in the store too)
        real_text = names.substitute_all(text)
        outer = _TEMPLATES.get(real_text)
        if outer is None:
            outer = _TEMPLATES[real_text] = _template(real_text)
        real = types.FunctionType(outer.code, globals)
        ns["__create_fn__"] = lambda **kw: real(**{names.substitute(k): v for k, v in kw.items()})
        return
    ns["__create_fn__"] = types.FunctionType(_rename(template.code, names.substitute, 1), globals)


class _Store:
    """The compiled templates kept between processes, as Python keeps modules' bytecode.

    Read when this module is imported (a missing or unreadable file is an empty store; each entry
    is unmarshalled when a class first needs it), written at exit when this process compiled a
    template the file lacked — beside this module's own cached bytecode
    (``importlib.util.cache_from_source``: ``__pycache__`` or ``sys.pycache_prefix``), one file per
    Python (``cache_tag``) and checked against its bytecode's magic number as a ``.pyc`` is, and not
    when Python writes no bytecode (``sys.dont_write_bytecode``, ``PYTHONDONTWRITEBYTECODE``).  An
    entry is only ever code compiled from its key's text, so a stale one is merely unused.
    """

    LIMIT = 4096  # entries kept; past it the store starts afresh (edits leave unused shapes behind)

    def __init__(self) -> None:
        try:
            self.path: str | None = importlib.util.cache_from_source(__file__).replace(".pyc", ".templates")
        except (NotImplementedError, ValueError):  # no cache_tag, or a __file__ it cannot place
            self.path = None

    def load(self) -> dict[str, bytes]:
        """Source text -> marshalled (``__create_fn__`` code, placeholders, other identifiers)."""
        if self.path is None:
            return {}
        try:
            with open(self.path, "rb") as f:
                magic, stored = marshal.load(f)
        except (OSError, EOFError, ValueError, TypeError):
            return {}
        # bytecode of another interpreter release (its magic number, as a .pyc's header) is not run
        if magic != importlib.util.MAGIC_NUMBER or not isinstance(stored, dict) or len(stored) > self.LIMIT:
            return {}
        return {k: v for k, v in stored.items() if isinstance(k, str) and isinstance(v, bytes)}

    def save(self) -> None:
        if not _NEW or self.path is None or sys.dont_write_bytecode:
            return
        new = dict(_NEW)
        stored = {**self.load(), **new}
        if len(stored) > self.LIMIT:
            stored = new
        temporary = f"{self.path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(temporary, "wb") as f:
                marshal.dump((importlib.util.MAGIC_NUMBER, stored), f)
            os.replace(temporary, self.path)  # readers see the old file or the new, never half
        except OSError:  # a read-only install: compile again next time
            with contextlib.suppress(OSError):
                os.unlink(temporary)


_STORE = _Store()
_STORED: dict[str, bytes] = _STORE.load()  # by source text; each entry leaves once used
_NEW: dict[str, bytes] = {}  # compiled by this process, for the store


def _bind(function: Any, namespace: dict) -> types.FunctionType:
    """A copy of one of dataclasses' functions that looks up its globals in ``namespace``."""
    copy = types.FunctionType(function.__code__, namespace, function.__name__, function.__defaults__,
                              function.__closure__)
    copy.__kwdefaults__ = function.__kwdefaults__
    return copy


def _build_namespace() -> dict:
    """dataclasses' namespace with the text generators fed placeholder fields and ``exec`` cached."""
    ns = dict(vars(_std))
    for name in ("_process_class", "_init_fn", "_repr_fn", "_frozen_get_del_attr", "_cmp_fn", "_hash_fn",
                 "_hash_add"):
        ns[name] = _bind(getattr(_std, name), ns)
    ns["_create_fn"] = _bind(_std._create_fn, dict(vars(_std), exec=_exec))
    init_fn, repr_fn, frozen_fns = ns["_init_fn"], ns["_repr_fn"], ns["_frozen_get_del_attr"]

    def _init(fields, std_fields, kw_only_fields, *args):  # type: ignore[no-untyped-def]
        n = _names()
        try:
            return init_fn(n.fields(fields), n.fields(std_fields), n.fields(kw_only_fields), *args)
        except TypeError as e:  # "non-default argument 'b' follows default argument": its real name
            raise TypeError(n.substitute_all(str(e))) from None

    ns["_init_fn"] = _init
    ns["_repr_fn"] = lambda fields, globals: repr_fn(_names().fields(fields), globals)
    ns["_frozen_get_del_attr"] = lambda cls, fields, globals: frozen_fns(cls, _names().fields(fields), globals)
    ns["_tuple_str"] = lambda obj_name, fields: _std._tuple_str(obj_name, _names().fields(fields))
    ns["_hash_action"] = {key: ns["_hash_add"] if action is _std._hash_add else action
                          for key, action in _std._hash_action.items()}
    return ns


if SUPPORTED:
    _process_class = _build_namespace()["_process_class"]
    atexit.register(_STORE.save)

    def _process(cls: type, *args: Any) -> type:
        saved = getattr(_current, "names", None)
        _current.names = _Names()
        try:
            return _process_class(cls, *args)
        finally:
            _current.names = saved

    def dataclass(cls: type | None = None, /, *, init: bool = True, repr: bool = True, eq: bool = True,
                  order: bool = False, unsafe_hash: bool = False, frozen: bool = False,
                  match_args: bool = True, kw_only: bool = False, slots: bool = False,
                  weakref_slot: bool = False) -> Any:
        """``dataclasses.dataclass``, its arguments and result; see the module's docstring."""
        def wrap(cls: type) -> type:
            return _process(cls, init, repr, eq, order, unsafe_hash, frozen, match_args, kw_only, slots,
                            weakref_slot)
        return wrap if cls is None else wrap(cls)
else:  # pragma: no cover - other Pythons
    dataclass = dataclasses.dataclass  # type: ignore[assignment]
