"""The group coordinator's settings, from the broker's Kafka-named keys."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["NEW_MEMBER_JOIN_TIMEOUT_MS", "GroupConfig"]

# Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a new member's JoinGroup is abandoned after
# this long (its sender may have disconnected while the rebalance was pending).
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


@dataclass(frozen=True, slots=True)
class GroupConfig:
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 104857600
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600000
    offsets_commit_timeout_ms: int = 5000
    offsets_load_buffer_size: int = 5242880

    @classmethod
    def from_kafka_config(cls, config: Any) -> GroupConfig:
        return cls(
            offsets_topic_num_partitions=config["offsets.topic.num.partitions"],
            offsets_topic_replication_factor=config["offsets.topic.replication.factor"],
            offsets_topic_segment_bytes=config["offsets.topic.segment.bytes"],
            min_session_timeout_ms=config["group.min.session.timeout.ms"],
            max_session_timeout_ms=config["group.max.session.timeout.ms"],
            initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
            max_size=config["group.max.size"],
            offset_metadata_max_bytes=config["offset.metadata.max.bytes"],
            offsets_retention_ms=config["offsets.retention.minutes"] * 60 * 1000,
            offsets_retention_check_interval_ms=config["offsets.retention.check.interval.ms"],
            offsets_commit_timeout_ms=config["offsets.commit.timeout.ms"],
            offsets_load_buffer_size=config["offsets.load.buffer.size"],
        )

    def offsets_topic_configs(self) -> dict[str, str]:
        """The topic configs ``__consumer_offsets`` is created with (Kafka's)."""
        return {"cleanup.policy": "compact", "compression.type": "producer",
                "segment.bytes": str(self.offsets_topic_segment_bytes)}
