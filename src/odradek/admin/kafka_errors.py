"""How Kafka's Java admin client names an error code: the exception class it raises and the
default message that class carries (Kafka's ``Errors`` table), for tools that print
``org.apache.kafka.common.errors.<Class>: <message>`` as Kafka's own tools do."""

from __future__ import annotations

from odradek.protocol.errors import ErrorCode

__all__ = ["exception_class", "exception_text"]

# Codes whose Java exception is not the code's name in CamelCase + "Exception".
_CLASSES = {ErrorCode.kafka_storage_error: "KafkaStorageException",
            ErrorCode.unknown_server_error: "UnknownServerException",
            ErrorCode.request_timed_out: "TimeoutException",
            ErrorCode.topic_authorization_failed: "TopicAuthorizationException",
            ErrorCode.cluster_authorization_failed: "ClusterAuthorizationException",
            ErrorCode.group_authorization_failed: "GroupAuthorizationException"}

# The default messages of the codes the tools meet (Kafka's Errors enum).
_MESSAGES = {
    ErrorCode.unknown_topic_or_partition: "This server does not host this topic-partition.",
    ErrorCode.offset_out_of_range:
        "The requested offset is not within the range of offsets maintained by the server.",
    ErrorCode.not_leader_or_follower:
        "For requests intended only for the leader, this error indicates that the broker is not the current "
        "leader. For requests intended for any replica, this error indicates that the broker is not a replica "
        "of the topic partition.",
    ErrorCode.leader_not_available:
        "There is no leader for this topic-partition as we are in the middle of a leadership election.",
    ErrorCode.request_timed_out: "The request timed out.",
    ErrorCode.topic_authorization_failed: "Topic authorization failed.",
    ErrorCode.cluster_authorization_failed: "Cluster authorization failed.",
    ErrorCode.policy_violation: "Request parameters do not satisfy the configured policy.",
    ErrorCode.kafka_storage_error: "Disk error when trying to access log file on the disk.",
    ErrorCode.unknown_server_error: "The server experienced an unexpected error when processing the request.",
    ErrorCode.broker_not_available: "The broker is not available.",
    ErrorCode.log_dir_not_found: "The user-specified log directory is not found in the broker config.",
}


def exception_class(error: ErrorCode) -> str | None:
    """The fully qualified Java exception Kafka's client raises for ``error`` (None for none)."""
    if error == ErrorCode.none:
        return None
    name = _CLASSES.get(error) or "".join(part.capitalize() for part in error.name.split("_")) + "Exception"
    return f"org.apache.kafka.common.errors.{name}"


def exception_text(error: ErrorCode) -> str:
    """``Throwable.toString()`` of that exception: the class, then its default message if known."""
    message = _MESSAGES.get(error)
    return f"{exception_class(error)}: {message}" if message else str(exception_class(error))
