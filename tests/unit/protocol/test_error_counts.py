"""A response's error codes counted as Kafka's errorCounts does: every error code field, NONE
included, at any depth, read from the payload (kio's and the control APIs' schemas)."""

from __future__ import annotations

from kio.schema.metadata.v12 import response as metadata
from kio.schema.offset_fetch.v8 import response as offset_fetch

from odradek.protocol import control
from odradek.protocol.error_counts import (
    ErrorCounts,
    count_error,
    count_errors,
    count_partition_errors,
)
from odradek.protocol.errors import ErrorCode
from odradek.protocol.produce_response import ProducedPartition


def _partition(index: int, error: ErrorCode) -> metadata.MetadataResponsePartition:
    return metadata.MetadataResponsePartition(error_code=error, partition_index=index, leader_id=0)


def test_metadata_counts_each_topics_and_each_partitions_code() -> None:
    response = metadata.MetadataResponse(throttle_time=0, brokers=(), topics=(
        metadata.MetadataResponseTopic(error_code=ErrorCode.none, name="a", topic_id=None, partitions=(
            _partition(0, ErrorCode.none), _partition(1, ErrorCode.leader_not_available))),
        metadata.MetadataResponseTopic(error_code=ErrorCode.unknown_topic_or_partition, name="b", topic_id=None,
                                       partitions=())))
    counts: ErrorCounts = {}
    count_errors(counts, response)
    assert counts == {ErrorCode.none: 2, ErrorCode.leader_not_available: 1, ErrorCode.unknown_topic_or_partition: 1}


def test_a_top_level_code_and_nested_ones_add_to_what_was_counted() -> None:
    counts: ErrorCounts = {ErrorCode.none: 5}
    count_errors(counts, control.StopReplicaResponse(error_code=ErrorCode.none, partition_errors=(
        control.StopReplicaPartitionError(topic_name="t", partition_index=0,
                                          error_code=ErrorCode.kafka_storage_error),)))
    assert counts == {ErrorCode.none: 6, ErrorCode.kafka_storage_error: 1}


def test_groups_topics_and_partitions_each_count() -> None:
    response = offset_fetch.OffsetFetchResponse(throttle_time=0, groups=(offset_fetch.OffsetFetchResponseGroup(
        group_id="g", error_code=ErrorCode.none, topics=(offset_fetch.OffsetFetchResponseTopics(name="t", partitions=(
            offset_fetch.OffsetFetchResponsePartitions(
                partition_index=p, committed_offset=-1, committed_leader_epoch=-1, metadata=None,
                error_code=ErrorCode.unstable_offset_commit if p else ErrorCode.none)
            for p in range(3))),)),))
    counts: ErrorCounts = {}
    count_errors(counts, response)
    assert counts == {ErrorCode.none: 2, ErrorCode.unstable_offset_commit: 2}


def test_hand_written_responses_count_their_partitions() -> None:
    counts: ErrorCounts = {}
    count_error(counts, ErrorCode.none)  # a fetch's top-level code
    count_partition_errors(counts, [("a", [ProducedPartition(0, ErrorCode.none, 5),
                                           ProducedPartition(1, ErrorCode.not_leader_or_follower, -1)]),
                                    ("b", [ProducedPartition(0, ErrorCode.not_leader_or_follower, -1)])])
    assert counts == {ErrorCode.none: 2, ErrorCode.not_leader_or_follower: 2}
