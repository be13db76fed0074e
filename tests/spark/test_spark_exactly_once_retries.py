"""The sink's ``exactlyOnce`` under task retries, on real brokers: the first attempt of chosen
write tasks fails after part of its rows reached the brokers (its transaction left open, as
if its executor died), and Spark runs the task again. Read with read_committed, the output of
a batch write and of a streaming query holds every input row once; the same runs without
``exactlyOnce`` hold the failed attempts' rows twice.

Spark retries tasks only on a master that allows it (``local[2,4]``), so the queries run in a
driver process of their own (tests/spark/exactly_once_driver.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from confluent_kafka import Producer

from support import OdradekBroker
from support.topics import unique_topic
from support.transactions import read_topic

DRIVER = Path(__file__).with_name("exactly_once_driver.py")
PARTITIONS = 4
ROWS = 4000  # batch write: 4 partitions of about 1000 rows
RECORDS = 4000  # stream: 1000 per input partition, 2 micro-batches of 500 per partition
MAX_OFFSETS = 2000
BATCH_FAULTS, BATCH_FAILED_ROWS = "0,1@300", 2 * 300  # failed attempts x rows they wrote
STREAM_FAULTS, STREAM_FAILED_ROWS = "0,2@200", 2 * 2 * 200  # micro-batches x failed attempts x rows


def produce_input(bootstrap: str, topic: str) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    values = [f"in-{i}".encode() for i in range(RECORDS)]
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % PARTITIONS)
    assert producer.flush(60) == 0
    return values


def run_driver(directory: Path, spec: dict) -> dict:
    spec_file, result_file = directory / "spec.json", directory / "result.json"
    spec_file.write_text(json.dumps(spec))
    done = subprocess.run(
        [sys.executable, str(DRIVER), str(spec_file), str(result_file)],
        cwd=directory, capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, f"driver failed:\n{done.stderr[-6000:]}"
    return json.loads(result_file.read_text())


def committed_counts(bootstrap: str, topic: str) -> Counter[bytes]:
    return Counter(value for _, _, value in read_topic(bootstrap, topic, PARTITIONS, "read_committed"))


def duplicates(counts: Counter[bytes]) -> int:
    return sum(n - 1 for n in counts.values())


def test_retried_write_tasks_write_each_row_once_with_exactly_once_and_twice_without(
    odradek_broker: OdradekBroker, kafka_bootstrap: str, tmp_path: Path
):
    input_topic = odradek_broker.new_topic("eos-in", PARTITIONS)
    inputs = produce_input(kafka_bootstrap, input_topic)
    writes = [
        {
            "exactlyOnce": mode,
            "batch_topic": odradek_broker.new_topic(f"eos-batch-{mode}", PARTITIONS),
            "stream_topic": odradek_broker.new_topic(f"eos-stream-{mode}", PARTITIONS),
            "checkpoint": str(tmp_path / f"checkpoint-{mode}"),
        }
        for mode in ("true", "false")
    ]
    result = run_driver(tmp_path, {
        "bootstrap": kafka_bootstrap, "input_topic": input_topic, "rows": ROWS,
        "partitions": PARTITIONS, "max_offsets": MAX_OFFSETS, "state_topic": unique_topic("eos-state"),
        "batch_faults": BATCH_FAULTS, "stream_faults": STREAM_FAULTS, "writes": writes,
    })
    assert result["stream_batches"] == {"true": [2000, 2000], "false": [2000, 2000]}

    expected_rows = {f"row-{i}".encode() for i in range(ROWS)}
    on, off = writes
    batch_on = committed_counts(kafka_bootstrap, on["batch_topic"])
    assert set(batch_on) == expected_rows
    assert duplicates(batch_on) == 0
    batch_off = committed_counts(kafka_bootstrap, off["batch_topic"])
    assert set(batch_off) == expected_rows
    assert duplicates(batch_off) == BATCH_FAILED_ROWS

    stream_on = committed_counts(kafka_bootstrap, on["stream_topic"])
    assert set(stream_on) == set(inputs)
    assert duplicates(stream_on) == 0
    stream_off = committed_counts(kafka_bootstrap, off["stream_topic"])
    assert set(stream_off) == set(inputs)
    assert duplicates(stream_off) == STREAM_FAILED_ROWS
