"""The schema registry as confluent-kafka's SchemaRegistryClient and serializers use it, over HTTP,
with the records through the broker over TCP; error answers in Confluent's body shape."""

from __future__ import annotations

import json
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from odradek.broker.dump_log import iter_dump
from odradek.testing.handle import BrokerHandle
from odradek.testing.process import free_port, serving

from .registry_helpers import http, wait_serving

pytestmark = pytest.mark.integration

USER = json.dumps({"type": "record", "name": "User", "namespace": "example",
                   "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]})
USER_V2 = json.dumps({"type": "record", "name": "User", "namespace": "example",
                      "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"},
                                 {"name": "email", "type": ["null", "string"], "default": None}]})
NO_DEFAULT = json.dumps({"type": "record", "name": "User", "namespace": "example",
                         "fields": [{"name": "name", "type": "string"}, {"name": "id", "type": "long"}]})


@pytest.fixture(scope="module")
def registry_broker():
    with BrokerHandle(schema_registry=True) as handle:
        yield handle


@pytest.fixture
def sr(registry_broker):
    return SchemaRegistryClient({"url": registry_broker.schema_registry_url})


def consume_one(bootstrap: str, topic: str):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                return msg
        raise AssertionError("nothing consumed")
    finally:
        consumer.close()


def test_the_fixture_has_no_registry_unless_asked():
    with BrokerHandle() as handle:
        with pytest.raises(RuntimeError, match="schema_registry=True"):
            _ = handle.schema_registry_url


def test_avro_serializer_and_deserializer_round_trip_through_the_broker(registry_broker, sr):
    topic = "sr-avro-users"
    ctx = SerializationContext(topic, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": registry_broker.bootstrap_servers})
    producer.produce(topic, value=AvroSerializer(sr, USER)({"name": "Zoë", "age": 7}, ctx))
    producer.flush(10)
    msg = consume_one(registry_broker.bootstrap_servers, topic)
    reader = SchemaRegistryClient({"url": registry_broker.schema_registry_url})  # no cache shared
    assert AvroDeserializer(reader)(msg.value(), ctx) == {"name": "Zoë", "age": 7}
    assert f"{topic}-value" in sr.get_subjects()
    assert sr.get_latest_version(f"{topic}-value").version == 1


def test_one_id_per_distinct_schema_across_subjects(registry_broker, sr):
    user, user_v2 = (s.replace('"example"', '"ids"') for s in (USER, USER_V2))  # not in the other tests
    first = sr.register_schema("sr-ids-a", Schema(user, "AVRO"))
    assert sr.register_schema("sr-ids-b", Schema(user, "AVRO")) == first
    assert sr.register_schema("sr-ids-a", Schema(user, "AVRO")) == first  # idempotent: still version 1
    assert sr.get_versions("sr-ids-a") == [1]
    second = sr.register_schema("sr-ids-a", Schema(user_v2, "AVRO"))
    assert second != first and sr.get_versions("sr-ids-a") == [1, 2]
    assert sorted(sr.get_subjects_by_schema_id(first)) == ["sr-ids-a", "sr-ids-b"]
    assert {(v.subject, v.version) for v in sr.get_schema_versions(first)} == {("sr-ids-a", 1), ("sr-ids-b", 1)}
    found = sr.lookup_schema("sr-ids-a", Schema(user_v2, "AVRO"))
    assert (found.schema_id, found.version) == (second, 2)
    assert sr.get_version("sr-ids-a", 2).schema.schema_str == found.schema.schema_str
    url = registry_broker.schema_registry_url
    body = http(f"{url}/schemas/ids/{first}?fetchMaxId=true")[1]
    assert body["maxId"] >= second and "maxId" not in http(f"{url}/schemas/ids/{first}")[1]


def test_incompatible_schema_is_409_under_backward(sr):
    sr.register_schema("sr-compat", Schema(USER, "AVRO"))
    with pytest.raises(SchemaRegistryError) as err:
        sr.register_schema("sr-compat", Schema(NO_DEFAULT, "AVRO"))
    assert (err.value.http_status_code, err.value.error_code) == (409, 409)
    assert "incompatible with an earlier schema" in err.value.error_message
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in err.value.error_message
    sr.set_compatibility("sr-compat", "NONE")
    assert sr.register_schema("sr-compat", Schema(NO_DEFAULT, "AVRO")) > 0
    assert sr.get_compatibility("sr-compat") == "NONE"


def test_config_global_and_per_subject(registry_broker, sr):
    url = registry_broker.schema_registry_url
    assert http(f"{url}/config") == (200, {"compatibilityLevel": "BACKWARD"})
    assert http(f"{url}/config/sr-nocfg")[1]["error_code"] == 40408
    assert http(f"{url}/config/sr-nocfg?defaultToGlobal=true")[1] == {"compatibilityLevel": "BACKWARD"}
    assert http(f"{url}/config/sr-cfg", "PUT", {"compatibility": "full_transitive"}) == (
        200, {"compatibility": "FULL_TRANSITIVE"})
    assert sr.get_compatibility("sr-cfg") == "FULL_TRANSITIVE"
    status, body = http(f"{url}/config", "PUT", {"compatibility": "INVALID"})
    assert (status, body["error_code"]) == (422, 42203) and "Invalid compatibility level" in body["message"]
    assert http(f"{url}/config/sr-cfg", "DELETE") == (200, {"compatibilityLevel": "FULL_TRANSITIVE"})
    assert http(f"{url}/config/sr-cfg")[1]["error_code"] == 40408
    assert http(f"{url}/config/sr-cfg", "DELETE")[1]["error_code"] == 40401


def test_errors_in_confluents_shape(registry_broker, sr):
    url = registry_broker.schema_registry_url
    sr.register_schema("sr-errors", Schema(USER, "AVRO"))
    cases = [
        (http(f"{url}/schemas/ids/999999"), 404, 40403),
        (http(f"{url}/subjects/sr-nobody/versions"), 404, 40401),
        (http(f"{url}/subjects/sr-errors/versions/3"), 404, 40402),
        (http(f"{url}/subjects/sr-errors/versions/a"), 422, 42202),
        (http(f"{url}/subjects/sr-errors/versions/0"), 422, 42202),
        (http(f"{url}/subjects/sr-errors", "POST", {"schema": '"int"'}), 404, 40403),
        (http(f"{url}/subjects/sr-nobody", "POST", {"schema": '"int"'}), 404, 40401),
        (http(f"{url}/subjects/sr-errors/versions", "POST", raw=b"{not json"), 400, 400),
        (http(f"{url}/subjects/sr-errors/versions", "POST", {"schema": "{\"type\": \"nope\"}"}), 422, 42201),
        (http(f"{url}/subjects/sr-errors/versions", "POST", {"schema": '"int"', "schemaType": "XML"}), 422, 42201),
        (http(f"{url}/subjects/sr-errors/versions", "POST", {"schema": ""}), 422, 42201),
        (http(f"{url}/no/such/path"), 404, 404),
    ]
    for (status, body), want_status, want_code in cases:
        assert (status, body["error_code"]) == (want_status, want_code), body
        assert isinstance(body["message"], str)
    invalid = {"schema": json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "f", "type": "array", "items": "string"}]})}  # the clients' own invalid-schema case
    status, body = http(f"{url}/subjects/sr-errors", "POST", invalid)
    assert (status, body["error_code"]) == (422, 42201) and body["message"].startswith("Invalid schema")


def test_odd_subject_names_are_subjects_not_paths(registry_broker, sr):
    for subject in ("a/b", "../../etc/passwd", "über topic-value", "x%2Fy", ":.ctx:s"):
        schema_id = sr.register_schema(subject, Schema(USER, "AVRO"))
        assert sr.get_latest_version(subject).schema_id == schema_id
        assert subject in sr.get_subjects()
    status, body = http(f"{registry_broker.schema_registry_url}/subjects/a%01b/versions", "POST", {"schema": USER})
    assert (status, body["error_code"]) == (422, 42208)


def test_concurrent_registrations_of_one_schema_get_one_id(registry_broker):
    schema = json.dumps({"type": "record", "name": "Concurrent", "fields": [{"name": "x", "type": "int"}]})
    url = registry_broker.schema_registry_url

    def register(i: int) -> int:
        return http(f"{url}/subjects/sr-concurrent-{i % 4}/versions", "POST", {"schema": schema})[1]["id"]

    with ThreadPoolExecutor(8) as pool:
        ids = set(pool.map(register, range(32)))
    assert len(ids) == 1


def test_reset_clears_the_registry():
    with BrokerHandle(schema_registry=True) as handle:
        sr = SchemaRegistryClient({"url": handle.schema_registry_url})
        sr.register_schema("sr-reset", Schema(USER, "AVRO"))
        handle.reset()
        assert http(f"{handle.schema_registry_url}/subjects") == (200, [])
        assert http(f"{handle.schema_registry_url}/schemas/ids/1")[1]["error_code"] == 40403
        assert SchemaRegistryClient({"url": handle.schema_registry_url}).register_schema(
            "sr-reset", Schema(USER_V2, "AVRO")) == 1


def test_kill_9_keeps_ids_versions_deletes_and_configs(tmp_path):
    port = free_port()
    settings = [f"odradek.schema.registry.listener=http://127.0.0.1:{port}"]
    url = f"http://127.0.0.1:{port}"

    with serving(settings, data_dir=tmp_path) as (proc, _port):
        wait_serving(url)
        sr = SchemaRegistryClient({"url": url})
        ids = {}
        for i in range(200):
            schema = json.dumps({"type": "record", "name": f"R{i}", "fields": [{"name": "a", "type": "int"}]})
            ids[f"s{i}"] = sr.register_schema(f"s{i}", Schema(schema, "AVRO"))
            sr.register_schema(f"s{i}", Schema(schema.replace('"int"}', '"int"},{"name":"b","type":"long",'
                                                              '"default":0}'), "AVRO"))
        sr.delete_version("s1", 1)
        sr.delete_subject("s2")
        sr.delete_subject("s3")
        sr.delete_subject("s3", permanent=True)
        sr.set_compatibility("s4", "FORWARD")
        sr.set_compatibility(level="FULL")
        before = {path: http(f"{url}{path}") for path in (
            "/subjects", "/subjects?deleted=true", "/subjects/s1/versions", "/subjects/s1/versions?deleted=true",
            "/subjects/s2/versions?deleted=true", "/config", "/config/s4", "/schemas/ids/1",
            "/subjects/s0/versions/2", "/schemas/ids/5/versions")}
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with serving(settings, data_dir=tmp_path):
        wait_serving(url)
        assert {path: http(f"{url}{path}") for path in before} == before
        sr = SchemaRegistryClient({"url": url})
        fresh = sr.register_schema("s-new", Schema('"string"', "AVRO"))
        assert fresh > max(ids.values())  # ids never reused after a restart
    # dump-log shows _schemas in Confluent's JSON
    records = [r for path in sorted((tmp_path / "_schemas-0").glob("*.log")) for entry in iter_dump(path)
               for r in entry.get("records", ())]
    assert {"offset", "key", "value"} <= set(records[0])
    assert records[0]["key"] == {"keytype": "SCHEMA", "subject": "s0", "version": 1, "magic": 1}
    assert records[0]["value"]["id"] == ids["s0"] and records[0]["value"]["deleted"] is False
    assert {"subject": "s2", "version": 2} in [r["value"] for r in records]  # the DELETE_SUBJECT record


COMMON_PROTO = 'syntax = "proto3";\npackage odr.test;\nmessage Money { string currency = 1; int64 units = 2; }\n'
ORDER_PROTO = ('syntax = "proto3";\npackage odr.test;\nimport "odr/common.proto";\n'
               'import "google/protobuf/timestamp.proto";\n'
               'message Order { string id = 1; Money total = 2; google.protobuf.Timestamp at = 3; }\n')


def order_class():
    """A message class made at run time, importing a file of its own (a reference) and a well-known type."""
    from google.protobuf import descriptor_pool, message_factory, timestamp_pb2  # noqa: F401

    from odradek.registry.proto_text import parse_proto

    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName("odr/order.proto")
    except KeyError:
        pool.Add(parse_proto(COMMON_PROTO, "odr/common.proto"))
        pool.Add(parse_proto(ORDER_PROTO, "odr/order.proto"))
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("odr.test.Order"))


def test_protobuf_serializer_with_a_reference_round_trips(registry_broker, sr):
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

    order = order_class()
    topic = "sr-proto-orders"
    ctx = SerializationContext(topic, MessageField.VALUE)
    message = order(id="o-1")
    message.total.currency, message.total.units = "EUR", 12
    producer = Producer({"bootstrap.servers": registry_broker.bootstrap_servers})
    producer.produce(topic, value=ProtobufSerializer(order, sr, {"use.deprecated.format": False})(message, ctx))
    producer.flush(10)
    msg = consume_one(registry_broker.bootstrap_servers, topic)
    reader = SchemaRegistryClient({"url": registry_broker.schema_registry_url})
    assert ProtobufDeserializer(order, {"use.deprecated.format": False}, reader)(msg.value(), ctx) == message
    latest = sr.get_latest_version(f"{topic}-value")
    assert [(r.name, r.subject, r.version) for r in latest.schema.references] == [
        ("odr/common.proto", "odr/common.proto", 1)]
    assert "message Order {" in latest.schema.schema_str  # stored as .proto text, as Confluent does
    # the text registers too (what Java and Go clients send) and is the same schema
    assert sr.lookup_schema(f"{topic}-value", Schema(latest.schema.schema_str, "PROTOBUF",
                                                     latest.schema.references)).schema_id == latest.schema_id


def test_json_serializer_round_trips_and_checks_compatibility(registry_broker, sr):
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    schema = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Person",
                         "type": "object", "properties": {"name": {"type": "string"}},
                         "additionalProperties": False})
    topic = "sr-json-people"
    ctx = SerializationContext(topic, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": registry_broker.bootstrap_servers})
    producer.produce(topic, value=JSONSerializer(schema, sr)({"name": "Ada"}, ctx))
    producer.flush(10)
    msg = consume_one(registry_broker.bootstrap_servers, topic)
    reader = SchemaRegistryClient({"url": registry_broker.schema_registry_url})
    assert JSONDeserializer(schema, schema_registry_client=reader)(msg.value(), ctx) == {"name": "Ada"}
    narrowed = json.dumps({**json.loads(schema), "properties": {"name": {"type": "integer"}}})
    assert sr.test_compatibility(f"{topic}-value", Schema(narrowed, "JSON")) is False
    with pytest.raises(SchemaRegistryError) as err:
        sr.register_schema(f"{topic}-value", Schema(narrowed, "JSON"))
    assert err.value.http_status_code == 409


def test_soft_and_hard_deletes(registry_broker, sr):
    url = registry_broker.schema_registry_url
    v1 = USER.replace('"example"', '"deletes"')
    v2 = USER_V2.replace('"example"', '"deletes"')
    sr.register_schema("sr-del", Schema(v1, "AVRO"))
    sr.register_schema("sr-del", Schema(v2, "AVRO"))
    assert sr.delete_version("sr-del", 1) == 1
    assert http(f"{url}/subjects/sr-del/versions/1", "DELETE")[1]["error_code"] == 40406
    assert sr.get_versions("sr-del") == [2]
    assert http(f"{url}/subjects/sr-del/versions?deleted=true") == (200, [1, 2])
    assert http(f"{url}/subjects/sr-del/versions/1?deleted=true")[1]["deleted"] is True
    assert http(f"{url}/subjects/sr-del?permanent=true", "DELETE")[1]["error_code"] == 40405
    assert http(f"{url}/subjects/sr-del/versions/2?permanent=true", "DELETE")[1]["error_code"] == 40407
    assert sr.delete_subject("sr-del") == [2]
    assert "sr-del" not in sr.get_subjects()
    assert http(f"{url}/subjects/sr-del/versions/latest")[1]["error_code"] == 40401  # all soft-deleted
    assert http(f"{url}/subjects/sr-del/versions/2?deleted=true")[1]["version"] == 2
    assert http(f"{url}/subjects/sr-del", "DELETE")[1]["error_code"] == 40404
    assert sr.delete_subject("sr-del", permanent=True) == [1, 2]
    assert http(f"{url}/subjects/sr-del?permanent=true", "DELETE")[1]["error_code"] == 40401
    assert sr.register_schema("sr-del", Schema(v1, "AVRO")) > 0
    assert sr.get_versions("sr-del") == [1]  # nothing of the subject is left: versions start over


def test_a_schema_over_max_message_bytes_is_42209_and_the_broker_goes_on(registry_broker, sr):
    url = registry_broker.schema_registry_url
    huge = json.dumps({"type": "record", "name": "Huge", "doc": "x" * (2 << 20), "fields": []})
    status, body = http(f"{url}/subjects/sr-huge/versions", "POST", {"schema": huge})
    assert (status, body["error_code"]) == (422, 42209)
    status, body = http(f"{url}/subjects/sr-huge/versions", "POST", raw=b'{"schema": "' + b"x" * (20 << 20) + b'"}')
    assert (status, body["error_code"]) == (422, 42209)  # over the HTTP body limit
    assert sr.register_schema("sr-huge", Schema('"string"', "AVRO")) > 0


def test_metadata_and_rule_set_are_kept(registry_broker):
    url = registry_broker.schema_registry_url
    metadata = {"properties": {"owner": "team-a"}}
    rule_set = {"domainRules": [{"name": "checkName", "kind": "CONDITION", "mode": "WRITE", "type": "CEL",
                                 "expr": "message.name != ''"}]}
    schema = USER.replace('"example"', '"contracts"')
    status, body = http(f"{url}/subjects/sr-contract/versions", "POST",
                        {"schema": schema, "metadata": metadata, "ruleSet": rule_set})
    assert status == 200
    got = http(f"{url}/subjects/sr-contract/versions/latest")[1]
    assert (got["metadata"], got["ruleSet"]) == (metadata, rule_set)
    assert http(f"{url}/schemas/ids/{body['id']}")[1]["metadata"] == metadata
    # without them it is another schema: another id
    assert http(f"{url}/subjects/sr-contract-plain/versions", "POST", {"schema": schema})[1]["id"] != body["id"]


def test_import_mode_registers_at_a_given_id_and_version(registry_broker):
    url = registry_broker.schema_registry_url
    schema = USER.replace('"example"', '"imported"')
    assert http(f"{url}/mode/sr-import", "PUT", {"mode": "IMPORT"}) == (200, {"mode": "IMPORT"})
    assert http(f"{url}/mode/sr-import")[1] == {"mode": "IMPORT"}
    assert http(f"{url}/subjects/sr-import/versions", "POST", {"schema": schema, "id": 5000, "version": 7}) == (
        200, {"id": 5000, "version": 7, "schema": json.dumps(json.loads(schema), separators=(",", ":"))})
    status, body = http(f"{url}/subjects/sr-import/versions", "POST", {"schema": '"long"'})
    assert (status, body["error_code"]) == (422, 42205)
    assert http(f"{url}/mode/sr-import", "DELETE")[0] == 200
    assert http(f"{url}/mode/sr-import")[1]["error_code"] == 40409
    assert http(f"{url}/mode/sr-import?defaultToGlobal=true")[1] == {"mode": "READWRITE"}
    assert http(f"{url}/mode", "PUT", {"mode": "BOGUS"})[1]["error_code"] == 42204
    status, body = http(f"{url}/mode", "PUT", {"mode": "IMPORT"})  # subjects exist: not without force
    assert (status, body["error_code"], body["message"]) == (422, 42205, "Cannot import since found existing subjects")
    assert http(f"{url}/mode/sr-import", "PUT", {"mode": "FORWARD"})[1]["error_code"] == 42204  # global only
    assert http(f"{url}/mode", "PUT", {"mode": "READONLY"})[0] == 200
    try:
        assert http(f"{url}/subjects/sr-readonly/versions", "POST", {"schema": '"long"'})[1]["error_code"] == 42205
    finally:
        http(f"{url}/mode", "PUT", {"mode": "READWRITE"})


def test_server_metadata_and_contexts(registry_broker):
    url = registry_broker.schema_registry_url
    assert http(f"{url}/contexts") == (200, ["."])
    assert http(f"{url}/")[1] == {}
    assert sorted(http(f"{url}/schemas/types")[1]) == ["AVRO", "JSON", "PROTOBUF"]
    cluster = http(f"{url}/v1/metadata/id")[1]
    assert cluster["scope"]["clusters"]["kafka-cluster"] == registry_broker.app.cluster_id


def test_basic_auth_where_the_listener_asks_for_it():
    with BrokerHandle(schema_registry=True,
                      overrides={"odradek.schema.registry.basic.auth.users": "alice:s3cret"}) as handle:
        url = handle.schema_registry_url
        status, body = http(f"{url}/subjects")
        assert (status, body["error_code"]) == (401, 401)
        sr = SchemaRegistryClient({"url": url, "basic.auth.user.info": "alice:s3cret"})
        assert sr.register_schema("sr-auth", Schema('"string"', "AVRO")) == 1
        wrong = SchemaRegistryClient({"url": url, "basic.auth.user.info": "alice:nope"})
        with pytest.raises(SchemaRegistryError) as err:
            wrong.get_subjects()
        assert err.value.http_status_code == 401


async def test_the_async_client_and_serializers(registry_broker):
    from confluent_kafka.schema_registry import AsyncSchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AsyncAvroDeserializer, AsyncAvroSerializer

    schema = USER.replace('"example"', '"asyncio"')
    ctx = SerializationContext("sr-async", MessageField.VALUE)
    client = AsyncSchemaRegistryClient({"url": registry_broker.schema_registry_url})
    serialize = await AsyncAvroSerializer(client, schema)
    data = await serialize({"name": "b", "age": 2}, ctx)
    reader = AsyncSchemaRegistryClient({"url": registry_broker.schema_registry_url})
    assert await (await AsyncAvroDeserializer(reader))(data, ctx) == {"name": "b", "age": 2}
    assert await client.get_versions("sr-async-value") == [1]


def test_normalized_registration_and_lookup_agree(sr):
    spaced = '{ "type": "record", "namespace": "norm", "name": "N", "fields": [ {"type": {"type": "int"}, "name": "a"} ] }'
    compact = '{"name":"norm.N","type":"record","fields":[{"name":"a","type":"int"}]}'
    first = sr.register_schema("sr-normalize", Schema(spaced, "AVRO"), normalize_schemas=True)
    assert sr.register_schema("sr-normalize", Schema(compact, "AVRO"), normalize_schemas=True) == first
    assert sr.lookup_schema("sr-normalize", Schema(spaced, "AVRO"), normalize_schemas=True).schema_id == first
    assert sr.get_versions("sr-normalize") == [1]


def test_avro_references_resolve_transitively(registry_broker, sr):
    from confluent_kafka.schema_registry import SchemaReference

    props = json.dumps({"type": "record", "name": "AwardProperties", "namespace": "refs",
                        "fields": [{"name": "year", "type": "int"}]})
    award = json.dumps({"type": "record", "name": "Award", "namespace": "refs",
                        "fields": [{"name": "name", "type": "string"}, {"name": "props", "type": "AwardProperties"}]})
    awarded = json.dumps({"type": "record", "name": "AwardedUser", "namespace": "refs",
                          "fields": [{"name": "award", "type": "Award"}]})
    for _ in range(2):  # idempotent, as the clients' tests register them again and again
        sr.register_schema("refs-props", Schema(props, "AVRO"))
        sr.register_schema("refs-award", Schema(award, "AVRO", [SchemaReference("refs.AwardProperties",
                                                                                "refs-props", 1)]))
    assert sr.get_versions("refs-award") == [1]
    missing = Schema(awarded, "AVRO")
    with pytest.raises(SchemaRegistryError) as err:
        sr.register_schema("refs-awarded", missing)
    assert err.value.error_code == 42201
    topic = "refs-awarded"
    ctx = SerializationContext(topic, MessageField.VALUE)
    serializer = AvroSerializer(sr, Schema(awarded, "AVRO", [SchemaReference("refs.Award", "refs-award", 1)]),
                                conf={"auto.register.schemas": True})
    data = serializer({"award": {"name": "gold", "props": {"year": 2024}}}, ctx)
    reader = SchemaRegistryClient({"url": registry_broker.schema_registry_url})
    assert AvroDeserializer(reader)(data, ctx) == {"award": {"name": "gold", "props": {"year": 2024}}}
    props_id = sr.get_latest_version("refs-props").schema_id
    assert http(f"{registry_broker.schema_registry_url}/subjects/refs-props/versions/1/referencedby")[1] == [
        sr.get_latest_version("refs-award").schema_id]
    status, body = http(f"{registry_broker.schema_registry_url}/subjects/refs-props/versions/1", "DELETE")
    assert (status, body["error_code"]) == (422, 42206) and props_id


def test_schema_by_guid_and_latest_with_metadata(registry_broker, sr):
    url = registry_broker.schema_registry_url
    schema = USER.replace('"example"', '"guids"')
    first = sr.register_schema_full_response("sr-meta", Schema(schema, "AVRO", metadata=None))
    by_id = http(f"{url}/schemas/ids/{first.schema_id}")[1]
    assert http(f"{url}/schemas/guids/{by_id['guid']}")[1]["id"] == first.schema_id
    assert sr.get_schema_by_guid(by_id["guid"]).schema_str == by_id["schema"]
    assert http(f"{url}/schemas/guids/not-a-guid")[1]["error_code"] == 40403
    tagged = {"properties": {"owner": "team-b", "tier": "gold"}}
    http(f"{url}/subjects/sr-meta/versions", "POST", {"schema": schema, "metadata": tagged})
    found = http(f"{url}/subjects/sr-meta/metadata?key=owner&value=team-b&key=tier&value=gold")
    assert (found[0], found[1]["version"]) == (200, 2)
    assert http(f"{url}/subjects/sr-meta/metadata?key=owner&value=nobody")[1]["error_code"] == 40403
    assert http(f"{url}/subjects/sr-nobody/metadata?key=owner&value=x")[1]["error_code"] == 40401


def test_compatibility_endpoint_with_verbose_reasons(registry_broker, sr):
    url = registry_broker.schema_registry_url
    v1 = USER.replace('"example"', '"verbose"')
    sr.register_schema("sr-verbose", Schema(v1, "AVRO"))
    breaking = NO_DEFAULT.replace('"example"', '"verbose"')
    answer = http(f"{url}/compatibility/subjects/sr-verbose/versions/latest?verbose=true", "POST",
                  {"schema": breaking})[1]
    assert answer["is_compatible"] is False
    assert any("READER_FIELD_MISSING_DEFAULT_VALUE" in m for m in answer["messages"])
    assert http(f"{url}/compatibility/subjects/sr-verbose/versions?verbose=False", "POST",
                {"schema": USER_V2.replace('"example"', '"verbose"')}) == (200, {"is_compatible": True})
    assert http(f"{url}/compatibility/subjects/sr-nothing/versions/latest", "POST", {"schema": '"int"'}) == (
        200, {"is_compatible": True})
    assert http(f"{url}/compatibility/subjects/sr-verbose/versions/9", "POST",
                {"schema": '"int"'})[1]["error_code"] == 40402
    invalid = http(f"{url}/compatibility/subjects/sr-verbose/versions/latest?verbose=true", "POST",
                   {"schema": '{"type": "nope"}'})[1]
    assert invalid["is_compatible"] is False and invalid["messages"][0].startswith("Invalid schema")


def test_records_another_registry_produces_to_schemas_are_served(registry_broker, sr):
    """A Confluent registry sharing the topic writes its records with a Kafka producer: they are
    read, in its key and value JSON (CP 8's "schemaType":"AVRO" included)."""
    url = registry_broker.schema_registry_url
    sr.register_schema("sr-shared-before", Schema('"boolean"', "AVRO"))  # _schemas exists
    key = b'{"keytype":"SCHEMA","subject":"sr-shared","version":1,"magic":1}'
    value = json.dumps({"subject": "sr-shared", "version": 1, "id": 90001, "schemaType": "AVRO",
                        "schema": '{"type":"fixed","name":"Shared","size":4}', "deleted": False}).encode()
    producer = Producer({"bootstrap.servers": registry_broker.bootstrap_servers})
    producer.produce("_schemas", key=key, value=value)
    producer.produce("_schemas", key=b'{"keytype":"CONFIG","subject":"sr-shared","magic":0}',
                     value=b'{"subject":"sr-shared","compatibilityLevel":"NONE"}')
    producer.flush(10)
    assert http(f"{url}/subjects/sr-shared/versions/1")[1]["id"] == 90001
    assert http(f"{url}/config/sr-shared")[1] == {"compatibilityLevel": "NONE"}
    assert sr.register_schema("sr-shared-after", Schema('"bytes"', "AVRO")) > 90001  # ids go on from there


def test_kill_9_during_registrations_keeps_every_acknowledged_one(tmp_path):
    """Each registration is answered only once durable in _schemas: whatever was acknowledged
    before a kill -9 is there after the restart, with its id; nothing half-written shows."""
    import threading

    port = free_port()
    settings = [f"odradek.schema.registry.listener=http://127.0.0.1:{port}"]
    url = f"http://127.0.0.1:{port}"
    acknowledged: dict[str, tuple[int, int]] = {}
    stop = threading.Event()

    def register(worker: int) -> None:
        n = 0
        while not stop.is_set():
            subject = f"crash-{worker}-{n}"
            schema = json.dumps({"type": "record", "name": f"C{worker}x{n}", "fields": [{"name": "a", "type": "int"}]})
            try:
                status, body = http(f"{url}/subjects/{subject}/versions", "POST", {"schema": schema})
            except OSError:
                return  # the broker is gone
            if status == 200:
                acknowledged[subject] = (body["id"], body["version"])
            n += 1

    with serving(settings, data_dir=tmp_path) as (proc, _port):
        wait_serving(url)
        workers = [threading.Thread(target=register, args=(w,)) for w in range(4)]
        for w in workers:
            w.start()
        time.sleep(1.5)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        stop.set()
        for w in workers:
            w.join(30)
    assert len(acknowledged) > 10
    with serving(settings, data_dir=tmp_path):
        subjects = set(wait_serving(url)[1])
        assert set(acknowledged) <= subjects
        for subject, (schema_id, version) in acknowledged.items():
            body = http(f"{url}/subjects/{subject}/versions/latest")[1]
            assert (body["id"], body["version"]) == (schema_id, version)
        ids = [http(f"{url}/subjects/{s}/versions/latest")[1]["id"] for s in subjects]
        assert len(ids) == len(set(ids))  # distinct schemas, distinct ids
