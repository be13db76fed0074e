"""``odradek transactions``: the operations of Kafka's ``kafka-transactions.sh``
(org.apache.kafka.tools.TransactionsCommand, KIP-664) over the Kafka protocol.

- list: ListTransactions (key 66) to every broker; each broker answers for the transaction
  coordinators it hosts (Admin.listTransactions).
- describe: FindCoordinator (key type 1) for the transactional id, then DescribeTransactions
  (key 65) to that coordinator (Admin.describeTransactions).
- describe-producers: DescribeProducers (key 61) to the partition leader, or to ``--broker-id``
  (Admin.describeProducers).
- abort: WriteTxnMarkers (key 27, v1) with an ABORT marker to the partition leader, with the
  producer id, producer epoch and coordinator epoch DescribeProducers reports for the
  transaction starting at ``--start-offset`` (Admin.abortTransaction, AbortTransactionHandler).

Connections are ``AdminConnection``s, one per broker asked, each negotiating versions itself.
The table format is TransactionsCommand.prettyPrintTable's: columns padded to their widest
cell, each followed by a tab.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from odradek.admin.client import AdminConnection, ClusterView
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.describe_transactions import DescribeTransactionsResponseV0
from odradek.protocol.errors import ErrorCode, KafkaError, for_code
from odradek.protocol.messages import build
from odradek.security.client import ClientSecurity

__all__ = [
    "DESCRIBE_PRODUCERS_HEADERS",
    "DESCRIBE_TRANSACTIONS_HEADERS",
    "LIST_TRANSACTIONS_HEADERS",
    "AbortTransactionSpec",
    "ProducerStateRow",
    "TransactionDescription",
    "TransactionListing",
    "TransactionsAdmin",
    "TransactionsCommandError",
    "abort_spec_for_start_offset",
    "describe_producers_rows",
    "describe_transaction_row",
    "list_transactions_rows",
    "pretty_print_table",
]

# Kafka 2.8's ApiKeys lack these two (KIP-664, Kafka 3.0); the wire numbers are fixed.
TRANSACTION_KEY_TYPE = 1  # FindCoordinatorRequest.CoordinatorType.TRANSACTION

_MAX_VERSIONS = {ApiKey.API_VERSIONS: 3, ApiKey.METADATA: 12, ApiKey.FIND_COORDINATOR: 4,
                 ApiKey.DESCRIBE_PRODUCERS: 0, ApiKey.WRITE_TXN_MARKERS: 1,
                 ApiKey.DESCRIBE_TRANSACTIONS: 0, ApiKey.LIST_TRANSACTIONS: 0, ApiKey.END_TXN: 2}
_NAMES = {ApiKey.METADATA: "Metadata", ApiKey.FIND_COORDINATOR: "FindCoordinator",
          ApiKey.DESCRIBE_PRODUCERS: "DescribeProducers", ApiKey.WRITE_TXN_MARKERS: "WriteTxnMarkers",
          ApiKey.DESCRIBE_TRANSACTIONS: "DescribeTransactions", ApiKey.LIST_TRANSACTIONS: "ListTransactions",
          ApiKey.END_TXN: "EndTxn"}
# Kafka's AdminClient retries these until its timeout; so does this client, for RETRY_TIMEOUT_S.
_RETRIABLE = frozenset({ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator,
                        ErrorCode.coordinator_not_available, ErrorCode.not_leader_or_follower,
                        ErrorCode.leader_not_available, ErrorCode.request_timed_out})
RETRY_TIMEOUT_S = 30.0
_RETRY_BACKOFF_S = 0.2

LIST_TRANSACTIONS_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_TRANSACTIONS_HEADERS = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                                 "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
                                 "TransactionDurationMs", "TopicPartitions")
DESCRIBE_PRODUCERS_HEADERS = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                              "LastTimestamp", "CurrentTransactionStartOffset")


class TransactionsCommandError(Exception):
    """A failed operation, as kafka-transactions.sh's one-line error."""


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    coordinator_id: int
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    coordinator_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_time_ms: int | None  # None: no transaction in progress (-1 on the wire)
    topic_partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class ProducerStateRow:
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int  # -1: none yet
    last_sequence: int
    last_timestamp: int
    current_txn_start_offset: int | None  # None: no ongoing transaction (-1 on the wire)


@dataclass(frozen=True, slots=True)
class AbortTransactionSpec:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int

    def __str__(self) -> str:  # as Kafka's AbortTransactionSpec.toString
        return (f"AbortTransactionSpec(topicPartition={self.topic}-{self.partition}, producerId={self.producer_id}, "
                f"producerEpoch={self.producer_epoch}, coordinatorEpoch={self.coordinator_epoch})")


# ---- output (TransactionsCommand.prettyPrintTable and each command's rows) -------------------

def pretty_print_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Lines of the table: every cell padded to its column's widest, then a tab."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    return ["".join(cell.ljust(w) + "\t" for cell, w in zip(row, widths, strict=True))
            for row in (tuple(headers), *rows)]


def list_transactions_rows(listings: Sequence[TransactionListing]) -> list[tuple[str, ...]]:
    return [(t.transactional_id, str(t.coordinator_id), str(t.producer_id), t.state) for t in listings]


def describe_transaction_row(d: TransactionDescription, now_ms: int) -> tuple[str, ...]:
    start = "None" if d.start_time_ms is None else str(d.start_time_ms)
    duration = "None" if d.start_time_ms is None else str(now_ms - d.start_time_ms)
    return (str(d.coordinator_id), d.transactional_id, str(d.producer_id), str(d.producer_epoch), d.state,
            str(d.timeout_ms), start, duration, ",".join(f"{t}-{p}" for t, p in d.topic_partitions))


def describe_producers_rows(producers: Sequence[ProducerStateRow]) -> list[tuple[str, ...]]:
    return [(str(p.producer_id), str(p.producer_epoch), str(p.coordinator_epoch), str(p.last_sequence),
             str(p.last_timestamp), "None" if p.current_txn_start_offset is None else str(p.current_txn_start_offset))
            for p in producers]


def abort_spec_for_start_offset(topic: str, partition: int, start_offset: int,
                                producers: Sequence[ProducerStateRow]) -> AbortTransactionSpec:
    """The abort of the open transaction starting at ``start_offset`` (AbortTransactionCommand.buildAbortSpec);
    a coordinator epoch of -1 (none yet) becomes 0, which no coordinator epoch is below."""
    for p in producers:
        if p.current_txn_start_offset == start_offset:
            return AbortTransactionSpec(topic, partition, p.producer_id, p.producer_epoch, max(p.coordinator_epoch, 0))
    raise TransactionsCommandError(f"Could not find any open transactions starting at offset {start_offset} "
                                   f"on partition {topic}-{partition}")


# ---- the protocol ---------------------------------------------------------------------------

class _Node(AdminConnection):
    """An AdminConnection that speaks the transaction admin APIs too."""

    max_versions = _MAX_VERSIONS
    api_names = _NAMES


def _error(code: int, message: str | None = None) -> KafkaError:
    error = ErrorCode(code)
    return for_code(error)(message or error.name.upper())


class TransactionsAdmin:
    """The operations, over ``bootstrap`` plus one connection per other broker asked."""

    def __init__(self, bootstrap: str, *, security: ClientSecurity | None = None) -> None:
        self.bootstrap = bootstrap
        self.security = security
        self._main: _Node | None = None
        self._nodes: dict[int, _Node] = {}

    async def __aenter__(self) -> TransactionsAdmin:
        self._main = await _Node(self.bootstrap, security=self.security).__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for node in (*self._nodes.values(), self._main):
            if node is not None:
                await node.__aexit__(None, None, None)
        self._nodes.clear()

    @property
    def main(self) -> _Node:
        assert self._main is not None, "use TransactionsAdmin as an async context manager"
        return self._main

    async def metadata(self, topics: Sequence[str] | None) -> ClusterView:
        return await self.main.metadata(topics)

    async def _node(self, broker_id: int, view: ClusterView | None = None) -> _Node:
        node = self._nodes.get(broker_id)
        if node is not None:
            return node
        view = view or await self.metadata([])
        if broker_id not in view.brokers:
            raise TransactionsCommandError(f"broker {broker_id} is not in the cluster "
                                           f"(brokers: {', '.join(map(str, sorted(view.brokers)))})")
        host, port, _ = view.brokers[broker_id]
        node = await _Node(f"{host}:{port}", security=self.security).__aenter__()
        self._nodes[broker_id] = node
        return node

    async def _forget(self, broker_id: int) -> None:
        node = self._nodes.pop(broker_id, None)
        if node is not None:
            await node.__aexit__(None, None, None)

    async def _retrying(self, attempt: Any, what: str) -> Any:
        """``await attempt()`` until it returns; KafkaErrors with a retriable code and lost
        connections are retried for RETRY_TIMEOUT_S, as the AdminClient does."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RETRY_TIMEOUT_S
        while True:
            try:
                return await attempt()
            except KafkaError as e:
                if e.code not in _RETRIABLE or loop.time() >= deadline:
                    raise TransactionsCommandError(f"{what}: {e}") from None
            except (ConnectionError, OSError, TimeoutError) as e:
                if loop.time() >= deadline:
                    raise TransactionsCommandError(f"{what}: {e or type(e).__name__}") from None
            await asyncio.sleep(_RETRY_BACKOFF_S)

    # -- list

    async def list_transactions(self) -> list[TransactionListing]:
        view = await self.metadata([])
        listings: list[TransactionListing] = []
        for broker_id in sorted(view.brokers):
            async def one(broker_id: int = broker_id) -> list[TransactionListing]:
                try:
                    node = await self._node(broker_id, view)
                    response = await node.request(ApiKey.LIST_TRANSACTIONS, lambda m, v: build(
                        m.ListTransactionsRequest, state_filters=(), producer_id_filters=()))
                except (ConnectionError, OSError, TimeoutError):
                    await self._forget(broker_id)
                    raise
                if response.error_code != ErrorCode.none:
                    raise _error(response.error_code)
                return [TransactionListing(s.transactional_id, broker_id, int(s.producer_id), s.transaction_state)
                        for s in response.transaction_states]
            listings += await self._retrying(one, "Failed to list transactions")
        return listings

    # -- describe

    async def find_transaction_coordinator(self, transactional_id: str) -> int:
        def body(m: types.ModuleType, version: int) -> Any:
            return build(m.FindCoordinatorRequest, key=transactional_id, key_type=TRANSACTION_KEY_TYPE,
                         coordinator_keys=(transactional_id,))

        response = await self.main.request(ApiKey.FIND_COORDINATOR, body)
        found = response.coordinators[0] if getattr(response, "coordinators", None) else response
        if found.error_code != ErrorCode.none:
            raise _error(found.error_code, found.error_message)
        return int(found.node_id)

    async def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        found = await self.find_transaction(transactional_id)
        if found is None:
            raise TransactionsCommandError(f"Failed to describe transaction state of transactional-id "
                                           f"`{transactional_id}`: {_error(ErrorCode.transactional_id_not_found)}")
        return found

    async def find_transaction(self, transactional_id: str) -> TransactionDescription | None:
        """The transaction state of ``transactional_id``, or None if its coordinator does not know it."""
        async def attempt() -> TransactionDescription | None:
            coordinator = await self.find_transaction_coordinator(transactional_id)
            try:
                node = await self._node(coordinator)
                # Read by hand: kio refuses the start time -1 Kafka sends for "none".
                response = await node.request(ApiKey.DESCRIBE_TRANSACTIONS, lambda m, v: build(
                    m.DescribeTransactionsRequest, transactional_ids=(transactional_id,)),
                    response_type=DescribeTransactionsResponseV0)
            except (ConnectionError, OSError, TimeoutError):
                await self._forget(coordinator)
                raise
            state = response.transaction_states[0]
            if state.error_code == ErrorCode.transactional_id_not_found:
                return None
            if state.error_code != ErrorCode.none:
                raise _error(state.error_code)
            start = state.transaction_start_time_ms
            return TransactionDescription(
                coordinator, transactional_id, state.producer_id, state.producer_epoch, state.transaction_state,
                state.transaction_timeout_ms, None if start < 0 else start,
                tuple((topic, p) for topic, partitions in state.topics for p in partitions))

        return await self._retrying(
            attempt, f"Failed to describe transaction state of transactional-id `{transactional_id}`")

    async def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int, *,
                              commit: bool) -> None:
        """EndTxn (key 26) to the coordinator of ``transactional_id`` for the producer holding
        ``producer_id``/``producer_epoch``: the coordinator checks the ids and the epoch, not the
        connection, so a process other than the producer can finish its open transaction (as
        Flink's Kafka sink commits the transactions its tasks left open)."""
        async def attempt() -> None:
            coordinator = await self.find_transaction_coordinator(transactional_id)
            try:
                node = await self._node(coordinator)
                response = await node.request(ApiKey.END_TXN, lambda m, v: build(
                    m.EndTxnRequest, transactional_id=transactional_id, producer_id=producer_id,
                    producer_epoch=producer_epoch, committed=commit))
            except (ConnectionError, OSError, TimeoutError):
                await self._forget(coordinator)
                raise
            if response.error_code != ErrorCode.none:
                raise _error(response.error_code)

        what = "commit" if commit else "abort"
        await self._retrying(attempt, f"Failed to {what} the transaction of transactional-id `{transactional_id}`")

    # -- describe-producers

    async def _leader(self, topic: str, partition: int) -> int:
        view = await self.metadata([topic])
        for t in view.topics:
            if t.name != topic:
                continue
            if t.error_code != ErrorCode.none:
                raise _error(t.error_code, f"topic {topic}: {ErrorCode(t.error_code).name.upper()}")
            for p in t.partitions:
                if p.partition_index == partition:
                    if p.leader_id < 0:
                        raise _error(ErrorCode.leader_not_available)
                    return int(p.leader_id)
        raise _error(ErrorCode.unknown_topic_or_partition,
                     f"This server does not host this topic-partition ({topic}-{partition})")

    async def describe_producers(self, topic: str, partition: int,
                                 broker_id: int | None = None) -> list[ProducerStateRow]:
        where = f"broker {broker_id}" if broker_id is not None else "leader"
        what = f"Failed to describe producers for partition {topic}-{partition} on {where}"

        async def attempt() -> list[ProducerStateRow]:
            target = broker_id if broker_id is not None else await self._leader(topic, partition)
            try:
                node = await self._node(target)
                response = await node.request(ApiKey.DESCRIBE_PRODUCERS, lambda m, v: build(
                    m.DescribeProducersRequest, topics=(build(m.TopicRequest, name=topic,
                                                              partition_indexes=(partition,)),)))
            except (ConnectionError, OSError, TimeoutError):
                await self._forget(target)
                raise
            result = response.topics[0].partitions[0]
            if result.error_code == ErrorCode.not_leader_or_follower and broker_id is not None:
                # A replica asked by id answers for itself only (Kafka's DescribeProducersHandler).
                raise TransactionsCommandError(f"{what}: broker {broker_id} is not the leader "
                                               f"(NOT_LEADER_OR_FOLLOWER)")
            if result.error_code != ErrorCode.none:
                raise _error(result.error_code, result.error_message)
            return [ProducerStateRow(int(s.producer_id), int(s.producer_epoch), int(s.coordinator_epoch),
                                     int(s.last_sequence), int(s.last_timestamp),
                                     None if s.current_txn_start_offset < 0 else int(s.current_txn_start_offset))
                    for s in result.active_producers]

        return await self._retrying(attempt, what)

    # -- abort

    async def abort_spec(self, topic: str, partition: int, start_offset: int) -> AbortTransactionSpec:
        producers = await self.describe_producers(topic, partition)
        return abort_spec_for_start_offset(topic, partition, start_offset, producers)

    async def abort_transaction(self, spec: AbortTransactionSpec) -> None:
        async def attempt() -> None:
            leader = await self._leader(spec.topic, spec.partition)

            def body(m: types.ModuleType, version: int) -> Any:
                return build(m.WriteTxnMarkersRequest, markers=(build(
                    m.WritableTxnMarker, producer_id=spec.producer_id, producer_epoch=spec.producer_epoch,
                    transaction_result=False, coordinator_epoch=spec.coordinator_epoch,
                    topics=(build(m.WritableTxnMarkerTopic, name=spec.topic,
                                  partition_indexes=(spec.partition,)),)),))

            try:
                node = await self._node(leader)
                response = await node.request(ApiKey.WRITE_TXN_MARKERS, body)
            except (ConnectionError, OSError, TimeoutError):
                await self._forget(leader)
                raise
            codes = [p.error_code for marker in response.markers for t in marker.topics for p in t.partitions]
            if not codes:
                raise _error(ErrorCode.unknown_server_error, "the broker answered no result for the partition")
            if codes[0] != ErrorCode.none:
                raise _error(codes[0])

        await self._retrying(attempt, f"Failed to abort transaction {spec}")
