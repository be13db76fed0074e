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
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from kio.schema.add_partitions_to_txn.v4 import request as apt_req
from kio.schema.add_partitions_to_txn.v4 import response as apt_resp

from odradek.broker.peer_connections import PeerConnections
from odradek.broker.transaction.state_topic import TRANSACTION_STATE_TOPIC
from odradek.common import TopicPartition
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.metadata_cache import MetadataCache
    from odradek.broker.transaction.coordinator import TransactionCoordinator
    from odradek.security.client import ClientSecurity

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


class _Pending:
    __slots__ = ("future", "partitions", "producer_epoch", "producer_id")

    def __init__(self, producer_id: int, producer_epoch: int, partitions: set[TopicPartition]) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.partitions = partitions
        self.future: asyncio.Future[dict[TopicPartition, ErrorCode]] = asyncio.get_running_loop().create_future()


class TxnVerifier:
    def __init__(self, coordinator: Callable[[], TransactionCoordinator], broker_id: int,
                 metadata_cache: MetadataCache, listener_name: str, timeout_s: float = 30.0, *,
                 security: ClientSecurity | None = None) -> None:
        # This broker's coordinator, built after the replica manager that takes this verifier.
        self.coordinator = coordinator
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.listener_name = listener_name
        self.timeout_s = timeout_s
        self.peers = PeerConnections(broker_id, metadata_cache, listener_name, "txn-verifier", security=security)
        # coordinator broker -> transactional id -> the check waiting to go out
        self._queues: dict[int, dict[str, _Pending]] = {}
        self._sending: set[asyncio.Task[None]] = set()

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        wanted = [TopicPartition(*tp) for tp in partitions]
        coordinator = self.coordinator()
        if coordinator.manager.coordinator_error(transactional_id) != E.not_coordinator:  # ours (loaded or loading)
            result = coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, wanted)
        else:
            result = await self._verify_remote(transactional_id, producer_id, producer_epoch, wanted)
        return {tp: produce_error_for(error) for tp, error in result.items()}

    async def _verify_remote(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """Checks for one coordinator made in the same loop turn go out as one request (one
        entry per transactional id, their partitions merged)."""
        meta = self.metadata_cache.partition(TRANSACTION_STATE_TOPIC,
                                             self.coordinator().manager.partition_for(transactional_id))
        if meta is None or meta.leader < 0 or meta.leader == self.broker_id:
            return dict.fromkeys(partitions, E.coordinator_not_available)
        queue = self._queues.setdefault(meta.leader, {})
        pending = queue.get(transactional_id)
        if pending is not None and (pending.producer_id, pending.producer_epoch) != (producer_id, producer_epoch):
            # The same id with another producer in this batch: on its own.
            result = await self._send(meta.leader, [_Pending(producer_id, producer_epoch, set(partitions))],
                                      [transactional_id])
            return {tp: result[transactional_id].get(tp, E.invalid_txn_state) for tp in partitions}
        if pending is None:
            pending = queue[transactional_id] = _Pending(producer_id, producer_epoch, set())
            if len(queue) == 1:
                asyncio.get_running_loop().call_soon(self._flush, meta.leader)
        pending.partitions.update(partitions)
        result = await asyncio.shield(pending.future)
        return {tp: result.get(tp, E.invalid_txn_state) for tp in partitions}

    def _flush(self, broker_id: int) -> None:
        queue = self._queues.pop(broker_id, {})
        if not queue:
            return
        ids = list(queue)
        pendings = [queue[t] for t in ids]

        async def send() -> None:
            results: dict[str, dict[TopicPartition, ErrorCode]] = {}
            try:
                results = await self._send(broker_id, pendings, ids)
            except Exception as e:
                log.warning("Verification request to broker %d failed: %s", broker_id, e)
            finally:  # every waiter gets an answer, even when cancelled
                for txn_id, p in queue.items():
                    if not p.future.done():
                        p.future.set_result(results.get(txn_id) or dict.fromkeys(p.partitions, E.network_exception))

        task = asyncio.get_running_loop().create_task(send(), name=f"txn-verify-{broker_id}")
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(self, broker_id: int, pendings: list[_Pending], ids: list[str]
                    ) -> dict[str, dict[TopicPartition, ErrorCode]]:
        transactions = []
        for txn_id, p in zip(ids, pendings, strict=True):
            by_topic: dict[str, list[int]] = defaultdict(list)
            for tp in sorted(p.partitions):
                by_topic[tp.topic].append(tp.partition)
            transactions.append(apt_req.AddPartitionsToTxnTransaction(
                transactional_id=txn_id, producer_id=p.producer_id, producer_epoch=p.producer_epoch,
                verify_only=True, topics=tuple(apt_req.AddPartitionsToTxnTopic(name=t, partitions=tuple(ps))
                                               for t, ps in by_topic.items())))
        results = {t: dict.fromkeys(p.partitions, E.invalid_txn_state) for t, p in zip(ids, pendings, strict=True)}
        try:
            conn = await self.peers.get(broker_id)
            response = await conn.send(apt_req.AddPartitionsToTxnRequest(transactions=tuple(transactions)),
                                       apt_resp.AddPartitionsToTxnResponse, timeout_s=self.timeout_s)
        except (OSError, ConnectionError, TimeoutError, LookupError) as e:
            log.debug("Verification request to broker %d failed: %s", broker_id, e)
            await self.peers.drop(broker_id)
            return {t: dict.fromkeys(r, E.network_exception) for t, r in results.items()}
        if response.error_code != E.none:
            return {t: dict.fromkeys(r, ErrorCode(response.error_code)) for t, r in results.items()}
        for txn in response.results_by_transaction:
            result = results.get(txn.transactional_id)
            if result is None:
                continue
            for topic in txn.topic_results:
                for p in topic.results_by_partition:
                    tp = TopicPartition(topic.name, p.partition_index)
                    if tp in result:
                        result[tp] = ErrorCode(p.partition_error_code)
        return results

    async def shutdown(self) -> None:
        for task in list(self._sending):
            task.cancel()
        for queue in self._queues.values():
            for p in queue.values():
                if not p.future.done():
                    p.future.set_result(dict.fromkeys(p.partitions, E.network_exception))
        self._queues.clear()
        await self.peers.close()
