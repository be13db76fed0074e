"""DeleteRecords on a real 3-broker cluster waits for the replicas, as Kafka 2.8 does: the
answer comes once every live replica has moved its log start offset (so each replica, asked
right after, already serves from there), a replica whose broker is gone is not waited for, and
one that is alive but does not fetch makes the partition answer REQUEST_TIMED_OUT."""

from __future__ import annotations

import signal

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from kio.schema.list_offsets.v7 import request as list_offsets_req
from kio.schema.list_offsets.v7 import response as list_offsets_resp

from odradek.local.cluster import LocalCluster
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import SimpleRecord, build_batch
from support import (
    EARLIEST,
    ClusterFactory,
    address_of,
    controller_of,
    create_topic,
    kafka_request,
    metadata,
    partition_state,
    produce_records,
    wait_until,
)

TOPIC = "purged"
DEBUG_REPLICA_ID = -2  # ListOffsets from this "replica" is answered by followers too


def replicated_topic(cluster: LocalCluster) -> tuple[int, int, int]:
    """``TOPIC`` led by a broker other than the controller, on all three brokers, with 100
    records every replica has (acks=all): (leader, other follower, controller)."""
    controller, _ = controller_of(cluster)
    leader, follower = (b for b in range(3) if b != controller)
    create_topic(cluster, TOPIC, assignment=[[leader, follower, controller]])
    assert partition_state(cluster, TOPIC, 0)["leader"] == leader
    batch = build_batch([SimpleRecord(value=f"r{i}".encode()) for i in range(100)])
    answer = produce_records(address_of(cluster, leader), TOPIC, 0, batch, acks=-1)
    assert answer.error_code == ErrorCode.none
    return leader, follower, controller


def delete_records(cluster: LocalCluster, before: int, operation_timeout_s: float = 30.0) -> int:
    """confluent-kafka's AdminClient.delete_records for partition 0: its low watermark (raises
    the partition's KafkaException)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.delete_records([TopicPartition(TOPIC, 0, before)], request_timeout=60,
                                   operation_timeout=operation_timeout_s)
    (future,) = futures.values()
    return future.result(90).low_watermark


def log_start_of(cluster: LocalCluster, broker: int) -> int:
    """The log start offset of partition 0 in ``broker``'s replica, leader or follower, now."""
    request = list_offsets_req.ListOffsetsRequest(replica_id=DEBUG_REPLICA_ID, isolation_level=0, topics=(
        list_offsets_req.ListOffsetsTopic(name=TOPIC, partitions=(
            list_offsets_req.ListOffsetsPartition(partition_index=0, timestamp=EARLIEST),)),))
    response = kafka_request(address_of(cluster, broker), request, list_offsets_resp.ListOffsetsResponse)
    (p,) = response.topics[0].partitions
    assert p.error_code == ErrorCode.none, (broker, p)
    return p.offset


def test_delete_records_answers_once_every_live_replica_moved_its_log_start(cluster_factory: ClusterFactory
                                                                           ) -> None:
    cluster = cluster_factory(3)
    leader, follower, controller = replicated_topic(cluster)

    assert delete_records(cluster, 40) == 40
    # No waiting here: the answer itself says every replica is there already.
    assert {b: log_start_of(cluster, b) for b in range(3)} == {0: 40, 1: 40, 2: 40}

    # A follower whose broker is gone (once the leader's metadata says so) is not waited for.
    cluster.stop_broker(follower)
    wait_until(lambda: follower not in {b.node_id for b in metadata(address_of(cluster, leader), [TOPIC]).brokers},
               timeout=30, message=f"the leader's metadata to drop broker {follower}")
    assert delete_records(cluster, 70) == 70
    assert {b: log_start_of(cluster, b) for b in (leader, controller)} == {leader: 70, controller: 70}


def test_delete_records_times_out_while_a_live_follower_does_not_fetch(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(3)
    leader, follower, controller = replicated_topic(cluster)
    cluster.signal_broker(follower, signal.SIGSTOP)  # alive in ZooKeeper, but not fetching
    try:
        try:
            delete_records(cluster, 40, operation_timeout_s=1.5)
        except KafkaException as e:
            error = e.args[0]
        else:
            raise AssertionError("DeleteRecords completed without the paused follower")
        # What AdminClient surfaces for the partition: the broker's REQUEST_TIMED_OUT.
        assert error.code() == KafkaError.REQUEST_TIMED_OUT, error
        # The leader moved its own log start; the paused follower could not.
        assert log_start_of(cluster, leader) == 40
    finally:
        cluster.signal_broker(follower, signal.SIGCONT)
    # Once it fetches again, it follows, and the same request completes.
    assert delete_records(cluster, 40) == 40
    assert {b: log_start_of(cluster, b) for b in (leader, follower, controller)} == {0: 40, 1: 40, 2: 40}
