"""The durable SCRAM credential store and the --add-scram text."""

from __future__ import annotations

import base64
import json

import pytest
from scramp import ScramClient

from odradek.broker.security.mechanism import MECHANISMS, SaslSettings
from odradek.broker.security.scram import SCRAM_MECHANISMS, credential_from_password
from odradek.broker.security.scram_store import FILE_NAME, CredentialStoreError, ScramCredentialStore
from odradek.broker.security.scram_users import add_users_offline, parse_add_scram

SHA256 = SCRAM_MECHANISMS["SCRAM-SHA-256"]


def test_credentials_survive_reopening_and_still_authenticate(tmp_path):
    store = ScramCredentialStore(tmp_path)
    store.load()
    store.put("alice", SHA256.name, credential_from_password(SHA256, "alice-secret", iterations=8192))
    again = ScramCredentialStore(tmp_path)
    again.load()
    assert again.users() == ["alice"]
    assert again.get("alice", SHA256.name).iterations == 8192
    server = MECHANISMS[SHA256.name](SaslSettings("L", credentials=again))
    client = ScramClient([SHA256.name], "alice", "alice-secret")
    client.set_server_first(server.evaluate(client.get_client_first().encode()).decode())
    client.set_server_final(server.evaluate(client.get_client_final().encode()).decode())
    assert server.principal() == "User:alice"


def test_file_holds_kafkas_tuple_and_never_the_password(tmp_path):
    add_users_offline(tmp_path, [parse_add_scram("SCRAM-SHA-512=[name=bob,password=hunter2-secret]")])
    text = (tmp_path / FILE_NAME).read_text()
    assert "hunter2" not in text and "hunter2" not in base64.b64decode(
        json.loads(text)["users"]["bob"]["SCRAM-SHA-512"]["salt"]).decode(errors="replace")
    entry = json.loads(text)["users"]["bob"]["SCRAM-SHA-512"]
    assert set(entry) == {"salt", "stored_key", "server_key", "iterations"}
    assert entry["iterations"] == 4096
    assert len(base64.b64decode(entry["stored_key"])) == 64
    assert not list(tmp_path.glob("*.tmp"))  # written through tmp + rename


def test_deleting_the_last_mechanism_forgets_the_user(tmp_path):
    store = ScramCredentialStore(tmp_path)
    store.put("a", SHA256.name, credential_from_password(SHA256, "p"))
    store.put("a", "SCRAM-SHA-512", credential_from_password(SCRAM_MECHANISMS["SCRAM-SHA-512"], "p"))
    assert list(store.mechanisms("a")) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    store.apply({}, [("a", SHA256.name)])
    assert list(store.mechanisms("a")) == ["SCRAM-SHA-512"]
    store.apply({}, [("a", "SCRAM-SHA-512")])
    reopened = ScramCredentialStore(tmp_path)
    reopened.load()
    assert "a" not in reopened and reopened.users() == []


def test_a_failed_write_changes_nothing(tmp_path, monkeypatch):
    store = ScramCredentialStore(tmp_path)
    store.put("a", SHA256.name, credential_from_password(SHA256, "p"))

    def boom(path, text):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr("odradek.broker.security.scram_store.atomic_write_text", boom)
    with pytest.raises(OSError):
        store.apply({("b", SHA256.name): credential_from_password(SHA256, "q")}, [("a", SHA256.name)])
    assert store.users() == ["a"]


@pytest.mark.parametrize("content", ["{", "[]", '{"users": {"a": {"SCRAM-SHA-1": {}}}}',
                                     '{"users": {"a": {"SCRAM-SHA-256": {"salt": "!!"}}}}'])
def test_unreadable_file_stops_start_up_naming_it(tmp_path, content):
    (tmp_path / FILE_NAME).write_text(content)
    with pytest.raises(CredentialStoreError, match=FILE_NAME):
        ScramCredentialStore(tmp_path).load()


def test_parse_add_scram_accepts_kafka_storage_syntax():
    u = parse_add_scram('SCRAM-SHA-256=[name=alice,password="alice,secret=1",iterations=8192]')
    assert (u.mechanism, u.name, u.password, u.iterations) == ("SCRAM-SHA-256", "alice", "alice,secret=1", 8192)
    assert "alice,secret" not in repr(u)
    assert parse_add_scram("SCRAM-SHA-512=[name=bob,password=pw]").iterations == 4096


@pytest.mark.parametrize("text", [
    "SCRAM-SHA-1=[name=a,password=b]", "SCRAM-SHA-256=[password=b]", "SCRAM-SHA-256=[name=a]",
    "SCRAM-SHA-256=[name=a,password=b,iterations=100]", "SCRAM-SHA-256=[name=a,password=b,iterations=20000]",
    "SCRAM-SHA-256=[name=a,password=b,colour=red]", "SCRAM-SHA-256 name=a", "SCRAM-SHA-256=[name=,password=b]",
])
def test_parse_add_scram_refuses_with_a_reason(text):
    with pytest.raises(ValueError):
        parse_add_scram(text)
