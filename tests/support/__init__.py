"""What the tests share: waiting on conditions, starting clusters, talking to a broker over
the wire, creating topics and reading offsets, producing and checking records, and the
brokers of the Spark tests.  Imported by name (``from support import wait_until``); the
fixtures built on them are in conftest.py."""

from __future__ import annotations

from support.clients import consume_all, delete_records, produce
from support.cluster import (
    ClusterFactory,
    JbodCluster,
    controller_of,
    current_controller,
    partition_state,
    run_kafka_tool,
    run_odradek,
    unique_chroot,
    zk_json,
)
from support.records import Headers, Rec, assert_acknowledged, assert_read_back, make_records
from support.spark import TANSU_ONE_RECORD_PER_BATCH, OdradekBroker, TansuBroker
from support.topics import alter_topic_config, create_topic, end_offsets, unique_topic
from support.waiting import wait_until, wait_until_async
from support.wire import (
    EARLIEST,
    LATEST,
    Address,
    PartitionInfo,
    address_of,
    batch_headers,
    fetch_records,
    kafka_request,
    list_offset,
    metadata,
    partitions_of,
    produce_records,
    stored_batches,
)

__all__ = [
    "EARLIEST",
    "LATEST",
    "TANSU_ONE_RECORD_PER_BATCH",
    "Address",
    "ClusterFactory",
    "Headers",
    "JbodCluster",
    "OdradekBroker",
    "PartitionInfo",
    "Rec",
    "TansuBroker",
    "address_of",
    "alter_topic_config",
    "assert_acknowledged",
    "assert_read_back",
    "batch_headers",
    "consume_all",
    "controller_of",
    "create_topic",
    "current_controller",
    "delete_records",
    "end_offsets",
    "fetch_records",
    "kafka_request",
    "list_offset",
    "make_records",
    "metadata",
    "partition_state",
    "partitions_of",
    "produce",
    "produce_records",
    "run_kafka_tool",
    "run_odradek",
    "stored_batches",
    "unique_chroot",
    "unique_topic",
    "wait_until",
    "wait_until_async",
    "zk_json",
]
