"""BrokerContext: what request handlers may use of the broker that runs them.

Handlers in :mod:`odradek.broker.apis` are written against this protocol, not against
:class:`~odradek.broker.server.KafkaServer` (Kafka's ``KafkaApis`` gets its collaborators
injected the same way), so the handler modules never import the server that dispatches to
them.  ``KafkaServer`` satisfies it structurally.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from odradek.broker.fetch_session import FetchSessionCache
    from odradek.broker.group.coordinator import GroupCoordinator
    from odradek.broker.metadata_cache import MetadataCache
    from odradek.broker.producer_id_manager import ProducerIdManager
    from odradek.broker.replica_manager import ReplicaManager
    from odradek.broker.transaction.coordinator import TransactionCoordinator
    from odradek.config import KafkaConfig
    from odradek.controller.controller import KafkaController
    from odradek.net.server import Request
    from odradek.security.acls import AclAuthorizer, Operation, ResourceType
    from odradek.zk.admin_zk_client import AdminZkClient
    from odradek.zk.client import KafkaZkClient

__all__ = ["BrokerContext"]


class BrokerContext(Protocol):
    """The broker's collaborators, as request handlers see them."""

    broker_id: int
    cluster_id: str | None
    config: KafkaConfig
    zk: KafkaZkClient
    metadata_cache: MetadataCache
    replica_manager: ReplicaManager
    fetch_sessions: FetchSessionCache
    group_coordinator: GroupCoordinator
    transaction_coordinator: TransactionCoordinator
    producer_ids: ProducerIdManager
    topic_admin: AdminZkClient
    controller: KafkaController
    # None without authorizer.class.name: handlers then skip their checks entirely.
    authorizer: AclAuthorizer | None

    def authorize(self, request: Request, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        """Whether the request's principal, from its client host, may perform ``operation``
        on ``resource_type``/``name`` (always true without ``authorizer.class.name``)."""
        ...
