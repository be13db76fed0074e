"""TransactionStateManager: the transactional ids of the ``__transaction_state`` partitions
this broker leads, their loading and unloading, and their persistence (Kafka's class of that
name, 2.8).

A partition's ids are served once it is *owned*: led here and its log replayed.  While it
loads, requests get COORDINATOR_LOAD_IN_PROGRESS; for a partition not led here,
NOT_COORDINATOR.  The coordinator epoch of a partition is its leader epoch when this broker
became its leader; every write checks it again once replicated, so a coordinator that lost
the partition meanwhile never applies a transition (it answers NOT_COORDINATOR).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from odradek.broker.transaction.state_topic import TRANSACTION_STATE_TOPIC, TransactionStateTopic
from odradek.broker.transaction.transaction_log import (
    TxnLogRecordError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from odradek.broker.transaction.transaction_state import (
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    coordinator_partition,
)
from odradek.broker.transaction.txn_config import TxnConfig
from odradek.common import now_ms
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import SimpleRecord, build_batch, decode_batch, iter_batches

log = logging.getLogger(__name__)

__all__ = ["CoordinatorEpochAndMetadata", "TransactionStateManager", "replay_transaction_log"]

S = TransactionState
E = ErrorCode

# Append errors as a transaction log write reports them (Kafka's appendTransactionToLog).
_APPEND_ERRORS = {
    E.unknown_topic_or_partition: E.coordinator_not_available,
    E.not_enough_replicas: E.coordinator_not_available,
    E.not_enough_replicas_after_append: E.coordinator_not_available,
    E.request_timed_out: E.coordinator_not_available,
    E.not_leader_or_follower: E.not_coordinator,
    E.kafka_storage_error: E.not_coordinator,
    E.message_too_large: E.unknown_server_error,
    E.record_list_too_large: E.unknown_server_error,
}


@dataclass(frozen=True, slots=True)
class CoordinatorEpochAndMetadata:
    coordinator_epoch: int
    metadata: TransactionMetadata


def replay_transaction_log(chunks: Iterable[bytes]) -> dict[str, TransactionMetadata]:
    """The transactional ids a partition's log leaves (the last record of each id wins; a
    tombstone removes it).  Unreadable records are skipped with a warning, as Kafka does."""
    loaded: dict[str, TransactionMetadata] = {}
    for chunk in chunks:
        for pos, header in iter_batches(chunk):
            if header.is_control:
                continue
            _, records = decode_batch(chunk[pos:pos + header.size])
            for record in records:
                if record.key is None:
                    continue
                try:
                    txn_id = decode_key(record.key)
                    value = decode_value(record.value)
                except TxnLogRecordError as e:
                    log.warning("Skipping an unreadable %s record at offset %d: %s", TRANSACTION_STATE_TOPIC,
                                record.offset, e)
                    continue
                if value is None:
                    loaded.pop(txn_id, None)
                else:
                    loaded[txn_id] = value.to_metadata(txn_id)
    return loaded


class TransactionStateManager:
    def __init__(self, config: TxnConfig, topic: TransactionStateTopic, now_ms: Callable[[], int] = now_ms) -> None:
        self.config = config
        self.topic = topic
        self.now_ms = now_ms
        self.num_partitions = config.num_partitions
        self.txns: dict[str, TransactionMetadata] = {}
        # partition -> coordinator epoch, for the partitions loaded and led here
        self.owned: dict[int, int] = {}
        self.loading: dict[int, asyncio.Task[None]] = {}

    # ------------------------------------------------------------------ lookup

    def partition_for(self, transactional_id: str) -> int:
        return coordinator_partition(transactional_id, self.num_partitions)

    def coordinator_error(self, transactional_id: str) -> ErrorCode | None:
        """None when this broker serves ``transactional_id`` now."""
        partition = self.partition_for(transactional_id)
        if partition in self.loading:
            return E.coordinator_load_in_progress
        if partition not in self.owned:
            return E.not_coordinator
        return None

    def get(self, transactional_id: str) -> tuple[ErrorCode | None, CoordinatorEpochAndMetadata | None]:
        """(error, None) when not served here; (None, None) when unknown; else its metadata
        with the coordinator epoch of its partition (Kafka's getTransactionState)."""
        error = self.coordinator_error(transactional_id)
        if error is not None:
            return error, None
        md = self.txns.get(transactional_id)
        if md is None:
            return None, None
        return None, CoordinatorEpochAndMetadata(self.owned[self.partition_for(transactional_id)], md)

    def put_if_absent(self, md: TransactionMetadata) -> TransactionMetadata:
        return self.txns.setdefault(md.transactional_id, md)

    def owned_metadata(self) -> Iterator[tuple[int, TransactionMetadata]]:
        """(coordinator epoch, metadata) of every id loaded here."""
        for md in list(self.txns.values()):
            epoch = self.owned.get(self.partition_for(md.transactional_id))
            if epoch is not None:
                yield epoch, md

    # ------------------------------------------------------------------ timeouts and expiry

    def timed_out_transactions(self, now_ms: int) -> list[tuple[str, int, int]]:
        """(transactional id, producer id, epoch) of transactions open longer than their
        timeout and not moving already (Kafka's timedOutTransactions)."""
        return [(md.transactional_id, md.producer_id, md.producer_epoch)
                for _, md in self.owned_metadata()
                if md.state in (S.ONGOING, S.PREPARE_EPOCH_FENCE) and not md.pending_transition_in_progress
                and md.txn_start_timestamp <= now_ms - md.txn_timeout_ms]

    def expirable(self, now_ms: int) -> list[TransactionMetadata]:
        """Idle ids past transactional.id.expiration.ms (Kafka's removeExpiredTransactionalIds)."""
        limit = now_ms - self.config.transactional_id_expiration_ms
        return [md for _, md in self.owned_metadata()
                if md.state.is_expiration_allowed and not md.pending_transition_in_progress
                and md.txn_last_update_timestamp <= limit]

    # ------------------------------------------------------------------ loading

    def schedule_load(self, partition: int, coordinator_epoch: int,
                      on_loaded: Callable[[int, int, list[TransactionMetadata]], None]) -> None:
        """This broker leads ``partition`` with ``coordinator_epoch``: replay its log, then
        serve its ids (``on_loaded(partition, epoch, ids)`` resumes their markers).  A
        partition loaded or loading with that epoch already is left alone; an older epoch is
        unloaded first (Kafka reloads on every election)."""
        if self.owned.get(partition) == coordinator_epoch:
            return
        if partition in self.owned or partition in self.loading:
            self.unload(partition)
        log.info("Scheduling loading of transaction metadata from %s-%d (coordinator epoch %d)",
                 TRANSACTION_STATE_TOPIC, partition, coordinator_epoch)
        self.loading[partition] = asyncio.get_running_loop().create_task(
            self._load(partition, coordinator_epoch, on_loaded), name=f"load-{TRANSACTION_STATE_TOPIC}-{partition}")

    async def _load(self, partition: int, coordinator_epoch: int,
                    on_loaded: Callable[[int, int, list[TransactionMetadata]], None]) -> None:
        started = time.monotonic()
        chunks = []
        try:
            for chunk in self.topic.read(partition):
                chunks.append(chunk)
                await asyncio.sleep(0)  # let requests through between chunks
            loaded = replay_transaction_log(chunks)
        except asyncio.CancelledError:
            raise
        except (KafkaError, OSError, ValueError) as e:
            log.error("Error loading transaction metadata from %s-%d; its ids stay unavailable until "
                      "leadership moves: %s", TRANSACTION_STATE_TOPIC, partition, e)
            self.loading.pop(partition, None)
            return
        self.loading.pop(partition, None)
        self.owned[partition] = coordinator_epoch
        ids = []
        for txn_id, md in loaded.items():
            if self.partition_for(txn_id) != partition:
                continue
            self.txns[txn_id] = md
            ids.append(md)
        log.info("Finished loading %d transaction metadata from %s-%d in %d milliseconds", len(ids),
                 TRANSACTION_STATE_TOPIC, partition, (time.monotonic() - started) * 1000)
        on_loaded(partition, coordinator_epoch, ids)

    def unload(self, partition: int) -> list[str]:
        """This broker no longer leads ``partition``: forget its ids (returned)."""
        task = self.loading.pop(partition, None)
        if task is not None:
            task.cancel()
        was_owned = self.owned.pop(partition, None) is not None
        removed = [txn_id for txn_id in self.txns if self.partition_for(txn_id) == partition]
        for txn_id in removed:
            del self.txns[txn_id]
        if was_owned or task is not None:
            log.info("Unloaded transaction metadata of %s-%d (%d ids)", TRANSACTION_STATE_TOPIC, partition,
                     len(removed))
        return removed

    def shutdown(self) -> None:
        for partition in sorted(set(self.owned) | set(self.loading)):
            self.unload(partition)

    # ------------------------------------------------------------------ persistence

    async def append_transition(self, md: TransactionMetadata, transit: TxnTransitMetadata,
                                coordinator_epoch: int) -> ErrorCode:
        """Write ``transit`` (acks=-1) and, once replicated and still coordinator with the
        same epoch, apply it to ``md`` (a Dead transit removes the id).  On failure the
        pending state is cleared and Kafka's error for the client is returned."""
        txn_id = md.transactional_id
        partition = self.partition_for(txn_id)
        value = None if transit.state is S.DEAD else encode_value(transit)
        batch = build_batch([SimpleRecord(key=encode_key(txn_id), value=value)], timestamp=self.now_ms())
        try:
            error = await self.topic.append(partition, batch)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("Appending the transition of %s to %s failed", txn_id, transit.state)
            error = E.unknown_server_error
        still_ours = self.owned.get(partition) == coordinator_epoch and self.txns.get(txn_id) is md
        if error != E.none:
            log.warning("Failed to write the transition of transactional id %s to %s in %s-%d: %s", txn_id,
                        transit.state, TRANSACTION_STATE_TOPIC, partition, error.name)
            if still_ours:
                md.pending_state = None
            else:
                return E.not_coordinator
            return _APPEND_ERRORS.get(error, E.unknown_server_error)
        if not still_ours:
            # Lost the partition (or reloaded it) while the write was under way.
            return E.not_coordinator
        if transit.state is S.DEAD:
            del self.txns[txn_id]
        else:
            md.complete_transition(transit)
        return E.none

    def list_transactions(self, states: Iterable[str], producer_ids: Iterable[int]) -> tuple[list[TransactionMetadata], list[str]]:
        """The ids matching the filters (empty filter: any), and the unknown state names."""
        known = {str(s): s for s in TransactionState}
        wanted_states = set()
        unknown = []
        for name in states:
            if name in known:
                wanted_states.add(known[name])
            else:
                unknown.append(name)
        pids = set(producer_ids)
        states_given = bool(wanted_states) or bool(unknown)
        out = [md for _, md in self.owned_metadata()
               if (not states_given or md.state in wanted_states) and (not pids or md.producer_id in pids)]
        return sorted(out, key=lambda md: md.transactional_id), unknown
