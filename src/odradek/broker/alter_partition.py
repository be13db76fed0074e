"""AlterPartitionManager: a leader's requests to the controller to change an ISR.

The leader never writes the ISR itself (the controller is the only writer of a partition's
state).  Proposed changes are batched into AlterPartition requests (api key 56, v2) sent to
the active controller; a change is pending until the answer arrives, and the answer (the
ISR and partition epoch the controller wrote) is applied to the partition.

A LeaderAndIsr may clear a pending change (and a new one may be proposed) while a request
for the old one is out: each request remembers the exact change it carries, and its answer
is applied only while that change is still the partition's pending one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kio.schema.alter_partition.v2 import request as req
from kio.schema.alter_partition.v2 import response as resp

from odradek import tasks
from odradek.broker.partition import Partition, PendingIsrChange
from odradek.net.client import BrokerConnection
from odradek.protocol.errors import ErrorCode
from odradek.security.client import ClientSecurity

if TYPE_CHECKING:
    from odradek.broker.metadata_cache import MetadataCache

log = logging.getLogger(__name__)

__all__ = ["AlterPartitionManager"]


class AlterPartitionManager:
    def __init__(self, broker_id: int, broker_epoch: Callable[[], int], metadata_cache: MetadataCache,
                 listener: str, on_applied: Callable[[Partition], None], *,
                 security: ClientSecurity | None = None) -> None:
        self.security = security
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self.metadata_cache = metadata_cache
        self.listener = listener
        self._on_applied = on_applied
        self._queue: dict[tuple[str, int], Partition] = {}
        self._wakeup = asyncio.Event()
        self._conn: BrokerConnection | None = None
        self._conn_target: tuple[int, str, int] | None = None
        self._task: asyncio.Task[None] | None = None
        # Kafka's IsrShrinksPerSec / IsrExpandsPerSec: ISR changes the controller accepted.
        self.isr_shrinks = 0
        self.isr_expands = 0

    def start(self) -> None:
        self._task = tasks.start(self._run(), "alter-partition-manager")

    async def stop(self) -> None:
        await tasks.cancel_and_wait(self._task)
        if self._conn is not None:
            await self._conn.close()

    def submit(self, partition: Partition, new_isr: tuple[int, ...]) -> bool:
        """Propose ``new_isr``; False if a change for this partition is already pending."""
        if partition.pending_isr is not None or partition.topic_id is None:
            return False
        partition.pending_isr = PendingIsrChange(new_isr, partition.leader_epoch, partition.partition_epoch)
        self._queue[(partition.topic, partition.partition)] = partition
        self._wakeup.set()
        return True

    async def _controller(self) -> BrokerConnection | None:
        controller = self.metadata_cache.controller_id
        if controller is None:
            return None
        endpoint = self.metadata_cache.endpoint(controller, self.listener)
        if endpoint is None:
            return None
        target = (controller, *endpoint)
        if self._conn is not None and self._conn.connected and self._conn_target == target:
            return self._conn
        if self._conn is not None:
            await self._conn.close()
        conn = BrokerConnection(endpoint[0], endpoint[1], f"broker-{self.broker_id}-alter-partition",
                                security=self.security)
        await conn.connect(timeout_s=5)
        self._conn, self._conn_target = conn, target
        return conn

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            queued, self._queue = self._queue, {}
            # What is sent: each partition with the change pending now (a LeaderAndIsr may have
            # dropped it since it was queued).
            batch = {key: (p, p.pending_isr) for key, p in queued.items() if p.pending_isr is not None}
            if not batch:
                continue
            try:
                conn = await self._controller()
                if conn is None:
                    raise ConnectionError("no known controller")
                response = await conn.send(self._request(batch), resp.AlterPartitionResponse, timeout_s=30)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # (connection trouble, timeouts): the batch is retried
                log.info("AlterPartition request failed (%r); retrying", e)
                if self._conn is not None:
                    await self._conn.close()
                    self._conn = None
                for key, (partition, _) in batch.items():
                    self._queue.setdefault(key, partition)
                await asyncio.sleep(0.2)
                self._wakeup.set()
                continue
            self._handle_response(batch, response)

    def _request(self, batch: dict[tuple[str, int], tuple[Partition, PendingIsrChange]]) -> req.AlterPartitionRequest:
        by_topic: dict[object, list[req.PartitionData]] = {}
        for partition, pending in batch.values():
            by_topic.setdefault(partition.topic_id, []).append(req.PartitionData(
                partition_index=partition.partition, leader_epoch=pending.leader_epoch, new_isr=pending.isr,
                leader_recovery_state=0, partition_epoch=pending.partition_epoch))
        return req.AlterPartitionRequest(
            broker_id=self.broker_id, broker_epoch=self._broker_epoch(),
            topics=tuple(req.TopicData(topic_id=tid, partitions=tuple(parts)) for tid, parts in by_topic.items()))

    def _handle_response(self, batch: dict[tuple[str, int], tuple[Partition, PendingIsrChange]],
                         response: resp.AlterPartitionResponse) -> None:
        by_id = {(p.topic_id, p.partition): (p, pending) for p, pending in batch.values()}
        if response.error_code != ErrorCode.none:
            log.info("AlterPartition refused by the controller: %s", ErrorCode(response.error_code).name)
        for topic in response.topics:
            for pd in topic.partitions:
                entry = by_id.get((topic.topic_id, pd.partition_index))
                if entry is None:
                    continue
                partition, pending = entry
                if partition.pending_isr is not pending:
                    continue  # superseded by a LeaderAndIsr (and maybe a newer proposal) meanwhile
                partition.pending_isr = None
                if pd.error_code != ErrorCode.none:
                    log.info("ISR change %s for %s refused: %s", pending.isr, partition.name,
                             ErrorCode(pd.error_code).name)
                    continue
                if partition.is_leader and pd.leader_epoch == partition.leader_epoch:
                    if len(pd.isr) < len(partition.isr):
                        self.isr_shrinks += 1
                    elif len(pd.isr) > len(partition.isr):
                        self.isr_expands += 1
                    partition.isr = tuple(pd.isr)
                    partition.partition_epoch = pd.partition_epoch
                    log.info("ISR of %s is now [%s] (partition epoch %d)", partition.name,
                             ",".join(map(str, pd.isr)), pd.partition_epoch)
                    self._on_applied(partition)
        # Not answered (e.g. the whole request was refused): the leader may propose again.
        for partition, pending in batch.values():
            if partition.pending_isr is pending:
                partition.pending_isr = None
