"""Authorization helpers shared by the request handlers (Kafka 2.8's AuthHelper).

Each handler states Kafka's KafkaApis rule for its API next to the check; these helpers only
keep the checks cheap: one decision per distinct resource name (never per partition), and none
at all when the broker runs without an authorizer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from odradek.security.acls import CLUSTER_RESOURCE_NAME, Operation, ResourceType

if TYPE_CHECKING:
    from odradek.broker.context import AuthorizingContext
    from odradek.net.server import Request

__all__ = ["authorized", "authorized_names", "authorized_operations", "cluster_authorized", "unauthorized_names"]


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


def authorized_operations(broker: AuthorizingContext, request: Request, resource_type: ResourceType, name: str,
                          codes: Mapping[Operation, int]) -> int:
    """AuthHelper.authorizedOperations (KIP-430): the bit field (Kafka's AclOperation codes) of
    the operations in ``codes``, those the resource type supports, that the principal may perform
    on the resource; all of them without an authorizer."""
    return sum(1 << code for op, code in codes.items()
               if authorized(broker, request, op, resource_type, name))


def cluster_authorized(broker: AuthorizingContext, request: Request, operation: Operation) -> bool:
    """Whether the principal may perform ``operation`` on the cluster resource (``kafka-cluster``)."""
    return authorized(broker, request, operation, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME)
