"""TransactionMarkerChannelManager: writes a transaction's end markers (Kafka 2.8's class of
that name).

For each transaction the partitions are grouped by their leader (metadata cache) and one
WriteTxnMarkersRequest v1 goes to each leader over the inter-broker listener, this broker
included.  Partitions answering a retriable error (a leader change, a replica not yet in
sync, a lost connection) are regrouped after a backoff with the leader looked up again;
partitions whose topic no longer exists are dropped.  An INVALID_PRODUCER_EPOCH or
TRANSACTION_COORDINATOR_FENCED answer means a newer coordinator or producer took over: the
transaction is left for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kio.schema.write_txn_markers.v1 import request as wtm_req
from kio.schema.write_txn_markers.v1 import response as wtm_resp

from odradek.broker.peer_connections import PeerConnections
from odradek.common import TopicPartition
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.metadata_cache import MetadataCache
    from odradek.security.client import ClientSecurity

log = logging.getLogger(__name__)

__all__ = ["TransactionMarkerChannelManager", "classify_marker_error"]

E = ErrorCode
_RETRY_BACKOFF_S = 0.1  # Kafka's retry.backoff.ms
_MAX_RETRY_BACKOFF_S = 1.0  # ... growing to reconnect.backoff.max.ms while nothing progresses
_REQUEST_TIMEOUT_S = 30.0

DONE, RETRY, FENCED = "done", "retry", "fenced"


def classify_marker_error(error: ErrorCode) -> str:
    """What a partition's WriteTxnMarkers answer means for the sender (Kafka's
    TransactionMarkerRequestCompletionHandler): written, to retry, or fenced."""
    if error in (E.none, E.unsupported_for_message_format):
        return DONE  # an old-format partition has no markers; nothing to wait for
    if error in (E.invalid_producer_epoch, E.transaction_coordinator_fenced):
        return FENCED
    return RETRY


class TransactionMarkerChannelManager:
    def __init__(self, broker_id: int, metadata_cache: MetadataCache, listener_name: str, *,
                 security: ClientSecurity | None = None) -> None:
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.listener_name = listener_name
        self.peers = PeerConnections(broker_id, metadata_cache, listener_name, "txn-markers", security=security)

    async def send_markers(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                           coordinator_epoch: int, partitions: Iterable[TopicPartition]) -> bool:
        remaining = set(partitions)
        backoff = _RETRY_BACKOFF_S
        while True:
            by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
            for tp in sorted(remaining):
                if not self.metadata_cache.contains_topic(tp.topic):
                    log.info("Dropping the marker of transactional id %s for %s-%d: the topic no longer exists",
                             transactional_id, tp.topic, tp.partition)
                    remaining.discard(tp)
                    continue
                meta = self.metadata_cache.partition(tp.topic, tp.partition)
                if meta is not None and meta.leader >= 0:
                    by_leader[meta.leader].append(tp)
            if not remaining:
                return True
            results = await asyncio.gather(*(
                self._send(leader, tps, producer_id, producer_epoch, commit, coordinator_epoch)
                for leader, tps in by_leader.items()))
            before = len(remaining)
            for outcome in results:
                for tp, what in outcome.items():
                    if what == FENCED:
                        return False
                    if what == DONE:
                        remaining.discard(tp)
            if not remaining:
                return True
            backoff = _RETRY_BACKOFF_S if len(remaining) < before else min(backoff * 2, _MAX_RETRY_BACKOFF_S)
            await asyncio.sleep(backoff)

    async def _send(self, leader: int, partitions: list[TopicPartition], producer_id: int, producer_epoch: int,
                    commit: bool, coordinator_epoch: int) -> dict[TopicPartition, str]:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for tp in partitions:
            by_topic[tp.topic].append(tp.partition)
        request = wtm_req.WriteTxnMarkersRequest(markers=(wtm_req.WritableTxnMarker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
            coordinator_epoch=coordinator_epoch,
            topics=tuple(wtm_req.WritableTxnMarkerTopic(name=t, partition_indexes=tuple(ps))
                         for t, ps in by_topic.items())),))
        try:
            conn = await self.peers.get(leader)
            response = await conn.send(request, wtm_resp.WriteTxnMarkersResponse, timeout_s=_REQUEST_TIMEOUT_S)
        except (OSError, ConnectionError, TimeoutError, LookupError) as e:
            log.debug("Sending markers to broker %d failed: %s", leader, e)
            await self.peers.drop(leader)
            return dict.fromkeys(partitions, RETRY)
        outcome = dict.fromkeys(partitions, RETRY)
        for marker in response.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    tp = TopicPartition(topic.name, p.partition_index)
                    if tp in outcome:
                        what = classify_marker_error(ErrorCode(p.error_code))
                        if what == RETRY:
                            log.debug("Marker for %s-%d answered %s; retrying", tp.topic, tp.partition,
                                      ErrorCode(p.error_code).name)
                        outcome[tp] = what
        return outcome

    async def shutdown(self) -> None:
        await self.peers.close()
