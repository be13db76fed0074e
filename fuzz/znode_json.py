"""Target ``znode_json``: the content of every znode the broker and controller read, as a
foreign tool (or an older Kafka) may have written it.

Input: a byte choosing the znode (``DECODERS``, in order), then the znode's bytes.

Entry: the codecs of ``zk.zk_data`` (cluster id, controller, controller epoch, broker
registration, topic assignment, partition state, config entities with their SCRAM
credentials as the broker's ``CredentialCache`` takes them, config change notifications,
reassignment, preferred election, log-directory events, producer-id blocks) and
``security.acls`` (ACL znodes and ACL change notifications).

Property: a decoder raises nothing but ``ValueError`` (``zk_data.MalformedZNodeError`` and the
ACL codecs' ValueError; json's and UTF-8's errors are ValueErrors too), and what it returns
has the types its callers rely on (broker ids, partitions and epochs are ints, names strings).
"""

from __future__ import annotations

from collections.abc import Callable

from odradek.broker.credentials import CredentialCache
from odradek.security.acls import Acl, PatternType, ResourcePattern, decode_acl_change, decode_acls
from odradek.zk.zk_data import (
    BrokerIdZNode,
    ClusterIdZNode,
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityZNode,
    ControllerEpochZNode,
    ControllerZNode,
    LogDirEventNotificationSequenceZNode,
    PreferredReplicaElectionZNode,
    ProducerIdBlockZNode,
    ReassignPartitionsZNode,
    TopicPartitionStateZNode,
    TopicZNode,
)

ALLOWED = (ValueError,)


def _ints(values: object) -> bool:
    return all(type(v) is int for v in values)  # type: ignore[attr-defined]


def _broker(data: bytes) -> None:
    info = BrokerIdZNode.decode(1, data)
    assert all(isinstance(e.listener, str) and isinstance(e.host, str) and type(e.port) is int
               and isinstance(e.security_protocol, str) for e in info.endpoints)
    assert info.rack is None or isinstance(info.rack, str)
    assert type(info.timestamp_ms) is int


def _topic(data: bytes) -> None:
    assignment = TopicZNode.decode(data)
    for replicas in (assignment.partitions, assignment.adding_replicas, assignment.removing_replicas):
        assert _ints(replicas) and all(_ints(r) for r in replicas.values())
    assert assignment.topic_id is None or isinstance(assignment.topic_id, str)


def _partition_state(data: bytes) -> None:
    state = TopicPartitionStateZNode.decode(data, 0)
    assert _ints((state.leader, state.leader_epoch, state.controller_epoch)) and _ints(state.isr)


def _config_entity(data: bytes) -> None:
    config = ConfigEntityZNode.decode(data)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in config.items())
    CredentialCache().update("alice", config)  # logs and skips a malformed credential


def _config_change(data: bytes) -> None:
    entity_type, name = ConfigEntityChangeNotificationSequenceZNode.decode(data)
    assert isinstance(entity_type, str) and isinstance(name, str)


def _reassignment(data: bytes) -> None:
    for (topic, partition), replicas in ReassignPartitionsZNode.decode(data).items():
        assert isinstance(topic, str) and type(partition) is int and _ints(replicas)


def _preferred_election(data: bytes) -> None:
    assert all(isinstance(t, str) and type(p) is int for t, p in PreferredReplicaElectionZNode.decode(data))


def _optional_ints(decode: Callable[[bytes], object]) -> Callable[[bytes], None]:
    def check(data: bytes) -> None:
        value = decode(data)
        assert value is None or _ints(value if isinstance(value, tuple) else (value,))
    return check


def _acls(data: bytes) -> None:
    assert all(isinstance(acl, Acl) and isinstance(acl.host, str) for acl in decode_acls(data))


def _acl_change(pattern_type: PatternType) -> Callable[[bytes], None]:
    def check(data: bytes) -> None:
        resource = decode_acl_change(pattern_type, data)
        assert isinstance(resource, ResourcePattern) and isinstance(resource.name, str)
    return check


DECODERS: tuple[tuple[str, Callable[[bytes], None]], ...] = (
    ("cluster_id", lambda data: _check_str(ClusterIdZNode.decode(data))),
    ("controller", _optional_ints(ControllerZNode.decode)),
    ("controller_epoch", lambda data: _check_int(ControllerEpochZNode.decode(data))),
    ("broker", _broker),
    ("topic", _topic),
    ("partition_state", _partition_state),
    ("config_entity", _config_entity),
    ("config_change", _config_change),
    ("reassignment", _reassignment),
    ("preferred_election", _preferred_election),
    ("log_dir_event", _optional_ints(LogDirEventNotificationSequenceZNode.decode)),
    ("producer_id_block", _optional_ints(ProducerIdBlockZNode.decode)),
    ("acls", _acls),
    ("acl_change_literal", _acl_change(PatternType.LITERAL)),
    ("acl_change_extended", _acl_change(PatternType.PREFIXED)),
)


def _check_str(value: object) -> None:
    assert isinstance(value, str), f"expected a string, got {value!r}"


def _check_int(value: object) -> None:
    assert type(value) is int, f"expected an int, got {value!r}"


def test_one_input(data: bytes) -> None:
    if not data:
        return
    _name, check = DECODERS[data[0] % len(DECODERS)]
    try:
        check(data[1:])
    except ALLOWED:
        pass
