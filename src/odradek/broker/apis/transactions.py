"""Transaction coordinator APIs: AddPartitionsToTxn (key 24, v0-4), AddOffsetsToTxn (25),
EndTxn (26), DescribeTransactions (65), ListTransactions (66), and FindCoordinator's
transaction key type.

The logic is the transaction coordinator's (:mod:`odradek.broker.transaction`); these
handlers translate between the wire versions and it.  PRODUCER_FENCED is answered as
INVALID_PRODUCER_EPOCH to versions that predate it (KIP-588), as Kafka's KafkaApis does.

Authorization (KafkaApis): Describe on the transactional id to find its coordinator, Write on it
for AddPartitionsToTxn (then Write on each topic), AddOffsetsToTxn (then Read on the group) and
EndTxn; AddPartitionsToTxn v4 (brokers verifying, KIP-890) needs ClusterAction.  Describe- and
ListTransactions leave out what the principal may not Describe.
"""

from __future__ import annotations

import datetime
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING

from odradek.broker.apis.authorization import authorized, cluster_authorized, unauthorized_names
from odradek.broker.apis.internal_topics import CoordinatorAnswer, InternalTopic, find_coordinator
from odradek.broker.apis.registry import api, build, decode_body, respond, response_module
from odradek.broker.group.offsets_topic import OFFSETS_TOPIC
from odradek.broker.transaction.state_topic import TRANSACTION_STATE_TOPIC
from odradek.common import TopicPartition
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.security.acls import Operation, ResourceType

if TYPE_CHECKING:
    from odradek.broker.context import AuthorizingContext, TransactionsContext
    from odradek.net.server import Request, Response

__all__ = ["find_transaction_coordinator"]

E = ErrorCode


def fenced_for_version(error: ErrorCode, version: int, first_version_with_fenced: int) -> ErrorCode:
    """PRODUCER_FENCED as the request version knows it."""
    if error == E.producer_fenced and version < first_version_with_fenced:
        return E.invalid_producer_epoch
    return error


def txn_id_allowed(broker: AuthorizingContext, request: Request, operation: Operation, transactional_id: str
                   ) -> bool:
    """Whether the principal may perform ``operation`` on the transactional id."""
    return authorized(broker, request, operation, ResourceType.TRANSACTIONAL_ID, transactional_id)


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for tp in partitions:
        out[tp.topic].append(tp.partition)
    return out


# ----------------------------------------------------------------------------- FindCoordinator


async def find_transaction_coordinator(broker: TransactionsContext, request: Request, key: str) -> CoordinatorAnswer:
    """FindCoordinator key type 1: the leader of the id's ``__transaction_state`` partition,
    the topic being created on first use."""
    if not key:
        return E.invalid_request, "transactional id must not be empty", -1, "", -1
    if not txn_id_allowed(broker, request, Operation.DESCRIBE, key):
        return E.transactional_id_authorization_failed, "Transactional Id authorization failed.", -1, "", -1
    coordinator = broker.transaction_coordinator
    config = coordinator.config
    topic = InternalTopic(TRANSACTION_STATE_TOPIC, config.num_partitions, config.replication_factor,
                          config.topic_configs(), "transactions state topic",
                          "transaction.state.log.replication.factor")
    return await find_coordinator(broker, request, topic, coordinator.manager.partition_for(key), coordinator)


# ----------------------------------------------------------------------------- AddPartitionsToTxn


@api(ApiKey.ADD_PARTITIONS_TO_TXN, "AddPartitionsToTxn", 0, 4)
async def handle_add_partitions_to_txn(broker: TransactionsContext, request: Request) -> Response:
    body = decode_body(request)
    version = request.api_version
    m = response_module(ApiKey.ADD_PARTITIONS_TO_TXN, version)
    if version >= 4:
        if not cluster_authorized(broker, request, Operation.CLUSTER_ACTION):
            return respond(request, build(m.AddPartitionsToTxnResponse, throttle_time=0,
                                          error_code=E.cluster_authorization_failed, results_by_transaction=()))
        results = []
        for txn in body.transactions:
            wanted = [TopicPartition(t.name, p) for t in txn.topics for p in t.partitions]
            refused = _refused_partitions(broker, request, txn.transactional_id, wanted)
            if refused is not None:
                errors = refused
            elif txn.verify_only:
                errors = broker.transaction_coordinator.verify_partitions(
                    txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted)
            else:
                errors = await _add_partitions(broker, txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                               wanted)
            results.append(build(m.AddPartitionsToTxnResult, transactional_id=txn.transactional_id,
                                 topic_results=_topic_results(m, errors)))
        return respond(request, build(m.AddPartitionsToTxnResponse, throttle_time=0, error_code=E.none,
                                      results_by_transaction=tuple(results)))
    wanted = [TopicPartition(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
    refused = _refused_partitions(broker, request, body.v3_and_below_transactional_id, wanted)
    errors = refused if refused is not None else await _add_partitions(
        broker, body.v3_and_below_transactional_id, body.v3_and_below_producer_id,
        body.v3_and_below_producer_epoch, wanted)
    errors = {tp: fenced_for_version(e, version, 2) for tp, e in errors.items()}
    return respond(request, build(m.AddPartitionsToTxnResponse, throttle_time=0,
                                  results_by_topic_v3_and_below=_topic_results(m, errors)))


def _refused_partitions(broker: AuthorizingContext, request: Request, transactional_id: str,
                        wanted: list[TopicPartition]) -> dict[TopicPartition, ErrorCode] | None:
    """Kafka's handleAddPartitionToTxnRequest checks: without Write on the transactional id
    every partition is refused; without Write on some topic its partitions are refused and the
    others not attempted.  None when all is allowed."""
    if broker.authorizer is None:
        return None
    if not txn_id_allowed(broker, request, Operation.WRITE, transactional_id):
        return dict.fromkeys(wanted, E.transactional_id_authorization_failed)
    denied = unauthorized_names(broker, request, Operation.WRITE, ResourceType.TOPIC, (tp.topic for tp in wanted))
    if not denied:
        return None
    return {tp: E.topic_authorization_failed if tp.topic in denied else E.operation_not_attempted for tp in wanted}


async def _add_partitions(broker: TransactionsContext, transactional_id: str, producer_id: int, producer_epoch: int,
                          wanted: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
    """Unknown partitions fail the request: UNKNOWN_TOPIC_OR_PARTITION for them,
    OPERATION_NOT_ATTEMPTED for the others (Kafka's handleAddPartitionToTxnRequest)."""
    cache = broker.metadata_cache
    unknown = [tp for tp in wanted if cache.partition(tp.topic, tp.partition) is None]
    if unknown:
        return {tp: E.unknown_topic_or_partition if tp in unknown else E.operation_not_attempted for tp in wanted}
    error = await broker.transaction_coordinator.add_partitions(transactional_id, producer_id, producer_epoch,
                                                                wanted)
    return dict.fromkeys(wanted, error)


def _topic_results(m: object, errors: dict[TopicPartition, ErrorCode]) -> tuple[object, ...]:
    by_topic: dict[str, list[tuple[int, ErrorCode]]] = defaultdict(list)
    for tp, error in errors.items():
        by_topic[tp.topic].append((tp.partition, error))
    return tuple(
        build(m.AddPartitionsToTxnTopicResult, name=topic, results_by_partition=tuple(  # type: ignore[attr-defined]
            build(m.AddPartitionsToTxnPartitionResult, partition_index=p,  # type: ignore[attr-defined]
                  partition_error_code=e) for p, e in parts))
        for topic, parts in by_topic.items())


# ----------------------------------------------------------------------------- AddOffsetsToTxn


@api(ApiKey.ADD_OFFSETS_TO_TXN, "AddOffsetsToTxn", 0, 3)
async def handle_add_offsets_to_txn(broker: TransactionsContext, request: Request) -> Response:
    """The group's ``__consumer_offsets`` partition joins the transaction."""
    body = decode_body(request)
    if not txn_id_allowed(broker, request, Operation.WRITE, body.transactional_id):
        error = E.transactional_id_authorization_failed
    elif not authorized(broker, request, Operation.READ, ResourceType.GROUP, body.group_id):
        error = E.group_authorization_failed
    else:
        partition = TopicPartition(OFFSETS_TOPIC, broker.group_coordinator.partition_for(body.group_id))
        error = await broker.transaction_coordinator.add_partitions(body.transactional_id, body.producer_id,
                                                                    body.producer_epoch, [partition])
    m = response_module(ApiKey.ADD_OFFSETS_TO_TXN, request.api_version)
    return respond(request, build(m.AddOffsetsToTxnResponse, throttle_time=0,
                                  error_code=fenced_for_version(error, request.api_version, 2)))


# ----------------------------------------------------------------------------- EndTxn


@api(ApiKey.END_TXN, "EndTxn", 0, 3)
async def handle_end_txn(broker: TransactionsContext, request: Request) -> Response:
    body = decode_body(request)
    if not txn_id_allowed(broker, request, Operation.WRITE, body.transactional_id):
        error = E.transactional_id_authorization_failed
    else:
        error = await broker.transaction_coordinator.end_transaction(
            body.transactional_id, body.producer_id, body.producer_epoch, commit=bool(body.committed))
    m = response_module(ApiKey.END_TXN, request.api_version)
    return respond(request, build(m.EndTxnResponse, throttle_time=0,
                                  error_code=fenced_for_version(error, request.api_version, 2)))


# ----------------------------------------------------------------------------- Describe / List


def _start_time(ms: int) -> datetime.datetime:
    """Kafka sends the start timestamp as it is: -1 for a transaction not started (kio's
    reader refuses negative timestamps; Kafka's clients do not)."""
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


@api(ApiKey.DESCRIBE_TRANSACTIONS, "DescribeTransactions", 0, 0)
async def handle_describe_transactions(broker: TransactionsContext, request: Request) -> Response:
    body = decode_body(request)
    m = response_module(ApiKey.DESCRIBE_TRANSACTIONS, request.api_version)
    states = []
    for txn_id in body.transactional_ids:
        if not txn_id_allowed(broker, request, Operation.DESCRIBE, txn_id):
            error, md = E.transactional_id_authorization_failed, None
        else:
            error, md = broker.transaction_coordinator.describe(txn_id)
        if md is None:
            # Kafka's schema defaults (0) for every field but the error and the id.
            states.append(build(m.TransactionState, error_code=error, transactional_id=txn_id, transaction_state="",
                                transaction_timeout=0, transaction_start_time=_start_time(0), producer_id=0,
                                producer_epoch=0, topics=()))
            continue
        # Only the partitions of topics the principal may Describe.
        by_topic = _by_topic(md.topic_partitions)
        hidden = unauthorized_names(broker, request, Operation.DESCRIBE, ResourceType.TOPIC, by_topic)
        topics = tuple(build(m.TopicData, topic=t, partitions=tuple(sorted(ps)))
                       for t, ps in sorted(by_topic.items()) if t not in hidden)
        states.append(build(m.TransactionState, error_code=E.none, transactional_id=txn_id,
                            transaction_state=str(md.state), transaction_timeout=md.txn_timeout_ms,
                            transaction_start_time=_start_time(md.txn_start_timestamp), producer_id=md.producer_id,
                            producer_epoch=md.producer_epoch, topics=topics))
    return respond(request, build(m.DescribeTransactionsResponse, throttle_time=0,
                                  transaction_states=tuple(states)))


@api(ApiKey.LIST_TRANSACTIONS, "ListTransactions", 0, 0)
async def handle_list_transactions(broker: TransactionsContext, request: Request) -> Response:
    body = decode_body(request)
    m = response_module(ApiKey.LIST_TRANSACTIONS, request.api_version)
    error, found, unknown = broker.transaction_coordinator.list_transactions(body.state_filters,
                                                                             body.producer_id_filters)
    found = [md for md in found if txn_id_allowed(broker, request, Operation.DESCRIBE, md.transactional_id)]
    return respond(request, build(m.ListTransactionsResponse, throttle_time=0, error_code=error,
                                  unknown_state_filters=tuple(unknown), transaction_states=tuple(
                                      build(m.TransactionState, transactional_id=md.transactional_id,
                                            producer_id=md.producer_id, transaction_state=str(md.state))
                                      for md in found)))
