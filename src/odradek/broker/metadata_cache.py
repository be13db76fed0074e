"""MetadataCache: what this broker knows of the cluster, from the controller's UpdateMetadata.

Metadata requests are answered from here.  Live brokers are replaced wholesale by each
UpdateMetadata; partition states are updated incrementally, and a leader of -2 (the topic is
being deleted) removes the partition.

A broker that has just started knows nothing until the controller's first UpdateMetadata
reaches it.  Handlers that would otherwise answer "no such topic" or "no brokers" from that
empty cache wait for it first (:meth:`MetadataCache.wait_initialized`), as a KRaft broker stays
fenced until it has caught up: a restarted broker must not tell a producer that a topic it
has been writing to does not exist.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from odradek.protocol import control
from odradek.zk.zk_data import LeaderAndIsr, uuid_to_topic_id

__all__ = ["INITIAL_METADATA_WAIT_S", "BrokerEndpoints", "MetadataCache", "PartitionMetadata"]

# How long a client request waits for a just-started broker's first UpdateMetadata before
# being answered from the (empty) cache with retriable errors.
INITIAL_METADATA_WAIT_S = 5.0


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class BrokerEndpoints:
    id: int
    rack: str | None
    # listener name -> (host, port)
    endpoints: dict[str, tuple[str, int]]


class MetadataCache:
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.controller_id: int | None = None
        self.controller_epoch = 0
        self.alive_brokers: dict[int, BrokerEndpoints] = {}
        self.partitions: dict[str, dict[int, PartitionMetadata]] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        # Bumped on every update; request handlers waiting for metadata watch it.
        self.version = 0
        self._initialized = asyncio.Event()

    @property
    def initialized(self) -> bool:
        """Whether an UpdateMetadata from a controller has been applied."""
        return self._initialized.is_set()

    async def wait_initialized(self, timeout_s: float = INITIAL_METADATA_WAIT_S) -> bool:
        """Wait (bounded) for the first UpdateMetadata; returns :attr:`initialized`."""
        if not self._initialized.is_set():
            try:
                await asyncio.wait_for(self._initialized.wait(), timeout_s)
            except TimeoutError:
                pass
        return self._initialized.is_set()

    def update(self, request: control.UpdateMetadataRequest) -> list[tuple[str, int]]:
        """Apply an UpdateMetadata request; returns the partitions it deleted."""
        self.controller_id = request.controller_id if request.controller_id >= 0 else None
        self.controller_epoch = request.controller_epoch
        self.alive_brokers = {
            b.id: BrokerEndpoints(b.id, b.rack, {e.listener: (e.host, e.port) for e in b.endpoints})
            for b in request.live_brokers
        }
        deleted = []
        for topic_state in request.topic_states:
            topic = topic_state.topic_name
            if topic_state.topic_id is not None and topic_state.topic_id.int != 0:
                self.topic_ids[topic] = topic_state.topic_id
            for ps in topic_state.partition_states:
                if ps.leader == LeaderAndIsr.LEADER_DURING_DELETE:
                    parts = self.partitions.get(topic)
                    if parts is not None and parts.pop(ps.partition_index, None) is not None:
                        deleted.append((topic, ps.partition_index))
                    if parts is not None and not parts:
                        del self.partitions[topic]
                        self.topic_ids.pop(topic, None)
                    continue
                self.partitions.setdefault(topic, {})[ps.partition_index] = PartitionMetadata(
                    topic, ps.partition_index, ps.leader, ps.leader_epoch, tuple(ps.isr), tuple(ps.replicas),
                    tuple(ps.offline_replicas), ps.zk_version)
        self.version += 1
        self._initialized.set()
        return deleted

    # ------------------------------------------------------------------ queries

    def topics(self) -> list[str]:
        return sorted(self.partitions)

    def contains_topic(self, topic: str) -> bool:
        return topic in self.partitions

    def partitions_of(self, topic: str) -> dict[int, PartitionMetadata]:
        return self.partitions.get(topic, {})

    def partition(self, topic: str, partition: int) -> PartitionMetadata | None:
        return self.partitions.get(topic, {}).get(partition)

    def topic_id(self, topic: str) -> uuid.UUID:
        return self.topic_ids.get(topic, uuid.UUID(int=0))

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The topic with this id (Metadata v12 asks by id; a scan, as such asks are rare)."""
        return next((name for name, known in self.topic_ids.items() if known == topic_id), None)

    def topic_id_string(self, topic: str) -> str | None:
        return uuid_to_topic_id(self.topic_ids.get(topic))

    def alive_broker_ids(self) -> list[int]:
        return sorted(self.alive_brokers)

    def endpoint(self, broker_id: int, listener: str) -> tuple[str, int] | None:
        broker = self.alive_brokers.get(broker_id)
        if broker is None:
            return None
        return broker.endpoints.get(listener)

    def brokers_for_listener(self, listener: str) -> Iterable[tuple[int, str, int, str | None]]:
        for broker in sorted(self.alive_brokers.values(), key=lambda b: b.id):
            ep = broker.endpoints.get(listener)
            if ep is not None:
                yield broker.id, ep[0], ep[1], broker.rack
