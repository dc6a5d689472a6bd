"""Features (KIP-584) in raw frames: ApiVersions v3/v4's supported and finalized features, and
UpdateFeatures v0-v2 with Kafka's validation.

What a Kafka 4.2 broker answers: supported ``metadata.version`` 7-29 and the
production features 0-max (those with a minimum of 0 left out of a v3
answer), finalized levels with min = max and level-0 features left out, an
epoch that grows at every change; UpdateFeatures refusals are one top-level
INVALID_UPDATE_VERSION with Kafka's message and no results, successes carry
one result per feature up to v1 and none on v2; the levels survive a restart
and go back to the defaults with a test-control reset.
"""

from __future__ import annotations

import pytest

from odradek.broker.features import RELEASE_FEATURES, release_features
from odradek.broker.wire_client import SyncClient
from odradek.testing import ThreadedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

API_VERSIONS, UPDATE = 18, 57
INVALID_UPDATE_VERSION = 95
UPGRADE, SAFE, UNSAFE = 1, 2, 3


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with ThreadedBroker(tmp_path_factory.mktemp("features")) as b:
        yield b


@pytest.fixture(autouse=True)
def _empty(broker):
    broker.control("reset")


def _client(b) -> SyncClient:
    host, port = b.bootstrap_servers.rsplit(":", 1)
    return SyncClient(host, int(port))


def _features(b, v=4):
    with _client(b) as c:
        r = c.request(API_VERSIONS, v, {"client_software_name": "t", "client_software_version": "1"})
    supported = {f.name: (f.min_version, f.max_version) for f in r.supported_features}
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in r.finalized_features}
    return supported, finalized, r.finalized_features_epoch


def _update(b, v, updates, validate_only=False):
    body = {"timeout_ms": 1000, "validate_only": validate_only, "feature_updates": [
        {"feature": name, "max_version_level": level, "upgrade_type": kind, "allow_downgrade": kind != UPGRADE}
        for name, level, kind in updates]}
    with _client(b) as c:
        return c.request(UPDATE, v, body)


def test_api_versions_v4_lists_kafka_42_features(broker):
    supported, finalized, epoch = _features(broker)
    assert supported == {"metadata.version": (7, 29), "kraft.version": (0, 1), "transaction.version": (0, 2),
                         "group.version": (0, 1), "eligible.leader.replicas.version": (0, 1),
                         "share.version": (0, 1), "streams.version": (0, 0)}  # streams groups: not served yet
    assert finalized == {"metadata.version": (29, 29), "kraft.version": (1, 1), "transaction.version": (2, 2),
                         "group.version": (1, 1), "eligible.leader.replicas.version": (1, 1),
                         "share.version": (1, 1)}
    assert epoch >= 0


def test_api_versions_v3_leaves_out_features_with_minimum_zero(broker):
    supported, finalized, _ = _features(broker, 3)
    assert supported == {"metadata.version": (7, 29)}  # KAFKA-17492
    assert finalized["transaction.version"] == (2, 2)


@pytest.mark.parametrize("v", [0, 1, 2])
def test_transaction_version_down_and_back(broker, v):
    _s, _f, epoch = _features(broker)
    r = _update(broker, v, [("transaction.version", 1, SAFE)])
    if v == 0:  # v0's allow_downgrade is not read by the controller: an upgrade type
        assert r.error_code == INVALID_UPDATE_VERSION
        assert "without setting the upgrade type" in r.error_message
        return
    assert r.error_code == 0 and r.error_message is None
    assert [(x.feature, x.error_code, x.error_message) for x in r.results] == (
        [] if v == 2 else [("transaction.version", 0, "NONE")])  # Errors.NONE.message()
    _s, finalized, epoch2 = _features(broker)
    assert finalized["transaction.version"] == (1, 1) and epoch2 > epoch
    assert _update(broker, v, [("transaction.version", 0, SAFE)]).error_code == 0
    _s, finalized, epoch3 = _features(broker)
    assert "transaction.version" not in finalized and epoch3 > epoch2  # level 0: left out
    assert _update(broker, v, [("transaction.version", 2, UPGRADE)]).error_code == 0
    assert _features(broker)[1]["transaction.version"] == (2, 2)


def test_upgrade_from_zero_with_v0(broker):
    assert _update(broker, 1, [("transaction.version", 0, UNSAFE)]).error_code == 0
    r = _update(broker, 0, [("transaction.version", 2, UPGRADE)])
    assert r.error_code == 0 and [x.feature for x in r.results] == ["transaction.version"]


@pytest.mark.parametrize(("updates", "message"), [
    ([("no.such.feature", 1, UPGRADE)],
     "Invalid update version 1 for feature no.such.feature. Local controller 1 does not support this feature."),
    ([("no.such.feature", 0, SAFE)], "Invalid update version 0 for feature no.such.feature. Feature "
                                     "no.such.feature not found."),
    ([("transaction.version", 3, UPGRADE)], "Local controller 1 only supports versions 0-2"),
    ([("transaction.version", -1, SAFE)], "A feature version cannot be less than 0."),
    ([("transaction.version", 1, UPGRADE)], "without setting the upgrade type to either safe or unsafe"),
    ([("transaction.version", 1, 0)], "The controller does not support the given upgrade type."),
    ([("transaction.version", 1, 7)], "The controller does not support the given upgrade type."),
    ([("group.version", 1, SAFE)], None),  # same level: fine
    ([("metadata.version", 22, SAFE)], "Unsupported metadata.version downgrade from 29 to 22. Refusing"),
    ([("metadata.version", 22, UNSAFE)], "Unsafe metadata downgrade is not supported in this version."),
    ([("metadata.version", 6, SAFE)], "only supports versions 7-29"),
    ([("kraft.version", 0, SAFE)], "Can't downgrade the version of this feature."),
    ([("eligible.leader.replicas.version", 0, SAFE), ("metadata.version", 23, SAFE)], None),
])
def test_kafka_validation(broker, updates, message):
    before = _features(broker)
    r = _update(broker, 1, updates)
    if message is None:
        assert r.error_code == 0, r
        return
    assert r.error_code == INVALID_UPDATE_VERSION
    assert r.error_message.startswith("The update failed for all features since the following feature had an "
                                      "error: ")
    assert message in r.error_message
    assert list(r.results) == []
    assert _features(broker) == before  # nothing changed, not even the epoch


def test_first_refusal_fails_the_whole_request(broker):
    r = _update(broker, 1, [("transaction.version", 1, SAFE), ("group.version", 5, UPGRADE)])
    assert r.error_code == INVALID_UPDATE_VERSION
    assert _features(broker)[1]["transaction.version"] == (2, 2)


def test_upgrade_to_a_newer_level_with_a_downgrade_type(broker):
    _update(broker, 2, [("transaction.version", 1, SAFE)])
    r = _update(broker, 2, [("transaction.version", 2, SAFE)])
    assert r.error_code == INVALID_UPDATE_VERSION and "Can't downgrade to a newer version." in r.error_message


def test_a_dependency_is_checked(broker):
    assert _update(broker, 1, [("eligible.leader.replicas.version", 0, SAFE),
                               ("metadata.version", 24, SAFE)]).error_code == 0
    r = _update(broker, 1, [("metadata.version", 22, SAFE)])
    assert r.error_code == INVALID_UPDATE_VERSION  # 23 changed the metadata format


def test_validate_only_changes_nothing(broker):
    before = _features(broker)
    r = _update(broker, 1, [("transaction.version", 1, SAFE)], validate_only=True)
    assert r.error_code == 0 and [x.feature for x in r.results] == ["transaction.version"]
    assert _features(broker) == before


def test_levels_survive_a_restart_and_go_with_a_reset(broker):
    assert _update(broker, 2, [("transaction.version", 1, SAFE), ("group.version", 0, SAFE)]).error_code == 0
    _s, _f, epoch = _features(broker)
    broker.restart()
    _s, finalized, epoch_after = _features(broker)
    assert finalized["transaction.version"] == (1, 1) and "group.version" not in finalized
    assert epoch_after == epoch
    broker.control("reset")
    _s, finalized, epoch_reset = _features(broker)
    assert finalized["transaction.version"] == (2, 2) and finalized["group.version"] == (1, 1)
    assert epoch_reset > epoch


def test_initial_levels_setting(tmp_path):
    with ThreadedBroker(tmp_path, overrides={"odradek.initial.features": "transaction.version=1"}) as b:
        assert _features(b)[1]["transaction.version"] == (1, 1)


@pytest.mark.parametrize("release", ["2.8", "3.5", "3.9", "4.0", "4.1"])
def test_emulated_release_features(tmp_path, release):
    with ThreadedBroker(tmp_path, overrides={"odradek.emulate.kafka.version": release}) as b:
        with _client(b) as c:
            r = c.request(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    row = release_features(release)
    assert {f.name for f in r.supported_features} == {f.name for f in row if f.min_level != 0}
    assert {f.name: f.max_version_level for f in r.finalized_features} == {
        f.name: f.default for f in row if f.default != 0}
    assert r.finalized_features_epoch == (-1 if not row else r.finalized_features_epoch)


def test_table_covers_every_release():
    from odradek.protocol.kafka_releases import RELEASES

    for release in RELEASES:
        assert release_features(release) is not None
    assert release_features("") == RELEASE_FEATURES["4.2"]


@pytest.mark.parametrize(("super_users", "code"), [("", 31), ("User:ANONYMOUS", 0)])
def test_the_authorizer_wants_alter_on_the_cluster(tmp_path, super_users, code):
    """``ControllerApis.handleUpdateFeatures``: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED."""
    overrides = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "super.users": super_users}
    with ThreadedBroker(tmp_path, overrides=overrides) as b:
        r = _update(b, 1, [("transaction.version", 1, SAFE)])
        assert r.error_code == code
        assert _features(b)[1]["transaction.version"] == ((1, 1) if code == 0 else (2, 2))


def test_kafka_python_admin_describes_and_updates_features(broker):
    """kafka-python 3's KafkaAdminClient: describe_features (ApiVersions) and update_features."""
    from kafka import KafkaAdminClient  # noqa: PLC0415
    from kafka.errors import KafkaError  # noqa: PLC0415

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10000)
    try:
        before = admin.describe_features()
        assert before["transaction.version"]["finalized"] == (2, 2)
        assert before["metadata.version"]["supported"] == (7, 29)
        assert admin.update_features({"transaction.version": ("SAFE_DOWNGRADE", 1)}) == {
            "transaction.version": "OK"}
        after = admin.describe_features()
        assert after["transaction.version"]["finalized"] == (1, 1)
        assert after["transaction.version"]["finalized_epoch"] > before["transaction.version"]["finalized_epoch"]
        with pytest.raises(KafkaError) as e:
            admin.update_features({"transaction.version": ("UPGRADE", 3)})
        assert "INVALID_UPDATE_VERSION" in repr(e.value) or "InvalidUpdateVersion" in repr(e.value)
        assert admin.update_features({"transaction.version": 2}) == {"transaction.version": "OK"}
        assert admin.describe_features()["transaction.version"]["finalized"] == (2, 2)
    finally:
        admin.close()


def test_a_reset_cut_short_by_a_crash_forgets_the_levels_too(tmp_path):
    from odradek.broker.control.reset import RESET_MARKER  # noqa: PLC0415

    with ThreadedBroker(tmp_path) as b:
        assert _update(b, 1, [("transaction.version", 1, SAFE)]).error_code == 0
        epoch = _features(b)[2]
    (tmp_path / RESET_MARKER).write_text("")  # as a reset killed half-way leaves it
    with ThreadedBroker(tmp_path) as b:
        _s, finalized, epoch_after = _features(b)
    assert finalized["transaction.version"] == (2, 2) and epoch_after > epoch
