"""How the streams and spark-kafka suites judge what they read, without a cluster: the word
count's output runs (a duplicate or a loss must fail) and the flights tables' comparison."""

from __future__ import annotations

import math

from compat.spark_kafka_job import evidence
from compat.suites import spark_kafka, streams


def test_the_input_and_its_counts_are_fixed_by_the_seed() -> None:
    plan = streams.Plan(lines=50, words=4, vocabulary=10)
    lines = streams.input_lines(plan, seed=7)
    assert lines == streams.input_lines(plan, seed=7) != streams.input_lines(plan, seed=8)
    counts = streams.expected_counts(lines)
    assert sum(counts.values()) == 200
    assert set(counts) <= {f"w{i}" for i in range(10)}  # "W3," counts as "w3"
    assert streams.expected_counts(["The cat, the HAT!", ""]) == {"the": 2, "cat": 1, "hat": 1}


def _check(*counts: tuple[str, str], records: int, caught_up: bool = True) -> str:
    lines = ["VERSION\tkafka-streams\t3.9.2", "some log line", "WAITED\tmetadata of out\t6.5"]
    lines += [f"COUNTS\t{word}\t{runs}" for word, runs in counts]
    lines.append(f"END\t{records}\t{'caught-up' if caught_up else 'timed-out'}\t0:5/5,1:3/3")
    return "\n".join(lines)


def test_exact_counts_pass() -> None:
    got = streams.parse_check(_check(("a", "1-3"), ("b", "1"), records=4))
    assert got.version == "3.9.2" and got.records == 4 and got.caught_up and got.positions == "0:5/5,1:3/3"
    assert got.waited == ["metadata of out: 6.5 s"]
    assert streams.judge({"a": 3, "b": 1}, 1, got) == []
    twice = streams.parse_check(_check(("a", "1-3,1-3"), ("b", "1,1"), records=8))
    assert streams.judge({"a": 3, "b": 1}, 2, twice) == []


def test_a_duplicate_a_loss_an_intruder_or_a_stall_fail() -> None:
    duplicate = streams.parse_check(_check(("a", "1-2,2-3"), ("b", "1"), records=5))
    assert streams.judge({"a": 3, "b": 1}, 1, duplicate) == ["'a': counts 1-2,2-3 instead of 1-3"]
    lost = streams.parse_check(_check(("a", "1-3"), records=3))
    assert streams.judge({"a": 3, "b": 1}, 1, lost) == ["'b': counts (none) instead of 1"]
    intruder = streams.parse_check(_check(("a", "1-3"), ("b", "1"), ("c", "1"), records=5))
    assert streams.judge({"a": 3, "b": 1}, 1, intruder) == ["'c': not in the input, counts 1"]
    stalled = streams.parse_check(_check(("a", "1-3"), ("b", "1"), records=4, caught_up=False))
    assert streams.judge({"a": 3, "b": 1}, 1, stalled)[0].startswith("the read_committed reader did not catch up")
    assert streams.judge({"a": 1}, 1, streams.parse_check("")) == ["the check printed no END line"]


def test_flights_tables_compare_by_group() -> None:
    row = {"carrier": "AA", "origin": "*", "flights": 10, "departed": 9, "mean_dep_delay": 5.5,
           "p90_dep_delay": 12.0, "share_delayed_15": 0.25}
    cancelled = {**row, "carrier": "ZZ", "departed": 0, "mean_dep_delay": math.nan, "p90_dep_delay": None}
    assert spark_kafka.table_differences([row, cancelled], [
        {**cancelled, "mean_dep_delay": None}, {**row, "mean_dep_delay": 5.5 + 1e-13}]) == []
    assert spark_kafka.table_differences([row, cancelled], [{**row, "flights": 11}]) == [
        "row ZZ/* missing", "AA/* flights: 11 instead of 10"]
    assert spark_kafka.table_differences([row], [row, cancelled]) == ["row ZZ/* unexpected"]


def test_the_job_lines_and_the_connector_version_are_read() -> None:
    stdout = "\n".join([
        "26/11/26 23:40:01 WARN NativeCodeLoader: ...",
        '{"versions": {"pyspark": "4.3.0", "spark": "4.3.0"}}',
        '{"format": "kafka", "error": "Py4JJavaError: boom"}',
        '{"format": "odradek", "input_rows": 3, "batches": 1, "seconds": 2.0, "table": []}',
        '{"written": "odradek", "read": "kafka", "error": "no connector"}',
    ])
    job = spark_kafka.parse_job(stdout)
    assert job.versions == {"pyspark": "4.3.0", "spark": "4.3.0"}
    assert job.runs["kafka"]["error"] == "Py4JJavaError: boom" and job.runs["odradek"]["input_rows"] == 3
    assert job.cross[("odradek", "kafka")]["error"] == "no connector"
    assert spark_kafka.connector_version(["/c/commons-pool2-2.13.1.jar", "/c/spark-sql-kafka-0-10_2.13-4.2.0.jar"]) \
        == "4.2.0"


def test_a_java_error_is_cut_to_its_evidence() -> None:
    trace = ("Py4JJavaError: An error occurred while calling o77.start.\n"
             ": java.lang.NoSuchMethodError: 'void org.apache.spark.Foo.bar()'\n"
             "\tat org.apache.spark.sql.kafka010.KafkaSourceProvider.x(KafkaSourceProvider.scala:1)\n"
             "\tat java.base/java.lang.Thread.run(Thread.java:840)\n"
             "Caused by: java.lang.ClassNotFoundException: org.apache.spark.Foo\n"
             "\tat more\n")
    assert evidence(trace) == ("Py4JJavaError: An error occurred while calling o77.start. | : java.lang."
                               "NoSuchMethodError: 'void org.apache.spark.Foo.bar()' | Caused by: java.lang."
                               "ClassNotFoundException: org.apache.spark.Foo")
