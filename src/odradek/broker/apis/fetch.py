"""Fetch (key 1): consumers read up to the high watermark (read_committed: the last stable
offset, with the aborted transactions in range), followers up to the log end offset.

Requests are read and responses written by hand (``protocol.fetch_request``,
``protocol.fetch_response``), so record batches go out as file regions.  Version 7 and up
may use fetch sessions (KIP-227, ``broker.fetch_session``): an incremental fetch reads every
partition of its session and answers only those with news.

A consumer under a ``consumer_byte_rate`` quota (Kafka's fetch quota) asks for at most what its
quota allows in one quota window; its response's record bytes are recorded, and a response that
takes it over the quota is not sent: the consumer gets an empty one carrying the throttle time
(the session untouched, the bytes taken back) and its connection is muted for that time.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from odradek.broker.apis.authorization import cluster_authorized, unauthorized_names
from odradek.broker.apis.registry import answer_when_done, api
from odradek.broker.delayed_fetch import DelayedFetch, FetchPartitionRequest, FetchPartitionResult
from odradek.broker.fetch_session import FetchContext
from odradek.broker.quota.throttling import client_of, throttle
from odradek.common import monotonic_ms
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.error_counts import count_error, count_partition_errors
from odradek.protocol.errors import ErrorCode
from odradek.protocol.fetch_request import parse_fetch_request
from odradek.protocol.fetch_response import FetchedPartition, encode_fetch_response
from odradek.security.acls import Operation, ResourceType

if TYPE_CHECKING:
    from odradek.broker.context import ProduceFetchContext
    from odradek.common import TopicPartition
    from odradek.net.server import Request, Response


# Errors Kafka's KafkaApis answers before the replica manager reads (a partition its metadata
# cache does not know, a refused topic): their aborted transactions are an empty list, not
# the null of every partition the replica manager answered, with or without an error.
_REFUSED_BEFORE_READING = frozenset({ErrorCode.unknown_topic_or_partition, ErrorCode.topic_authorization_failed})


@api(ApiKey.FETCH, "Fetch", 4, 12)
def handle_fetch(broker: ProduceFetchContext, request: Request) -> Response | asyncio.Future[Response]:
    """Answered at once when there is data (or the fetch may not wait); otherwise a future of
    the answer, completed by the DelayedFetch without a task in between."""
    version = request.api_version
    body = parse_fetch_request(request.frame, request.body_offset, version)
    requests = [FetchPartitionRequest(p.topic, p.partition, p.fetch_offset, p.partition_max_bytes,
                                      p.current_leader_epoch, p.last_fetched_epoch, p.log_start_offset)
                for p in body.partitions]
    if version >= 7:  # fetch sessions (KIP-227)
        context = broker.fetch_sessions.new_context(body, requests, monotonic_ms())
        if context.error != ErrorCode.none:
            return _response(request, context.error, 0, [])
    else:
        context = FetchContext(requests)
    requests = context.partitions
    denied: set[str] = set()
    if broker.authorizer is not None:
        # KafkaApis.handleFetchRequest: a follower (replica id >= 0) needs ClusterAction on the
        # cluster, a consumer Read on each topic; refused partitions get TOPIC_AUTHORIZATION_FAILED.
        if body.replica_id >= 0:
            if not cluster_authorized(broker, request, Operation.CLUSTER_ACTION):
                denied = {r.topic for r in requests}
        else:
            denied = unauthorized_names(broker, request, Operation.READ, ResourceType.TOPIC, (r.topic for r in requests))
    allowed = [r for r in requests if r.topic not in denied] if denied else requests
    if not allowed:
        return _encode(broker, request, body.replica_id, context, denied, {})
    # Fetch v11+ consumers send their rack (KIP-392): they may read from followers.
    client_rack = body.rack_id if version >= 11 and body.replica_id < 0 else None
    max_bytes = body.max_bytes
    quota_window_bytes = None
    if broker.quotas.fetch.enabled and body.replica_id < 0:
        quota_window_bytes = broker.quotas.fetch.max_value_in_quota_window(*client_of(request))
        if quota_window_bytes is not None:
            max_bytes = min(max_bytes, int(quota_window_bytes))
    outcome = broker.replica_manager.fetch_messages(
        body.replica_id, body.max_wait_ms, body.min_bytes, max_bytes, allowed, body.isolation_level, client_rack)
    if quota_window_bytes is not None:
        return _under_fetch_quota(broker, request, context, denied, outcome)
    if not isinstance(outcome, DelayedFetch):
        return _encode(broker, request, body.replica_id, context, denied, outcome)
    return answer_when_done(outcome.future,
                            lambda done: _encode(broker, request, body.replica_id, context, denied, done))


def _under_fetch_quota(broker: ProduceFetchContext, request: Request, context: FetchContext, denied: set[str],
                       outcome: dict[TopicPartition, FetchPartitionResult] | DelayedFetch
                       ) -> Response | asyncio.Future[Response]:
    """Kafka's fetch quota: the response's record bytes are recorded; one that takes the
    consumer over its quota is replaced by an empty response carrying the throttle time (the
    bytes taken back, the fetch session untouched), and the connection is muted."""
    fetch_quota = broker.quotas.fetch
    user, client_id = client_of(request)

    def answer(done: dict[TopicPartition, FetchPartitionResult]) -> Response:
        size = sum(result.size for result in done.values())
        throttle_ms = fetch_quota.record(user, client_id, size)
        if throttle_ms <= 0:
            return _encode(broker, request, -1, context, denied, done)
        fetch_quota.unrecord(user, client_id, size)
        throttle(request, throttle_ms)
        return _response(request, ErrorCode.none, context.session_id, [], throttle_ms)

    if not isinstance(outcome, DelayedFetch):
        return answer(outcome)
    return answer_when_done(outcome.future, answer)


def _encode(broker: ProduceFetchContext, request: Request, replica_id: int, context: FetchContext,
            denied: set[str], outcome: dict[TopicPartition, FetchPartitionResult]) -> Response:
    results: dict[tuple[str, int], FetchPartitionResult] = dict(outcome)  # type: ignore[arg-type]
    for r in context.partitions:
        if r.topic in denied:
            results[(r.topic, r.partition)] = FetchPartitionResult(ErrorCode.topic_authorization_failed)
    topics: dict[str, list[FetchedPartition]] = {}
    topic_stats = broker.replica_manager.topic_stats
    for r in context.select(results):
        res = results[(r.topic, r.partition)]
        if res.size:  # BytesOutPerSec, or ReplicationBytesOutPerSec to a follower (counted as sent)
            counters = topic_stats.topic(r.topic)
            if replica_id >= 0:
                counters.replication_bytes_out += res.size
            else:
                counters.bytes_out += res.size
        aborted = res.aborted_transactions
        topics.setdefault(r.topic, []).append(FetchedPartition(
            r.partition, res.error, res.high_watermark, res.last_stable_offset, res.log_start_offset,
            res.regions, aborted_transactions_null=aborted is None and res.error not in _REFUSED_BEFORE_READING,
            aborted_transactions=aborted or (),
            preferred_read_replica=res.preferred_read_replica, diverging_epoch=res.diverging_epoch))
    return _response(request, ErrorCode.none, context.session_id, list(topics.items()))


def _response(request: Request, error: int, session_id: int, topics: list[tuple[str, list[FetchedPartition]]],
              throttle_ms: int = 0) -> Response:
    """The response frame; with request metrics on, its error codes are counted: the top-level
    one and each partition's (Kafka's FetchResponse.errorCounts)."""
    counts = request.error_counts
    if counts is not None:
        count_error(counts, error)
        count_partition_errors(counts, topics)
    return encode_fetch_response(request.header.correlation_id, request.api_version, error, session_id, topics,
                                 throttle_time_ms=throttle_ms)
