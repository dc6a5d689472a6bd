"""The serve process's GC policy: long-lived objects leave the collector's walk; cycles still die."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from odradek.broker.gcpolicy import GcPolicy


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture
def policy():
    loop = asyncio.new_event_loop()
    p = GcPolicy()
    p.install(loop)
    try:
        yield p
    finally:
        p.uninstall()
        loop.close()


def _walked(obj: object) -> bool:
    """Whether a collection would walk ``obj`` (frozen objects are in no generation)."""
    return any(o is obj for o in gc.get_objects())


def test_startup_heap_is_frozen(policy):
    assert gc.get_freeze_count() > 0
    assert policy.frozen_after_deep > 0
    assert not _walked(policy)  # created before install: frozen with the rest


def test_survivors_of_a_full_collection_are_frozen(policy):
    kept = [Node()]
    assert _walked(kept)
    gc.collect()  # a full collection: the policy freezes what survived it
    assert not _walked(kept)
    assert policy.freezes >= 1


def test_a_frozen_cycle_is_reclaimed_by_the_deep_collection(policy):
    a, b = Node(), Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    gc.collect()  # the live cycle is frozen
    del a, b
    gc.collect()
    assert gone() is not None  # frozen: a normal collection no longer sees the dead cycle
    policy.deep_collect()
    assert gone() is None


def test_uninstall_restores_the_collector(policy):
    policy.uninstall()
    assert gc.get_freeze_count() == 0
    kept = [Node()]
    gc.collect()
    assert _walked(kept)


def test_imported_freezes_the_heap_and_turns_the_collector_back_on():
    """``odradek serve`` turns the collector off while it imports; ``imported`` ends that."""
    p = GcPolicy()
    loaded = [Node()]  # stands for what an import made
    gc.disable()
    try:
        p.imported()
        assert gc.isenabled()
        assert not _walked(loaded)  # frozen as it was, uncollected
    finally:
        gc.enable()
        p.uninstall()
