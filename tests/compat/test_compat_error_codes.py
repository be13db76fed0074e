"""The Kafka error codes clients see, from raw requests (kio payloads over odradek's
BrokerConnection) and, where a client surfaces them, from confluent-kafka: requests to a
non-leader, unknown topics and partitions, corrupt and oversized batches, fetches outside
the log, and acks=-1 with fewer in-sync replicas than min.insync.replicas.

A refused batch must leave the log as it was: each check ends by appending a good batch and
seeing it land at the offset the log had before.
"""

from __future__ import annotations

import datetime
import time

import pytest
from confluent_kafka import KafkaError, Producer
from kio.schema.delete_records.v2 import request as delete_records_req
from kio.schema.delete_records.v2 import response as delete_records_resp

from odradek.local.cluster import LocalCluster
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import (
    CompressionType,
    SimpleRecord,
    build_batch,
    decode_batch,
    iter_batches,
)
from support import (
    EARLIEST,
    LATEST,
    address_of,
    alter_topic_config,
    create_topic,
    fetch_records,
    kafka_request,
    list_offset,
    partitions_of,
    produce_records,
    run_odradek,
    wait_until,
)


def batch(*values: bytes, compression: CompressionType = CompressionType.NONE) -> bytes:
    return build_batch([SimpleRecord(v, key=b"k") for v in values], timestamp=int(time.time() * 1000),
                       compression=compression)


def assert_next_append_lands_at(cluster: LocalCluster, topic: str, partition: int, leader: int,
                                offset: int) -> None:
    """Nothing was appended by what came before: a good batch gets ``offset``, and a fetch
    from ``offset`` returns exactly it."""
    p = produce_records(address_of(cluster, leader), topic, partition, batch(b"good"))
    assert (p.error_code, p.base_offset) == (ErrorCode.none, offset)
    data = fetch_records(address_of(cluster, leader), topic, partition, offset)
    _, records = decode_batch(data.records)
    assert [(r.offset, r.value) for r in records] == [(offset, b"good")]


def deliver(producer: Producer, topic: str, value: bytes, partition: int = 0) -> KafkaError | None:
    """Produce one record with confluent-kafka and return its delivery error."""
    result: list[KafkaError | None] = []
    producer.produce(topic, value=value, key=b"k", partition=partition,
                     on_delivery=lambda err, _msg: result.append(err))
    assert producer.flush(60) == 0
    assert len(result) == 1
    return result[0]


# ----------------------------------------------------------------------------- leadership


def test_produce_and_fetch_on_a_non_leader(module_cluster: LocalCluster) -> None:
    cluster = module_cluster
    info = create_topic(cluster, "errors-leader", 3, 3)
    single = create_topic(cluster, "errors-leader-rf1", 1, 1)
    for partition, meta in info.items():
        for broker_id in meta.replicas:
            if broker_id == meta.leader:
                continue
            p = produce_records(address_of(cluster, broker_id), "errors-leader", partition, batch(b"to a follower"))
            assert p.error_code == ErrorCode.not_leader_or_follower, (partition, broker_id, p)
            # A follower serves a v11+ consumer (KIP-392: Kafka 2.8's fetchOnlyFromLeader is false
            # when the request carries client metadata), up to its high watermark.
            f = fetch_records(address_of(cluster, broker_id), "errors-leader", partition, 0)
            assert f.error_code == ErrorCode.none, (partition, broker_id, f)
            error, _, _ = list_offset(address_of(cluster, broker_id), "errors-leader", partition, LATEST)
            assert error == ErrorCode.not_leader_or_follower
        assert_next_append_lands_at(cluster, "errors-leader", partition, meta.leader, 0)
    # A broker that holds no replica at all but knows the partition says the same (as Kafka).
    (meta,) = single.values()
    for broker_id in set(cluster.brokers) - {meta.leader}:
        p = produce_records(address_of(cluster, broker_id), "errors-leader-rf1", 0, batch(b"to a stranger"))
        assert p.error_code == ErrorCode.not_leader_or_follower
        f = fetch_records(address_of(cluster, broker_id), "errors-leader-rf1", 0, 0)
        assert f.error_code == ErrorCode.not_leader_or_follower
    assert_next_append_lands_at(cluster, "errors-leader-rf1", 0, meta.leader, 0)


def test_unknown_topic_or_partition(module_cluster: LocalCluster) -> None:
    cluster = module_cluster
    info = create_topic(cluster, "errors-known", 2, 3)
    for broker_id in cluster.brokers:
        address = address_of(cluster, broker_id)
        assert produce_records(address, "errors-no-such-topic", 0, batch(b"x")).error_code == \
            ErrorCode.unknown_topic_or_partition
        assert produce_records(address, "errors-known", 7, batch(b"x")).error_code == ErrorCode.unknown_topic_or_partition
        assert fetch_records(address, "errors-no-such-topic", 0, 0).error_code == ErrorCode.unknown_topic_or_partition
        assert fetch_records(address, "errors-known", 7, 0).error_code == ErrorCode.unknown_topic_or_partition
        assert list_offset(address, "errors-no-such-topic", 0, LATEST)[0] == ErrorCode.unknown_topic_or_partition
        assert partitions_of(address, "errors-no-such-topic") is None  # Metadata says so, and creates nothing
    assert cluster.zk_client().exists("/brokers/topics/errors-no-such-topic") is None
    for partition, meta in info.items():
        assert_next_append_lands_at(cluster, "errors-known", partition, meta.leader, 0)

    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "retries": 0,
                   "topic.metadata.propagation.max.ms": 1000, "message.timeout.ms": 10000}) as producer:
        error = deliver(producer, "errors-no-such-topic", b"x")
        assert error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART, error  # the broker's
        error = deliver(producer, "errors-known", b"x", partition=7)
    assert error is not None and error.code() == KafkaError._UNKNOWN_PARTITION, error


# ----------------------------------------------------------------------------- batches


def test_corrupt_batches_are_refused_and_not_appended(module_cluster: LocalCluster) -> None:
    cluster = module_cluster
    info = create_topic(cluster, "errors-corrupt", 1, 3)
    leader = address_of(cluster, info[0].leader)
    assert produce_records(leader, "errors-corrupt", 0, batch(b"first", b"second")).error_code == ErrorCode.none

    good = batch(b"will be damaged", b"in several ways", compression=CompressionType.GZIP)
    crc_flipped = bytearray(good)
    crc_flipped[17] ^= 0xFF  # a CRC byte
    payload_flipped = bytearray(good)
    payload_flipped[-3] ^= 0x01  # inside the compressed records: the CRC no longer matches
    attributes_flipped = bytearray(good)
    attributes_flipped[22] ^= 0x02  # gzip -> lz4 in the attributes, covered by the CRC
    for damaged in (crc_flipped, payload_flipped, attributes_flipped):
        p = produce_records(leader, "errors-corrupt", 0, bytes(damaged))
        assert p.error_code == ErrorCode.corrupt_message, p
        assert p.base_offset == -1
    # A batch whose length field points past the bytes sent, and a batch cut short.
    longer = bytearray(good)
    longer[8:12] = (int.from_bytes(good[8:12], "big") + 100).to_bytes(4, "big")
    for damaged in (bytes(longer), good[: len(good) - 10]):
        assert produce_records(leader, "errors-corrupt", 0, damaged).error_code in (
            ErrorCode.corrupt_message, ErrorCode.invalid_record)
    assert list_offset(leader, "errors-corrupt", 0, LATEST)[:2] == (ErrorCode.none, 2)
    assert_next_append_lands_at(cluster, "errors-corrupt", 0, info[0].leader, 2)


def test_batches_above_max_message_bytes(module_cluster: LocalCluster) -> None:
    cluster = module_cluster
    limit = 10_000
    info = create_topic(cluster, "errors-too-large", 1, 3, {"max.message.bytes": str(limit)})
    leader = address_of(cluster, info[0].leader)
    big = batch(b"x" * (limit + 1))
    assert len(big) > limit
    p = produce_records(leader, "errors-too-large", 0, big)
    assert p.error_code == ErrorCode.message_too_large, p
    fits = batch(b"y" * (limit - 200))
    assert len(fits) <= limit
    assert produce_records(leader, "errors-too-large", 0, fits).error_code == ErrorCode.none
    # The limit is on the batch as stored: 200 KB that gzip squeezes under it are accepted.
    squeezed = batch(b"z" * 200_000, compression=CompressionType.GZIP)
    assert len(squeezed) < limit
    p = produce_records(leader, "errors-too-large", 0, squeezed)
    assert (p.error_code, p.base_offset) == (ErrorCode.none, 1)
    assert_next_append_lands_at(cluster, "errors-too-large", 0, info[0].leader, 2)

    # What a client sees: librdkafka's producer reports the broker's MESSAGE_TOO_LARGE.
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "retries": 0}) as producer:
        error = deliver(producer, "errors-too-large", bytes(range(256)) * 60)  # 15 KB, incompressible-ish
    assert error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE, error
    assert list_offset(leader, "errors-too-large", 0, LATEST)[:2] == (ErrorCode.none, 3)


def test_record_sets_over_a_segment_and_the_broker_wide_message_max_bytes(module_cluster: LocalCluster) -> None:
    cluster = module_cluster
    # Kafka's Log.append: a produced record set larger than a segment is RECORD_LIST_TOO_LARGE.
    info = create_topic(cluster, "errors-small-segments", 1, 3, {"segment.bytes": "1024"})
    leader = address_of(cluster, info[0].leader)
    big = batch(b"x" * 2000)
    assert len(big) > 1024
    assert produce_records(leader, "errors-small-segments", 0, big).error_code == ErrorCode.record_list_too_large
    assert_next_append_lands_at(cluster, "errors-small-segments", 0, info[0].leader, 0)

    # message.max.bytes is the broker-wide default of max.message.bytes (here a dynamic default).
    info = create_topic(cluster, "errors-broker-limit", 1, 3)
    leader = address_of(cluster, info[0].leader)
    bootstrap = ["--bootstrap-server", cluster.bootstrap_servers, "--entity-type", "brokers", "--entity-default"]
    done = run_odradek("configs", "--alter", *bootstrap, "--add-config", "message.max.bytes=5000")
    assert done.returncode == 0, done.stderr
    try:
        wait_until(lambda: produce_records(leader, "errors-broker-limit", 0, batch(b"z" * 6000)).error_code
                   == ErrorCode.message_too_large, message="message.max.bytes=5000 applied")
        appended = list_offset(leader, "errors-broker-limit", 0, LATEST)[1]
        assert produce_records(leader, "errors-broker-limit", 0, batch(b"w" * 4000)).error_code == ErrorCode.none
        # A topic's own max.message.bytes overrides the broker's.
        alter_topic_config(cluster, "errors-broker-limit", {"max.message.bytes": "10000"})
        wait_until(lambda: produce_records(leader, "errors-broker-limit", 0, batch(b"z" * 6000)).error_code
                   == ErrorCode.none, message="the topic's max.message.bytes applied")
        assert list_offset(leader, "errors-broker-limit", 0, LATEST)[1] == appended + 2
    finally:
        run_odradek("configs", "--alter", *bootstrap, "--delete-config", "message.max.bytes")


# ----------------------------------------------------------------------------- offsets


def test_fetch_outside_the_log(module_cluster: LocalCluster) -> None:
    cluster = module_cluster
    info = create_topic(cluster, "errors-range", 1, 3)
    leader_id = info[0].leader
    leader = address_of(cluster, leader_id)
    for i in range(5):
        assert produce_records(leader, "errors-range", 0, batch(b"%d" % i, b"%d again" % i)).error_code == ErrorCode.none
    assert list_offset(leader, "errors-range", 0, LATEST)[:2] == (ErrorCode.none, 10)

    at_end = fetch_records(leader, "errors-range", 0, 10)
    assert (at_end.error_code, at_end.high_watermark, at_end.records or b"") == (ErrorCode.none, 10, b"")
    for offset in (11, 1000, 2**62, -1):
        f = fetch_records(leader, "errors-range", 0, offset)
        assert f.error_code == ErrorCode.offset_out_of_range, (offset, f.error_code)
        assert f.high_watermark in (10, -1) and not f.records

    # DeleteRecords moves the log start: below it is out of range too.
    response = kafka_request(leader, delete_records_req.DeleteRecordsRequest(
        topics=(delete_records_req.DeleteRecordsTopic(name="errors-range", partitions=(
            delete_records_req.DeleteRecordsPartition(partition_index=0, offset=4),)),),
        timeout=datetime.timedelta(seconds=10)), delete_records_resp.DeleteRecordsResponse)
    (result,) = response.topics[0].partitions
    assert (result.error_code, result.low_watermark) == (ErrorCode.none, 4)
    assert list_offset(leader, "errors-range", 0, EARLIEST)[:2] == (ErrorCode.none, 4)
    assert fetch_records(leader, "errors-range", 0, 3).error_code == ErrorCode.offset_out_of_range
    first = fetch_records(leader, "errors-range", 0, 4)
    assert first.error_code == ErrorCode.none and first.log_start_offset == 4
    _, records = decode_batch(first.records)
    assert records[0].offset == 4 and records[0].value == b"2"
    assert_next_append_lands_at(cluster, "errors-range", 0, leader_id, 10)


# ----------------------------------------------------------------------------- min.insync.replicas


def test_min_insync_replicas_above_the_replication_factor(module_cluster: LocalCluster) -> None:
    """min.insync.replicas=4 on three replicas: acks=-1 can never be satisfied; acks=1 can."""
    cluster = module_cluster
    info = create_topic(cluster, "errors-misr", 1, 3, {"min.insync.replicas": "4"})
    leader = address_of(cluster, info[0].leader)
    p = produce_records(leader, "errors-misr", 0, batch(b"all"), acks=-1)
    assert p.error_code == ErrorCode.not_enough_replicas, p
    p = produce_records(leader, "errors-misr", 0, batch(b"one"), acks=1)
    assert (p.error_code, p.base_offset) == (ErrorCode.none, 0)
    wait_until(lambda: list_offset(leader, "errors-misr", 0, LATEST)[1] == 1, message="high watermark 1")

    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "retries": 0}) as producer:
        error = deliver(producer, "errors-misr", b"x")
    assert error is not None and error.code() == KafkaError.NOT_ENOUGH_REPLICAS, error
    assert list_offset(leader, "errors-misr", 0, LATEST)[:2] == (ErrorCode.none, 1)


@pytest.mark.slow
def test_not_enough_replicas_once_the_isr_shrinks(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    """min.insync.replicas=3 on three replicas: a follower dies, the ISR shrinks to two,
    acks=-1 is refused (nothing appended) and acks=1 still works; once the follower is back
    in the ISR, acks=-1 works again."""
    cluster = cluster_factory(3)
    topic = "errors-isr"
    info = create_topic(cluster, topic, 1, 3, {"min.insync.replicas": "3"})
    leader_id = info[0].leader
    leader = address_of(cluster, leader_id)
    assert produce_records(leader, topic, 0, batch(b"before")).error_code == ErrorCode.none
    follower = next(b for b in info[0].replicas if b != leader_id)
    cluster.kill_broker(follower)

    def isr() -> tuple[int, ...] | None:
        meta = partitions_of(leader, topic)
        return meta[0].isr if meta else None

    wait_until(lambda: follower not in (isr() or (follower,)), timeout=60, message="the ISR to shrink")
    p = produce_records(leader, topic, 0, batch(b"refused"), acks=-1)
    assert p.error_code == ErrorCode.not_enough_replicas, p
    p = produce_records(leader, topic, 0, batch(b"leader only"), acks=1)
    assert (p.error_code, p.base_offset) == (ErrorCode.none, 1)

    cluster.start_broker(follower)
    wait_until(lambda: set(isr() or ()) == set(info[0].replicas), timeout=60, message="the ISR to grow back")
    p = produce_records(leader, topic, 0, batch(b"after"), acks=-1)
    assert (p.error_code, p.base_offset) == (ErrorCode.none, 2)
    data = fetch_records(leader, topic, 0, 0).records
    values = [r.value for pos, h in iter_batches(data) for r in decode_batch(data[pos:pos + h.size])[1]]
    assert values == [b"before", b"leader only", b"after"]
