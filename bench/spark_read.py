"""Spark through the `odradek` data source vs one plain consumer.

In one invocation: start a local odradek cluster (embedded ZooKeeper, 3 brokers), create a
topic of 6 partitions, produce N records (default 1,000,000) of 100-byte values spread
evenly over the partitions, then read the whole topic

  (a) with Spark (``local[2]``) through the data source: ``df.count()`` and
      ``df.groupBy("partition").count()``, each its own job reading every record;
  (b) with one confluent-kafka Consumer in this process, ``assign()``ed to all 6 partitions
      from offset 0, ``consume(num_messages=1000)`` until every record arrived (each
      message checked for an error, as any consumer must), twice: with librdkafka's
      default settings, and with fetch.queue.backoff.ms=1, which the data source's own
      consumers use (librdkafka's default of 1 s idles a consumer that drains its queue
      quickly: it stops fetching at queued.min.messages and looks again only a second
      later).

and print records/s of each and the ratios data source / consumer (the issue's target is
>= 1.5x: the data source reads partitions in parallel). Each reader runs --rounds times,
interleaved; the table shows the median round (the machine is shared, so rounds vary) and
the JSON keeps every round. A tiny Spark job runs first so JVM and Python-worker start-up
are not timed. Results land in bench/results/spark_read-<time>.json.

    .venv/bin/python bench/spark_read.py [--records 1000000] [--brokers 3] [--rf 1]
        [--rounds 3] [--bootstrap HOST:PORT --topic T]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from odradek.local.cluster import LocalCluster
from odradek.perf.harness import unwind_on_sigterm

RESULTS = Path(__file__).resolve().parent / "results"
PARTITIONS = 6
VALUE_BYTES = 100
CONSUME_BATCH = 1000


def create_topic(cluster: LocalCluster, topic: str, replication_factor: int) -> None:
    subprocess.run(
        [sys.executable, "-m", "odradek", "topics", "--zookeeper", cluster.zookeeper_connect,
         "--create", "--topic", topic, "--partitions", str(PARTITIONS),
         "--replication-factor", str(replication_factor)],
        check=True, capture_output=True, text=True,
    )
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "bench"})
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
            if meta and not meta.error and len(meta.partitions) == PARTITIONS and all(
                    p.leader >= 0 for p in meta.partitions.values()):
                return
            time.sleep(0.1)
        raise TimeoutError(f"no leaders for {topic}")
    finally:
        consumer.close()


def produce(bootstrap: str, topic: str, records: int) -> float:
    """N records of 100 random-looking bytes, round-robin over the partitions; records/s."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 10,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 500_000})
    values = [os.urandom(VALUE_BYTES) for _ in range(1024)]
    failed: list[KafkaError] = []

    def on_delivery(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failed.append(error)

    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, values[i % 1024], partition=i % PARTITIONS,
                                 on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(300) or failed:
        raise RuntimeError(f"produce failed: {failed[:3]}")
    return records / (time.perf_counter() - start)


def read_with_consumer(bootstrap: str, topic: str, records: int, **config: object) -> dict[str, float]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-consumer",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest", **config})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        seen = 0
        start = time.perf_counter()
        while seen < records:
            for message in consumer.consume(CONSUME_BATCH, 1.0):
                if message.error() is None:
                    seen += 1
                elif message.error().code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(message.error())
        seconds = time.perf_counter() - start
    finally:
        consumer.close()
    return {"records": seen, "seconds": seconds, "records_per_s": seen / seconds}


def spark_session():  # type: ignore[no-untyped-def]
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import odradek.spark

    spark = (SparkSession.builder.master("local[2]").appName("odradek-bench-spark-read")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    odradek.spark.register(spark)
    return spark


def warm_up(spark, bootstrap: str, topic: str) -> float:  # type: ignore[no-untyped-def]
    """A tiny job first: JVM code paths and the Python workers start outside the timings."""
    start = time.perf_counter()
    ends = json.dumps({topic: {str(p): 100 for p in range(PARTITIONS)}})
    df = (spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("endingOffsets", ends).load())
    assert df.count() == 100 * PARTITIONS
    return time.perf_counter() - start


def read_with_spark(spark, bootstrap: str, topic: str, records: int, job: str) -> dict[str, float]:  # type: ignore[no-untyped-def]
    df = (spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).load())
    start = time.perf_counter()
    if job == "count":
        counted = df.count()
    elif job == "bytes":  # a light aggregation that touches every record's value
        from pyspark.sql import functions as F

        rows = df.groupBy("partition").agg(F.count(F.lit(1)).alias("n"),
                                           F.sum(F.length("value")).alias("bytes")).collect()
        counted = sum(r["n"] for r in rows)
    else:
        counted = sum(r["count"] for r in df.groupBy("partition").count().collect())
    seconds = time.perf_counter() - start
    if counted != records:
        raise RuntimeError(f"spark {job} read {counted} of {records} records")
    return {"records": counted, "seconds": seconds, "records_per_s": counted / seconds}


READERS = {
    "consumer, librdkafka defaults": lambda spark, bs, t, n: read_with_consumer(bs, t, n),
    "consumer, fetch.queue.backoff.ms=1": lambda spark, bs, t, n: read_with_consumer(
        bs, t, n, **{"fetch.queue.backoff.ms": 1}),
    "spark local[2] count": lambda spark, bs, t, n: read_with_spark(spark, bs, t, n, "count"),
    "spark local[2] groupBy(partition).count": lambda spark, bs, t, n: read_with_spark(
        spark, bs, t, n, "groupBy"),
}
BASELINES = ("consumer, librdkafka defaults", "consumer, fetch.queue.backoff.ms=1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--rf", type=int, default=1, help="replication factor of the topic")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bootstrap", help="use this running cluster (with --topic, already filled)")
    parser.add_argument("--topic", default="spark-read")
    args = parser.parse_args()

    result: dict[str, object] = {"records": args.records, "partitions": PARTITIONS,
                                 "value_bytes": VALUE_BYTES, "load_average": os.getloadavg()}
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in READERS}
    with tempfile.TemporaryDirectory(prefix="spark-read-") as tmp:
        cluster = None
        if args.bootstrap:
            bootstrap = args.bootstrap
        else:
            cluster = LocalCluster(Path(tmp) / "cluster", args.brokers)
            cluster.start()
            bootstrap = cluster.bootstrap_servers
            result.update(brokers=args.brokers, replication_factor=args.rf)
        spark = None
        try:
            if cluster is not None:
                create_topic(cluster, args.topic, args.rf)
                result["produce_records_per_s"] = produce(bootstrap, args.topic, args.records)
                print(f"produced {args.records:,} records at {result['produce_records_per_s']:,.0f}/s")
            spark = spark_session()
            result["spark_warmup_s"] = warm_up(spark, bootstrap, args.topic)
            for i in range(args.rounds):
                for name, read in READERS.items():
                    rounds[name].append(read(spark, bootstrap, args.topic, args.records))
                print(f"round {i + 1}: " + ", ".join(
                    f"{name} {r[-1]['records_per_s']:,.0f}/s" for name, r in rounds.items()))
        finally:
            if spark is not None:
                spark.stop()
            if cluster is not None:
                cluster.stop()

    median = {name: statistics.median(r["records_per_s"] for r in rs) for name, rs in rounds.items()}
    result["rounds"] = rounds
    result["median_records_per_s"] = median
    result["ratios"] = {f"{name} / {base}": median[name] / median[base]
                        for name in READERS if name not in BASELINES for base in BASELINES}
    print(f"\nmedian of {args.rounds} rounds, {args.records:,} records of {VALUE_BYTES} bytes, "
          f"{PARTITIONS} partitions")
    header = "".join(f"{'vs ' + b.split(', ')[1][:22]:>26}" for b in BASELINES)
    print(f"{'reader':<42}{'records/s':>12}{header}")
    for name, rate in median.items():
        ratios = "".join(f"{rate / median[b]:>25.2f}x" for b in BASELINES)
        print(f"{name:<42}{rate:>12,.0f}{ratios}")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"spark_read-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"results: {out}")


if __name__ == "__main__":
    unwind_on_sigterm()
    main()
