"""What the console asks of the cluster, over the Kafka protocol only (so it reads any Kafka):
Metadata, DescribeConfigs, DescribeLogDirs, ListOffsets, the group APIs, DescribeAcls and
DescribeUserScramCredentials through odradek's admin connections; the message browser through
confluent-kafka's consumer (read_committed as librdkafka implements it); the brokers' /metrics
over HTTP.

One admin connection is kept open; when its broker dies, the next call opens a new one through
the other bootstrap servers, so the pages go on while a broker is down."""

from __future__ import annotations

import asyncio
import time
import types
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp

from odradek.admin.acls import AclAdminConnection, AdminClientAclService
from odradek.admin.client import AdminClientError
from odradek.admin.configs import ConfigsAdminConnection
from odradek.admin.group_admin import GroupAdminConnection, GroupDescription
from odradek.common import TopicPartition
from odradek.console.model import BrokerInfo, ClusterSnapshot, PartitionInfo, messages_in_totals
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages import build
from odradek.security.acl_filters import AclBindingFilter
from odradek.security.acls import Acl, ResourcePattern
from odradek.security.client import ClientSecurity
from odradek.security.client_properties import librdkafka_properties

__all__ = ["BrowsedRecord", "ClusterReader", "ConfigEntry", "GroupLag", "LogDirSummary", "ReadError"]

T = TypeVar("T")
LATEST, EARLIEST = -1, -2
_MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
_CONFIG_SOURCES = {1: "topic", 2: "dynamic broker", 3: "dynamic default", 4: "static broker", 5: "default",
                   6: "dynamic logger"}
# What a lost or refused connection looks like to the caller: the page shows it, the next call retries.
ReadError = (AdminClientError, KafkaError, ConnectionError, OSError, TimeoutError)


class ConsoleAdminConnection(GroupAdminConnection):
    """A GroupAdminConnection that also speaks the describing APIs the pages need."""

    max_versions = {**GroupAdminConnection.max_versions, **AclAdminConnection.max_versions,
                    **ConfigsAdminConnection.max_versions, ApiKey.DESCRIBE_LOG_DIRS: 4}
    api_names = {**GroupAdminConnection.api_names, **AclAdminConnection.api_names,
                 **ConfigsAdminConnection.api_names, ApiKey.DESCRIBE_LOG_DIRS: "DescribeLogDirs"}


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: str
    sensitive: bool


@dataclass(frozen=True, slots=True)
class LogDirSummary:
    broker_id: int
    path: str
    error: str | None
    size: int  # bytes of every replica in it
    replicas: int
    sizes: dict[TopicPartition, int]


@dataclass(frozen=True, slots=True)
class GroupLag:
    """A group as DescribeGroups and OffsetFetch show it, with each partition's log-end offset."""

    description: GroupDescription
    rows: tuple[tuple[str, int, int | None, int | None], ...]  # topic, partition, committed, log-end

    def lags(self) -> dict[tuple[str, int], int]:
        return {(t, p): max(end - committed, 0) for t, p, committed, end in self.rows
                if committed is not None and end is not None}


@dataclass(frozen=True, slots=True)
class BrowsedRecord:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


class ClusterReader:
    """The console's one way into the cluster: ``bootstrap`` servers, client ``properties``
    (a ``--command-config`` file's, Kafka's names) and, optionally, the brokers' metrics URLs."""

    def __init__(self, bootstrap: str, properties: Mapping[str, str] | None = None,
                 metrics_urls: Sequence[str] = ()) -> None:
        self.bootstrap = bootstrap
        self.properties = dict(properties or {})
        self.security = ClientSecurity.from_properties(self.properties) if self.properties else None
        self.metrics_urls = tuple(metrics_urls)
        ConsoleAdminConnection(bootstrap)  # refuses malformed addresses now rather than on every page
        self._admin: ConsoleAdminConnection | None = None
        self._lock = asyncio.Lock()  # one request at a time on the shared connection
        self._known: dict[int, BrokerInfo] = {}  # every broker seen, for the columns of dead ones
        self._http: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        await self._drop_connection()
        if self._http is not None:
            await self._http.close()

    async def _call(self, action: Callable[[ConsoleAdminConnection], Awaitable[T]]) -> T:
        """``action`` on the admin connection; once more on a new connection if the old one broke
        (its broker died: the new one goes through the other bootstrap servers)."""
        async with self._lock:
            try:
                return await action(await self._connection())
            except (ConnectionError, OSError, TimeoutError):
                await self._drop_connection()
            try:
                return await action(await self._connection())
            except (ConnectionError, OSError, TimeoutError):
                await self._drop_connection()
                raise

    async def _connection(self) -> ConsoleAdminConnection:
        if self._admin is None:
            self._admin = await ConsoleAdminConnection(self.bootstrap, security=self.security).__aenter__()
        return self._admin

    async def _drop_connection(self) -> None:
        if self._admin is not None:
            admin, self._admin = self._admin, None
            await admin.__aexit__(None, None, None)

    async def snapshot(self) -> ClusterSnapshot:
        """Brokers, controller and every topic's partitions, from one Metadata answer."""
        view = await self._call(lambda admin: admin.metadata(None))
        live = [BrokerInfo(b, host, port, rack) for b, (host, port, rack) in view.brokers.items()]
        self._known.update((b.broker_id, b) for b in live)
        partitions = [PartitionInfo(t.name, p.partition_index, p.leader_id, tuple(p.replica_nodes),
                                    tuple(p.isr_nodes), tuple(getattr(p, "offline_replicas", ()) or ()))
                      for t in view.topics if t.error_code == ErrorCode.none for p in t.partitions]
        return ClusterSnapshot.of(live, view.controller_id, partitions, self._known)

    async def log_dirs(self, broker_ids: Iterable[int]) -> dict[int, list[LogDirSummary] | str]:
        """Each live broker's log directories (DescribeLogDirs), or why it could not say."""
        found: dict[int, list[LogDirSummary] | str] = {}
        for broker_id in broker_ids:
            try:
                response = await self._call(lambda admin, b=broker_id: admin.broker_request(
                    b, ApiKey.DESCRIBE_LOG_DIRS, lambda m, v: build(m.DescribeLogDirsRequest, topics=None)))
            except ReadError as e:
                found[broker_id] = f"{type(e).__name__}: {e}"
                continue
            if getattr(response, "error_code", ErrorCode.none) != ErrorCode.none:
                found[broker_id] = ErrorCode(response.error_code).name
                continue
            found[broker_id] = [LogDirSummary(
                broker_id, r.log_dir, None if r.error_code == ErrorCode.none else ErrorCode(r.error_code).name,
                sum(p.partition_size for t in r.topics for p in t.partitions),
                sum(len(t.partitions) for t in r.topics),
                {TopicPartition(t.name, p.partition_index): p.partition_size for t in r.topics for p in t.partitions})
                for r in response.results]
        return found

    async def topic_configs(self, topic: str) -> list[ConfigEntry]:
        def body(m: types.ModuleType, version: int) -> Any:
            return build(m.DescribeConfigsRequest, include_synonyms=False, include_documentation=False,
                         resources=(build(m.DescribeConfigsResource, resource_type=2, resource_name=topic,
                                          configuration_keys=None),))

        result = (await self._call(lambda admin: admin.request(ApiKey.DESCRIBE_CONFIGS, body))).results[0]
        if result.error_code != ErrorCode.none:
            raise AdminClientError(result.error_message or ErrorCode(result.error_code).name)
        return sorted((ConfigEntry(c.name, c.value, _CONFIG_SOURCES.get(getattr(c, "config_source", 0), "?"),
                                   c.is_sensitive) for c in result.configs), key=lambda c: c.name)

    async def offsets(self, partitions: Sequence[TopicPartition], timestamp: int) -> dict[TopicPartition, int]:
        """The LATEST or EARLIEST offset of each partition that has a leader to ask."""
        found = await self._call(lambda admin: admin.list_offsets(partitions, timestamp))
        return {tp: o for tp, o in found.items() if not isinstance(o, ErrorCode)}

    async def groups(self) -> list[tuple[str, str, str]]:
        return sorted(await self._call(lambda admin: admin.list_groups()))

    async def group(self, group_id: str) -> GroupLag:
        description = await self._call(lambda admin: admin.describe_group(group_id))
        committed = await self._call(lambda admin: admin.committed_offsets(group_id))
        assigned = {tp for m in description.members for tp in m.assignment}
        partitions = sorted(assigned | set(committed))
        ends = await self.offsets(partitions, LATEST) if partitions else {}
        rows = tuple((t, p, committed.get((t, p)), ends.get(TopicPartition(t, p))) for t, p in partitions)
        return GroupLag(description, rows)

    async def acls(self) -> dict[ResourcePattern, frozenset[Acl]]:
        return await self._call(lambda admin: AdminClientAclService(admin).describe([AclBindingFilter()]))

    async def scram_users(self) -> list[tuple[str, str]]:
        """Every user with SCRAM credentials and their mechanisms (iterations), as described."""
        def body(m: types.ModuleType, version: int) -> Any:
            return build(m.DescribeUserScramCredentialsRequest, users=None)

        response = await self._call(lambda admin: admin.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, body))
        if response.error_code != ErrorCode.none:
            raise AdminClientError(response.error_message or ErrorCode(response.error_code).name)
        return sorted((r.user, ", ".join(f"{_MECHANISMS.get(i.mechanism, i.mechanism)} ({i.iterations} iterations)"
                                         for i in r.credential_infos))
                      for r in response.results if r.error_code == ErrorCode.none)

    async def messages_in(self) -> dict[str, dict[str, float]] | None:
        """Each metrics URL's MessagesInPerSec totals per topic (None: no URL is known); a broker
        that does not answer is left out."""
        if not self.metrics_urls:
            return None
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2))
        found = {}
        for url in self.metrics_urls:
            try:
                async with self._http.get(url) as response:
                    found[url] = messages_in_totals(await response.text())
            except (aiohttp.ClientError, TimeoutError, ValueError):
                continue
        return found

    async def browse(self, topic: str, partition: int, count: int, read_committed: bool) -> list[BrowsedRecord]:
        """The latest ``count`` records of a partition (fewer if it holds fewer)."""
        return await asyncio.to_thread(self._browse, topic, partition, count, read_committed)

    def _browse(self, topic: str, partition: int, count: int, read_committed: bool,
                timeout_s: float = 10.0) -> list[BrowsedRecord]:
        import confluent_kafka as ck

        config = {**librdkafka_properties(self.properties), "bootstrap.servers": self.bootstrap,
                  "group.id": "odradek-console", "enable.auto.commit": False, "enable.partition.eof": True,
                  "isolation.level": "read_committed" if read_committed else "read_uncommitted", "log_level": 0}
        consumer = ck.Consumer(config)
        try:
            low, high = consumer.get_watermark_offsets(ck.TopicPartition(topic, partition), timeout=timeout_s)
            if high <= low:
                return []
            consumer.assign([ck.TopicPartition(topic, partition, max(low, high - count))])
            records: list[BrowsedRecord] = []
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is None:
                    continue
                if message.error():
                    if message.error().code() == ck.KafkaError._PARTITION_EOF:
                        break
                    raise AdminClientError(message.error().str())
                records.append(BrowsedRecord(message.offset(), message.timestamp()[1], message.key(),
                                             message.value(), tuple(message.headers() or ())))
                if message.offset() >= high - 1:
                    break
            return records[-count:]
        finally:
            consumer.close()
