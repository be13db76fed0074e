"""The data source with ``kafka.isolation.level=read_committed``, as Spark's Kafka source
passes it to its consumers, on odradek's transactions: committed data only, up to the last
stable offset; read_uncommitted gets aborted and open transactions' records too."""

from __future__ import annotations

from confluent_kafka import Producer

from support.transactions import lso_and_hw, wait_lso_reaches_hw


def _read(spark, bootstrap, topic, isolation):
    df = (spark.read.format("odradek")
          .option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic)
          .option("kafka.isolation.level", isolation)
          .option("kafkaConsumer.pollTimeoutMs", "20000")
          .load())
    return sorted(r.value.decode() for r in df.collect())


def _txn(producer, topic, name, partitions=2, count=3):
    """Begin a transaction and write ``count`` records over the partitions (acknowledged)."""
    producer.begin_transaction()
    for i in range(count):
        producer.produce(topic, value=f"{name}{i}".encode(), partition=i % partitions)
    producer.flush(30)


def test_read_committed_gets_only_committed_data(spark, kafka_bootstrap, odradek_broker):
    topic = odradek_broker.new_topic("committed", partitions=2)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": f"spark-{topic}",
                         "linger.ms": 2})
    producer.init_transactions(30)
    _txn(producer, topic, "a")
    producer.commit_transaction(30)
    _txn(producer, topic, "b")
    producer.abort_transaction(30)
    _txn(producer, topic, "c")
    producer.commit_transaction(30)
    _txn(producer, topic, "d")  # left open while Spark reads
    try:
        assert any(lso < hw for lso, hw in (lso_and_hw(kafka_bootstrap, topic, p) for p in range(2)))
        committed = _read(spark, kafka_bootstrap, topic, "read_committed")
        assert committed == ["a0", "a1", "a2", "c0", "c1", "c2"]
        everything = _read(spark, kafka_bootstrap, topic, "read_uncommitted")
        assert everything == ["a0", "a1", "a2", "b0", "b1", "b2", "c0", "c1", "c2", "d0", "d1", "d2"]
    finally:
        producer.commit_transaction(30)
    for p in range(2):  # the commit returns before its markers are written
        wait_lso_reaches_hw(kafka_bootstrap, topic, p)
    assert _read(spark, kafka_bootstrap, topic, "read_committed") == [
        "a0", "a1", "a2", "c0", "c1", "c2", "d0", "d1", "d2"]
