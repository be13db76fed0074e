"""FakeBroker: one object that satisfies every request-handler family's Protocol
(:mod:`odradek.broker.context`) without sockets or ZooKeeper, for unit tests of the handlers.

Real pieces where they are simpler than fakes: the broker's KafkaConfig, a MetadataCache fed
with UpdateMetadata, a ReplicaManager over a LogManager in a temporary directory, the fetch
sessions, the group and transaction coordinators over that replica manager (as the server
wires them), and an AclAuthorizer over the ACLs the in-memory ACL store holds.  In memory:
ZooKeeper's config znodes, the topic admin (which, standing in for the controller too, makes
this broker lead a new topic's partitions before it returns), the controller's role and
event queue, producer ids and the transaction marker channel.

A test sends a request with :meth:`FakeBroker.call`, through the handler table and the wire
encodings, exactly as a connection would hand it to the handler.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import os
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from control_helpers import lai_state, leader_and_isr, um_broker, um_state, update_metadata
from kazoo.protocol.states import ZnodeStat

from odradek.broker.apis import load_handlers
from odradek.broker.fetch_session import FetchSessionCache
from odradek.broker.group.coordinator import GroupCoordinator
from odradek.broker.group.group_config import GroupConfig
from odradek.broker.group.group_metadata_manager import GroupMetadataManager
from odradek.broker.group.offsets_topic import ReplicatedOffsetsTopic
from odradek.broker.group.scheduler import AsyncioScheduler
from odradek.broker.metadata_cache import MetadataCache
from odradek.broker.quota.quota_managers import QuotaManagers
from odradek.broker.quota.throttling import handle_with_quotas
from odradek.broker.replica_manager import PartitionVerifier, ReplicaManager
from odradek.broker.transaction.coordinator import TransactionCoordinator
from odradek.broker.transaction.state_manager import TransactionStateManager
from odradek.broker.transaction.state_topic import ReplicatedTransactionStateTopic
from odradek.broker.transaction.txn_config import TxnConfig
from odradek.common import TopicPartition
from odradek.config import KafkaConfig
from odradek.controller.events import ControllerEvent
from odradek.log.log_manager import LogManager, LogManagerConfig
from odradek.net.kafka_channel import KafkaChannel
from odradek.net.server import Request
from odradek.protocol.errors import (
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from odradek.protocol.framing import decode_request_header, decode_response, encode_request
from odradek.security.acl_filters import AclBindingFilter, matching_bindings
from odradek.security.acls import (
    ANONYMOUS,
    CLUSTER_RESOURCE_NAME,
    Acl,
    AclAuthorizer,
    KafkaPrincipal,
    Operation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from odradek.zk.acl_store import AclUpdateConflict
from odradek.zk.zk_data import ConfigEntityZNode, LeaderAndIsr, TopicZNode

__all__ = ["BROKER_ID", "CLIENT_ID", "LISTENER", "OTHER_BROKER", "FakeBroker", "FakeConnection", "WithBroker", "decode_answer",
           "run_with_broker"]

BROKER_ID = 0
OTHER_BROKER = 1  # leads what this broker follows; never alive, so nothing fetches from it
LISTENER = "PLAINTEXT"
_CORRELATION_ID = 7
CLIENT_ID = "fake-client"
R = TypeVar("R")

# The with_broker fixture (conftest.py): with_broker(body, **options) runs body(broker).
WithBroker = Callable[..., Any]


class FakeConnection:
    """What handlers read of the connection a request came in on; ``channel`` is a real
    KafkaChannel, which a quota's throttle mutes."""

    def __init__(self, principal: KafkaPrincipal = ANONYMOUS, client_host: str = "127.0.0.1") -> None:
        self.listener = LISTENER
        self.peer = f"{client_host}:50000"
        self.client_host = client_host
        self.principal = principal
        self.authenticator = None
        self.closed = False
        self.channel = KafkaChannel(connection=self)

    def close(self) -> None:
        self.closed = True

    def mute(self, until_ns: int) -> None:
        self.channel.mute(until_ns)


class FakeZk:
    """The znodes the handlers read and write: topics' existence and config entities."""

    def __init__(self) -> None:
        self.topics: set[str] = set()
        self.configs: dict[tuple[str, str], dict[str, str]] = {}  # (entity type, entity) -> config

    async def exists(self, path: str) -> ZnodeStat | None:
        if path not in {TopicZNode.path(t) for t in self.topics}:
            return None
        return ZnodeStat(*([0] * len(ZnodeStat._fields)))

    async def get_children(self, path: str) -> list[str] | None:
        """The znodes below ``path`` that the stored configs imply (``users/alice/clients/app``
        makes ``alice`` a child of ``/config/users``), as ZooKeeper would list them."""
        prefix = path.rstrip("/") + "/"
        children = {ConfigEntityZNode.path(entity_type, entity)[len(prefix):].split("/")[0]
                    for entity_type, entity in self.configs
                    if ConfigEntityZNode.path(entity_type, entity).startswith(prefix)}
        return sorted(children) if children else None

    async def get_entity_config(self, entity_type: str, entity: str) -> dict[str, str] | None:
        config = self.configs.get((entity_type, entity))
        return None if config is None else dict(config)

    async def set_entity_config(self, entity_type: str, entity: str, config: Mapping[str, str]) -> None:
        self.configs[(entity_type, entity)] = dict(config)

    async def get_topic_config(self, topic: str) -> dict[str, str]:
        return dict(self.configs.get(("topics", topic), {}))

    async def get_topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        return {topic: await self.get_topic_config(topic) for topic in topics}

    async def get_broker_config(self, entity: str) -> dict[str, str]:
        return dict(self.configs.get(("brokers", entity), {}))

    async def set_broker_config(self, entity: str, config: Mapping[str, str]) -> None:
        self.configs[("brokers", entity)] = dict(config)


class FakeTopicAdmin:
    """AdminZkClient's writes, and the controller's answer to them at once: this broker leads
    the new partitions (or, with ``online`` False, nobody does: they never get a leader)."""

    def __init__(self, broker: FakeBroker) -> None:
        self.broker = broker
        self.online = True
        self.fail_with: Exception | None = None  # raised by every call while set
        self.added: list[tuple[str, int, dict[int, list[int]] | None]] = []

    def _check(self, topic: str, *, exists: bool) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        if exists and topic not in self.broker.zk.topics:
            raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.")

    async def create_topic(self, topic: str, partitions: int | None = None, replication_factor: int | None = None,
                           *, assignment: Mapping[int, Sequence[int]] | None = None,
                           config: Mapping[str, str] | None = None, validate_only: bool = False
                           ) -> dict[int, list[int]]:
        self._check(topic, exists=False)
        if topic in self.broker.zk.topics:
            raise TopicAlreadyExistsError(f"Topic '{topic}' already exists.")
        if assignment is None:
            assert partitions is not None
            assignment = {p: [BROKER_ID] for p in range(partitions)}
        if not validate_only:
            self.broker.zk.topics.add(topic)
            self.broker.zk.configs[("topics", topic)] = dict(config or {})
            if self.online:
                await self.broker.lead(topic, range(len(assignment)))
        return {p: list(replicas) for p, replicas in assignment.items()}

    async def delete_topic(self, topic: str) -> bool:
        self._check(topic, exists=True)
        self.broker.zk.topics.discard(topic)
        if self.online:
            self.broker.forget(topic)
        return True

    async def add_partitions(self, topic: str, num_partitions: int,
                             assignment: Mapping[int, Sequence[int]] | None = None,
                             *, validate_only: bool = False) -> dict[int, list[int]]:
        self._check(topic, exists=True)
        new = {p: list(r) for p, r in assignment.items()} if assignment is not None else None
        self.added.append((topic, num_partitions, new))
        current = len(self.broker.metadata_cache.partitions_of(topic))
        if not validate_only and self.online:
            await self.broker.lead(topic, range(current, num_partitions))
        return new or {p: [BROKER_ID] for p in range(current, num_partitions)}

    async def alter_topic_config(self, topic: str, config: Mapping[str, str], *,
                                 validate_only: bool = False) -> dict[str, str]:
        self._check(topic, exists=True)
        if not validate_only:
            self.broker.zk.configs[("topics", topic)] = dict(config)
        return dict(config)


class FakeAclStore:
    """ACLs by resource pattern, in memory; the broker's authorizer reads the same mapping."""

    def __init__(self) -> None:
        self.acls: dict[ResourcePattern, frozenset[Acl]] = {}
        self.conflict = False  # every write fails as ZkAclStore's does after its retries

    def _write(self, resource: ResourcePattern, acls: frozenset[Acl]) -> None:
        if self.conflict:
            raise AclUpdateConflict(f"ACLs of {resource} kept changing under concurrent updates")
        if acls:
            self.acls[resource] = acls
        else:
            self.acls.pop(resource, None)

    async def add(self, resource: ResourcePattern, acls: Iterable[Acl]) -> frozenset[Acl]:
        new = self.acls.get(resource, frozenset()) | frozenset(acls)
        self._write(resource, new)
        return new

    async def describe(self, filters: Iterable[AclBindingFilter]) -> dict[ResourcePattern, frozenset[Acl]]:
        return matching_bindings(self.acls, filters)

    async def delete_matching(self, filters: Iterable[AclBindingFilter]
                              ) -> dict[AclBindingFilter, dict[ResourcePattern, frozenset[Acl]]]:
        filters = list(filters)
        removed: dict[AclBindingFilter, dict[ResourcePattern, frozenset[Acl]]] = {f: {} for f in filters}
        for pattern, acls in list(self.acls.items()):
            for f in filters:
                hits = frozenset(acl for acl in acls if f.matches(pattern, acl))
                if hits:
                    removed[f][pattern] = hits
            gone = [taken[pattern] for taken in removed.values() if pattern in taken]
            if gone:
                self._write(pattern, acls.difference(*gone))
        return removed


class FakeController:
    """This broker's controller: active or not, and the events put on its queue."""

    def __init__(self) -> None:
        self.is_active = True
        self.events: list[ControllerEvent] = []
        self.event_manager = self  # the queue is the list above

    def put(self, event: ControllerEvent) -> None:
        self.events.append(event)


class FakeProducerIds:
    def __init__(self) -> None:
        self._ids = itertools.count(1000)

    async def next_id(self) -> int:
        return next(self._ids)


class RecordingMarkers:
    """The transaction marker channel: records each send and reports it written."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int, bool, frozenset[TopicPartition]]] = []

    async def send_markers(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                           coordinator_epoch: int, partitions: Iterable[TopicPartition]) -> bool:
        self.sent.append((transactional_id, producer_id, commit, frozenset(partitions)))
        return True


class FakeBroker:
    """Broker 0 of a cluster where it is the only live broker (see the module docstring)."""

    def __init__(self, log_dir: Path, props: Mapping[str, str] | None = None, *,
                 txn_verifier: PartitionVerifier | None = None,
                 transaction_coordinator: TransactionCoordinator | None = None) -> None:
        self.broker_id = BROKER_ID
        self.cluster_id: str | None = "fake-cluster"
        self.config = KafkaConfig.from_props({
            "broker.id": str(BROKER_ID), "zookeeper.connect": "unused:2181", "log.dirs": str(log_dir),
            "offsets.topic.num.partitions": "1", "offsets.topic.replication.factor": "1",
            "transaction.state.log.num.partitions": "1", "transaction.state.log.replication.factor": "1",
            "group.initial.rebalance.delay.ms": "0", **(props or {})})
        self.metadata_cache = MetadataCache(BROKER_ID)
        self.log_manager = LogManager(LogManagerConfig.from_kafka_config(self.config), self.config.log_config())
        self.log_manager.startup()
        self.replica_manager = ReplicaManager(BROKER_ID, self.config, self.metadata_cache, self.log_manager,
                                              broker_epoch=lambda: -1, txn_verifier=txn_verifier)
        self.fetch_sessions = FetchSessionCache(self.config["max.incremental.fetch.session.cache.slots"])
        self.quotas = QuotaManagers.from_kafka_config(self.config)
        group_config = GroupConfig.from_kafka_config(self.config)
        self.group_coordinator = GroupCoordinator(group_config, GroupMetadataManager(group_config, ReplicatedOffsetsTopic(
            self.replica_manager, group_config.offsets_commit_timeout_ms, group_config.offsets_load_buffer_size)),
            AsyncioScheduler())
        self.producer_ids = FakeProducerIds()
        self.markers = RecordingMarkers()
        txn_config = TxnConfig.from_kafka_config(self.config)
        self.transaction_coordinator = transaction_coordinator or TransactionCoordinator(
            txn_config, TransactionStateManager(txn_config, ReplicatedTransactionStateTopic(
                self.replica_manager, txn_config.append_timeout_ms, txn_config.load_buffer_size)),
            self.producer_ids.next_id, self.markers)
        for coordinator in (self.group_coordinator, self.transaction_coordinator):
            self.replica_manager.on_become_leader.append(coordinator.became_leader)
            self.replica_manager.on_become_follower.append(coordinator.became_follower)
            self.replica_manager.on_stop_replica.append(coordinator.replicas_stopped)
        self.zk = FakeZk()
        self.topic_admin = FakeTopicAdmin(self)
        self.acl_store = FakeAclStore()
        self.authorizer: AclAuthorizer | None = None
        self.controller = FakeController()
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._handlers = load_handlers()
        # The controller's first UpdateMetadata: this broker alive, no topics yet.
        self.metadata_cache.update(update_metadata({}, [um_broker(BROKER_ID)]))

    # ------------------------------------------------------------------ the cluster around it

    def enable_authorizer(self, *super_users: KafkaPrincipal) -> None:
        """authorizer.class.name set: nothing is allowed without an ACL but to ``super_users``."""
        self.authorizer = AclAuthorizer(self.acl_store.acls, super_users=super_users)

    def allow(self, principal: KafkaPrincipal, operation: Operation, resource_type: ResourceType,
              name: str = CLUSTER_RESOURCE_NAME) -> None:
        """An ALLOW ACL for ``principal`` from any host on the literal resource."""
        pattern = ResourcePattern(resource_type, name, PatternType.LITERAL)
        acl = Acl(principal, PermissionType.ALLOW, "*", operation)
        self.acl_store.acls[pattern] = self.acl_store.acls.get(pattern, frozenset()) | {acl}

    async def lead(self, topic: str, partitions: Iterable[int], *, leader: int = BROKER_ID,
                   leader_epoch: int = 0) -> None:
        """The controller makes ``leader`` (this broker, or a dead one it follows) the leader
        of ``partitions`` of ``topic``: LeaderAndIsr, then UpdateMetadata."""
        self.zk.topics.add(topic)
        topic_id = self._topic_ids.setdefault(topic, uuid.uuid4())
        replicas = (leader,) if leader == BROKER_ID else (leader, BROKER_ID)
        isr = replicas if leader == BROKER_ID else (leader,)
        partitions = list(partitions)
        async with self.replica_manager.state_change_lock:
            await self.replica_manager.become_leader_or_follower(1, leader_and_isr(
                [lai_state(p, leader, leader_epoch, isr, replicas) for p in partitions], topic=topic,
                topic_id=topic_id))
        self.metadata_cache.update(update_metadata(
            {topic: (topic_id, [um_state(p, leader, leader_epoch, isr, replicas) for p in partitions])},
            [um_broker(BROKER_ID)]))

    def forget(self, topic: str) -> None:
        """The topic's deletion completes: it leaves the metadata cache."""
        partitions = list(self.metadata_cache.partitions_of(topic))
        self.metadata_cache.update(update_metadata(
            {topic: (None, [um_state(p, LeaderAndIsr.LEADER_DURING_DELETE) for p in partitions])},
            [um_broker(BROKER_ID)]))

    async def shutdown(self) -> None:
        await self.group_coordinator.shutdown()
        await self.transaction_coordinator.shutdown()
        await self.replica_manager.fetchers.shutdown()
        self.log_manager.shutdown()

    # ------------------------------------------------------------------ requests

    async def call(self, payload: Any, response_type: type[R], *, principal: KafkaPrincipal = ANONYMOUS,
                   connection: FakeConnection | None = None, client_id: str = CLIENT_ID) -> R:
        """Hand ``payload`` to its handler as a connection would, and decode the answer."""
        answer = self.send(payload, connection or FakeConnection(principal), client_id)
        if inspect.isawaitable(answer):
            answer = await answer
        return decode_answer(answer, response_type)

    def send(self, payload: Any, connection: FakeConnection, client_id: str = CLIENT_ID) -> object:
        """Hand ``payload`` to its handler (under the quotas, once one is set, as the server
        dispatches) and return what it returns: a response, an awaitable of one (a future a
        delayed operation completes, or a coroutine), or None (Produce with acks=0)."""
        return self.send_frame(encode_request(payload, _CORRELATION_ID, client_id)[4:], connection)

    def send_frame(self, frame: bytes, connection: FakeConnection) -> object:
        """``send`` for a request frame (size prefix excluded) written by the caller: versions
        kio has no schema for (Produce v0-v2)."""
        header, body_offset = decode_request_header(frame)
        handler = self._handlers[header.api_key].handler
        request = Request(header, frame, body_offset, connection)
        if self.quotas.enabled:
            return handle_with_quotas(self.quotas, handler, self, request)
        return handler(self, request)  # type: ignore[arg-type]


def decode_answer(answer: object, response_type: type[R]) -> R:
    """A handler's response, read as the client would read what the socket server writes of
    it (bytes as they are, file regions read from their files)."""
    assert answer is not None, "no answer (acks=0)"
    if isinstance(answer, (bytes, bytearray, memoryview)):
        frame = bytes(answer)
    else:
        assert isinstance(answer, Sequence)
        frame = b"".join(bytes(part) if isinstance(part, (bytes, bytearray, memoryview))
                         else os.pread(part.fd, part.size, part.position) for part in answer)
    correlation_id, response = decode_response(frame[4:], response_type)
    assert correlation_id == _CORRELATION_ID
    return response


def run_with_broker(log_dir: Path, body: Callable[[FakeBroker], Awaitable[R]], **options: Any) -> R:
    """Run ``body`` in a fresh event loop against a FakeBroker (``options`` are its own)."""
    async def main() -> R:
        broker = FakeBroker(log_dir, **options)
        try:
            return await body(broker)
        finally:
            await broker.shutdown()
    return asyncio.run(main())
