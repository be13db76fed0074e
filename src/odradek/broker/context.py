"""What request handlers may use of the broker that runs them: one Protocol per API family.

Kafka's ``KafkaApis`` takes eighteen collaborators and every handler sees them all.  Here each
handler module in :mod:`odradek.broker.apis` is written against its family's Protocol, which
names only what that family uses, so handler modules never import the server that dispatches
to them and each family can be tested with a small fake (``tests/unit/broker/fake_broker.py``).
:class:`~odradek.broker.server.KafkaServer` satisfies every one of them structurally.

Members that do no I/O of their own (the metadata cache, the replica manager, the coordinators,
the fetch sessions, the ACL authorizer) are typed as their classes, so a fake holds real ones.
Members that reach ZooKeeper or the controller are typed as narrow Protocols of the calls the
handlers make, so a fake keeps them in memory; they are read-only properties here, which lets
the server's concrete ``KafkaZkClient`` or ``KafkaController`` stand for the narrower type.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from kazoo.protocol.states import ZnodeStat

    from odradek.broker.fetch_session import FetchSessionCache
    from odradek.broker.group.coordinator import GroupCoordinator
    from odradek.broker.metadata_cache import MetadataCache
    from odradek.broker.quota.quota_managers import QuotaManagers
    from odradek.broker.replica_manager import ReplicaManager
    from odradek.broker.transaction.coordinator import TransactionCoordinator
    from odradek.config import KafkaConfig
    from odradek.controller.events import ControllerEvent
    from odradek.security.acl_filters import AclBindingFilter
    from odradek.security.acls import Acl, AclAuthorizer, ResourcePattern

__all__ = [
    "FAMILIES",
    "AclStore",
    "AclsContext",
    "AuthorizingContext",
    "ClientQuotasContext",
    "ConfigStore",
    "ConfigsContext",
    "ControlContext",
    "ControllerInbox",
    "ControllerRole",
    "FindCoordinatorContext",
    "GroupsContext",
    "InternalTopicsContext",
    "LogDirsContext",
    "MetadataContext",
    "ProduceFetchContext",
    "ProducerIds",
    "ScramContext",
    "TopicAdmin",
    "TopicAdminContext",
    "TopicConfigAdmin",
    "TopicCreator",
    "TransactionsContext",
    "UserConfigStore",
]


# ----------------------------------------------------------------------------- collaborators


@runtime_checkable
class TopicCreator(Protocol):
    """Topic creation as AdminZkClient does it (validation, placement, the ZooKeeper write)."""

    async def create_topic(self, topic: str, partitions: int | None = None, replication_factor: int | None = None,
                           *, assignment: Mapping[int, Sequence[int]] | None = None,
                           config: Mapping[str, str] | None = None, validate_only: bool = False
                           ) -> dict[int, list[int]]: ...


@runtime_checkable
class TopicAdmin(TopicCreator, Protocol):
    """CreateTopics, DeleteTopics and CreatePartitions' ZooKeeper writes (AdminZkClient)."""

    async def delete_topic(self, topic: str) -> bool: ...

    async def add_partitions(self, topic: str, num_partitions: int,
                             assignment: Mapping[int, Sequence[int]] | None = None,
                             *, validate_only: bool = False) -> dict[int, list[int]]: ...


@runtime_checkable
class TopicConfigAdmin(Protocol):
    """AlterConfigs' write of a topic's overrides (AdminZkClient)."""

    async def alter_topic_config(self, topic: str, config: Mapping[str, str], *,
                                 validate_only: bool = False) -> dict[str, str]: ...


@runtime_checkable
class ConfigStore(Protocol):
    """The configs' znodes that DescribeConfigs and AlterConfigs read and write (KafkaZkClient)."""

    async def exists(self, path: str) -> ZnodeStat | None: ...

    async def get_topic_config(self, topic: str) -> dict[str, str]: ...

    async def get_broker_config(self, entity: str) -> dict[str, str]: ...

    async def set_broker_config(self, entity: str, config: Mapping[str, str]) -> None: ...


@runtime_checkable
class UserConfigStore(Protocol):
    """``/config/users`` and ``/config/clients``, where SCRAM credentials and client quotas live
    (KafkaZkClient)."""

    async def get_children(self, path: str) -> list[str] | None: ...

    async def get_entity_config(self, entity_type: str, entity: str) -> dict[str, str] | None: ...

    async def set_entity_config(self, entity_type: str, entity: str, config: Mapping[str, str]) -> None: ...


@runtime_checkable
class TopicConfigReader(Protocol):
    """The topic configs a LeaderAndIsr needs for the logs it creates (KafkaZkClient)."""

    async def get_topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]: ...


@runtime_checkable
class AclStore(Protocol):
    """The ACLs in ZooKeeper (zk.acl_store.ZkAclStore)."""

    async def add(self, resource: ResourcePattern, acls: Iterable[Acl]) -> frozenset[Acl]: ...

    async def describe(self, filters: Iterable[AclBindingFilter]) -> dict[ResourcePattern, frozenset[Acl]]: ...

    async def delete_matching(self, filters: Iterable[AclBindingFilter]
                              ) -> dict[AclBindingFilter, dict[ResourcePattern, frozenset[Acl]]]: ...


@runtime_checkable
class ProducerIds(Protocol):
    """Producer ids for idempotent producers (ProducerIdManager: blocks from ZooKeeper)."""

    async def next_id(self) -> int: ...


@runtime_checkable
class ControllerRole(Protocol):
    """Whether this broker's controller is the active one."""

    @property
    def is_active(self) -> bool: ...


@runtime_checkable
class _EventQueue(Protocol):
    def put(self, event: ControllerEvent) -> None: ...


@runtime_checkable
class ControllerInbox(ControllerRole, Protocol):
    """The controller as the requests it serves reach it: an event on its queue."""

    @property
    def event_manager(self) -> _EventQueue: ...


# ----------------------------------------------------------------------------- API families


@runtime_checkable
class AuthorizingContext(Protocol):
    """What every family has: the authorizer, None without ``authorizer.class.name`` (handlers
    then skip their checks entirely; apis/authorization.py asks it)."""

    authorizer: AclAuthorizer | None


@runtime_checkable
class ProduceFetchContext(AuthorizingContext, Protocol):
    """Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords, DescribeProducers."""

    replica_manager: ReplicaManager
    fetch_sessions: FetchSessionCache
    quotas: QuotaManagers  # a consumer's fetch records its bytes (apis/fetch.py)


@runtime_checkable
class InternalTopicsContext(Protocol):
    """FindCoordinator's lookup, which creates ``__consumer_offsets`` or
    ``__transaction_state`` on first use."""

    metadata_cache: MetadataCache

    @property
    def topic_admin(self) -> TopicCreator: ...


@runtime_checkable
class MetadataContext(AuthorizingContext, Protocol):
    """Metadata (with auto topic creation) and DescribeCluster."""

    cluster_id: str | None
    config: KafkaConfig
    metadata_cache: MetadataCache

    @property
    def topic_admin(self) -> TopicCreator: ...


@runtime_checkable
class TopicAdminContext(AuthorizingContext, Protocol):
    """CreateTopics, DeleteTopics, CreatePartitions (the active controller only)."""

    config: KafkaConfig
    metadata_cache: MetadataCache

    @property
    def controller(self) -> ControllerRole: ...

    @property
    def topic_admin(self) -> TopicAdmin: ...


@runtime_checkable
class ConfigsContext(AuthorizingContext, Protocol):
    """DescribeConfigs, AlterConfigs, IncrementalAlterConfigs."""

    broker_id: int
    config: KafkaConfig
    metadata_cache: MetadataCache

    @property
    def topic_admin(self) -> TopicConfigAdmin: ...

    @property
    def zk(self) -> ConfigStore: ...


@runtime_checkable
class GroupsContext(AuthorizingContext, InternalTopicsContext, Protocol):
    """Group membership and administration; OffsetCommit, OffsetFetch, OffsetDelete."""

    group_coordinator: GroupCoordinator


@runtime_checkable
class TransactionsContext(AuthorizingContext, InternalTopicsContext, Protocol):
    """InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
    WriteTxnMarkers, DescribeTransactions, ListTransactions."""

    config: KafkaConfig
    replica_manager: ReplicaManager
    group_coordinator: GroupCoordinator
    transaction_coordinator: TransactionCoordinator

    @property
    def producer_ids(self) -> ProducerIds: ...


@runtime_checkable
class FindCoordinatorContext(GroupsContext, TransactionsContext, Protocol):
    """FindCoordinator answers for groups and for transactional ids."""


@runtime_checkable
class AclsContext(AuthorizingContext, Protocol):
    """CreateAcls, DescribeAcls, DeleteAcls."""

    @property
    def acl_store(self) -> AclStore: ...


@runtime_checkable
class ScramContext(AuthorizingContext, Protocol):
    """DescribeUserScramCredentials, AlterUserScramCredentials (the active controller only)."""

    @property
    def controller(self) -> ControllerRole: ...

    @property
    def zk(self) -> UserConfigStore: ...


@runtime_checkable
class ClientQuotasContext(AuthorizingContext, Protocol):
    """DescribeClientQuotas, AlterClientQuotas (any broker)."""

    @property
    def zk(self) -> UserConfigStore: ...


@runtime_checkable
class ControlContext(AuthorizingContext, Protocol):
    """What brokers and the controller send each other: LeaderAndIsr, StopReplica,
    UpdateMetadata, ControlledShutdown, AlterPartition."""

    replica_manager: ReplicaManager

    @property
    def controller(self) -> ControllerInbox: ...

    @property
    def zk(self) -> TopicConfigReader: ...


@runtime_checkable
class LogDirsContext(AuthorizingContext, Protocol):
    """DescribeLogDirs, AlterReplicaLogDirs."""

    replica_manager: ReplicaManager


# Every family; the broker (and a fake standing in for it) satisfies each.
FAMILIES: tuple[type, ...] = (ProduceFetchContext, MetadataContext, TopicAdminContext, ConfigsContext,
                              GroupsContext, TransactionsContext, FindCoordinatorContext, AclsContext,
                              ScramContext, ClientQuotasContext, ControlContext, LogDirsContext)
