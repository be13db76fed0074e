"""DescribeAcls (key 29), CreateAcls (key 30) and DeleteAcls (key 31).

Kafka 2.8 serves versions 0-2; kio (generated from a later Kafka) has no version 0 schemas, so
versions 1-2 are served (v1 added prefixed patterns, v2 is the flexible encoding).  As
KafkaApis.handle*AclsRequest: the principal needs Alter on the Cluster to create or delete
ACLs and Describe on the Cluster to list them (CLUSTER_AUTHORIZATION_FAILED otherwise); a
broker without ``authorizer.class.name`` answers SECURITY_DISABLED.  The ACLs are read and
written in ZooKeeper (zk.acl_store), and the broker's authorizer learns of changes through the
change notifications the store writes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from odradek.broker.apis.authorization import cluster_authorized
from odradek.broker.apis.registry import api, build, decode_body, respond, response_module
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.security.acl_filters import (
    AclBindingFilter,
    AclFilter,
    ResourcePatternFilter,
    operation_code,
    operation_from_code,
    pattern_type_code,
    pattern_type_from_code,
    permission_code,
    permission_from_code,
    resource_type_code,
    resource_type_from_code,
)
from odradek.security.acls import (
    CLUSTER_RESOURCE_NAME,
    Acl,
    KafkaPrincipal,
    Operation,
    ResourcePattern,
    ResourceType,
)
from odradek.zk.acl_store import AclUpdateConflict

if TYPE_CHECKING:
    from odradek.broker.context import AclsContext
    from odradek.net.server import Request, Response

NO_AUTHORIZER = "No Authorizer is configured on the broker"
_CLUSTER_AUTHORIZATION = "Cluster authorization failed."


def _authorizer_configured(broker: AclsContext) -> bool:
    return broker.authorizer is not None


def _binding_filter(item: Any) -> AclBindingFilter:
    """A DescribeAcls request or a DeleteAcls filter as an AclBindingFilter; ValueError if it
    has UNKNOWN elements (Kafka: INVALID_REQUEST)."""
    pattern_type = pattern_type_from_code(getattr(item, "pattern_type_filter", 3), allow_any=True)
    return AclBindingFilter(
        ResourcePatternFilter(resource_type_from_code(item.resource_type_filter, allow_any=True),
                              item.resource_name_filter, pattern_type),
        AclFilter(item.principal_filter, item.host_filter, operation_from_code(item.operation, allow_any=True),
                  permission_from_code(item.permission_type, allow_any=True)))


def _binding(creation: Any) -> tuple[ResourcePattern, Acl]:
    """A CreateAcls creation as a (pattern, ACL); ValueError with Kafka's reason if invalid."""
    resource_type = resource_type_from_code(creation.resource_type)
    pattern_type = pattern_type_from_code(getattr(creation, "resource_pattern_type", 3))
    name = creation.resource_name
    if not name:
        raise ValueError("Invalid empty resource name specified")
    if resource_type is ResourceType.CLUSTER and name != CLUSTER_RESOURCE_NAME:
        raise ValueError(f"The only valid name for the CLUSTER resource is {CLUSTER_RESOURCE_NAME}")
    if "/" in name:
        raise ValueError(f"ACL binding contains invalid resource name: {name}")
    assert resource_type is not None and pattern_type is not None and not isinstance(pattern_type, str)
    acl = Acl(KafkaPrincipal.parse(creation.principal), permission_from_code(creation.permission_type),
              creation.host, operation_from_code(creation.operation))
    return ResourcePattern(resource_type, name, pattern_type), acl


@api(ApiKey.CREATE_ACLS, "CreateAcls", 1, 2)
async def handle_create_acls(broker: AclsContext, request: Request) -> Response:
    body = decode_body(request)
    m = response_module(ApiKey.CREATE_ACLS, request.api_version)

    def results(code: ErrorCode, message: str | None) -> tuple[Any, ...]:
        return tuple(build(m.AclCreationResult, error_code=code, error_message=message) for _ in body.creations)

    if not cluster_authorized(broker, request, Operation.ALTER):
        out = results(ErrorCode.cluster_authorization_failed, _CLUSTER_AUTHORIZATION)
    elif not _authorizer_configured(broker):
        out = results(ErrorCode.security_disabled, NO_AUTHORIZER)
    else:
        out = tuple([await _create(broker, m, creation) for creation in body.creations])
    return respond(request, build(m.CreateAclsResponse, throttle_time=0, results=out))


async def _create(broker: AclsContext, m: Any, creation: Any) -> Any:
    try:
        pattern, acl = _binding(creation)
    except ValueError as e:
        return build(m.AclCreationResult, error_code=ErrorCode.invalid_request, error_message=str(e))
    try:
        await broker.acl_store.add(pattern, (acl,))
    except AclUpdateConflict as e:
        return build(m.AclCreationResult, error_code=ErrorCode.unknown_server_error, error_message=str(e))
    return build(m.AclCreationResult, error_code=ErrorCode.none, error_message=None)


@api(ApiKey.DESCRIBE_ACLS, "DescribeAcls", 1, 2)
async def handle_describe_acls(broker: AclsContext, request: Request) -> Response:
    body = decode_body(request)
    m = response_module(ApiKey.DESCRIBE_ACLS, request.api_version)

    def failed(code: ErrorCode, message: str) -> Response:
        return respond(request, build(m.DescribeAclsResponse, throttle_time=0, error_code=code,
                                      error_message=message, resources=()))

    if not cluster_authorized(broker, request, Operation.DESCRIBE):
        return failed(ErrorCode.cluster_authorization_failed, _CLUSTER_AUTHORIZATION)
    if not _authorizer_configured(broker):
        return failed(ErrorCode.security_disabled, NO_AUTHORIZER)
    try:
        binding_filter = _binding_filter(body)
    except ValueError as e:
        return failed(ErrorCode.invalid_request, str(e))
    found = await broker.acl_store.describe((binding_filter,))
    resources = tuple(
        build(m.DescribeAclsResource, resource_type=resource_type_code(pattern.resource_type),
              resource_name=pattern.name, pattern_type=pattern_type_code(pattern.pattern_type),
              acls=tuple(build(m.AclDescription, principal=str(acl.principal), host=acl.host,
                               operation=operation_code(acl.operation),
                               permission_type=permission_code(acl.permission))
                         for acl in sorted(acls, key=Acl.sort_key)))
        for pattern, acls in sorted(found.items(), key=lambda item: _pattern_key(item[0])))
    return respond(request, build(m.DescribeAclsResponse, throttle_time=0, error_code=ErrorCode.none,
                                  error_message=None, resources=resources))


def _pattern_key(pattern: ResourcePattern) -> tuple[str, str, str]:
    return pattern.resource_type.value, pattern.pattern_type.value, pattern.name


@api(ApiKey.DELETE_ACLS, "DeleteAcls", 1, 2)
async def handle_delete_acls(broker: AclsContext, request: Request) -> Response:
    body = decode_body(request)
    m = response_module(ApiKey.DELETE_ACLS, request.api_version)

    def results(code: ErrorCode, message: str) -> tuple[Any, ...]:
        return tuple(build(m.DeleteAclsFilterResult, error_code=code, error_message=message, matching_acls=())
                     for _ in body.filters)

    if not cluster_authorized(broker, request, Operation.ALTER):
        out = results(ErrorCode.cluster_authorization_failed, _CLUSTER_AUTHORIZATION)
    elif not _authorizer_configured(broker):
        out = results(ErrorCode.security_disabled, NO_AUTHORIZER)
    else:
        out = await _delete(broker, m, body.filters)
    return respond(request, build(m.DeleteAclsResponse, throttle_time=0, filter_results=out))


async def _delete(broker: AclsContext, m: Any, items: Any) -> tuple[Any, ...]:
    filters: list[AclBindingFilter | None] = []
    for item in items:
        try:
            filters.append(_binding_filter(item))
        except ValueError:
            filters.append(None)
    valid = [f for f in filters if f is not None]
    try:
        removed = await broker.acl_store.delete_matching(valid) if valid else {}
    except AclUpdateConflict as e:
        return tuple(build(m.DeleteAclsFilterResult, error_code=ErrorCode.unknown_server_error,
                           error_message=str(e), matching_acls=()) for _ in filters)
    out = []
    for binding_filter in filters:
        if binding_filter is None:
            out.append(build(m.DeleteAclsFilterResult, error_code=ErrorCode.invalid_request,
                             error_message="The filter contains UNKNOWN elements", matching_acls=()))
            continue
        matching = tuple(
            build(m.DeleteAclsMatchingAcl, error_code=ErrorCode.none, error_message=None,
                  resource_type=resource_type_code(pattern.resource_type), resource_name=pattern.name,
                  pattern_type=pattern_type_code(pattern.pattern_type), principal=str(acl.principal),
                  host=acl.host, operation=operation_code(acl.operation),
                  permission_type=permission_code(acl.permission))
            for pattern, acls in sorted(removed[binding_filter].items(), key=lambda item: _pattern_key(item[0]))
            for acl in sorted(acls, key=Acl.sort_key))
        out.append(build(m.DeleteAclsFilterResult, error_code=ErrorCode.none, error_message=None,
                         matching_acls=matching))
    return tuple(out)
