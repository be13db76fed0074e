"""Transaction coordinator config keys and the marker channel's error classification."""

from __future__ import annotations

import pytest

from odradek.broker.transaction.marker_channel import DONE, FENCED, RETRY, classify_marker_error
from odradek.broker.transaction.state_manager import replay_transaction_log
from odradek.broker.transaction.transaction_log import TxnLogValue, encode_key, encode_value
from odradek.broker.transaction.transaction_state import TransactionState
from odradek.broker.transaction.txn_config import TxnConfig
from odradek.common import TopicPartition
from odradek.config import ConfigError, KafkaConfig
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.records import SimpleRecord, build_batch

BASE = {"broker.id": "0", "zookeeper.connect": "localhost:2181", "log.dirs": "/tmp/x"}


def test_kafka_defaults() -> None:
    c = TxnConfig.from_kafka_config(KafkaConfig.from_props(BASE))
    assert (c.num_partitions, c.replication_factor, c.min_isr, c.max_timeout_ms) == (50, 3, 2, 900000)
    assert c.transactional_id_expiration_ms == 604800000 and c.abort_timed_out_interval_ms == 10000
    assert c.remove_expired_interval_ms == 3600000 and c.partition_verification is True
    assert c.topic_configs() == {"cleanup.policy": "compact", "min.insync.replicas": "2",
                                 "segment.bytes": "104857600", "unclean.leader.election.enable": "false",
                                 "compression.type": "uncompressed"}


def test_overrides_and_validation() -> None:
    c = TxnConfig.from_kafka_config(KafkaConfig.from_props({
        **BASE, "transaction.state.log.num.partitions": "3", "transaction.partition.verification.enable": "false"}))
    assert c.num_partitions == 3 and c.partition_verification is False
    with pytest.raises(ConfigError):
        KafkaConfig.from_props({**BASE, "transaction.max.timeout.ms": "0"})


def test_marker_errors() -> None:
    assert classify_marker_error(E.none) == DONE
    assert classify_marker_error(E.not_leader_or_follower) == RETRY
    assert classify_marker_error(E.unknown_topic_or_partition) == RETRY
    assert classify_marker_error(E.not_enough_replicas) == RETRY
    assert classify_marker_error(E.invalid_producer_epoch) == FENCED
    assert classify_marker_error(E.transaction_coordinator_fenced) == FENCED


def test_replay_keeps_the_last_record_and_honours_tombstones() -> None:
    def value(state: TransactionState, epoch: int, parts: frozenset[TopicPartition] = frozenset()) -> bytes:
        return encode_value(TxnLogValue(7, epoch, 1000, state, parts, 5, 4 if parts else -1))
    tp = TopicPartition("t", 0)
    batch = build_batch([
        SimpleRecord(key=encode_key("a"), value=value(TransactionState.EMPTY, 0)),
        SimpleRecord(key=encode_key("a"), value=value(TransactionState.ONGOING, 0, frozenset({tp}))),
        SimpleRecord(key=encode_key("b"), value=value(TransactionState.EMPTY, 3)),
        SimpleRecord(key=encode_key("b"), value=None),
        SimpleRecord(key=b"\x00\x09garbage", value=b"x"),
    ])
    loaded = replay_transaction_log([batch])
    assert set(loaded) == {"a"}
    assert loaded["a"].state is TransactionState.ONGOING and loaded["a"].topic_partitions == {tp}
