"""Every znode odradek reads or writes: its path and its JSON, byte-compatible with Kafka.

This is Kafka's ``ZkData``: business code asks a znode object for its path and hands it
plain data to encode; nothing else in the code base builds a path string.

A foreign tool (or an older Kafka) may have written what is read back: every ``decode``
raises :class:`MalformedZNodeError` (a ValueError) for content that is not the znode's JSON
with the types Kafka writes, and nothing else.
"""

from __future__ import annotations

import base64
import functools
import json
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import quote, unquote

from odradek.common import now_ms

__all__ = [
    "PERSISTENT_PATHS",
    "AdminZNode",
    "BrokerIdZNode",
    "BrokerIdsZNode",
    "BrokerInfo",
    "ClientQuotaEntity",
    "ClusterIdZNode",
    "ConfigEntityChangeNotificationSequenceZNode",
    "ConfigEntityChangeNotificationZNode",
    "ConfigEntityZNode",
    "ControllerEpochZNode",
    "ControllerZNode",
    "DeleteTopicsTopicZNode",
    "DeleteTopicsZNode",
    "EndPoint",
    "LeaderAndIsr",
    "LogDirEventNotificationSequenceZNode",
    "LogDirEventNotificationZNode",
    "MalformedZNodeError",
    "PreferredReplicaElectionZNode",
    "ProducerIdBlockZNode",
    "ReassignPartitionsZNode",
    "TopicAssignment",
    "TopicConfigZNode",
    "TopicPartitionStateZNode",
    "TopicPartitionZNode",
    "TopicPartitionsZNode",
    "TopicZNode",
    "TopicsZNode",
    "desanitize_entity_name",
    "sanitize_entity_name",
]


def _dumps(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


class MalformedZNodeError(ValueError):
    """A znode's content is not what Kafka writes there."""


_D = TypeVar("_D", bound=Callable[..., Any])


def _decoder(decode: _D) -> _D:
    """Turn every way a decoder can trip over foreign content into MalformedZNodeError:
    missing keys, values of the wrong JSON type, numbers out of range, nesting too deep."""
    @functools.wraps(decode)
    def checked(*args: Any, **kwargs: Any) -> Any:
        try:
            return decode(*args, **kwargs)
        except (KeyError, TypeError, AttributeError, IndexError, ValueError, OverflowError,
                RecursionError) as e:
            if isinstance(e, MalformedZNodeError):
                raise
            raise MalformedZNodeError(f"{decode.__qualname__}: {type(e).__name__}: {e}") from None
    return checked  # type: ignore[return-value]


def _loads(data: bytes | None) -> object:
    if not data:
        return None
    return json.loads(data.decode())


def _object(data: bytes | None) -> dict[str, Any]:
    """The JSON object a znode holds ({} for an empty znode)."""
    obj = _loads(data)
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise MalformedZNodeError(f"expected a JSON object, got {obj!r}")
    return obj


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise MalformedZNodeError(f"expected a string, got {value!r}")
    return value


def _int_list(value: object) -> list[int]:
    """A list of broker ids (JSON integers)."""
    if not isinstance(value, list) or not all(type(b) is int for b in value):
        raise MalformedZNodeError(f"expected a list of integers, got {value!r}")
    return value


def _uuid_string(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


# ----------------------------------------------------------------------------- cluster


class ClusterIdZNode:
    path = "/cluster/id"

    @staticmethod
    def encode(cluster_id: str) -> bytes:
        return _dumps({"version": "1", "id": cluster_id})

    @staticmethod
    @_decoder
    def decode(data: bytes) -> str:
        return _str(_object(data)["id"])

    @staticmethod
    def new_cluster_id() -> str:
        return _uuid_string(uuid.uuid4())


# ----------------------------------------------------------------------------- controller


class ControllerZNode:
    path = "/controller"

    @staticmethod
    def encode(broker_id: int, timestamp_ms: int | None = None) -> bytes:
        return _dumps({
            "version": 1,
            "brokerid": broker_id,
            "timestamp": str(timestamp_ms if timestamp_ms is not None else now_ms()),
        })

    @staticmethod
    @_decoder
    def decode(data: bytes) -> int | None:
        obj = _loads(data)
        if type(obj) is int:  # very old Kafka wrote just the id
            return obj
        return None if obj is None else int(_object(data)["brokerid"])


class ControllerEpochZNode:
    path = "/controller_epoch"

    @staticmethod
    def encode(epoch: int) -> bytes:
        return str(epoch).encode()

    @staticmethod
    @_decoder
    def decode(data: bytes) -> int:
        return int(data.decode())


# ----------------------------------------------------------------------------- brokers


@dataclass(frozen=True, slots=True)
class EndPoint:
    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    @property
    def connection_string(self) -> str:
        # Kafka's Utils.formatAddress: an IPv6 host goes in brackets.
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None
    timestamp_ms: int = 0

    def endpoint(self, listener: str | None = None) -> EndPoint:
        if listener is None:
            return self.endpoints[0]
        for ep in self.endpoints:
            if ep.listener == listener:
                return ep
        raise KeyError(f"broker {self.id} has no listener {listener}")


class BrokerIdsZNode:
    path = "/brokers/ids"


class BrokerIdZNode:
    """``/brokers/ids/<id>`` (ephemeral), Kafka's broker registration JSON version 5."""

    @staticmethod
    def path(broker_id: int) -> str:
        return f"{BrokerIdsZNode.path}/{broker_id}"

    @staticmethod
    def encode(info: BrokerInfo) -> bytes:
        # The top-level host and port are for old clients that only speak PLAINTEXT: Kafka
        # writes the first PLAINTEXT endpoint there, or null and -1 when there is none.
        plaintext = next((e for e in info.endpoints if e.security_protocol == "PLAINTEXT"), None)
        obj: dict[str, object] = {
            "listener_security_protocol_map": {e.listener: e.security_protocol for e in info.endpoints},
            "endpoints": [e.connection_string for e in info.endpoints],
            "jmx_port": -1,
            "features": {},
            "host": plaintext.host if plaintext else None,
            "timestamp": str(info.timestamp_ms or now_ms()),
            "port": plaintext.port if plaintext else -1,
            "version": 5,
        }
        if info.rack is not None:
            obj["rack"] = info.rack
        return _dumps(obj)

    @staticmethod
    @_decoder
    def decode(broker_id: int, data: bytes) -> BrokerInfo:
        obj = _object(data)
        protocols = obj.get("listener_security_protocol_map") or {}
        endpoints = []
        for conn in obj.get("endpoints") or []:
            listener, rest = _str(conn).split("://", 1)
            host, _, port = rest.rpartition(":")
            host = host.strip("[]")
            endpoints.append(EndPoint(listener, host, int(port), _str(protocols.get(listener, listener))))
        if not endpoints and obj.get("host"):
            endpoints.append(EndPoint("PLAINTEXT", _str(obj["host"]), int(obj["port"])))
        rack = obj.get("rack")
        return BrokerInfo(
            id=broker_id,
            endpoints=tuple(endpoints),
            rack=None if rack is None else _str(rack),
            timestamp_ms=int(obj.get("timestamp", 0)),
        )


class BrokerSequenceIdZNode:
    path = "/brokers/seqid"


# ----------------------------------------------------------------------------- topics


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """The content of ``/brokers/topics/<topic>``: replicas per partition (and reassignment)."""

    partitions: Mapping[int, Sequence[int]]
    topic_id: str | None = None
    adding_replicas: Mapping[int, Sequence[int]] = field(default_factory=dict)
    removing_replicas: Mapping[int, Sequence[int]] = field(default_factory=dict)


class TopicsZNode:
    path = "/brokers/topics"


def _int_keyed(obj: Mapping[str, Sequence[int]] | None) -> dict[int, list[int]]:
    return {int(k): _int_list(v) for k, v in (obj or {}).items()}


def _str_keyed(obj: Mapping[int, Sequence[int]]) -> dict[str, list[int]]:
    return {str(k): list(obj[k]) for k in sorted(obj)}


class TopicZNode:
    """``/brokers/topics/<topic>``: Kafka's version 3 JSON (with a topic id)."""

    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicsZNode.path}/{topic}"

    @staticmethod
    def encode(assignment: TopicAssignment) -> bytes:
        obj: dict[str, object] = {
            "partitions": _str_keyed(assignment.partitions),
            "adding_replicas": _str_keyed(assignment.adding_replicas),
            "removing_replicas": _str_keyed(assignment.removing_replicas),
            "version": 3 if assignment.topic_id else 2,
        }
        if assignment.topic_id:
            obj["topic_id"] = assignment.topic_id
        return _dumps(obj)

    @staticmethod
    @_decoder
    def decode(data: bytes) -> TopicAssignment:
        obj = _object(data)
        topic_id = obj.get("topic_id")
        return TopicAssignment(
            partitions=_int_keyed(obj.get("partitions")),
            topic_id=None if topic_id is None else _str(topic_id),
            adding_replicas=_int_keyed(obj.get("adding_replicas")),
            removing_replicas=_int_keyed(obj.get("removing_replicas")),
        )

    @staticmethod
    def new_topic_id() -> str:
        return _uuid_string(uuid.uuid4())


class TopicPartitionsZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicZNode.path(topic)}/partitions"


class TopicPartitionZNode:
    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"{TopicPartitionsZNode.path(topic)}/{partition}"


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """A partition's leadership as the controller decided it (Kafka's LeaderIsrAndControllerEpoch).

    ``zk_version`` is the version of the state znode it was read from or written to; every
    update is conditional on it.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = -1

    NO_LEADER = -1
    # The leader a partition shows while its topic is being deleted (UpdateMetadata).
    LEADER_DURING_DELETE = -2

    def new_leader_and_isr(self, leader: int, isr: Iterable[int]) -> LeaderAndIsr:
        return LeaderAndIsr(leader, self.leader_epoch + 1, tuple(isr), self.controller_epoch,
                            self.zk_version)

    def new_isr(self, isr: Iterable[int]) -> LeaderAndIsr:
        # Kafka bumps the leader epoch on an ISR change made by the controller, so that a
        # broker holding the old state fences itself.
        return LeaderAndIsr(self.leader, self.leader_epoch + 1, tuple(isr), self.controller_epoch,
                            self.zk_version)


class TopicPartitionStateZNode:
    """``/brokers/topics/<t>/partitions/<p>/state``."""

    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"{TopicPartitionZNode.path(topic, partition)}/state"

    @staticmethod
    def encode(state: LeaderAndIsr) -> bytes:
        return _dumps({
            "controller_epoch": state.controller_epoch,
            "leader": state.leader,
            "version": 1,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
        })

    @staticmethod
    @_decoder
    def decode(data: bytes, zk_version: int) -> LeaderAndIsr:
        obj = _object(data)
        return LeaderAndIsr(
            leader=int(obj["leader"]),
            leader_epoch=int(obj["leader_epoch"]),
            isr=tuple(_int_list(obj["isr"])),
            controller_epoch=int(obj["controller_epoch"]),
            zk_version=zk_version,
        )


# ----------------------------------------------------------------------------- config


class ConfigEntityTypeZNode:
    TYPES = ("topics", "clients", "users", "brokers", "ips")

    @staticmethod
    def path(entity_type: str) -> str:
        return f"/config/{entity_type}"


class ConfigEntityZNode:
    """``/config/<entity type>/<entity>``, e.g. ``/config/brokers/0`` or the cluster-wide
    ``/config/brokers/<default>``: ``{"version":1,"config":{...}}`` with string values."""

    # Kafka's ConfigEntityName.Default: the entity whose config applies to every broker.
    DEFAULT = "<default>"

    @staticmethod
    def path(entity_type: str, entity: str) -> str:
        return f"{ConfigEntityTypeZNode.path(entity_type)}/{entity}"

    @staticmethod
    def encode(config: Mapping[str, str]) -> bytes:
        return _dumps({"version": 1, "config": {k: str(v) for k, v in config.items()}})

    @staticmethod
    @_decoder
    def decode(data: bytes | None) -> dict[str, str]:
        obj = _loads(data)
        if not obj:
            return {}
        return {k: str(v) for k, v in (_object(data).get("config") or {}).items()}


class TopicConfigZNode:
    """``/config/topics/<topic>``: the config entity of a topic."""

    @staticmethod
    def path(topic: str) -> str:
        return ConfigEntityZNode.path("topics", topic)

    encode = ConfigEntityZNode.encode
    decode = ConfigEntityZNode.decode


def sanitize_entity_name(name: str) -> str:
    """Kafka's Sanitizer.sanitize: user (and client id) names are URL-encoded in znode names
    (UTF-8; ``*`` as ``%2A``, space as ``%20``), so ``/config/users/<name>`` is always one znode."""
    return quote(name, safe="-_.").replace("~", "%7E")


def desanitize_entity_name(name: str) -> str:
    """Kafka's Sanitizer.desanitize."""
    return unquote(name)


class ConfigEntityChangeNotificationZNode:
    path = "/config/changes"


class ConfigEntityChangeNotificationSequenceZNode:
    """``/config/changes/config_change_<seq>``: tells brokers an entity's config changed."""

    PREFIX = "config_change_"

    @staticmethod
    def path_prefix() -> str:
        return f"{ConfigEntityChangeNotificationZNode.path}/{ConfigEntityChangeNotificationSequenceZNode.PREFIX}"

    @staticmethod
    def encode(entity_type: str, entity_name: str) -> bytes:
        return _dumps({"version": 2, "entity_path": f"{entity_type}/{entity_name}"})

    @staticmethod
    @_decoder
    def decode(data: bytes) -> tuple[str, str]:
        entity_type, _, name = _str(_object(data)["entity_path"]).partition("/")
        return entity_type, name


@dataclass(frozen=True, slots=True)
class ClientQuotaEntity:
    """A client quota entity (KIP-546): a user, a client id, or one client id of one user.
    Each part is its znode name (sanitized, :func:`sanitize_entity_name`), ``<default>`` for
    the default entity, or None where the entity has no such part.  Its quotas live in the
    config map of ``/config/users/<user>`` (beside the user's SCRAM credentials),
    ``/config/users/<user>/clients/<client>`` or ``/config/clients/<client>``."""

    user: str | None = None
    client_id: str | None = None

    def config_entity(self) -> tuple[str, str]:
        """The (entity type, entity name) of its :class:`ConfigEntityZNode` and change notification."""
        if self.user is None:
            if self.client_id is None:
                raise ValueError("a client quota entity names a user, a client id or both")
            return "clients", self.client_id
        if self.client_id is None:
            return "users", self.user
        return "users", f"{self.user}/clients/{self.client_id}"

    @classmethod
    def from_config_entity(cls, entity_type: str, entity_name: str) -> ClientQuotaEntity | None:
        """The entity of a ``users/...`` or ``clients/...`` config entity (a notification's
        entity path), or None for other entity types."""
        if entity_type == "clients":
            return cls(None, entity_name)
        if entity_type != "users":
            return None
        user, sep, client_id = entity_name.partition("/clients/")
        return cls(user, client_id if sep else None)


# ----------------------------------------------------------------------------- admin


class AdminZNode:
    path = "/admin"


class DeleteTopicsZNode:
    path = f"{AdminZNode.path}/delete_topics"


class DeleteTopicsTopicZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"{DeleteTopicsZNode.path}/{topic}"


class ReassignPartitionsZNode:
    """``/admin/reassign_partitions``: a pending reassignment request."""

    path = f"{AdminZNode.path}/reassign_partitions"

    @staticmethod
    def encode(reassignment: Mapping[tuple[str, int], Sequence[int]]) -> bytes:
        return _dumps({
            "version": 1,
            "partitions": [
                {"topic": t, "partition": p, "replicas": list(r)}
                for (t, p), r in sorted(reassignment.items())
            ],
        })

    @staticmethod
    @_decoder
    def decode(data: bytes) -> dict[tuple[str, int], list[int]]:
        return {
            (_str(e["topic"]), int(e["partition"])): _int_list(e["replicas"])
            for e in _object(data).get("partitions", [])
        }


class PreferredReplicaElectionZNode:
    path = f"{AdminZNode.path}/preferred_replica_election"

    @staticmethod
    def encode(partitions: Iterable[tuple[str, int]]) -> bytes:
        return _dumps({
            "version": 1,
            "partitions": [{"topic": t, "partition": p} for t, p in sorted(partitions)],
        })

    @staticmethod
    @_decoder
    def decode(data: bytes) -> set[tuple[str, int]]:
        return {(_str(e["topic"]), int(e["partition"])) for e in _object(data).get("partitions", [])}


class IsrChangeNotificationZNode:
    path = "/isr_change_notification"


class LogDirEventNotificationZNode:
    path = "/log_dir_event_notification"


class LogDirEventNotificationSequenceZNode:
    """``/log_dir_event_notification/log_dir_event_<seq>``: a broker tells the controller one of
    its log directories failed (``{"version":1,"broker":<id>,"event":1}``)."""

    PREFIX = "log_dir_event_"
    LOG_DIR_FAILURE_EVENT = 1

    @staticmethod
    def path_prefix() -> str:
        return f"{LogDirEventNotificationZNode.path}/{LogDirEventNotificationSequenceZNode.PREFIX}"

    @staticmethod
    def path(name: str) -> str:
        """The path of a child named ``name`` (as ``get_children`` lists it)."""
        return f"{LogDirEventNotificationZNode.path}/{name}"

    @staticmethod
    def encode(broker_id: int) -> bytes:
        return _dumps({"version": 1, "broker": broker_id,
                       "event": LogDirEventNotificationSequenceZNode.LOG_DIR_FAILURE_EVENT})

    @staticmethod
    @_decoder
    def decode(data: bytes | None) -> int | None:
        """The broker that wrote the notification (None for an empty or foreign one)."""
        obj = _loads(data)
        if not isinstance(obj, dict) or "broker" not in obj:
            return None
        return int(obj["broker"])


class ConsumerPathZNode:
    path = "/consumers"


class ProducerIdBlockZNode:
    """``/latest_producer_id_block``: the last block of producer ids handed to a broker."""

    path = "/latest_producer_id_block"
    BLOCK_SIZE = 1000

    @staticmethod
    def encode(broker_id: int, block_start: int, block_end: int) -> bytes:
        return _dumps({
            "version": 1,
            "broker": broker_id,
            "block_start": str(block_start),
            "block_end": str(block_end),
        })

    @staticmethod
    @_decoder
    def decode(data: bytes | None) -> tuple[int, int, int] | None:
        obj = _loads(data)
        if not obj:
            return None
        obj = _object(data)
        return int(obj["broker"]), int(obj["block_start"]), int(obj["block_end"])


# Kafka's ZkData.PersistentZkPaths: created by every broker at start-up.
PERSISTENT_PATHS: tuple[str, ...] = (
    ConsumerPathZNode.path,
    BrokerIdsZNode.path,
    TopicsZNode.path,
    ConfigEntityChangeNotificationZNode.path,
    DeleteTopicsZNode.path,
    BrokerSequenceIdZNode.path,
    IsrChangeNotificationZNode.path,
    ProducerIdBlockZNode.path,
    LogDirEventNotificationZNode.path,
    *(ConfigEntityTypeZNode.path(t) for t in ConfigEntityTypeZNode.TYPES),
)


def topic_id_to_uuid(topic_id: str | None) -> uuid.UUID:
    """Kafka's topic id string (URL-safe base64, no padding) as a UUID; zero when unknown."""
    if not topic_id:
        return uuid.UUID(int=0)
    padded = topic_id + "=" * (-len(topic_id) % 4)
    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(padded))
    except (ValueError, TypeError):
        return uuid.UUID(int=0)


def uuid_to_topic_id(value: uuid.UUID | None) -> str | None:
    if value is None or value.int == 0:
        return None
    return _uuid_string(value)
