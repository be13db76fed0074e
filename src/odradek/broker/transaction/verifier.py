"""TxnVerifier: KIP-890 part 1's check, before a transactional batch starts a transaction on
a partition, that the partition was added to that producer's ongoing transaction.

The transaction coordinator of the id answers: this broker's own coordinator directly, a
remote one through AddPartitionsToTxn v4 with ``verify_only`` over the inter-broker listener
(Kafka 3.6's AddPartitionsToTxnManager).  Errors are turned into what a produce response
can carry, as Kafka's ReplicaManager does: the coordinator being elsewhere, loading, busy
or unreachable becomes NOT_ENOUGH_REPLICAS (retriable for every client), PRODUCER_FENCED
becomes INVALID_PRODUCER_EPOCH.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kio.schema.add_partitions_to_txn.v4 import request as apt_req
from kio.schema.add_partitions_to_txn.v4 import response as apt_resp

from odradek.broker.transaction.state_topic import TRANSACTION_STATE_TOPIC
from odradek.common import TopicPartition
from odradek.net.client import BrokerConnection
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.metadata_cache import MetadataCache
    from odradek.broker.transaction.coordinator import TransactionCoordinator

log = logging.getLogger(__name__)

__all__ = ["TxnVerifier", "produce_error_for"]

E = ErrorCode
_RETRIABLE_FOR_PRODUCE = frozenset({
    E.not_coordinator, E.coordinator_not_available, E.coordinator_load_in_progress, E.concurrent_transactions,
    E.network_exception, E.request_timed_out, E.unknown_server_error})


def produce_error_for(error: ErrorCode) -> ErrorCode:
    """A verification error as the produce response reports it."""
    if error in _RETRIABLE_FOR_PRODUCE:
        return E.not_enough_replicas
    if error == E.producer_fenced:
        return E.invalid_producer_epoch
    return error


class TxnVerifier:
    def __init__(self, coordinator: TransactionCoordinator, broker_id: int, metadata_cache: MetadataCache,
                 listener_name: str, timeout_s: float = 30.0) -> None:
        self.coordinator = coordinator
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.listener_name = listener_name
        self.timeout_s = timeout_s
        self._connections: dict[int, BrokerConnection] = {}
        self._connect_locks: dict[int, asyncio.Lock] = defaultdict(asyncio.Lock)

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        wanted = [TopicPartition(*tp) for tp in partitions]
        manager = self.coordinator.manager
        if manager.coordinator_error(transactional_id) != E.not_coordinator:  # ours (loaded or loading)
            result = self.coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, wanted)
        else:
            result = await self._verify_remote(transactional_id, producer_id, producer_epoch, wanted)
        return {tp: produce_error_for(error) for tp, error in result.items()}

    async def _verify_remote(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        meta = self.metadata_cache.partition(TRANSACTION_STATE_TOPIC,
                                             self.coordinator.manager.partition_for(transactional_id))
        if meta is None or meta.leader < 0 or meta.leader == self.broker_id:
            return dict.fromkeys(partitions, E.coordinator_not_available)
        by_topic: dict[str, list[int]] = defaultdict(list)
        for tp in partitions:
            by_topic[tp.topic].append(tp.partition)
        request = apt_req.AddPartitionsToTxnRequest(transactions=(apt_req.AddPartitionsToTxnTransaction(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
            verify_only=True, topics=tuple(apt_req.AddPartitionsToTxnTopic(name=t, partitions=tuple(ps))
                                           for t, ps in by_topic.items())),))
        try:
            conn = await self._connection(meta.leader)
            response = await conn.send(request, apt_resp.AddPartitionsToTxnResponse, timeout_s=self.timeout_s)
        except (OSError, ConnectionError, TimeoutError, LookupError) as e:
            log.debug("Verification request to broker %d failed: %s", meta.leader, e)
            conn = self._connections.pop(meta.leader, None)
            if conn is not None:
                await conn.close()
            return dict.fromkeys(partitions, E.network_exception)
        if response.error_code != E.none:
            return dict.fromkeys(partitions, ErrorCode(response.error_code))
        result = dict.fromkeys(partitions, E.invalid_txn_state)
        for txn in response.results_by_transaction:
            if txn.transactional_id != transactional_id:
                continue
            for topic in txn.topic_results:
                for p in topic.results_by_partition:
                    tp = TopicPartition(topic.name, p.partition_index)
                    if tp in result:
                        result[tp] = ErrorCode(p.partition_error_code)
        return result

    async def _connection(self, broker_id: int) -> BrokerConnection:
        async with self._connect_locks[broker_id]:
            conn = self._connections.get(broker_id)
            if conn is not None and conn.connected:
                return conn
            endpoint = self.metadata_cache.endpoint(broker_id, self.listener_name)
            if endpoint is None:
                raise LookupError(f"no {self.listener_name} endpoint for broker {broker_id}")
            conn = BrokerConnection(endpoint[0], endpoint[1], f"broker-{self.broker_id}-txn-verifier")
            await conn.connect(timeout_s=10)
            self._connections[broker_id] = conn
            return conn

    async def shutdown(self) -> None:
        for conn in self._connections.values():
            await conn.close()
        self._connections.clear()
