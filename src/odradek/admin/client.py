"""``odradek topics --bootstrap-server``: the topic service over the Kafka protocol (Kafka's
TopicCommand.AdminClientTopicService), and the small admin client it runs on.

CreateTopics, DeleteTopics and CreatePartitions go to the controller, as Kafka's
ZooKeeper-mode brokers require; Metadata, DescribeConfigs and IncrementalAlterConfigs to the
bootstrap broker.  The client is odradek's own connection plus kio's message classes:
versions are negotiated with ApiVersions, and fields a version lacks are dropped, so one code
path speaks every version in between.

What the protocol cannot show: ``--list`` cannot mark topics pending deletion (brokers drop
them from their metadata as soon as deletion starts), as with Kafka's AdminClient.
"""

from __future__ import annotations

import asyncio
import sys
import types
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kio.index import KioIndexError, load_request_schema, load_response_schema

from odradek import __version__
from odradek.admin.topic_command import TopicDeletion, TopicListing
from odradek.assignment import assign_new_partitions, assign_replicas_to_brokers
from odradek.net.client import AuthenticationFailed, BrokerConnection
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError, for_code
from odradek.protocol.messages import build
from odradek.security.client import ClientSecurity
from odradek.zk.admin_zk_client import PartitionDescription, RackAwareMode, TopicDescription
from odradek.zk.zk_data import uuid_to_topic_id

__all__ = ["AdminClientError", "AdminClientTopicService", "AdminConnection", "ClusterView"]


# The newest version of each API this client speaks (it speaks every older one kio has too).
_MAX_VERSIONS = {ApiKey.API_VERSIONS: 3, ApiKey.METADATA: 12, ApiKey.CREATE_TOPICS: 7, ApiKey.DELETE_TOPICS: 6, ApiKey.DESCRIBE_CONFIGS: 4,
                 ApiKey.CREATE_PARTITIONS: 3, ApiKey.INCREMENTAL_ALTER_CONFIGS: 1}
_NAMES = {ApiKey.METADATA: "Metadata", ApiKey.CREATE_TOPICS: "CreateTopics", ApiKey.DELETE_TOPICS: "DeleteTopics",
          ApiKey.DESCRIBE_CONFIGS: "DescribeConfigs", ApiKey.CREATE_PARTITIONS: "CreatePartitions",
          ApiKey.INCREMENTAL_ALTER_CONFIGS: "IncrementalAlterConfigs"}
TOPIC_RESOURCE = 2
DYNAMIC_TOPIC_CONFIG = 1
SET, DELETE = 0, 1

CONNECT_TIMEOUT_S = 10.0
ADMIN_TIMEOUT_MS = 30_000  # how long brokers may wait for topics to appear or vanish
_RESPONSE_SLACK_S = 15.0
_NOT_CONTROLLER_RETRIES = 3
_CONTROLLER_POLL_S = 0.1


class AdminClientError(Exception):
    """The cluster cannot be reached or does not speak what the client needs; one line."""


def _parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    servers = []
    for item in (s.strip() for s in bootstrap.split(",")):
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise AdminClientError(f"Invalid --bootstrap-server {bootstrap!r}: expected host:port[,host:port...]")
        servers.append((host.strip("[]"), int(port)))
    return servers


def _raise_for(code: int, message: str | None, what: str) -> None:
    if code != ErrorCode.none:
        error = ErrorCode(code)
        raise for_code(error)(message or f"{what}: {error.name.upper()}")


@dataclass(frozen=True, slots=True)
class ClusterView:
    """What one Metadata response says."""

    brokers: dict[int, tuple[str, int, str | None]]
    controller_id: int
    topics: list[Any]


class AdminConnection:
    """Admin requests over one bootstrap connection, plus one to the controller; both
    secured as ``security`` says (``--command-config``)."""

    # The newest version of each API this client speaks, and the APIs' names for messages.
    max_versions: Mapping[int, int] = _MAX_VERSIONS
    api_names: Mapping[int, str] = _NAMES

    def __init__(self, bootstrap: str, *, security: ClientSecurity | None = None) -> None:
        self.servers = _parse_bootstrap(bootstrap)
        self.bootstrap = bootstrap
        self.security = security
        self._conn: BrokerConnection | None = None
        self._controller: BrokerConnection | None = None
        self._nodes: dict[int, BrokerConnection] = {}  # connections to brokers named by id
        self._versions: dict[int, tuple[int, int]] = {}

    async def __aenter__(self) -> AdminConnection:
        errors = []
        for host, port in self.servers:
            conn = BrokerConnection(host, port, "odradek-topics", security=self.security)
            try:
                await conn.connect(timeout_s=CONNECT_TIMEOUT_S)
                self._versions = await self._api_versions(conn)
            except AuthenticationFailed as e:
                # Another broker would refuse the same login: say why at once.
                await conn.close()
                raise AdminClientError(f"authentication to {host}:{port} failed: {e}") from None
            except (OSError, TimeoutError, ConnectionError, KafkaError) as e:
                await conn.close()
                reason = e.strerror if isinstance(e, OSError) and e.strerror else repr(e)
                errors.append(f"{host}:{port}: {reason}")
                continue
            self._conn = conn
            return self
        raise AdminClientError(f"could not connect to any broker of --bootstrap-server {self.bootstrap} "
                           f"({'; '.join(errors)})")

    async def __aexit__(self, *exc: object) -> None:
        for conn in (self._controller, self._conn, *self._nodes.values()):
            if conn is not None:
                await conn.close()

    async def _api_versions(self, conn: BrokerConnection) -> dict[int, tuple[int, int]]:
        version = _MAX_VERSIONS[ApiKey.API_VERSIONS]
        request = build(load_request_schema(ApiKey.API_VERSIONS, version), client_software_name="odradek",
                        client_software_version=__version__)
        response = await conn.send(request, load_response_schema(ApiKey.API_VERSIONS, version), timeout_s=CONNECT_TIMEOUT_S)
        _raise_for(response.error_code, None, "ApiVersions")
        return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}

    @property
    def api_versions(self) -> dict[int, tuple[int, int]]:
        """What the bootstrap broker's ApiVersions answer advertised: api key -> (min, max)."""
        return dict(self._versions)

    def version(self, api_key: int) -> int:
        """The newest version both sides speak; AdminClientError if there is none."""
        low, high = self._versions.get(api_key, (0, -1))
        for version in range(min(high, self.max_versions[api_key]), low - 1, -1):
            try:
                load_request_schema(api_key, version)
            except KioIndexError:
                continue
            return version
        raise AdminClientError(f"the broker at {self.bootstrap} does not support {self.api_names[api_key]} "
                           "at a version this client speaks")

    async def request(self, api_key: int, build_body: Any, *, controller: bool = False, node: int | None = None,
                      timeout_ms: int = ADMIN_TIMEOUT_MS, response_type: Any = None) -> Any:
        """Send ``build_body(module, version)`` (module: kio's request classes of the
        negotiated version) and return the response (read as ``response_type`` if given,
        else with kio's schema of that version); to the controller, or to broker ``node``
        (as Kafka's AdminClient sends a BROKER resource's configs to that broker), or else
        to the bootstrap broker."""
        conn = await self._controller_connection() if controller else \
            await self._node_connection(node) if node is not None else self._conn
        assert conn is not None
        return await self.send_on(conn, api_key, build_body, timeout_ms=timeout_ms, response_type=response_type)

    async def send_on(self, conn: BrokerConnection, api_key: int, build_body: Any, *,
                      timeout_ms: int = ADMIN_TIMEOUT_MS, response_type: Any = None) -> Any:
        """:meth:`request` on a connection of the caller's (to a broker it chose)."""
        version = self.version(api_key)
        request_cls = load_request_schema(api_key, version)
        body = build_body(sys.modules[request_cls.__module__], version)
        response_cls = response_type or load_response_schema(api_key, version)
        return await conn.send(body, response_cls, timeout_s=timeout_ms / 1000 + _RESPONSE_SLACK_S)

    async def _controller_connection(self) -> BrokerConnection:
        if self._controller is not None and self._controller.connected:
            return self._controller
        # A broker knows the controller once the controller's first UpdateMetadata reached it
        # (right after start-up, or after a controller change, it may not yet).
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CONNECT_TIMEOUT_S
        view = await self.metadata([])
        while view.controller_id not in view.brokers:
            if loop.time() >= deadline:
                raise AdminClientError(f"no active controller is known to {self.bootstrap}; try again")
            await asyncio.sleep(_CONTROLLER_POLL_S)
            view = await self.metadata([])
        self._controller = await self._connect(view, view.controller_id, "the controller")
        return self._controller

    async def _node_connection(self, node: int) -> BrokerConnection:
        conn = self._nodes.get(node)
        if conn is not None and conn.connected:
            return conn
        view = await self.metadata([])
        if node not in view.brokers:
            raise AdminClientError(f"broker {node} is not in the cluster (brokers: "
                                   f"{', '.join(str(b) for b in sorted(view.brokers))})")
        self._nodes[node] = await self._connect(view, node, "broker")
        return self._nodes[node]

    async def _connect(self, view: ClusterView, node: int, what: str) -> BrokerConnection:
        host, port, _ = view.brokers[node]
        conn = BrokerConnection(host, port, "odradek-topics", security=self.security)
        try:
            await conn.connect(timeout_s=CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as e:
            raise AdminClientError(f"could not connect to {what} (broker {node} at {host}:{port}): {e}") from None
        return conn

    async def controller_request(self, api_key: int, build_body: Any) -> Any:
        """A request the controller must answer; retried if the controller moves meanwhile."""
        for _ in range(_NOT_CONTROLLER_RETRIES):
            response = await self.request(api_key, build_body, controller=True)
            results = getattr(response, "topics", None) or getattr(response, "responses", None) or \
                getattr(response, "results", None) or ()
            if not any(r.error_code == ErrorCode.not_controller for r in results):
                return response
            if self._controller is not None:
                await self._controller.close()
                self._controller = None
        return response

    async def metadata(self, topics: Sequence[str] | None) -> ClusterView:
        """Brokers, controller and (None: all) topics; never auto-creates."""
        def body(m: types.ModuleType, version: int) -> Any:
            wanted = None if topics is None else tuple(
                build(m.MetadataRequestTopic, name=t, topic_id=uuid.UUID(int=0)) for t in topics)
            return build(m.MetadataRequest, topics=wanted, allow_auto_topic_creation=False,
                         include_cluster_authorized_operations=False, include_topic_authorized_operations=False)

        response = await self.request(ApiKey.METADATA, body)
        brokers = {b.node_id: (b.host, b.port, b.rack) for b in response.brokers}
        return ClusterView(brokers, response.controller_id, list(response.topics))


class AdminClientTopicService:
    """The TopicService of ``--bootstrap-server``, over one AdminConnection."""

    def __init__(self, admin: AdminConnection) -> None:
        self.admin = admin

    async def list_topics(self) -> TopicListing:
        return TopicListing(tuple(_existing(await self.admin.metadata(None))))

    async def describe_topics(self, names: Sequence[str]) -> list[TopicDescription]:
        if not names:
            return []
        view = await self.admin.metadata(names)
        present = set(_existing(view))
        overrides = await self._topic_overrides([n for n in names if n in present])
        # A topic deleted between Metadata and DescribeConfigs has no overrides entry.
        return _descriptions(view, [n for n in names if n in overrides], overrides)

    async def live_broker_ids(self) -> set[int]:
        return set((await self.admin.metadata([])).brokers)

    async def create_topic(self, topic: str, partitions: int | None, replication_factor: int | None,
                           assignment: Mapping[int, Sequence[int]] | None, config: Mapping[str, str],
                           rack_aware_mode: RackAwareMode) -> None:
        if (assignment is None and rack_aware_mode is RackAwareMode.DISABLED and partitions is not None
                and replication_factor is not None and partitions > 0 and replication_factor > 0):
            # The broker places replicas rack-aware; ignoring racks means placing them here.
            brokers = sorted((await self.admin.metadata([])).brokers)
            assignment = assign_replicas_to_brokers(brokers, partitions, replication_factor)

        def body(m: types.ModuleType, version: int) -> Any:
            return build(m.CreateTopicsRequest, timeout=ADMIN_TIMEOUT_MS, validate_only=False, topics=(build(
                m.CreatableTopic, name=topic,
                num_partitions=-1 if assignment is not None else partitions,
                replication_factor=-1 if assignment is not None else replication_factor,
                assignments=tuple(build(m.CreatableReplicaAssignment, partition_index=p, broker_ids=tuple(r))
                                  for p, r in sorted((assignment or {}).items())),
                configs=tuple(build(m.CreatableTopicConfig, name=k, value=v) for k, v in config.items())),))

        result = (await self.admin.controller_request(ApiKey.CREATE_TOPICS, body)).topics[0]
        # Timed out: the topic exists, its partitions are still coming online (as --zookeeper).
        if result.error_code != ErrorCode.request_timed_out:
            _raise_for(result.error_code, result.error_message, f"creating topic {topic}")

    async def alter_topic_config(self, topic: str, to_set: Mapping[str, str], to_delete: Sequence[str]) -> None:
        ops = [(k, SET, v) for k, v in to_set.items()] + [(k, DELETE, None) for k in to_delete]

        def body(m: types.ModuleType, version: int) -> Any:
            return build(m.IncrementalAlterConfigsRequest, validate_only=False, resources=(build(
                m.AlterConfigsResource, resource_type=TOPIC_RESOURCE, resource_name=topic, configs=tuple(
                    build(m.AlterableConfig, name=k, config_operation=op, value=v) for k, op, v in ops)),))

        result = (await self.admin.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, body)).responses[0]
        _raise_for(result.error_code, result.error_message, f"altering the config of {topic}")

    async def create_partitions(self, topic: str, count: int, assignment: Mapping[int, Sequence[int]] | None,
                                rack_aware_mode: RackAwareMode) -> None:
        new: list[list[int]] | None = None
        if assignment is not None:
            new = [list(r) for _, r in sorted(assignment.items())]
        elif rack_aware_mode is RackAwareMode.DISABLED:
            view = await self.admin.metadata([topic])
            current = {p.partition_index: list(p.replica_nodes)
                       for t in view.topics if t.name == topic and t.error_code == ErrorCode.none
                       for p in t.partitions}
            if current and count > len(current):
                placed = assign_new_partitions(sorted(view.brokers), current, count)
                new = [placed[p] for p in sorted(placed)]

        def body(m: types.ModuleType, version: int) -> Any:
            assignments = None if new is None else tuple(
                build(m.CreatePartitionsAssignment, broker_ids=tuple(r)) for r in new)
            return build(m.CreatePartitionsRequest, timeout=ADMIN_TIMEOUT_MS, validate_only=False, topics=(
                build(m.CreatePartitionsTopic, name=topic, count=count, assignments=assignments),))

        result = (await self.admin.controller_request(ApiKey.CREATE_PARTITIONS, body)).results[0]
        if result.error_code != ErrorCode.request_timed_out:
            _raise_for(result.error_code, result.error_message, f"adding partitions to {topic}")

    async def delete_topic(self, topic: str) -> TopicDeletion:
        def body(m: types.ModuleType, version: int) -> Any:
            return build(m.DeleteTopicsRequest, timeout=ADMIN_TIMEOUT_MS, topic_names=(topic,),
                         topics=(build(m.DeleteTopicState, name=topic, topic_id=uuid.UUID(int=0)),))

        result = (await self.admin.controller_request(ApiKey.DELETE_TOPICS, body)).responses[0]
        # Timed out: marked for deletion, still in progress (a replica's broker may be down).
        if result.error_code != ErrorCode.request_timed_out:
            _raise_for(result.error_code, getattr(result, "error_message", None), f"deleting topic {topic}")
        return TopicDeletion.REQUESTED

    async def _topic_overrides(self, names: Sequence[str]) -> dict[str, dict[str, str]]:
        """Each topic's dynamic config overrides (DescribeConfigs); topics deleted meanwhile are left out."""
        if not names:
            return {}

        def body(m: types.ModuleType, version: int) -> Any:
            return build(m.DescribeConfigsRequest, include_synonyms=False, include_documentation=False,
                         resources=tuple(build(m.DescribeConfigsResource, resource_type=TOPIC_RESOURCE,
                                               resource_name=n, configuration_keys=None) for n in names))

        response = await self.admin.request(ApiKey.DESCRIBE_CONFIGS, body)
        overrides: dict[str, dict[str, str]] = {}
        for result in response.results:
            if result.error_code == ErrorCode.unknown_topic_or_partition:
                continue
            _raise_for(result.error_code, result.error_message, f"describing configs of {result.resource_name}")
            overrides[result.resource_name] = {
                c.name: c.value for c in result.configs
                if c.config_source == DYNAMIC_TOPIC_CONFIG and c.value is not None}
        return overrides


def _existing(view: ClusterView) -> list[str]:
    return sorted(t.name for t in view.topics if t.error_code == ErrorCode.none)


def _descriptions(view: ClusterView, names: Sequence[str], configs: Mapping[str, dict[str, str]]
                  ) -> list[TopicDescription]:
    by_name = {t.name: t for t in view.topics if t.error_code == ErrorCode.none}
    result = []
    for name in names:
        topic = by_name[name]
        partitions = tuple(
            PartitionDescription(p.partition_index, tuple(p.replica_nodes),
                                 p.leader_id if p.leader_id >= 0 else None, tuple(p.isr_nodes),
                                 getattr(p, "leader_epoch", -1))
            for p in sorted(topic.partitions, key=lambda p: p.partition_index))
        topic_id = getattr(topic, "topic_id", None)
        result.append(TopicDescription(name, uuid_to_topic_id(topic_id) if topic_id and topic_id.int else None,
                                       partitions, configs.get(name, {})))
    return result
