"""Authorization helpers shared by the request handlers (Kafka 2.8's AuthHelper).

Each handler states Kafka's KafkaApis rule for its API next to the check; these helpers only
keep the checks cheap: one decision per distinct resource name (never per partition), and none
at all when the broker runs without an authorizer.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from odradek.security.acl_filters import operation_code
from odradek.security.acls import CLUSTER_RESOURCE_NAME, Operation, ResourceType

if TYPE_CHECKING:
    from odradek.broker.context import AuthorizingContext
    from odradek.net.server import Request

__all__ = ["OMITTED_OPERATIONS", "authorized", "authorized_by_resource_type", "authorized_names",
           "authorized_operations", "cluster_authorized", "unauthorized_names"]

# KIP-430's authorized_operations when the client did not ask for them.
OMITTED_OPERATIONS = -2147483648
# Kafka's AclEntry.supportedOperations: what each resource type's authorized_operations covers.
_SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DELETE, Operation.ALTER,
                         Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
    ResourceType.GROUP: (Operation.READ, Operation.DELETE, Operation.DESCRIBE),
    ResourceType.CLUSTER: (Operation.CREATE, Operation.ALTER, Operation.DESCRIBE, Operation.CLUSTER_ACTION,
                           Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE),
}


def authorized(broker: AuthorizingContext, request: Request, operation: Operation, resource_type: ResourceType,
               name: str) -> bool:
    """Whether the request's principal, from its client host, may perform ``operation`` on
    ``resource_type``/``name`` (always true without ``authorizer.class.name``)."""
    authorizer = broker.authorizer
    if authorizer is None:
        return True
    connection = request.connection
    return authorizer.authorize(connection.principal, connection.client_host, operation, resource_type, name)


def authorized_names(broker: AuthorizingContext, request: Request, operation: Operation,
                     resource_type: ResourceType, names: Iterable[str | None]) -> set[str]:
    """AuthHelper.filterByAuthorized: the distinct names the request's principal may perform
    ``operation`` on (all of them without an authorizer; a None name never)."""
    distinct = {name for name in names if name is not None}
    if broker.authorizer is None:
        return distinct
    return {name for name in distinct if authorized(broker, request, operation, resource_type, name)}


def unauthorized_names(broker: AuthorizingContext, request: Request, operation: Operation,
                       resource_type: ResourceType, names: Iterable[str | None]) -> set[str]:
    """The distinct names the principal may not perform ``operation`` on (empty without an
    authorizer): the cheap form for the hot paths, which act on the exceptions only."""
    if broker.authorizer is None:
        return set()
    distinct = {name for name in names if name is not None}
    return {name for name in distinct if not authorized(broker, request, operation, resource_type, name)}


def cluster_authorized(broker: AuthorizingContext, request: Request, operation: Operation) -> bool:
    """Whether the principal may perform ``operation`` on the cluster resource (``kafka-cluster``)."""
    return authorized(broker, request, operation, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME)


def authorized_operations(broker: AuthorizingContext, request: Request, resource_type: ResourceType,
                          name: str = CLUSTER_RESOURCE_NAME) -> int:
    """AuthHelper.authorizedOperations (KIP-430): a bit (Kafka's AclOperation code) for each
    operation of the resource type the principal may perform on ``name``; every one of them
    without an authorizer."""
    return sum(1 << operation_code(op) for op in _SUPPORTED_OPERATIONS[resource_type]
               if authorized(broker, request, op, resource_type, name))


def authorized_by_resource_type(broker: AuthorizingContext, request: Request, operation: Operation,
                                resource_type: ResourceType) -> bool:
    """AuthHelper.authorizeByResourceType (KIP-679): whether the principal may perform
    ``operation`` on some resource of the type (always true without an authorizer)."""
    authorizer = broker.authorizer
    if authorizer is None:
        return True
    connection = request.connection
    return authorizer.authorize_by_resource_type(connection.principal, connection.client_host, operation, resource_type)
