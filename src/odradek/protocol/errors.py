"""Kafka error codes and the exceptions that carry them.

The table of codes is Kafka's own (``kio.schema.errors.ErrorCode``, generated from Kafka's
sources).  Internal code raises :class:`KafkaError` subclasses; API handlers turn them into
error codes at the edge (``KafkaError.code``).
"""

from __future__ import annotations

from typing import NamedTuple

from kio.schema.errors import ErrorCode


class KafkaError(Exception):
    """An error with a Kafka error code; ``str(e)`` is the message sent back to clients."""

    code: ErrorCode = ErrorCode.unknown_server_error

    @property
    def retriable(self) -> bool:
        return self.code.retriable


_BY_CODE: dict[ErrorCode, type[KafkaError]] = {}


def _define(code: ErrorCode) -> type[KafkaError]:
    name = "".join(part.capitalize() for part in code.name.split("_"))
    if not name.endswith(("Error", "Exception")):
        name += "Error"
    cls = type(name, (KafkaError,), {"code": code, "__module__": __name__})
    _BY_CODE[code] = cls
    return cls


for _code in ErrorCode:
    if _code is not ErrorCode.none:
        _define(_code)


def for_code(code: int | ErrorCode) -> type[KafkaError]:
    """The exception class for an error code (``UnknownServerError`` for unknown codes)."""
    try:
        return _BY_CODE[ErrorCode(code)]
    except (ValueError, KeyError):
        return _BY_CODE[ErrorCode.unknown_server_error]


# Names used throughout the code base, spelled out so linters and readers see them.
UnknownServerError = _BY_CODE[ErrorCode.unknown_server_error]
OffsetOutOfRangeError = _BY_CODE[ErrorCode.offset_out_of_range]
CorruptMessageError = _BY_CODE[ErrorCode.corrupt_message]
UnknownTopicOrPartitionError = _BY_CODE[ErrorCode.unknown_topic_or_partition]
LeaderNotAvailableError = _BY_CODE[ErrorCode.leader_not_available]
NotLeaderOrFollowerError = _BY_CODE[ErrorCode.not_leader_or_follower]
RequestTimedOutError = _BY_CODE[ErrorCode.request_timed_out]
BrokerNotAvailableError = _BY_CODE[ErrorCode.broker_not_available]
MessageTooLargeError = _BY_CODE[ErrorCode.message_too_large]
StaleControllerEpochError = _BY_CODE[ErrorCode.stale_controller_epoch]
InvalidTopicError = _BY_CODE[ErrorCode.invalid_topic_exception]
RecordListTooLargeError = _BY_CODE[ErrorCode.record_list_too_large]
NotEnoughReplicasError = _BY_CODE[ErrorCode.not_enough_replicas]
InvalidRequiredAcksError = _BY_CODE[ErrorCode.invalid_required_acks]
UnsupportedVersionError = _BY_CODE[ErrorCode.unsupported_version]
TopicAlreadyExistsError = _BY_CODE[ErrorCode.topic_already_exists]
InvalidPartitionsError = _BY_CODE[ErrorCode.invalid_partitions]
InvalidReplicationFactorError = _BY_CODE[ErrorCode.invalid_replication_factor]
InvalidReplicaAssignmentError = _BY_CODE[ErrorCode.invalid_replica_assignment]
InvalidConfigError = _BY_CODE[ErrorCode.invalid_config]
NotControllerError = _BY_CODE[ErrorCode.not_controller]
InvalidRequestError = _BY_CODE[ErrorCode.invalid_request]
PolicyViolationError = _BY_CODE[ErrorCode.policy_violation]
KafkaStorageError = _BY_CODE[ErrorCode.kafka_storage_error]
TopicDeletionDisabledError = _BY_CODE[ErrorCode.topic_deletion_disabled]
FencedLeaderEpochError = _BY_CODE[ErrorCode.fenced_leader_epoch]
UnknownLeaderEpochError = _BY_CODE[ErrorCode.unknown_leader_epoch]
InvalidRecordError = _BY_CODE[ErrorCode.invalid_record]
ReassignmentInProgressError = _BY_CODE[ErrorCode.reassignment_in_progress]


class ApiError(NamedTuple):
    """An error code and the message that goes with it in a response (Kafka's ApiError)."""

    error: ErrorCode
    message: str | None = None

    @property
    def is_success(self) -> bool:
        return self.error == ErrorCode.none
