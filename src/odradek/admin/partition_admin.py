"""Leader elections and partition reassignments over the Kafka protocol: the work of
``odradek leader-election`` (Kafka 2.8's LeaderElectionCommand) and of
``odradek reassign-partitions --bootstrap-server`` (ReassignPartitionsCommand's admin-client
mode).

ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments go to the controller
(asked again once if it moved meanwhile); throttles are IncrementalAlterConfigs on the topics
(``leader|follower.replication.throttled.replicas``) and on each broker
(``leader|follower.replication.throttled.rate``, ``replica.alter.log.dirs.io.max.bytes.per.second``),
each broker's sent to that broker as Kafka's admin client does.  The output functions return
the lines Kafka's tools print.
"""

from __future__ import annotations

import json
import types
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from odradek.admin.client import AdminConnection, ClusterView
from odradek.admin.hash_map_order import java_topic_partition_hashcode, scala_hash_map_order
from odradek.common import TopicPartition
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ApiError, ErrorCode
from odradek.protocol.messages import build
from odradek.security.client import ClientSecurity

__all__ = [
    "BROKER_THROTTLES",
    "TOPIC_THROTTLES",
    "PartitionAdmin",
    "PartitionAdminError",
    "Reassignment",
    "election_output",
    "exception_text",
    "follower_throttles",
    "leader_throttles",
    "list_output",
    "reassigning_brokers",
    "reassignment_json",
]

_MAX_VERSIONS = {**AdminConnection.max_versions, ApiKey.ELECT_LEADERS: 2, ApiKey.ALTER_PARTITION_REASSIGNMENTS: 0,
                 ApiKey.LIST_PARTITION_REASSIGNMENTS: 0}
_NAMES = {**AdminConnection.api_names, ApiKey.ELECT_LEADERS: "ElectLeaders",
          ApiKey.ALTER_PARTITION_REASSIGNMENTS: "AlterPartitionReassignments",
          ApiKey.LIST_PARTITION_REASSIGNMENTS: "ListPartitionReassignments"}
BROKER_RESOURCE, TOPIC_RESOURCE = 4, 2
SET, DELETE = 0, 1
LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LOG_DIR_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_REPLICAS, FOLLOWER_REPLICAS = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"
BROKER_THROTTLES = (LEADER_RATE, FOLLOWER_RATE, LOG_DIR_RATE)
TOPIC_THROTTLES = (LEADER_REPLICAS, FOLLOWER_REPLICAS)

# The message of Kafka's exception for an error code, where the response carries none.
_DEFAULT_MESSAGES = {
    ErrorCode.unknown_topic_or_partition: "This server does not host this topic-partition.",
    ErrorCode.election_not_needed: "Leader election not needed for topic partition.",
    ErrorCode.preferred_leader_not_available: "The preferred leader was not available.",
    ErrorCode.eligible_leaders_not_available: "Eligible topic partition leaders are not available.",
    ErrorCode.cluster_authorization_failed: "Cluster authorization failed.",
    ErrorCode.not_controller: "This is not the correct controller for this cluster.",
    ErrorCode.request_timed_out: "The request timed out.",
    ErrorCode.invalid_request: "This most likely occurs because of a request being malformed by the client "
                               "library or the message was sent to an incompatible broker. See the broker logs "
                               "for more details.",
    ErrorCode.no_reassignment_in_progress: "No partition reassignment is in progress.",
    ErrorCode.invalid_replica_assignment: "A replica assignment is invalid.",
}


# Error codes whose Java exception is not named after the code.
_EXCEPTION_NAMES = {ErrorCode.cluster_authorization_failed: "ClusterAuthorizationException",
                    ErrorCode.topic_authorization_failed: "TopicAuthorizationException",
                    ErrorCode.request_timed_out: "TimeoutException"}


class PartitionAdminError(Exception):
    """What the command cannot do, in one line; ``error``: the response's error code, if one
    refused the whole request."""

    def __init__(self, message: str, error: ErrorCode | None = None) -> None:
        super().__init__(message)
        self.error = error


def exception_text(error: ApiError) -> str:
    """``exception.toString()`` of the Java exception Kafka's admin client makes of ``error``."""
    code = ErrorCode(error.error)
    name = _EXCEPTION_NAMES.get(code) or "".join(part.capitalize() for part in code.name.split("_")) + "Exception"
    message = error.message or _DEFAULT_MESSAGES.get(code, code.name)
    return f"org.apache.kafka.common.errors.{name}: {message}"


@dataclass(frozen=True, slots=True)
class Reassignment:
    """An ongoing reassignment as ListPartitionReassignments shows it."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    named: dict[str, list[int]] = {}
    for tp in partitions:
        named.setdefault(tp.topic, []).append(tp.partition)
    return named


class _Node(AdminConnection):
    """An AdminConnection that speaks the election and reassignment APIs too."""

    max_versions = _MAX_VERSIONS
    api_names = _NAMES


class PartitionAdmin:
    """The requests of the two commands, over ``bootstrap`` (and the controller, each broker)."""

    def __init__(self, bootstrap: str, *, security: ClientSecurity | None = None) -> None:
        self.bootstrap = bootstrap
        self.security = security
        self._main = _Node(bootstrap, security=security)

    async def __aenter__(self) -> PartitionAdmin:
        await self._main.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._main.__aexit__(*exc)

    async def _to_controller(self, api_key: int, build_body: Any) -> Any:
        """A request the controller answers; asked again once if it answered NOT_CONTROLLER."""
        response = await self._main.request(api_key, build_body, controller=True)
        if response.error_code == ErrorCode.not_controller:
            await self._main.__aexit__()
            self._main = _Node(self.bootstrap, security=self.security)
            await self._main.__aenter__()
            response = await self._main.request(api_key, build_body, controller=True)
        return response

    async def cluster(self, topics: Sequence[str] | None = None) -> ClusterView:
        return await self._main.metadata(topics)

    async def assignments(self, topics: Iterable[str]) -> dict[TopicPartition, list[int]]:
        """The replicas of every partition of ``topics`` that exist."""
        view = await self._main.metadata(sorted(set(topics)))
        return {TopicPartition(t.name, p.partition_index): list(p.replica_nodes)
                for t in view.topics if t.error_code == ErrorCode.none for p in t.partitions}

    async def elect_leaders(self, election_type: int, partitions: Iterable[TopicPartition] | None,
                            timeout_ms: int) -> dict[TopicPartition, ApiError]:
        """Each partition's outcome (every partition that needed an election when ``partitions``
        is None); PartitionAdminError when the whole request fails."""
        named = None if partitions is None else _by_topic(partitions)

        def body(m: types.ModuleType, _version: int) -> Any:
            topics = None if named is None else tuple(
                build(m.TopicPartitions, topic=t, partitions=tuple(ps)) for t, ps in named.items())
            return build(m.ElectLeadersRequest, election_type=election_type, topic_partitions=topics,
                         timeout=timeout_ms)

        response = await self._to_controller(ApiKey.ELECT_LEADERS, body)
        if response.error_code != ErrorCode.none:
            error = ErrorCode(response.error_code)
            raise PartitionAdminError(exception_text(ApiError(error)), error)
        return {TopicPartition(r.topic, p.partition_id): ApiError(ErrorCode(p.error_code), p.error_message)
                for r in response.replica_election_results for p in r.partition_result}

    async def alter_reassignments(self, targets: Mapping[TopicPartition, Sequence[int] | None]
                                  ) -> dict[TopicPartition, ApiError]:
        """Start (a replica list) or cancel (None) each partition's reassignment: its error."""
        by_topic: dict[str, list[tuple[int, Sequence[int] | None]]] = {}
        for tp, replicas in sorted(targets.items()):
            by_topic.setdefault(tp.topic, []).append((tp.partition, replicas))

        def body(m: types.ModuleType, _version: int) -> Any:
            return build(m.AlterPartitionReassignmentsRequest, timeout=30_000, topics=tuple(
                build(m.ReassignableTopic, name=t, partitions=tuple(
                    build(m.ReassignablePartition, partition_index=p, replicas=None if r is None else tuple(r))
                    for p, r in ps)) for t, ps in by_topic.items()))

        response = await self._to_controller(ApiKey.ALTER_PARTITION_REASSIGNMENTS, body)
        if response.error_code != ErrorCode.none:
            raise PartitionAdminError(exception_text(ApiError(ErrorCode(response.error_code),
                                                              response.error_message)))
        return {TopicPartition(t.name, p.partition_index): ApiError(ErrorCode(p.error_code), p.error_message)
                for t in response.responses for p in t.partitions}

    async def list_reassignments(self, partitions: Iterable[TopicPartition] | None = None
                                 ) -> dict[TopicPartition, Reassignment]:
        """The reassignments in progress (of ``partitions``, or all)."""
        named = None if partitions is None else _by_topic(partitions)

        def body(m: types.ModuleType, _version: int) -> Any:
            return build(m.ListPartitionReassignmentsRequest, timeout=30_000, topics=None if named is None else tuple(
                build(m.ListPartitionReassignmentsTopics, name=t, partition_indexes=tuple(ps))
                for t, ps in named.items()))

        response = await self._to_controller(ApiKey.LIST_PARTITION_REASSIGNMENTS, body)
        if response.error_code != ErrorCode.none:
            raise PartitionAdminError(exception_text(ApiError(ErrorCode(response.error_code),
                                                              response.error_message)))
        return {TopicPartition(t.name, p.partition_index): Reassignment(
                    tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas))
                for t in response.topics for p in t.partitions}

    async def alter_topic_configs(self, changes: Mapping[str, Mapping[str, str | None]]) -> None:
        """Set (a value) or delete (None) topic configs, topic by topic."""
        await self._alter_configs(self._main, TOPIC_RESOURCE, changes)

    async def alter_broker_configs(self, changes: Mapping[int, Mapping[str, str | None]]) -> None:
        """Set (a value) or delete (None) broker configs, each at the broker it belongs to."""
        view = await self._main.metadata([])
        for broker_id, configs in sorted(changes.items()):
            if broker_id not in view.brokers:
                raise PartitionAdminError(f"Unknown broker id {broker_id}")
            host, port, _ = view.brokers[broker_id]
            async with _Node(f"{host}:{port}", security=self.security) as node:
                await self._alter_configs(node, BROKER_RESOURCE, {str(broker_id): configs})

    @staticmethod
    async def _alter_configs(node: AdminConnection, resource_type: int,
                             changes: Mapping[str, Mapping[str, str | None]]) -> None:
        def body(m: types.ModuleType, _version: int) -> Any:
            return build(m.IncrementalAlterConfigsRequest, validate_only=False, resources=tuple(
                build(m.AlterConfigsResource, resource_type=resource_type, resource_name=name, configs=tuple(
                    build(m.AlterableConfig, name=k, config_operation=DELETE if v is None else SET, value=v)
                    for k, v in sorted(configs.items()))) for name, configs in changes.items()))

        if not changes:
            return
        for result in (await node.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, body)).responses:
            if result.error_code != ErrorCode.none:
                raise PartitionAdminError(exception_text(ApiError(ErrorCode(result.error_code),
                                                                  result.error_message)))


def election_output(election_type: str, results: Mapping[TopicPartition, ApiError]) -> tuple[list[str], int]:
    """kafka-leader-election.sh's lines and the number of partitions that failed.

    Kafka 2.8's tool iterates Scala hash sets and maps, and on partitions that needed no
    election prints its "Valid replica already elected" line with the partitions that
    succeeded (later Kafka lists the right ones); odradek prints what 2.8 prints."""
    def order(tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        return scala_hash_map_order(tps, lambda tp: java_topic_partition_hashcode(*tp))

    succeeded = order(tp for tp, r in results.items() if r.error == ErrorCode.none)
    noop = [tp for tp, r in results.items() if r.error == ErrorCode.election_not_needed]
    failed = order(tp for tp, r in results.items() if r.error not in (ErrorCode.none, ErrorCode.election_not_needed))
    lines = []
    names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in succeeded)
    if succeeded:
        lines.append(f"Successfully completed leader election ({election_type}) for partitions {names}")
    if noop:
        lines.append(f"Valid replica already elected for partitions {names}")
    lines.extend(f"Error completing leader election ({election_type}) for partition: {tp.topic}-{tp.partition}: "
                 f"{exception_text(results[tp])}" for tp in failed)
    return lines, len(failed)


def reassignment_json(assignment: Mapping[TopicPartition, Sequence[int]]) -> str:
    """Kafka's reassignment JSON: partitions sorted, every log dir ``any``."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas),
         "log_dirs": ["any"] * len(replicas)} for tp, replicas in sorted(assignment.items())]},
        separators=(",", ":"))


def list_output(ongoing: Mapping[TopicPartition, Reassignment]) -> list[str]:
    """``--list``'s lines."""
    if not ongoing:
        return ["No partition reassignments found."]
    lines = ["Current partition reassignments:"]
    for tp, r in sorted(ongoing.items()):
        adding = f" adding: {','.join(map(str, r.adding))}." if r.adding else ""
        removing = f" removing: {','.join(map(str, r.removing))}." if r.removing else ""
        lines.append(f"{tp.topic}-{tp.partition}: replicas: {','.join(map(str, r.replicas))}.{adding}{removing}")
    return lines


def _moving(current: Mapping[TopicPartition, Sequence[int]], proposed: Mapping[TopicPartition, Sequence[int]]
            ) -> dict[TopicPartition, tuple[list[int], list[int]]]:
    """Each partition whose replicas change: (its current replicas, the replicas it gains)."""
    return {tp: (list(current[tp]), [b for b in target if b not in current[tp]])
            for tp, target in proposed.items() if tp in current and list(current[tp]) != list(target)}


def leader_throttles(current: Mapping[TopicPartition, Sequence[int]],
                     proposed: Mapping[TopicPartition, Sequence[int]]) -> dict[str, str]:
    """``leader.replication.throttled.replicas`` per topic: the replicas that send the data
    (every current replica of a moving partition), ``partition:broker``."""
    return _throttle_lists({tp: sources for tp, (sources, _) in _moving(current, proposed).items()})


def follower_throttles(current: Mapping[TopicPartition, Sequence[int]],
                       proposed: Mapping[TopicPartition, Sequence[int]]) -> dict[str, str]:
    """``follower.replication.throttled.replicas`` per topic: the replicas being added."""
    return _throttle_lists({tp: added for tp, (_, added) in _moving(current, proposed).items()})


def _throttle_lists(replicas: Mapping[TopicPartition, Sequence[int]]) -> dict[str, str]:
    by_topic: dict[str, list[str]] = {}
    for tp, brokers in sorted(replicas.items()):
        by_topic.setdefault(tp.topic, []).extend(f"{tp.partition}:{b}" for b in brokers)
    return {t: ",".join(entries) for t, entries in by_topic.items()}


def reassigning_brokers(current: Mapping[TopicPartition, Sequence[int]],
                        proposed: Mapping[TopicPartition, Sequence[int]]) -> list[int]:
    """The brokers that send or receive data in the move: they get the throttle rates."""
    brokers: set[int] = set()
    for sources, added in _moving(current, proposed).values():
        brokers.update(sources, added)
    return sorted(brokers)
