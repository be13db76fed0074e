"""The transaction coordinator's settings, from the broker's Kafka-named keys
(Kafka's TransactionConfig)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["TxnConfig"]


@dataclass(frozen=True, slots=True)
class TxnConfig:
    num_partitions: int = 50
    replication_factor: int = 3
    min_isr: int = 2
    segment_bytes: int = 104857600
    load_buffer_size: int = 5242880
    max_timeout_ms: int = 900000
    transactional_id_expiration_ms: int = 604800000
    abort_timed_out_interval_ms: int = 10000
    remove_expired_interval_ms: int = 3600000
    partition_verification: bool = True
    # Kafka's TransactionStateManager request timeout for its own appends (acks=-1).
    append_timeout_ms: int = 30000

    @classmethod
    def from_kafka_config(cls, config: Any) -> TxnConfig:
        return cls(
            num_partitions=config["transaction.state.log.num.partitions"],
            replication_factor=config["transaction.state.log.replication.factor"],
            min_isr=config["transaction.state.log.min.isr"],
            segment_bytes=config["transaction.state.log.segment.bytes"],
            load_buffer_size=config["transaction.state.log.load.buffer.size"],
            max_timeout_ms=config["transaction.max.timeout.ms"],
            transactional_id_expiration_ms=config["transactional.id.expiration.ms"],
            abort_timed_out_interval_ms=config["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
            remove_expired_interval_ms=config["transaction.remove.expired.transaction.cleanup.interval.ms"],
            partition_verification=config["transaction.partition.verification.enable"],
        )

    def topic_configs(self) -> dict[str, str]:
        """The topic configs ``__transaction_state`` is created with (Kafka's
        TransactionStateManager.transactionTopicConfigs)."""
        return {"cleanup.policy": "compact", "min.insync.replicas": str(self.min_isr),
                "segment.bytes": str(self.segment_bytes), "unclean.leader.election.enable": "false",
                "compression.type": "uncompressed"}
