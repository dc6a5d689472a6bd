"""``_schemas`` records as Confluent writes them, and the state their replay builds."""

from __future__ import annotations

import json

import pytest

from odradek.registry import errors
from odradek.registry.operations import Registry, SchemaRequest, parse_version
from odradek.registry.records import CONFIG, DELETE_SUBJECT, MODE, NOOP, SCHEMA, Key
from odradek.registry.state import RegistryState

A = '{"type":"record","name":"A","fields":[{"name":"x","type":"int"}]}'
A2 = '{"type":"record","name":"A","fields":[{"name":"x","type":"int"},{"name":"y","type":"int","default":1}]}'


@pytest.mark.parametrize("key, wire", [
    (Key(SCHEMA, "orders-value", 1), b'{"keytype":"SCHEMA","subject":"orders-value","version":1,"magic":1}'),
    (Key(CONFIG), b'{"keytype":"CONFIG","magic":0}'),
    (Key(CONFIG, "s"), b'{"keytype":"CONFIG","subject":"s","magic":0}'),
    (Key(MODE, "s"), b'{"keytype":"MODE","subject":"s","magic":0}'),
    (Key(DELETE_SUBJECT, "s"), b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}'),
    (Key(NOOP), b'{"keytype":"NOOP","magic":0}'),
    (Key(SCHEMA, "ü", 2), '{"keytype":"SCHEMA","subject":"ü","version":2,"magic":1}'.encode()),
])
def test_keys_are_confluents_bytes(key, wire):
    assert key.encode() == wire


def apply_all(state: RegistryState, records) -> None:
    for key, value in records:
        state.apply_bytes(key, value)


def test_replay_of_confluent_and_karapace_records():
    state = RegistryState()
    apply_all(state, [
        (b'{"keytype":"CONFIG","subject":null,"magic":0}', b'{"compatibilityLevel":"FULL"}'),  # Karapace, CP < 6.2
        (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}',
         json.dumps({"subject": "s", "version": 1, "id": 7, "schema": A, "deleted": False}).encode()),
        (b'{"keytype":"SCHEMA","subject":"t","version":1,"magic":0}',
         json.dumps({"subject": "t", "version": 1, "id": 7, "schemaType": "AVRO", "schema": A}).encode()),
        (b'not json', b'{}'),  # skipped, as Confluent skips a key it cannot read
        (b'{"keytype":"NOOP","magic":0}', None),
        (b'{"keytype":"CONFIG","magic":0}', b'{"compatibilityLevel":"NONE"}'),  # the same global key: later wins
        (b'{"keytype":"DELETE_SUBJECT","subject":"t","magic":0}', b'{"subject":"t","version":1}'),
    ])
    assert state.compatibility("s") == "NONE"
    assert state.max_id == 7 and state.by_id[7].schema == A
    assert state.subject_names() == ["s"] and state.subject_names(deleted=True) == ["s", "t"]
    apply_all(state, [(b'{"keytype":"SCHEMA","subject":"t","version":1,"magic":1}', None)])
    assert state.subject_names(deleted=True) == ["s"] and 7 in state.by_id


def run(state: RegistryState, write) -> object:
    for key, value in write.records:
        state.apply_bytes(key, value)
    return write.answer


def test_operations_write_records_and_replay_applies_them():
    state = RegistryState()
    registry = Registry(state)
    answer = run(state, registry.register("s", SchemaRequest(A)))
    assert answer["id"] == 1 and answer["version"] == 1
    assert registry.register("s", SchemaRequest(A)).records == []  # already there: nothing written
    assert run(state, registry.register("other", SchemaRequest(A)))["id"] == 1
    assert run(state, registry.register("s", SchemaRequest(A2)))["id"] == 2
    with pytest.raises(errors.RegistryError) as err:
        registry.delete_version("s", 1, permanent=True)
    assert err.value.code == 40407
    assert run(state, registry.delete_version("s", 1, permanent=False)) == 1
    with pytest.raises(errors.RegistryError) as err:
        registry.delete_version("s", 1, permanent=False)
    assert err.value.code == 40406
    assert run(state, registry.delete_subject("s", permanent=False)) == [2]
    with pytest.raises(errors.RegistryError) as err:
        registry.delete_subject("s", permanent=False)
    assert err.value.code == 40404
    assert run(state, registry.delete_subject("s", permanent=True)) == [1, 2]
    assert state.subject_names(deleted=True) == ["other"]
    assert run(state, registry.register("s", SchemaRequest(A2)))["id"] == 3  # id 2 is gone, not reused
    assert run(state, registry.register("s", SchemaRequest(A)))["version"] == 2


def test_import_mode_registers_at_the_given_id_and_version():
    state = RegistryState()
    registry = Registry(state)
    with pytest.raises(errors.RegistryError) as err:
        registry.register("s", SchemaRequest(A, id=42, version=3))
    assert err.value.code == 42205
    run(state, registry.set_mode(None, {"mode": "IMPORT"}))
    assert run(state, registry.register("s", SchemaRequest(A, id=42, version=3))) == {
        "id": 42, "version": 3, "schema": A}
    with pytest.raises(errors.RegistryError) as err:
        registry.register("t", SchemaRequest(A2, id=42, version=1))
    assert err.value.code == 42205
    run(state, registry.set_mode(None, {"mode": "READWRITE"}))
    assert run(state, registry.register("t", SchemaRequest(A2)))["id"] == 43


@pytest.mark.parametrize("text, expected", [("latest", -1), ("LATEST ", -1), ("-1", -1), ("1", 1),
                                            (str(2**31 - 1), 2**31 - 1)])
def test_versions(text, expected):
    assert parse_version(text) == expected


@pytest.mark.parametrize("text", ["0", "-2", "a", str(2**31), ""])
def test_invalid_versions_are_42202(text):
    with pytest.raises(errors.RegistryError) as err:
        parse_version(text)
    assert err.value.code == 42202


@pytest.mark.parametrize("text, canonical", [
    ('{"type": "string"}', '"string"'),
    ('{"type":"int","logicalType":"date"}', '{"type":"int","logicalType":"date"}'),
    ('{"fields":[{"type":"int","name":"a","default":1,"doc":"d"}],"name":"R","type":"record","namespace":"x.y"}',
     '{"type":"record","name":"R","namespace":"x.y","fields":[{"name":"a","type":"int","doc":"d","default":1}]}'),
    ('{"type":"record","name":"a.b.R","fields":[{"name":"e","type":{"type":"enum","name":"E","symbols":["A"]}},'
     '{"name":"f","type":"E"},{"name":"g","type":{"type":"fixed","name":"c.F","size":2}},{"name":"h","type":"c.F"}]}',
     '{"type":"record","name":"R","namespace":"a.b","fields":[{"name":"e","type":{"type":"enum","name":"E",'
     '"symbols":["A"]}},{"name":"f","type":"E"},{"name":"g","type":{"type":"fixed","name":"F","namespace":"c",'
     '"size":2}},{"name":"h","type":"c.F"}]}'),
])
def test_avro_canonical_text_is_avro_javas(text, canonical):
    """Stored as Confluent stores it (Avro Java's Schema.toString()): the same text, the same id."""
    from odradek.registry.schemas import parse

    assert parse("AVRO", text).canonical == canonical
    assert parse("AVRO", canonical).canonical == canonical


def test_avro_types_from_references_are_written_by_name():
    from odradek.registry.schemas import Dependency, parse

    dep = Dependency("refs.Money", "AVRO", '{"type":"record","name":"Money","namespace":"refs","fields":[]}')
    parsed = parse("AVRO", '{"type":"record","name":"Price","namespace":"refs","fields":[{"name":"m","type":"Money"}]}',
                   (dep,))
    assert parsed.canonical == ('{"type":"record","name":"Price","namespace":"refs","fields":[{"name":"m",'
                                '"type":"Money"}]}')


def test_the_registry_listener_setting():
    """On by default for `odradek serve` (and the container); http://, HOST:PORT or a port; empty is off."""
    from odradek.broker.config import SETTINGS_BY_NAME, registry_address

    assert SETTINGS_BY_NAME["odradek.schema.registry.listener"].default == "http://127.0.0.1:8081"
    assert registry_address("http://127.0.0.1:8081") == ("127.0.0.1", 8081)
    assert registry_address("0.0.0.0:18081") == ("0.0.0.0", 18081)
    assert registry_address("8082") == ("127.0.0.1", 8082)
    assert registry_address("") is None
    with pytest.raises(ValueError, match="only http"):
        registry_address("https://127.0.0.1:8081")
