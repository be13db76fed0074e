"""CreateAcls, DescribeAcls and DeleteAcls handlers on a FakeBroker: the ACLs they write are the
ones its authorizer decides with; no authorizer, no Alter/Describe on the cluster, invalid
bindings and filters, and a store that keeps conflicting."""

from __future__ import annotations

from fake_broker import FakeBroker, WithBroker
from kio.schema.create_acls.v2 import request as create_req
from kio.schema.create_acls.v2 import response as create_resp
from kio.schema.delete_acls.v2 import request as delete_req
from kio.schema.delete_acls.v2 import response as delete_resp
from kio.schema.describe_acls.v2 import request as describe_req
from kio.schema.describe_acls.v2 import response as describe_resp
from kio.schema.metadata.v12 import request as md_req
from kio.schema.metadata.v12 import response as md_resp
from kio.static.primitive import i8

from odradek.broker.apis.acls import NO_AUTHORIZER
from odradek.protocol.errors import ErrorCode as E
from odradek.security.acl_filters import (
    ANY_CODE,
    operation_code,
    pattern_type_code,
    permission_code,
    resource_type_code,
)
from odradek.security.acls import (
    KafkaPrincipal,
    Operation,
    PatternType,
    PermissionType,
    ResourceType,
)

ADMIN = KafkaPrincipal("User", "admin")
ALICE = KafkaPrincipal("User", "alice")
UNKNOWN_CODE = 0


def creation(name: str, operation: Operation = Operation.READ, resource_type: ResourceType = ResourceType.TOPIC,
             principal: str = "User:alice") -> create_req.AclCreation:
    return create_req.AclCreation(
        resource_type=i8(resource_type_code(resource_type)), resource_name=name,
        resource_pattern_type=i8(pattern_type_code(PatternType.LITERAL)), principal=principal, host="*",
        operation=i8(operation_code(operation)), permission_type=i8(permission_code(PermissionType.ALLOW)))


def any_filter(cls: type, resource_type: int = ANY_CODE, name: str | None = None) -> object:
    return cls(resource_type_filter=i8(resource_type), resource_name_filter=name, pattern_type_filter=i8(ANY_CODE),
               principal_filter=None, host_filter=None, operation=i8(ANY_CODE), permission_type=i8(ANY_CODE))


async def create(b: FakeBroker, *creations: create_req.AclCreation, principal: KafkaPrincipal = ADMIN
                 ) -> list[tuple[E, str | None]]:
    response = await b.call(create_req.CreateAclsRequest(creations=creations), create_resp.CreateAclsResponse,
                            principal=principal)
    return [(r.error_code, r.error_message) for r in response.results]


async def describe(b: FakeBroker, resource_type: int = ANY_CODE, principal: KafkaPrincipal = ADMIN
                   ) -> tuple[E, list[tuple[str, str, int]]]:
    response = await b.call(any_filter(describe_req.DescribeAclsRequest, resource_type),
                            describe_resp.DescribeAclsResponse, principal=principal)
    return response.error_code, [(r.resource_name, a.principal, a.operation) for r in response.resources
                                 for a in r.acls]


async def alices_view_of(b: FakeBroker, topic: str) -> E:
    """Metadata's answer for ``topic`` to alice: refused without Describe on it."""
    response = await b.call(md_req.MetadataRequest(topics=(md_req.MetadataRequestTopic(topic_id=None, name=topic),),
                                                   allow_auto_topic_creation=False,
                                                   include_topic_authorized_operations=False),
                            md_resp.MetadataResponse, principal=ALICE)
    (found,) = response.topics
    return found.error_code


def test_without_an_authorizer_acl_requests_answer_security_disabled(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        assert await create(b, creation("t")) == [(E.security_disabled, NO_AUTHORIZER)]
        assert (await describe(b))[0] == E.security_disabled
        deleted = await b.call(delete_req.DeleteAclsRequest(filters=(any_filter(delete_req.DeleteAclsFilter),)),
                               delete_resp.DeleteAclsResponse)
        assert [r.error_code for r in deleted.filter_results] == [E.security_disabled]
        assert b.acl_store.acls == {}

    with_broker(body)


def test_created_acls_are_described_decide_requests_and_are_deleted(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        b.enable_authorizer(ADMIN)
        await b.lead("t", [0])
        assert await alices_view_of(b, "t") == E.topic_authorization_failed
        assert await create(b, creation("t", Operation.DESCRIBE), creation("t", Operation.WRITE),
                            creation("g", resource_type=ResourceType.GROUP)) == [(E.none, None)] * 3
        assert await describe(b, resource_type_code(ResourceType.TOPIC)) == (E.none, [
            ("t", "User:alice", operation_code(Operation.DESCRIBE)), ("t", "User:alice", operation_code(Operation.WRITE))])
        assert await alices_view_of(b, "t") == E.none
        deleted = await b.call(delete_req.DeleteAclsRequest(filters=(
            any_filter(delete_req.DeleteAclsFilter, resource_type_code(ResourceType.TOPIC), "t"),
            any_filter(delete_req.DeleteAclsFilter, UNKNOWN_CODE))), delete_resp.DeleteAclsResponse, principal=ADMIN)
        matched, invalid = deleted.filter_results
        assert [(m.resource_name, m.operation) for m in matched.matching_acls] == [
            ("t", operation_code(Operation.DESCRIBE)), ("t", operation_code(Operation.WRITE))]
        assert (invalid.error_code, invalid.error_message) == (E.invalid_request, "The filter contains UNKNOWN elements")
        assert await alices_view_of(b, "t") == E.topic_authorization_failed
        assert [(r, p) for r, p, _ in (await describe(b))[1]] == [("g", "User:alice")]

    with_broker(body)


def test_acl_requests_need_alter_or_describe_on_the_cluster(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        b.enable_authorizer(ADMIN)
        assert await create(b, creation("t"), principal=ALICE) == [
            (E.cluster_authorization_failed, "Cluster authorization failed.")]
        assert (await describe(b, principal=ALICE))[0] == E.cluster_authorization_failed
        b.allow(ALICE, Operation.DESCRIBE, ResourceType.CLUSTER)
        assert (await describe(b, principal=ALICE))[0] == E.none
        deleted = await b.call(delete_req.DeleteAclsRequest(filters=(any_filter(delete_req.DeleteAclsFilter),)),
                               delete_resp.DeleteAclsResponse, principal=ALICE)
        assert [r.error_code for r in deleted.filter_results] == [E.cluster_authorization_failed]
        assert len(b.acl_store.acls) == 1  # only the ACL allowed above

    with_broker(body)


def test_invalid_bindings_filters_and_conflicts(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        b.enable_authorizer(ADMIN)
        assert await create(b, creation("a/b"), creation("other", resource_type=ResourceType.CLUSTER),
                            creation("t", principal="alice")) == [
            (E.invalid_request, "ACL binding contains invalid resource name: a/b"),
            (E.invalid_request, "The only valid name for the CLUSTER resource is kafka-cluster"),
            (E.invalid_request, "expected a principal in format principalType:principalName (e.g. User:alice), "
                                "got 'alice'")]
        assert (await describe(b, UNKNOWN_CODE))[0] == E.invalid_request
        b.acl_store.conflict = True
        ((error, _),) = await create(b, creation("t"))
        assert error == E.unknown_server_error
        assert b.acl_store.acls == {}

    with_broker(body)
