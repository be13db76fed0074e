"""Produce (key 0): leaders append record batches as bytes; acks 0, 1 or -1 (all ISR).

Requests are read and responses written by hand (``protocol.produce_request``,
``protocol.produce_response``).  Transactional batches need the request's transactional id;
the replica manager verifies (KIP-890) that a batch starting a transaction is in it.
Versions 0-2 carry magic 0/1 message sets: each becomes one v2 batch first (Kafka's
up-conversion, ``protocol.legacy_records``), a corrupt one CORRUPT_MESSAGE."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from odradek.broker.apis.authorization import authorized, unauthorized_names
from odradek.broker.apis.registry import answer_when_done, api
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.error_counts import count_error
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.legacy_records import is_legacy_message_set, up_convert
from odradek.protocol.produce_request import has_transactional_records, parse_produce_request
from odradek.protocol.produce_response import ProducedPartition, encode_produce_response
from odradek.security.acls import Operation, ResourceType

if TYPE_CHECKING:
    from odradek.broker.context import ProduceFetchContext
    from odradek.broker.delayed_produce import DelayedProduce, ProducePartitionResult
    from odradek.common import TopicPartition
    from odradek.net.server import Request, Response
    from odradek.protocol.error_counts import ErrorCounts


@api(ApiKey.PRODUCE, "Produce", 0, 9)
def handle_produce(broker: ProduceFetchContext, request: Request) -> Response | Awaitable[Response]:
    """Answered at once unless acks=-1 has to wait for the ISR (then a future of the answer) or
    a transactional batch needs KIP-890 verification (then a coroutine): no task per request."""
    body = parse_produce_request(request.frame, request.body_offset, request.api_version)
    acks = body.acks
    entries = body.partitions
    transactional_id = body.transactional_id
    refused: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
    if request.api_version < 3:
        entries, refused = _up_convert(entries)
    if transactional_id is None and has_transactional_records(entries):
        # Kafka's KafkaApis.handleProduceRequest: transactional records need an (authorized)
        # transactional id; without one the whole request fails.
        results = {(t, p): (ErrorCode.transactional_id_authorization_failed,
                            "transactional records need a transactional id") for t, p, _ in entries}
        return _error_response(request, results)
    if acks not in (0, 1, -1):
        results = {(t, p): (ErrorCode.invalid_required_acks, f"acks={acks} is not 0, 1 or -1") for t, p, _ in entries}
        return _error_response(request, results)
    if broker.authorizer is not None:
        # KafkaApis.handleProduceRequest: Write on the transactional id for transactional
        # requests (whole request refused), then Write on each topic.  Since Kafka 3.0
        # (KIP-679) an idempotent produce needs nothing more: a 3.x producer is idempotent by
        # default, with Write on its topics alone.
        if transactional_id is not None and not authorized(
                broker, request, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            results = {(t, p): (ErrorCode.transactional_id_authorization_failed,
                                "Transactional Id authorization failed.") for t, p, _ in entries}
            return _error_response(request, results)
        denied = unauthorized_names(broker, request, Operation.WRITE, ResourceType.TOPIC, (t for t, _, _ in entries))
        if denied:
            refused.update({(t, p): (ErrorCode.topic_authorization_failed, None) for t, p, _ in entries if t in denied})
            entries = [e for e in entries if e[0] not in denied]
    timeout_ms = body.timeout_ms
    if refused and not entries:
        if acks == 0:
            request.connection.close()
            _unanswered(request)
            return None
        return _error_response(request, refused)
    if transactional_id is not None:  # KIP-890 verification may ask the transaction coordinator
        return _produce_transactional(broker, request, acks, timeout_ms, entries, transactional_id, refused)
    results, delayed = broker.replica_manager.append_records(acks, timeout_ms, entries)
    return _answer(request, acks, results, delayed, refused)


async def _produce_transactional(broker: ProduceFetchContext, request: Request, acks: int, timeout_ms: int,
                                 entries: list[tuple[str, int, memoryview | None]], transactional_id: str,
                                 refused: dict[tuple[str, int], tuple[ErrorCode, str | None]]) -> Response:
    results, delayed = await broker.replica_manager.append_records_async(
        acks, timeout_ms, entries, transactional_id=transactional_id)
    answer = _answer(request, acks, results, delayed, refused)
    return await answer if isinstance(answer, asyncio.Future) else answer


def _answer(request: Request, acks: int, results: dict[TopicPartition, ProducePartitionResult],
            delayed: DelayedProduce | None, refused: dict[tuple[str, int], tuple[ErrorCode, str | None]]
            ) -> Response | asyncio.Future[Response]:
    """The response now, or (acks=-1 waiting for the ISR) a future of it, completed by the
    DelayedProduce without a task in between."""
    if acks == 0:
        if refused or any(r.error != ErrorCode.none for r in results.values()):
            # Kafka closes the connection so an acks=0 producer notices and refreshes metadata.
            request.connection.close()
        _unanswered(request)
        return None
    if delayed is None:
        return _encode(request, results, refused)
    return answer_when_done(delayed.future, lambda done: _encode(request, done, refused))


def _encode(request: Request, results: dict[TopicPartition, ProducePartitionResult],
            refused: dict[tuple[str, int], tuple[ErrorCode, str | None]]) -> bytes:
    by_topic: dict[str, list[ProducedPartition]] = {}
    for (topic, partition), (error, message) in refused.items():
        by_topic.setdefault(topic, []).append(ProducedPartition(partition, error, -1, error_message=message))
    for (topic, partition), r in results.items():
        by_topic.setdefault(topic, []).append(ProducedPartition(
            partition, r.error, r.base_offset, r.log_append_time, r.log_start_offset, r.record_errors, r.message))
    counts = request.error_counts
    # Metrics on: an answer of one partition, NONE, is what they take each Produce answer to
    # carry (RequestTimes.none_per_answer); only an answer that differs is counted (r: the one
    # result when there is one).
    if counts is not None and (refused or len(results) != 1 or r.error):
        _count_errors(counts, results, refused)
    return encode_produce_response(request.header.correlation_id, request.api_version, list(by_topic.items()))


def _count_errors(counts: ErrorCounts, results: dict[TopicPartition, ProducePartitionResult],
                  refused: dict[tuple[str, int], tuple[ErrorCode, str | None]]) -> None:
    """An answer's error codes, as they differ from one NONE."""
    for error, _message in refused.values():
        count_error(counts, error)
    none = 0
    for r in results.values():
        if r.error:
            count_error(counts, r.error)
        else:
            none += 1
    if none != 1:
        counts[ErrorCode.none] = counts.get(ErrorCode.none, 0) + none - 1


def _unanswered(request: Request) -> None:
    """An acks=0 request: no answer, counted as one of no partitions (no NONE)."""
    counts = request.error_counts
    if counts is not None:
        _count_errors(counts, {}, {})


def _up_convert(entries: list[tuple[str, int, memoryview | None]]
                ) -> tuple[list[tuple[str, int, memoryview | None]], dict[tuple[str, int], tuple[ErrorCode, str | None]]]:
    """Produce v0-v2: each partition's magic 0/1 message set as one v2 batch (a v2 batch, which
    these versions may carry too, stays as it is); the ones that cannot be read, refused."""
    converted: list[tuple[str, int, memoryview | None]] = []
    refused: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
    for topic, partition, records in entries:
        if records is None or not is_legacy_message_set(records):
            converted.append((topic, partition, records))
            continue
        try:
            converted.append((topic, partition, memoryview(bytearray(up_convert(records)))))
        except KafkaError as e:
            refused[(topic, partition)] = (e.code, str(e))
    return converted, refused


def _error_response(request: Request, results: dict[tuple[str, int], tuple[ErrorCode, str | None]]) -> bytes:
    return _encode(request, {}, results)
