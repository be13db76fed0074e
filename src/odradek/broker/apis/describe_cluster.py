"""DescribeCluster (key 60): the live brokers on the connection's listener, the controller and
the cluster id, from the metadata cache.  Anyone may ask; the cluster's authorized operations
(KIP-430) are those the principal is allowed, none without Describe on the cluster.  Asked for
controller endpoints (KIP-919), a broker answers MISMATCHED_ENDPOINT_TYPE, as Kafka's does."""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.apis.authorization import (
    OMITTED_OPERATIONS,
    authorized_operations,
    cluster_authorized,
)
from odradek.broker.apis.registry import api, build, decode_body, respond, response_module
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.security.acls import Operation, ResourceType

if TYPE_CHECKING:
    from odradek.broker.context import MetadataContext
    from odradek.net.server import Request, Response


_BROKER_ENDPOINTS = 1  # KIP-919 endpoint types: 1 brokers, 2 controllers


@api(ApiKey.DESCRIBE_CLUSTER, "DescribeCluster", 0, 1)
async def handle_describe_cluster(broker: MetadataContext, request: Request) -> Response:
    body = decode_body(request)
    m = response_module(ApiKey.DESCRIBE_CLUSTER, request.api_version)
    endpoint_type = getattr(body, "endpoint_type", _BROKER_ENDPOINTS)
    cache = broker.metadata_cache
    await cache.wait_initialized()
    if endpoint_type != _BROKER_ENDPOINTS:
        # Kafka's broker answers a request for another kind of endpoint with
        # MISMATCHED_ENDPOINT_TYPE and its response defaults (its own endpoint type, no cluster id).
        return respond(request, build(
            m.DescribeClusterResponse, error_code=ErrorCode.mismatched_endpoint_type,
            error_message=f"The request was sent to an endpoint of type BROKER, but we wanted an endpoint of "
                          f"type {endpoint_type}",
            endpoint_type=_BROKER_ENDPOINTS, cluster_id="", brokers=()))
    brokers = tuple(build(m.DescribeClusterBroker, broker_id=broker_id, host=host, port=port, rack=rack)
                    for broker_id, host, port, rack in cache.brokers_for_listener(request.connection.listener))
    operations = OMITTED_OPERATIONS
    if body.include_cluster_authorized_operations:
        operations = 0
        if cluster_authorized(broker, request, Operation.DESCRIBE):
            operations = authorized_operations(broker, request, ResourceType.CLUSTER)
    return respond(request, build(
        m.DescribeClusterResponse, error_code=ErrorCode.none, error_message=None, endpoint_type=endpoint_type,
        cluster_id=broker.cluster_id or "", controller_id=cache.controller_id if cache.controller_id is not None else -1,
        brokers=brokers, cluster_authorized_operations=operations))
