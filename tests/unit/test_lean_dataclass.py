"""``odradek.protocol.lean_dataclass.dataclass`` makes the classes the standard library's decorator makes.

Every class of ours made with it is compared, in a fresh interpreter, with the class the standard
library makes from the same definition: fields, parameters, docstring, slots and each generated
method's instructions, defaults, annotations and closure.  Synthetic classes cover the features (frozen,
slots, ``kw_only``, ``default_factory``, ``field()`` options, ``__post_init__`` and ``InitVar``,
inheritance, field names that are also names in the generated sources) by behaviour, and the store
of compiled templates is read, written and ignored as Python's bytecode cache is.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import inspect
import json
import marshal
import pickle
import subprocess
import sys
import textwrap
from dataclasses import InitVar, field
from pathlib import Path
from typing import ClassVar

import pytest

import odradek
from odradek.protocol import lean_dataclass
from odradek.protocol.lean_dataclass import dataclass

ROOT = Path(odradek.__file__).parent
METHODS = ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__", "__lt__", "__le__",
           "__gt__", "__ge__", "__getstate__", "__setstate__")

pytestmark = pytest.mark.skipif(not lean_dataclass.SUPPORTED, reason="the standard library's decorator is used")


# the check run in a fresh interpreter: every class made by lean_dataclass, made again by the
# standard library from a copy of its definition taken before processing, then compared
CHECK = textwrap.dedent('''
    import dataclasses, dis, importlib, inspect, json, sys
    from odradek.protocol import lean_dataclass

    METHODS = %(methods)r
    compared, problems = [], []
    process = lean_dataclass._process

    def code_of(fn):
        fn = getattr(fn, "__wrapped__", fn)  # __repr__ behind reprlib's recursion guard
        return fn

    def instructions(code):
        # by name, not index: the compiler orders closure cells by name, so renamed cells may sit
        # in another order than the real names' compile puts them, with the same meaning
        return [(i.opname, i.argval) for i in dis.get_instructions(code)]

    def same_code(a, b, where):
        for attr in ("co_names", "co_varnames", "co_consts", "co_argcount", "co_kwonlyargcount", "co_flags",
                     "co_name", "co_filename"):
            if getattr(a, attr) != getattr(b, attr):
                problems.append(f"{where}: {attr} {getattr(a, attr)!r} != {getattr(b, attr)!r}")
        if sorted(a.co_freevars) != sorted(b.co_freevars) or instructions(a) != instructions(b):
            problems.append(f"{where}: instructions")

    def compare(ours, theirs, original, twin):
        where = f"{ours.__module__}.{ours.__qualname__}"
        compared.append(where)
        for fo, ft in zip(dataclasses.fields(ours), dataclasses.fields(theirs), strict=True):
            for slot in dataclasses.Field.__slots__:
                if getattr(fo, slot) != getattr(ft, slot):
                    problems.append(f"{where}.{fo.name}: Field.{slot}")
        if len(dataclasses.fields(ours)) != len(dataclasses.fields(theirs)):
            problems.append(f"{where}: fields")
        if repr(ours.__dataclass_params__) != repr(theirs.__dataclass_params__):
            problems.append(f"{where}: params")
        for attr in ("__doc__", "__slots__", "__match_args__", "__qualname__", "__module__"):
            if ours.__dict__.get(attr) != theirs.__dict__.get(attr):
                problems.append(f"{where}: {attr}")
        if set(ours.__dict__) != set(theirs.__dict__):
            problems.append(f"{where}: attributes {set(ours.__dict__) ^ set(theirs.__dict__)}")
        if str(inspect.signature(ours)) != str(inspect.signature(theirs)):
            problems.append(f"{where}: signature")
        for name in METHODS:
            a, b = ours.__dict__.get(name), theirs.__dict__.get(name)
            if (a is None) != (b is None) or (a is None and name in ours.__dict__) != (b is None and name in theirs.__dict__):
                problems.append(f"{where}.{name}: present in one only")
                continue
            if a is None or not hasattr(code_of(a), "__code__"):
                if a is not b and not (a is None and b is None):
                    problems.append(f"{where}.{name}: {a!r} != {b!r}")
                continue
            fa, fb = code_of(a), code_of(b)
            same_code(fa.__code__, fb.__code__, f"{where}.{name}")
            for attr in ("__defaults__", "__kwdefaults__", "__annotations__", "__qualname__", "__name__",
                         "__module__"):
                if getattr(fa, attr) != getattr(fb, attr):
                    problems.append(f"{where}.{name}: {attr} {getattr(fa, attr)!r} != {getattr(fb, attr)!r}")
            if fa.__globals__ is not fb.__globals__:
                problems.append(f"{where}.{name}: __globals__")
            cells_a = dict(zip(fa.__code__.co_freevars, [c.cell_contents for c in fa.__closure__ or ()], strict=True))
            cells_b = dict(zip(fb.__code__.co_freevars, [c.cell_contents for c in fb.__closure__ or ()], strict=True))
            for cell, x in cells_a.items():
                y = cells_b.get(cell)
                if not (x is y or (x is original and y is twin)):
                    problems.append(f"{where}.{name}: closure {cell} {x!r} != {y!r}")

    def checked(cls, *args):
        namespace = {k: v for k, v in cls.__dict__.items() if k not in ("__dict__", "__weakref__")}
        twin = type(cls)(cls.__name__, cls.__bases__, namespace)
        twin.__qualname__ = cls.__qualname__
        original = cls
        ours = process(cls, *args)
        theirs = dataclasses._process_class(twin, *args)
        compare(ours, theirs, original, twin)
        return ours

    lean_dataclass._process = checked
    for name in sys.argv[1:]:
        importlib.import_module(name)
    print(json.dumps({"compared": compared, "problems": problems}))
''') % {"methods": METHODS}


def converted_modules() -> list[str]:
    """Our modules whose dataclasses lean_dataclass makes."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if "lean_dataclass import dataclass" in path.read_text(encoding="utf-8"):
            parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
            found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def test_every_converted_class_is_the_standard_librarys():
    modules = converted_modules()
    assert "odradek.offsets.consumer_records" in modules
    out = subprocess.run([sys.executable, "-c", CHECK, *modules], capture_output=True, text=True, check=True,
                         cwd=ROOT.parent)
    report = json.loads(out.stdout)
    assert report["problems"] == []
    # the classes were made in that interpreter, after the hook (none imported before it)
    assert len(report["compared"]) >= 80
    assert any(c.startswith("odradek.offsets.consumer_records.") for c in report["compared"])


# --- synthetic classes, by behaviour -------------------------------------------------------------


def both(source: str) -> tuple[dict, dict]:
    """``source`` run twice: with ``dataclass`` the standard library's, then lean_dataclass's."""
    results = []
    for deco in (dataclasses.dataclass, dataclass):
        namespace = {"dataclass": deco, "field": field, "InitVar": InitVar, "ClassVar": ClassVar,
                     "__name__": __name__}
        exec(compile(textwrap.dedent(source), "<test>", "exec"), namespace)
        results.append(namespace)
    return results[0], results[1]


SOURCES = {
    "frozen slots": """
        @dataclass(frozen=True, slots=True)
        class K:
            group: str
            topic: str
            partition: int = 0
        """,
    "kw_only slots factory": """
        @dataclass(slots=True, kw_only=True)
        class K:
            members: dict = field(default_factory=dict)
            epoch: int = -1
            name: str = "x"
        """,
    "names of the generated sources": """
        @dataclass(frozen=True)
        class K:
            name: str
            value: int
            self: int = 1
            other: int = 2
            cls: int = 3
        """,
    "field options": """
        @dataclass(order=True)
        class K:
            a: int
            b: list = field(default_factory=list, compare=False, repr=False)
            c: int = field(default=5, hash=False)
        """,
    "post init": """
        @dataclass
        class K:
            a: int
            scale: InitVar[int] = 2
            shared: ClassVar[int] = 9
            def __post_init__(self, scale):
                self.a *= scale
        """,
    "eq off, no docstring": """
        @dataclass(eq=False, slots=True)
        class K:
            a: int
        """,
    "inherits": """
        @dataclass(frozen=True)
        class Base:
            a: int
        @dataclass(frozen=True, slots=True)
        class K(Base):
            b: str = "b"
        """,
    "no fields": """
        @dataclass(frozen=True)
        class K:
            \"\"\"A class with a docstring.\"\"\"
        """,
}


def build(cls: type) -> list:
    params = inspect.signature(cls).parameters
    args = {n: (i + 1 if p.annotation in (int, "int") else f"v{i}") for i, (n, p) in enumerate(params.items())
            if p.default is inspect.Parameter.empty}
    return [cls(**args), cls(**args)] + ([cls(**{**args, n: 99}) for n in list(args)[:1]] if args else [])


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_synthetic_class_behaves_as_the_standard_librarys(name):
    std, lean = both(SOURCES[name])
    S, L = std["K"], lean["K"]
    assert str(inspect.signature(S)) == str(inspect.signature(L))
    assert S.__doc__ == L.__doc__
    assert [(f.name, f.default, f.kw_only, f.compare, f.repr) for f in dataclasses.fields(S)] == \
        [(f.name, f.default, f.kw_only, f.compare, f.repr) for f in dataclasses.fields(L)]
    assert hasattr(S, "__slots__") == hasattr(L, "__slots__")
    ours, theirs = build(L), build(S)
    assert [repr(x).replace(S.__qualname__, "K") for x in theirs] == [repr(x).replace(L.__qualname__, "K") for x in ours]
    assert [a == b for a in theirs for b in theirs] == [a == b for a in ours for b in ours]
    if S.__hash__ is None:
        assert L.__hash__ is None
    else:
        assert [hash(a) == hash(b) for a in theirs for b in theirs] == [hash(a) == hash(b) for a in ours for b in ours]
    if S.__dataclass_params__.order:
        assert [a < b for a in theirs for b in theirs] == [a < b for a in ours for b in ours]
    assert [dataclasses.asdict(x) for x in theirs] == [dataclasses.asdict(x) for x in ours]
    first = dataclasses.fields(S)[0].name if dataclasses.fields(S) else None
    if first:
        assert repr(dataclasses.replace(theirs[0], **{first: 7})) == repr(dataclasses.replace(ours[0], **{first: 7}))
    errors = []
    for obj in (theirs[0], ours[0]):
        try:
            setattr(obj, first or "anything", 1)
            errors.append(None)
        except Exception as e:  # noqa: BLE001 - the kind of error is what is compared
            errors.append((type(e), str(e)))
    assert errors[0] == errors[1]


def test_a_converted_class_pickles():
    from odradek.offsets.records import OffsetKey

    key = OffsetKey("g", "t", 3)
    assert pickle.loads(pickle.dumps(key)) == key and copy.deepcopy(key) == key


def test_methods_run_the_code_the_standard_library_compiles():
    std, lean = both(SOURCES["frozen slots"])
    for name in ("__init__", "__eq__", "__hash__", "__setattr__", "__delattr__"):
        a, b = getattr(std["K"], name).__code__, getattr(lean["K"], name).__code__
        assert (a.co_code, a.co_names, a.co_varnames, a.co_consts) == (b.co_code, b.co_names, b.co_varnames, b.co_consts)


def test_errors_are_the_standard_librarys():
    for source in ("@dataclass\nclass K:\n    a: int = 1\n    b: int\n",
                   "@dataclass\nclass K:\n    a: list = []\n",
                   "@dataclass(order=True, eq=False)\nclass K:\n    a: int\n",
                   "@dataclass(frozen=True)\nclass B:\n    a: int\n@dataclass\nclass K(B):\n    b: int\n"):
        raised = []
        for deco in (dataclasses.dataclass, dataclass):
            with pytest.raises((TypeError, ValueError)) as info:
                exec(source, {"dataclass": deco, "__name__": __name__})
            raised.append((info.type, str(info.value)))
        assert raised[0] == raised[1]


def test_threads_make_classes_at_once():
    from concurrent.futures import ThreadPoolExecutor

    def make(i: int) -> str:
        cls = dataclass(frozen=True, slots=True)(type(f"T{i}", (), {"__annotations__": {f"f{i}": int, "g": str}}))
        return repr(cls(i, "g"))

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(make, range(40))) == [f"T{i}(f{i}={i}, g='g')" for i in range(40)]


# --- the store of compiled templates --------------------------------------------------------------


@pytest.fixture
def store(tmp_path, monkeypatch):
    s = lean_dataclass._Store()
    monkeypatch.setattr(s, "path", str(tmp_path / "templates"))
    monkeypatch.setattr(lean_dataclass, "_STORE", s)
    for name in ("_STORED", "_NEW", "_TEMPLATES"):
        monkeypatch.setattr(lean_dataclass, name, {})
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    return s


def test_the_store_keeps_templates_between_processes(store):
    dataclass(frozen=True)(type("S1", (), {"__annotations__": {"x": int}}))
    compiled = dict(lean_dataclass._NEW)
    assert compiled  # __init__, __repr__, __eq__, __setattr__, __delattr__, __hash__
    store.save()
    assert store.load() == compiled
    # a later process: each template from the store, none compiled
    lean_dataclass._STORED.update(store.load())
    lean_dataclass._NEW.clear()
    lean_dataclass._TEMPLATES.clear()
    cls = dataclass(frozen=True)(type("S2", (), {"__annotations__": {"y": int}}))
    assert lean_dataclass._NEW == {} and lean_dataclass._STORED == {}
    assert repr(cls(3)) == "S2(y=3)" and hash(cls(3)) == hash((3,))
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'y'"):
        cls(3).y = 4


def test_the_store_is_not_written_without_bytecode(store, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    dataclass(type("S3", (), {"__annotations__": {"x": int}}))
    store.save()
    assert not Path(store.path).exists()


def test_an_unreadable_store_is_an_empty_one(store):
    Path(store.path).write_bytes(b"\x00not marshal")
    assert store.load() == {}
    Path(store.path).write_bytes(marshal.dumps({"text": "not marshalled code"}))
    assert store.load() == {}
    Path(store.path).write_bytes(marshal.dumps((importlib.util.MAGIC_NUMBER, {"text": "not marshalled code"})))
    assert store.load() == {}


def test_a_store_of_another_python_release_is_not_used(store):
    dataclass(type("S6", (), {"__annotations__": {"x": int}}))
    store.save()
    assert store.load()
    magic, stored = marshal.loads(Path(store.path).read_bytes())
    Path(store.path).write_bytes(marshal.dumps((b"\x00\x00\r\n", stored)))
    assert store.load() == {}


def test_a_damaged_entry_is_compiled_again(store):
    dataclass(type("S4", (), {"__annotations__": {"x": int}}))
    texts = list(lean_dataclass._NEW)
    lean_dataclass._STORED.update(dict.fromkeys(texts, b"\x00damaged"))
    lean_dataclass._NEW.clear()
    lean_dataclass._TEMPLATES.clear()
    cls = dataclass(type("S5", (), {"__annotations__": {"y": int}}))
    assert repr(cls(1)) == "S5(y=1)" and set(lean_dataclass._NEW) == set(texts)
