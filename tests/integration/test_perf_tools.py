"""`odradek perf produce|consume` against a real 1-broker cluster: sane numbers, exit 0;
bad arguments and unreachable brokers: one line on stderr, non-zero exit."""

from __future__ import annotations

import json
import re

import pytest

from support import run_odradek

RECORDS = 20_000
SIZE = 100


@pytest.fixture
def cluster_with_topic(cluster_factory):  # type: ignore[no-untyped-def]
    cluster = cluster_factory(1)
    created = run_odradek("topics", "--zookeeper", cluster.zookeeper_connect, "--create",
                          "--topic", "perf", "--partitions", "3", "--replication-factor", "1")
    assert created.returncode == 0, created.stderr
    return cluster


def test_produce_then_consume(cluster_with_topic) -> None:  # type: ignore[no-untyped-def]
    servers = cluster_with_topic.bootstrap_servers
    produced = run_odradek("perf", "produce", "--topic", "perf", "--num-records", str(RECORDS),
                           "--record-size", str(SIZE), "--throughput", "-1", "--bootstrap-server",
                           servers, "--producer-props", "acks=1", "linger.ms=5")
    assert produced.returncode == 0, produced.stderr
    lines = produced.stdout.strip().splitlines()
    assert len(lines) == 1
    m = re.fullmatch(
        r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
        r"([\d.]+) ms max latency, ([\d.]+) ms 50th, ([\d.]+) ms 95th, ([\d.]+) ms 99th, "
        r"([\d.]+) ms 99.9th\.", lines[0])
    assert m, lines[0]
    sent, rps, mbps, avg, mx, p50, p95, p99, p999 = (float(g) for g in m.groups())
    assert sent == RECORDS
    assert rps > 1000
    assert mbps == pytest.approx(rps * SIZE / 2**20, rel=0.01)
    assert 0 < p50 <= p95 <= p99 <= p999 <= mx
    assert 0 < avg <= mx < 30_000

    consumed = run_odradek("perf", "consume", "--topic", "perf", "--messages", str(RECORDS),
                           "--bootstrap-server", servers, "--json")
    assert consumed.returncode == 0, consumed.stderr
    summary = json.loads(consumed.stdout)
    assert summary["records"] == RECORDS
    assert summary["bytes"] == RECORDS * SIZE
    assert summary["records_per_sec"] > 1000
    assert summary["mb_per_sec"] == pytest.approx(summary["records_per_sec"] * SIZE / 2**20, rel=0.01)


def test_rate_limited_json(cluster_with_topic) -> None:  # type: ignore[no-untyped-def]
    produced = run_odradek("perf", "produce", "--topic", "perf", "--num-records", "2000",
                           "--record-size", "10", "--throughput", "2000", "--json",
                           "--producer-props", f"bootstrap.servers={cluster_with_topic.bootstrap_servers}")
    assert produced.returncode == 0, produced.stderr
    summary = json.loads(produced.stdout)
    assert summary["records"] == 2000 and summary["errors"] == 0
    assert 0.9 <= summary["elapsed_s"] < 10  # 2000 records at 2000/s: about a second
    assert summary["records_per_sec"] < 2300


def test_consume_more_than_there_is(cluster_with_topic) -> None:  # type: ignore[no-untyped-def]
    result = run_odradek("perf", "consume", "--topic", "perf", "--messages", "10", "--timeout", "1000",
                         "--bootstrap-server", cluster_with_topic.bootstrap_servers)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [
        "Error: consumed 0 of 10 records; none arrived for 1 s"]


@pytest.mark.parametrize("args", [
    ["produce", "--topic", "t", "--record-size", "100", "--bootstrap-server", "127.0.0.1:1"],
    ["produce", "--topic", "t", "--num-records", "0", "--record-size", "100", "--bootstrap-server", "x:1"],
    ["produce", "--topic", "t", "--num-records", "10", "--record-size", "100"],
    ["produce", "--topic", "t", "--num-records", "10", "--record-size", "100", "--bootstrap-server",
     "127.0.0.1:1", "--producer-props", "acks=1", "oops"],
    ["produce", "--topic", "t", "--num-records", "10", "--record-size", "100", "--bootstrap-server",
     "127.0.0.1:1", "--producer-props", "no.such.property=1"],
    ["consume", "--topic", "t", "--messages", "x", "--bootstrap-server", "127.0.0.1:1"],
    ["consume", "--topic", "t", "--messages", "10", "--bootstrap-server", "127.0.0.1:1", "--timeout", "2000"],
    ["nonsense"],
])
def test_bad_arguments_one_line(args: list[str]) -> None:
    result = run_odradek("perf", *args, timeout=60)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert result.stdout == ""


def test_unknown_topic(cluster_with_topic) -> None:  # type: ignore[no-untyped-def]
    result = run_odradek("perf", "produce", "--topic", "missing", "--num-records", "10", "--record-size",
                         "10", "--bootstrap-server", cluster_with_topic.bootstrap_servers)
    assert result.returncode != 0
    assert result.stderr.strip() == "Error: topic 'missing' does not exist"
