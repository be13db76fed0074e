"""Kafka's error codes as its Java clients report them: the exception class and its default
message (Kafka's ``Errors`` table), which Kafka's tools print (``Error: org.apache.kafka.common.
errors.GroupIdNotFoundException: The group id does not exist.``)."""

from __future__ import annotations

from typing import Final

from odradek.protocol.errors import ErrorCode

__all__ = ["java_exception"]

_PACKAGE: Final = "org.apache.kafka.common.errors."
_EXCEPTIONS: Final = {
    ErrorCode.unknown_topic_or_partition: ("UnknownTopicOrPartitionException",
                                           "This server does not host this topic-partition."),
    ErrorCode.leader_not_available: ("LeaderNotAvailableException",
                                     "There is no leader for this topic-partition as we are in the middle of a "
                                     "leadership election."),
    ErrorCode.not_leader_or_follower: ("NotLeaderOrFollowerException",
                                       "For requests intended only for the leader, this error indicates that the "
                                       "broker is not the current leader. For requests intended for any replica, "
                                       "this error indicates that the broker is not a replica of the topic "
                                       "partition."),
    ErrorCode.coordinator_load_in_progress: ("CoordinatorLoadInProgressException",
                                             "The coordinator is loading and hence can't process requests."),
    ErrorCode.coordinator_not_available: ("CoordinatorNotAvailableException", "The coordinator is not available."),
    ErrorCode.not_coordinator: ("NotCoordinatorException", "This is not the correct coordinator."),
    ErrorCode.invalid_group_id: ("InvalidGroupIdException", "The configured groupId is invalid."),
    ErrorCode.unknown_member_id: ("UnknownMemberIdException", "The coordinator is not aware of this member."),
    ErrorCode.rebalance_in_progress: ("RebalanceInProgressException",
                                      "The group is rebalancing, so a rejoin is needed."),
    ErrorCode.topic_authorization_failed: ("TopicAuthorizationException", "Topic authorization failed."),
    ErrorCode.group_authorization_failed: ("GroupAuthorizationException", "Group authorization failed."),
    ErrorCode.non_empty_group: ("GroupNotEmptyException", "The group is not empty."),
    ErrorCode.group_id_not_found: ("GroupIdNotFoundException", "The group id does not exist."),
    ErrorCode.group_subscribed_to_topic: ("GroupSubscribedToTopicException",
                                          "Deleting offsets of a topic is forbidden while the consumer group is "
                                          "actively subscribed to it."),
}
_UNKNOWN: Final = ("UnknownServerException",
                   "The server experienced an unexpected error when processing the request.")


def java_exception(code: int) -> str:
    """``org.apache.kafka.common.errors.X: message`` for an error code (Throwable.toString)."""
    name, message = _EXCEPTIONS.get(ErrorCode(code), _UNKNOWN)
    return f"{_PACKAGE}{name}: {message}"
