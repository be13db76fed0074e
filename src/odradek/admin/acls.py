"""``odradek acls``: kafka-acls.sh (Kafka 2.8's AclCommand) without the printing.

:class:`AclCommandOptions` holds the flags and checks their combinations with AclCommand's
messages; :func:`bindings_to_add` and :func:`filters_to_remove` turn them into ACLs the way
AclCommand does (``--producer``: Write, Describe and Create on the topics, Write and Describe on
transactional ids, IdempotentWrite on the cluster with ``--idempotent``; ``--consumer``: Read
and Describe on the topics, Read on the groups).  Two services carry them out: over ZooKeeper
(``--zookeeper`` or ``--authorizer-properties zookeeper.connect=...``, zk.acl_store, as Kafka's
AuthorizerService) and over the Kafka protocol (``--bootstrap-server``, CreateAcls/
DescribeAcls/DeleteAcls, as Kafka's AdminClientService).  :func:`run_acl_command` runs an
action on either and reports through ``echo``, in kafka-acls.sh's words.
"""

from __future__ import annotations

import enum
import types
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence, Set
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from odradek.admin.client import AdminConnection
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, for_code
from odradek.protocol.messages import build
from odradek.security.acl_filters import (
    MATCH,
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
    WILDCARD_HOST,
    Acl,
    KafkaPrincipal,
    Operation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from odradek.zk.acl_store import ZkAclStore
from odradek.zk.client import KafkaZkClient

__all__ = [
    "AclAction",
    "AclAdminConnection",
    "AclCommandError",
    "AclCommandOptions",
    "AclService",
    "AdminClientAclService",
    "ZkAclService",
    "bindings_to_add",
    "filters_to_remove",
    "format_acl",
    "run_acl_command",
    "zookeeper_acl_service",
]

SESSION_TIMEOUT_MS = 30_000
CONNECTION_TIMEOUT_MS = 10_000

# AclEntry.supportedOperations (kafka.security.authorizer.AclEntry), plus All.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[Operation, ...]] = {
    ResourceType.TOPIC: (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE, Operation.DELETE,
                         Operation.ALTER, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
    ResourceType.GROUP: (Operation.READ, Operation.DESCRIBE, Operation.DELETE),
    ResourceType.CLUSTER: (Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS,
                           Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE, Operation.ALTER, Operation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE),
    ResourceType.DELEGATION_TOKEN: (Operation.DESCRIBE,),
}


class AclCommandError(Exception):
    """A bad flag or flag combination, or a refusal by the cluster; one line."""


class AclAction(enum.Enum):
    ADD = "add"
    REMOVE = "remove"
    LIST = "list"


_PATTERN_TYPES: dict[str, PatternType | str | None] = {
    "literal": PatternType.LITERAL, "prefixed": PatternType.PREFIXED, "any": None, "match": MATCH}


@dataclass(frozen=True)
class AclCommandOptions:
    """kafka-acls.sh's flags (the connection flags stay with the command line)."""

    action: AclAction
    topics: Sequence[str] = ()
    groups: Sequence[str] = ()
    transactional_ids: Sequence[str] = ()
    cluster: bool = False
    resource_pattern_type: str = "literal"
    allow_principals: Sequence[str] = ()
    deny_principals: Sequence[str] = ()
    allow_hosts: Sequence[str] = ()
    deny_hosts: Sequence[str] = ()
    operations: Sequence[str] = ()
    list_principals: Sequence[str] = ()
    producer: bool = False
    consumer: bool = False
    idempotent: bool = False
    force: bool = False

    @property
    def pattern_type(self) -> PatternType | str | None:
        try:
            return _PATTERN_TYPES[self.resource_pattern_type.lower()]
        except KeyError:
            raise AclCommandError(f"Invalid --resource-pattern-type {self.resource_pattern_type!r}: expected "
                                  "one of literal, prefixed, any, match") from None

    def _given(self) -> dict[str, bool]:
        return {"--producer": self.producer, "--consumer": self.consumer,
                "--allow-host": bool(self.allow_hosts), "--allow-principal": bool(self.allow_principals),
                "--deny-host": bool(self.deny_hosts), "--deny-principal": bool(self.deny_principals),
                "--operation": bool(self.operations)}

    def check(self) -> None:
        """AclCommandOptions.checkArgs plus the checks AclCommand makes while building ACLs."""
        given = self._given()
        if self.action is AclAction.LIST:
            for flag in ("--producer", "--consumer", "--allow-host", "--allow-principal", "--deny-host",
                         "--deny-principal"):
                if given[flag]:
                    raise AclCommandError(f'Option "--list" can\'t be used with option "{flag}"')
        for mode in ("--producer", "--consumer"):
            if given[mode]:
                for flag in ("--operation", "--deny-principal", "--deny-host"):
                    if given[flag]:
                        raise AclCommandError(f'Option "{mode}" can\'t be used with option "{flag}"')
        if self.list_principals and self.action is not AclAction.LIST:
            raise AclCommandError("The --principal option is only available if --list is set")
        if self.producer and not self.topics:
            raise AclCommandError("With --producer you must specify a --topic")
        if self.idempotent and not self.producer:
            raise AclCommandError("The --idempotent option is only available if --producer is set")
        if self.consumer and (not self.topics or not self.groups
                              or (not self.producer and (self.cluster or self.transactional_ids))):
            raise AclCommandError("With --consumer you must specify a --topic and a --group and no --cluster or "
                                  "--transactional-id option should be specified.")
        pattern_type = self.pattern_type
        if self.action is AclAction.ADD and not isinstance(pattern_type, PatternType):
            raise AclCommandError(f"A '--resource-pattern-type' value of '{self.resource_pattern_type.upper()}' "
                                  "is not valid when adding acls.")
        for principal in (*self.allow_principals, *self.deny_principals, *self.list_principals):
            _principal(principal)
        for name in self.operations:
            _operation(name)
        for name in (*self.topics, *self.groups, *self.transactional_ids):
            if not name.strip():
                raise AclCommandError("Resource names must not be empty")
        if self.action is not AclAction.LIST:
            if not self.resource_filters():
                raise AclCommandError("You must provide at least one resource: --topic <topic> or --cluster or "
                                      "--group <group> or --transactional-id <transactional id>")
            resource_to_acls = self._filter_to_acls()
            _validate_operations(resource_to_acls)
            if self.action is AclAction.ADD and any(not acls for acls in resource_to_acls.values()):
                raise AclCommandError("You must specify one of: --allow-principal, --deny-principal when trying "
                                      "to add ACLs.")

    def resource_filters(self) -> list[ResourcePatternFilter]:
        """AclCommand.getResourceFilter: one filter per resource flag (the cluster only with the
        literal pattern type)."""
        pattern_type = self.pattern_type
        filters = [ResourcePatternFilter(ResourceType.TOPIC, t.strip(), pattern_type) for t in self.topics]
        if pattern_type is PatternType.LITERAL and (self.cluster or self.idempotent):
            filters.append(ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME, PatternType.LITERAL))
        filters += [ResourcePatternFilter(ResourceType.GROUP, g.strip(), pattern_type) for g in self.groups]
        filters += [ResourcePatternFilter(ResourceType.TRANSACTIONAL_ID, t.strip(), pattern_type)
                    for t in self.transactional_ids]
        return list(dict.fromkeys(filters))

    def _acls(self, operations: Iterable[Operation]) -> frozenset[Acl]:
        """AclCommand.getAcl: each principal from each host (``*`` if no host is given) for each
        operation, allowed or denied."""
        operations = tuple(operations)
        acls = set()
        for permission, principals, hosts in ((PermissionType.ALLOW, self.allow_principals, self.allow_hosts),
                                              (PermissionType.DENY, self.deny_principals, self.deny_hosts)):
            for principal in principals:
                for host in (h.strip() for h in hosts or (WILDCARD_HOST,)):
                    acls.update(Acl(_principal(principal), permission, host, op) for op in operations)
        return frozenset(acls)

    def _filter_to_acls(self) -> dict[ResourcePatternFilter, frozenset[Acl]]:
        """AclCommand.getResourceFilterToAcls."""
        filters = self.resource_filters()
        if not self.producer and not self.consumer:
            acls = self._acls(_operation(op) for op in self.operations or ("All",))
            return dict.fromkeys(filters, acls)
        result: dict[ResourcePatternFilter, frozenset[Acl]] = {}
        if self.producer:
            for f in filters:
                if f.resource_type is ResourceType.TOPIC:
                    result[f] = self._acls((Operation.WRITE, Operation.DESCRIBE, Operation.CREATE))
                elif f.resource_type is ResourceType.TRANSACTIONAL_ID:
                    result[f] = self._acls((Operation.WRITE, Operation.DESCRIBE))
            if self.idempotent:
                cluster = ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME, PatternType.LITERAL)
                result[cluster] = self._acls((Operation.IDEMPOTENT_WRITE,))
        if self.consumer:
            for f in filters:
                if f.resource_type is ResourceType.TOPIC:
                    result[f] = result.get(f, frozenset()) | self._acls((Operation.READ, Operation.DESCRIBE))
                elif f.resource_type is ResourceType.GROUP:
                    result[f] = result.get(f, frozenset()) | self._acls((Operation.READ,))
        return result


def _principal(text: str) -> KafkaPrincipal:
    try:
        return KafkaPrincipal.parse(text.strip())
    except ValueError as e:
        raise AclCommandError(str(e)) from None


def _operation(text: str) -> Operation:
    try:
        return Operation.parse(text.strip())
    except ValueError as e:
        raise AclCommandError(str(e)) from None


def _validate_operations(resource_to_acls: Mapping[ResourcePatternFilter, Set[Acl]]) -> None:
    for resource, acls in resource_to_acls.items():
        assert resource.resource_type is not None
        valid = (*SUPPORTED_OPERATIONS[resource.resource_type], Operation.ALL)
        if any(acl.operation not in valid for acl in acls):
            raise AclCommandError(f"ResourceType {resource.resource_type.name} only supports operations "
                                  f"{','.join(op.name for op in valid)}")


def bindings_to_add(opts: AclCommandOptions) -> dict[ResourcePattern, frozenset[Acl]]:
    """AclCommand.getResourceToAcls (``opts.check()`` passed)."""
    return {ResourcePattern(f.resource_type, f.name, f.pattern_type): acls  # type: ignore[arg-type]
            for f, acls in opts._filter_to_acls().items()}


def filters_to_remove(opts: AclCommandOptions) -> dict[ResourcePatternFilter, frozenset[Acl]]:
    """What ``--remove`` removes: per resource filter, the ACLs named (none: all of them)."""
    return opts._filter_to_acls()


def format_pattern(pattern: ResourcePattern | ResourcePatternFilter) -> str:
    """ResourcePattern.toString, e.g. ``ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)``."""
    if isinstance(pattern, ResourcePatternFilter):
        return str(pattern)
    return (f"ResourcePattern(resourceType={pattern.resource_type.name}, name={pattern.name}, "
            f"patternType={pattern.pattern_type.name})")


def format_acl(acl: Acl) -> str:
    """AccessControlEntry.toString, e.g. ``(principal=User:a, host=*, operation=READ, permissionType=ALLOW)``."""
    return (f"(principal={acl.principal}, host={acl.host}, operation={acl.operation.name}, "
            f"permissionType={acl.permission.name})")


def _acl_lines(acls: Iterable[Acl]) -> str:
    return "\n".join("\t" + format_acl(acl) for acl in sorted(acls, key=Acl.sort_key))


class AclService(Protocol):
    """What the command needs of a backend."""

    async def create(self, resource: ResourcePattern, acls: frozenset[Acl]) -> None: ...

    async def describe(self, filters: Sequence[AclBindingFilter]) -> dict[ResourcePattern, frozenset[Acl]]: ...

    async def delete(self, filters: Sequence[AclBindingFilter]) -> None: ...


class ZkAclService:
    """``--zookeeper``: ZooKeeper directly, as Kafka's AuthorizerService (through AclAuthorizer)."""

    def __init__(self, zk: KafkaZkClient) -> None:
        self.store = ZkAclStore(zk)

    async def create(self, resource: ResourcePattern, acls: frozenset[Acl]) -> None:
        await self.store.add(resource, acls)

    async def describe(self, filters: Sequence[AclBindingFilter]) -> dict[ResourcePattern, frozenset[Acl]]:
        return await self.store.describe(filters)

    async def delete(self, filters: Sequence[AclBindingFilter]) -> None:
        await self.store.delete_matching(filters)


@asynccontextmanager
async def zookeeper_acl_service(connect: str) -> AsyncIterator[ZkAclService]:
    """A ZkAclService on a new ZooKeeper session, closed on exit (ZkConnectionError if unreachable)."""
    zk = KafkaZkClient(connect, session_timeout_ms=SESSION_TIMEOUT_MS, connection_timeout_ms=CONNECTION_TIMEOUT_MS)
    await zk.start()
    try:
        yield ZkAclService(zk)
    finally:
        await zk.close()


class AclAdminConnection(AdminConnection):
    """An AdminConnection that speaks the ACL APIs too."""

    max_versions = {**AdminConnection.max_versions, ApiKey.DESCRIBE_ACLS: 2, ApiKey.CREATE_ACLS: 2,
                    ApiKey.DELETE_ACLS: 2}
    api_names = {**AdminConnection.api_names, ApiKey.DESCRIBE_ACLS: "DescribeAcls", ApiKey.CREATE_ACLS: "CreateAcls",
                 ApiKey.DELETE_ACLS: "DeleteAcls"}


def _raise_for(code: int, message: str | None) -> None:
    if code != ErrorCode.none:
        error = ErrorCode(code)
        raise for_code(error)(message or error.name.upper())


def _filter_fields(binding_filter: AclBindingFilter) -> dict[str, Any]:
    pattern, entry = binding_filter.pattern, binding_filter.entry
    return {"resource_type_filter": resource_type_code(pattern.resource_type),
            "resource_name_filter": pattern.name, "pattern_type_filter": pattern_type_code(pattern.pattern_type),
            "principal_filter": entry.principal, "host_filter": entry.host,
            "operation": operation_code(entry.operation), "permission_type": permission_code(entry.permission)}


class AdminClientAclService:
    """``--bootstrap-server``: CreateAcls, DescribeAcls and DeleteAcls (Kafka's AdminClientService)."""

    def __init__(self, admin: AdminConnection) -> None:
        self.admin = admin

    async def create(self, resource: ResourcePattern, acls: frozenset[Acl]) -> None:
        def body(m: types.ModuleType, version: int) -> Any:
            return build(m.CreateAclsRequest, creations=tuple(build(
                m.AclCreation, resource_type=resource_type_code(resource.resource_type), resource_name=resource.name,
                resource_pattern_type=pattern_type_code(resource.pattern_type), principal=str(acl.principal),
                host=acl.host, operation=operation_code(acl.operation),
                permission_type=permission_code(acl.permission)) for acl in sorted(acls, key=Acl.sort_key)))

        for result in (await self.admin.request(ApiKey.CREATE_ACLS, body)).results:
            _raise_for(result.error_code, result.error_message)

    async def describe(self, filters: Sequence[AclBindingFilter]) -> dict[ResourcePattern, frozenset[Acl]]:
        found: dict[ResourcePattern, frozenset[Acl]] = {}
        for binding_filter in filters:
            def body(m: types.ModuleType, version: int, f: AclBindingFilter = binding_filter) -> Any:
                return build(m.DescribeAclsRequest, **_filter_fields(f))

            response = await self.admin.request(ApiKey.DESCRIBE_ACLS, body)
            _raise_for(response.error_code, response.error_message)
            for resource in response.resources:
                pattern = ResourcePattern(resource_type_from_code(resource.resource_type), resource.resource_name,
                                          pattern_type_from_code(getattr(resource, "pattern_type", 3)))
                acls = frozenset(Acl(KafkaPrincipal.parse(a.principal), permission_from_code(a.permission_type),
                                     a.host, operation_from_code(a.operation)) for a in resource.acls)
                found[pattern] = found.get(pattern, frozenset()) | acls
        return found

    async def delete(self, filters: Sequence[AclBindingFilter]) -> None:
        def body(m: types.ModuleType, version: int) -> Any:
            return build(m.DeleteAclsRequest, filters=tuple(build(m.DeleteAclsFilter, **_filter_fields(f))
                                                            for f in filters))

        for result in (await self.admin.request(ApiKey.DELETE_ACLS, body)).filter_results:
            _raise_for(result.error_code, result.error_message)


async def run_acl_command(service: AclService, opts: AclCommandOptions, echo: Callable[[str], None],
                          confirm: Callable[[str], bool]) -> None:
    """Carry out ``opts.action`` (``opts.check()`` passed).  ``confirm(question)`` is asked
    before each removal unless ``--force``."""
    if opts.action is AclAction.ADD:
        for resource, acls in bindings_to_add(opts).items():
            echo(f"Adding ACLs for resource `{format_pattern(resource)}`: \n {_acl_lines(acls)} \n")
            await service.create(resource, acls)
    elif opts.action is AclAction.REMOVE:
        for resource_filter, acls in filters_to_remove(opts).items():
            if acls:
                question = (f"Are you sure you want to remove ACLs: \n {_acl_lines(acls)} \n from resource filter "
                            f"`{format_pattern(resource_filter)}`? (y/n)")
                targets = [AclBindingFilter(resource_filter, AclFilter.exactly(acl)) for acl in acls]
            else:
                question = (f"Are you sure you want to delete all ACLs for resource filter "
                            f"`{format_pattern(resource_filter)}`? (y/n)")
                targets = [AclBindingFilter(resource_filter, AclFilter())]
            if opts.force or confirm(question):
                await service.delete(targets)
    await _list(service, opts, echo)


async def _list(service: AclService, opts: AclCommandOptions, echo: Callable[[str], None]) -> None:
    """AclCommand.listAcls: the ACLs of the resources named (all if none), by principal if
    ``--principal`` is given."""
    filters = [AclBindingFilter(f, AclFilter()) for f in opts.resource_filters()] or [AclBindingFilter()]
    found = await service.describe(filters)
    ordered = sorted(found.items(), key=lambda item: (item[0].resource_type.name, item[0].pattern_type.name,
                                                      item[0].name))
    if not opts.list_principals:
        for resource, acls in ordered:
            echo(f"Current ACLs for resource `{format_pattern(resource)}`: \n {_acl_lines(acls)} \n")
        return
    for text in opts.list_principals:
        principal = str(_principal(text))
        echo(f"ACLs for principal `{principal}`")
        for resource, acls in ordered:
            mine = [acl for acl in acls if str(acl.principal) == principal]
            if mine:
                echo(f"Current ACLs for resource `{format_pattern(resource)}`: \n {_acl_lines(mine)} \n")
