"""Kafka's small tools as ``odradek`` subcommands on a real 3-broker cluster, each run beside
Kafka's own on the same cluster and compared: ``delete-records`` (Kafka 2.8's
DeleteRecordsCommand), ``get-offsets`` (Kafka 3.9's GetOffsetShell), ``broker-api-versions``
(2.8's BrokerApiVersionsCommand), ``console-producer`` and ``console-consumer`` (2.8's
ConsoleProducer and ConsoleConsumer), ``replica-verification`` (2.8's ReplicaVerificationTool,
on healthy replicas and on a follower altered on disk); and what each refuses (one line, exit
code 1)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from odradek.local.cluster import LocalCluster
from odradek.local.zookeeper import find_java
from odradek.perf.kafka_ref import KafkaRefError, jvm_classpath
from support import (
    ClusterFactory,
    consume_all,
    create_topic,
    produce,
    run_kafka_tool,
    run_odradek,
    wait_until,
)
from support.transactions import txn_producer

DELETE_RECORDS = "kafka.admin.DeleteRecordsCommand"
GET_OFFSET_SHELL = "org.apache.kafka.tools.GetOffsetShell"
CONSOLE_CONSUMER = "kafka.tools.ConsoleConsumer"
CONSOLE_PRODUCER = "kafka.tools.ConsoleProducer"
# An hour ago: older records would be removed by time retention (7 days) while the tests run.
TIMESTAMP = (int(time.time()) - 3600) * 1000


def bootstrap(cluster: LocalCluster) -> str:
    return cluster.bootstrap_servers.split(",")[0]


@pytest.fixture(scope="module")
def offsets_topic(module_cluster: LocalCluster) -> str:
    """3 partitions with 5, 4 and 0 records, timestamps TIMESTAMP + i * 1000."""
    create_topic(module_cluster, "tools-offsets", 3, 2)
    for partition, count in ((0, 5), (1, 4)):
        for i in range(count):
            produce(module_cluster.bootstrap_servers, "tools-offsets", [(partition, None, b"r%d" % i)],
                    timestamp=TIMESTAMP + i * 1000)
    return "tools-offsets"


def test_delete_records_prints_what_kafka_prints(module_cluster: LocalCluster, tmp_path: Path) -> None:
    create_topic(module_cluster, "tools-delete", 3, 2)
    produce(module_cluster.bootstrap_servers, "tools-delete", [(p, None, b"x") for p in range(3) for _ in range(5)])
    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "tools-delete", "partition": 0, "offset": 2},
        {"topic": "tools-delete", "partition": 1, "offset": 99},
        {"topic": "tools-delete", "partition": 2, "offset": -1},
        {"topic": "no-such-topic", "partition": 0, "offset": 1}]}))
    args = ["--bootstrap-server", bootstrap(module_cluster), "--offset-json-file", str(spec)]
    ours = run_odradek("delete-records", *args)
    assert ours.returncode == 0, ours.stderr
    lines = ours.stdout.splitlines()
    assert lines[:2] == ["Executing records delete operation", "Records delete operation completed:"]
    assert sorted(lines[2:]) == [
        "partition: no-such-topic-0\terror: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
        "This server does not host this topic-partition.",
        "partition: tools-delete-0\tlow_watermark: 2",
        "partition: tools-delete-1\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException: "
        "The requested offset is not within the range of offsets maintained by the server.",
        "partition: tools-delete-2\tlow_watermark: 5"]
    earliest = run_odradek("get-offsets", "--bootstrap-server", bootstrap(module_cluster), "--topic", "tools-delete",
                           "--time", "earliest")
    assert earliest.stdout.splitlines() == ["tools-delete:0:2", "tools-delete:1:0", "tools-delete:2:5"]
    # Deleting below the same offsets again changes nothing: Kafka's tool must print the same,
    # in the order of its admin client's hash map.
    kafka = run_kafka_tool("kafka-2.8", DELETE_RECORDS, *args)
    assert kafka.returncode == 0, kafka.stderr
    assert ours.stdout == kafka.stdout


@pytest.mark.parametrize(("content", "message"), [
    ('{"partitions": [{"topic": "t", "partition": 0, "offset": 1}, {"topic": "t", "partition": 0, "offset": 2}]}',
     "Offset json file contains duplicate topic partitions: t-0"),
    ('{"partitions": [], "version": 2}', "Not supported version field value 2"),
    ('{"partitions": [{"topic": "t", "partition": 0}]}', "No such field exists: `offset`"),
    ("[1]", "Expected JSON object, received [1]"),
], ids=["duplicate", "version", "no-offset", "not-an-object"])
def test_delete_records_refuses_bad_files(module_cluster: LocalCluster, tmp_path: Path, content: str,
                                          message: str) -> None:
    spec = tmp_path / "offsets.json"
    spec.write_text(content)
    done = run_odradek("delete-records", "--bootstrap-server", bootstrap(module_cluster),
                       "--offset-json-file", str(spec))
    assert (done.returncode, done.stdout, done.stderr) == (1, "", f"Error: {message}\n")


@pytest.mark.parametrize("args", [
    (), ("--topic", "tools-off.*", "--time", "-2"), ("--topic", "tools-offsets", "--partitions", "0,2"),
    ("--topic-partitions", "tools-offsets:1-,tools-delete:0"), ("--time", "-3"), ("--time", "earliest"),
    ("--topic", "tools-offsets", "--time", str(TIMESTAMP + 2500)), ("--exclude-internal-topics",),
], ids=["all", "earliest", "partitions", "topic-partitions", "max-timestamp", "named-time", "timestamp",
        "no-internal"])
def test_get_offsets_prints_what_kafka_get_offset_shell_prints(module_cluster: LocalCluster, offsets_topic: str,
                                                               args: tuple[str, ...]) -> None:
    command = ["--bootstrap-server", bootstrap(module_cluster), *args]
    ours = run_odradek("get-offsets", *command)
    kafka = run_kafka_tool("kafka-3.9-tools", GET_OFFSET_SHELL, *command)
    assert ours.returncode == kafka.returncode == 0, (ours.stderr, kafka.stderr)
    assert ours.stdout == kafka.stdout, (ours.stderr, kafka.stderr)
    assert ours.stdout


def test_get_offsets_finds_offsets_by_time(module_cluster: LocalCluster, offsets_topic: str) -> None:
    def offsets(*args: str) -> list[str]:
        done = run_odradek("get-offsets", "--bootstrap-server", bootstrap(module_cluster),
                           "--topic", offsets_topic, *args)
        assert done.returncode == 0 and not done.stderr, done.stderr
        return done.stdout.splitlines()

    assert offsets() == ["tools-offsets:0:5", "tools-offsets:1:4", "tools-offsets:2:0"]
    # The first record at or after the time; none after the last (an empty partition has none).
    assert offsets("--time", str(TIMESTAMP + 2500)) == ["tools-offsets:0:3", "tools-offsets:1:3"]
    assert offsets("--time", str(TIMESTAMP + 4000)) == ["tools-offsets:0:4"]
    assert offsets("--time", "-3") == ["tools-offsets:0:4", "tools-offsets:1:3"]


@pytest.mark.parametrize(("args", "message"), [
    (("--topic", "nothing-matches"), "Could not match any topic-partitions with the specified filters"),
    (("--topic", "x", "--topic-partitions", "x"), "--topic-partitions cannot be used with --topic or --partitions"),
    (("--time", "soon"), "Malformed time argument soon. Please use -1 or latest / -2 or earliest / -3 or "
                         "max-timestamp / -4 or earliest-local / -5 or latest-tiered, or a specified long format "
                         "timestamp"),
    (("--partitions", "0,a"), "--partitions expects a comma separated list of numeric partition ids, but "
                              "received: 0,a"),
    (("--topic", "("), "( is an invalid regex."),
], ids=["no-match", "both-filters", "bad-time", "bad-partitions", "bad-regex"])
def test_get_offsets_refuses(module_cluster: LocalCluster, offsets_topic: str, args: tuple[str, ...],
                             message: str) -> None:
    done = run_odradek("get-offsets", "--bootstrap-server", bootstrap(module_cluster), *args)
    assert (done.returncode, done.stdout, done.stderr) == (1, "", f"Error: {message}\n")


def _blocks(text: str) -> list[str]:
    """A broker-api-versions output as its per-broker blocks, sorted (Kafka's tool prints the
    brokers in a random order)."""
    return sorted(re.split(r"(?<=\n\))\n", text.strip()))


def test_broker_api_versions_prints_what_kafka_prints(module_cluster: LocalCluster) -> None:
    ours = run_odradek("broker-api-versions", "--bootstrap-server", bootstrap(module_cluster))
    kafka = run_kafka_tool("kafka-2.8", "kafka.admin.BrokerApiVersionsCommand",
                           "--bootstrap-server", bootstrap(module_cluster))
    assert ours.returncode == kafka.returncode == 0, (ours.stderr, kafka.stderr)
    blocks = _blocks(ours.stdout)
    assert [b.splitlines()[0] for b in blocks] == sorted(
        f"{address} (id: {broker} rack: null) -> (" for broker, address in
        enumerate(module_cluster.bootstrap_servers.split(",")))
    assert "\tProduce(0): 0 to 9 [usable: 9]," in blocks[0].splitlines()
    assert blocks == _blocks(kafka.stdout)


def test_broker_api_versions_without_a_cluster() -> None:
    done = run_odradek("broker-api-versions", "--bootstrap-server", "127.0.0.1:1")
    assert done.returncode == 1 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and "could not connect" in done.stderr


LINES = "".join(f"key-{i}\tvalue {i}\n" for i in range(20)) + "no-value\t\n"
FORMAT = ("--property", "print.key=true", "--property", "print.partition=true", "--property", "print.offset=true")


def kafka_consume(cluster: LocalCluster, topic: str, count: int, *args: str) -> list[str]:
    done = run_kafka_tool("kafka-2.8", CONSOLE_CONSUMER, "--bootstrap-server", bootstrap(cluster), "--topic", topic,
                          "--from-beginning", "--max-messages", str(count), "--timeout-ms", "20000", *args)
    assert done.returncode == 0 and f"Processed a total of {count} messages" in done.stderr, done.stderr
    return sorted(done.stdout.splitlines())


def odradek_consume(cluster: LocalCluster, topic: str, *args: str) -> tuple[list[str], str]:
    done = run_odradek("console-consumer", "--bootstrap-server", bootstrap(cluster), "--topic", topic,
                       "--timeout-ms", "20000", *args)
    assert done.returncode == 0, done.stderr
    return sorted(done.stdout.splitlines()), done.stderr


def test_console_producer_writes_what_kafkas_writes(module_cluster: LocalCluster) -> None:
    """The same keyed lines through both producers land in the same partitions (Kafka's
    murmur2 placement) with the same keys and values, as Kafka's console consumer shows."""
    for topic in ("tools-console-ours", "tools-console-kafka"):
        create_topic(module_cluster, topic, 3, 2)
    args = ["--bootstrap-server", bootstrap(module_cluster), "--property", "parse.key=true"]
    ours = run_odradek("console-producer", *args, "--topic", "tools-console-ours", input=LINES)
    assert ours.returncode == 0 and ours.stdout == ours.stderr == "", ours.stderr
    kafka = run_kafka_tool("kafka-2.8", CONSOLE_PRODUCER, *args, "--topic", "tools-console-kafka", input=LINES)
    assert kafka.returncode == 0, kafka.stderr
    written = kafka_consume(module_cluster, "tools-console-ours", 21, *FORMAT)
    assert written == kafka_consume(module_cluster, "tools-console-kafka", 21, *FORMAT)
    assert sorted(line.split("\t", 2)[2] for line in written) == sorted(LINES.splitlines())


def test_console_producer_refuses_a_line_without_key(module_cluster: LocalCluster) -> None:
    create_topic(module_cluster, "tools-console-nokey", 1, 2)
    done = run_odradek("console-producer", "--bootstrap-server", bootstrap(module_cluster), "--topic",
                       "tools-console-nokey", "--property", "parse.key=true", input="k\tv\nnot keyed\n")
    assert (done.returncode, done.stderr) == (1, "Error: No key found on line 2: not keyed\n")
    # ignore.error: a value without key, as Kafka's reader makes it.
    done = run_odradek("console-producer", "--bootstrap-server", bootstrap(module_cluster), "--topic",
                       "tools-console-nokey", "--property", "parse.key=true", "--property", "ignore.error=true",
                       input="not keyed\n")
    assert done.returncode == 0, done.stderr
    assert [(m.key(), m.value()) for m in consume_all(module_cluster.bootstrap_servers, "tools-console-nokey", 1, 2)
            ] == [(b"k", b"v"), (None, b"not keyed")]


@pytest.mark.parametrize("props", [
    FORMAT,
    ("--property", "print.timestamp=true", "--property", "print.key=true", "--property", "key.separator= | "),
    ("--property", "print.headers=true", "--property", "print.value=false", "--property", "null.literal=NULL"),
], ids=["key-partition-offset", "timestamp-separator", "headers-no-value"])
def test_console_consumer_prints_what_kafkas_prints(module_cluster: LocalCluster, props: tuple[str, ...]) -> None:
    topic = "tools-console-read"
    if topic not in run_odradek("topics", "--bootstrap-server", bootstrap(module_cluster), "--list").stdout:
        create_topic(module_cluster, topic, 3, 2)
        produce(module_cluster.bootstrap_servers, topic, [(p, b"k%d" % i, b"v%d" % i) for i in range(4)
                                                          for p in range(3)], headers=[("h", b"1"), ("n", None)])
        produce(module_cluster.bootstrap_servers, topic, [(0, None, None)])
    ours, stderr = odradek_consume(module_cluster, topic, "--from-beginning", "--max-messages", "13", *props)
    assert stderr.endswith("Processed a total of 13 messages\n")
    assert ours == kafka_consume(module_cluster, topic, 13, *props)


def test_console_consumer_group_resumes_where_it_committed(module_cluster: LocalCluster) -> None:
    create_topic(module_cluster, "tools-console-group", 1, 2)
    produce(module_cluster.bootstrap_servers, "tools-console-group", [(0, None, b"m%d" % i) for i in range(5)])
    group = ("--group", "tools-console-group", "--from-beginning")
    first, _ = odradek_consume(module_cluster, "tools-console-group", *group, "--max-messages", "2")
    assert first == ["m0", "m1"]
    rest, stderr = odradek_consume(module_cluster, "tools-console-group", *group, "--max-messages", "3")
    assert rest == ["m2", "m3", "m4"] and stderr.endswith("Processed a total of 3 messages\n")


def test_console_consumer_isolation_level(module_cluster: LocalCluster) -> None:
    create_topic(module_cluster, "tools-console-txn", 1, 3)
    producer = txn_producer("confluent", module_cluster.bootstrap_servers)
    try:
        for value, commit in ((b"aborted", False), (b"committed", True)):
            producer.begin()
            producer.send("tools-console-txn", 0, value)
            producer.flush()  # written before the abort, not just dropped from the client's queue
            producer.commit() if commit else producer.abort()
    finally:
        producer.close()
    read = ("--from-beginning", "--partition", "0", "--timeout-ms", "3000")
    committed, _ = odradek_consume(module_cluster, "tools-console-txn", *read, "--isolation-level", "read_committed")
    everything, _ = odradek_consume(module_cluster, "tools-console-txn", *read)
    assert committed == ["committed"]
    assert everything == ["aborted", "committed"]


@pytest.mark.parametrize(("args", "message"), [
    (("--topic", "t", "--group", "g", "--partition", "0"), "Options group and partition cannot be specified together."),
    (("--topic", "t", "--offset", "3"), "The partition is required when offset is specified."),
    (("--topic", "t", "--isolation-level", "dirty"),
     "--isolation-level must be read_committed or read_uncommitted, got 'dirty'"),
    ((), "Exactly one of whitelist/topic is required."),
], ids=["group-and-partition", "offset-without-partition", "bad-isolation", "no-topic"])
def test_console_consumer_refuses(module_cluster: LocalCluster, args: tuple[str, ...], message: str) -> None:
    done = run_odradek("console-consumer", "--bootstrap-server", bootstrap(module_cluster), *args)
    assert (done.returncode, done.stdout, done.stderr) == (1, "", f"Error: {message}\n")


def _stream_lines(command: list[str], count: int, pattern: str, timeout: float = 90) -> list[str]:
    """The first ``count`` stdout lines of a long-running tool that match ``pattern``; then
    the tool is stopped."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               stdin=subprocess.DEVNULL)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(process.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        wait_until(lambda: len([line for line in lines if re.search(pattern, line)]) >= count, timeout=timeout,
                   message=f"{count} lines matching {pattern!r} from {command[-1]}")
    finally:
        process.terminate()
        process.wait(timeout=30)
        reader.join(timeout=10)
    return [line.rstrip("\n") for line in lines if re.search(pattern, line)][:count]


def _without_time(line: str) -> str:
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}: ", line), line
    return line[len("2000-01-01 00:00:00,000: "):]


def _verification(cluster: LocalCluster, topic: str, count: int, pattern: str) -> tuple[list[str], list[str]]:
    """What odradek's and Kafka's replica verification print first about ``topic``."""
    args = ["--broker-list", bootstrap(cluster), "--topic-white-list", topic, "--time", "-2",
            "--report-interval-ms", "300"]
    ours = _stream_lines([sys.executable, "-m", "odradek", "replica-verification", *args], count, pattern)
    try:
        classpath = os.pathsep.join(map(str, jvm_classpath("kafka-2.8")))
    except KafkaRefError as e:
        pytest.skip(f"Kafka's jars are not here: {e}")
    kafka = _stream_lines([find_java(), "-cp", classpath, "kafka.tools.ReplicaVerificationTool", *args], count, pattern)
    return [_without_time(line) for line in ours], [_without_time(line) for line in kafka]


def test_replica_verification_prints_what_kafka_prints(module_cluster: LocalCluster) -> None:
    create_topic(module_cluster, "tools-verify", 1, 3)
    for i in range(3):
        produce(module_cluster.bootstrap_servers, "tools-verify", [(0, None, b"batch %d record %d" % (i, n))
                                                                   for n in range(10)])
    ours, kafka = _verification(module_cluster, "tools-verify", 2, "max lag")
    assert ours == kafka == ["max lag is 0 for partition tools-verify-0 at offset 30 among 1 partitions"] * 2


def test_replica_verification_finds_a_follower_that_differs(cluster_factory: ClusterFactory) -> None:
    """A follower's copy of a batch altered on disk (its stored checksum) while it is down: both
    tools name the partition, the offset and both checksums."""
    cluster = cluster_factory(2)
    create_topic(cluster, "tools-differs", assignment=[[0, 1]], replication_factor=2)
    for i in range(3):
        produce(cluster.bootstrap_servers, "tools-differs", [(0, None, b"batch %d" % i)])
    cluster.stop_broker(1)
    segment = next((cluster.brokers[1].config_path.parent / "data").glob("tools-differs-0/*.log"))
    data = bytearray(segment.read_bytes())
    second = 12 + int.from_bytes(data[8:12], "big")  # where the second batch starts
    crc = int.from_bytes(data[second + 17:second + 21], "big")
    data[second + 17:second + 21] = (crc ^ 0xFFFF).to_bytes(4, "big")
    segment.write_bytes(data)
    cluster.start_broker(1)
    ours, kafka = _verification(cluster, "tools-differs", 1, "unmatched checksum")
    assert ours == kafka == [f"partition tools-differs-0 has unmatched checksum at offset 1; replica 0's checksum "
                             f"{crc}; replica 1's checksum {crc ^ 0xFFFF}"]


@pytest.mark.parametrize("args", [(), ("--print-data-log",), ("--deep-iteration",), ("--index-sanity-check",),
                                  ("--verify-index-only",)],
                         ids=["shallow", "print-data-log", "deep", "index-sanity-check", "verify-index-only"])
def test_dump_log_prints_what_kafka_dump_log_segments_prints(module_cluster: LocalCluster,
                                                             args: tuple[str, ...]) -> None:
    """A leader's segment, offset index and time index of a keyed, transactional topic, dumped
    by odradek and by Kafka 3.9's DumpLogSegments."""
    topic = "tools-dump"
    if not list((module_cluster.brokers[0].config_path.parent / "data").glob(f"{topic}-0")):
        create_topic(module_cluster, topic, assignment=[[0, 1]], replication_factor=2,
                     config={"index.interval.bytes": "100"})
        produce(module_cluster.bootstrap_servers, topic, [(0, b"key-%d" % i, b"value %d" % i) for i in range(30)],
                headers=[("h", b"x")])
        producer = txn_producer("confluent", module_cluster.bootstrap_servers)
        try:
            producer.begin()
            producer.send(topic, 0, b"in a transaction", b"tx")
            producer.commit()
        finally:
            producer.close()
    directory = module_cluster.brokers[0].config_path.parent / "data" / f"{topic}-0"
    files = ",".join(str(directory / f"00000000000000000000.{kind}") for kind in ("log", "index", "timeindex"))
    ours = run_odradek("dump-log", "--files", files, *args)
    kafka = run_kafka_tool("kafka-3.9", "kafka.tools.DumpLogSegments", "--files", files, *args)
    assert ours.returncode == kafka.returncode == 0, (ours.stderr, kafka.stderr)
    assert ours.stdout == kafka.stdout
    assert f"Dumping {directory / '00000000000000000000.log'}" in ours.stdout
