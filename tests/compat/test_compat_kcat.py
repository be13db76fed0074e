"""kcat (the Debian package; its own librdkafka) against a 3-broker cluster: metadata
listing (-L, text and JSON), producing keyed records from stdin (-P -K:) with headers and
each compression codec, consuming (-C -e) with a format string, and offset queries (-Q).

kcat -C without -G is a simple consumer (assign at explicit offsets): no group coordinator.
kcat -P cannot set record timestamps: they are the producer's clock, checked against the
time window of the run and read back identically.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time

import pytest

from odradek.local.cluster import LocalCluster
from support import (
    Rec,
    address_of,
    assert_read_back,
    batch_headers,
    controller_of,
    create_topic,
    end_offsets,
    make_records,
    partition_state,
)

pytestmark = pytest.mark.skipif(shutil.which("kcat") is None,
                                reason="kcat is not installed (sh scripts/bootstrap --test installs it)")

CODECS = ("none", "snappy", "zstd", "gzip", "lz4")
FORMAT = r"%p\t%o\t%k\t%s\t%h\t%T\n"


def kcat(cluster: LocalCluster, *args: str, input: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["kcat", "-b", cluster.bootstrap_servers, *args], input=input, capture_output=True,
                            text=True, timeout=timeout, stdin=None if input is not None else subprocess.DEVNULL)
    assert result.returncode == 0, f"kcat {' '.join(args)} exited {result.returncode}: {result.stderr}"
    return result


# ----------------------------------------------------------------------------- -L

_BROKER = re.compile(r"^  broker (\d+) at ([\d.]+):(\d+)( \(controller\))?$")
_TOPIC = re.compile(r'^  topic "([^"]+)" with (\d+) partitions:(?: (.*))?$')
_PARTITION = re.compile(r"^    partition (\d+), leader (-?\d+), replicas: ([\d,]*), isrs: ([\d,]*)(?:, (.*))?$")


def parse_listing(text: str) -> tuple[dict[int, tuple[str, int]], int | None, dict[str, dict]]:
    """kcat -L's text: brokers {id: (host, port)}, controller id, topics
    {name: {"error": str|None, "partitions": {p: (leader, replicas, isrs, error)}}}."""
    brokers: dict[int, tuple[str, int]] = {}
    controller = None
    topics: dict[str, dict] = {}
    current: dict | None = None
    for line in text.splitlines():
        if m := _BROKER.match(line):
            brokers[int(m[1])] = (m[2], int(m[3]))
            if m[4]:
                controller = int(m[1])
        elif m := _TOPIC.match(line):
            current = topics[m[1]] = {"count": int(m[2]), "error": m[3], "partitions": {}}
        elif m := _PARTITION.match(line):
            assert current is not None, line
            ids = [tuple(int(x) for x in group.split(",") if x) for group in (m[3], m[4])]
            current["partitions"][int(m[1])] = (int(m[2]), ids[0], ids[1], m[5])
        else:
            assert line.startswith(("Metadata for", " ")), f"unexpected kcat -L line: {line!r}"
    return brokers, controller, topics


def test_metadata_listing(module_cluster: LocalCluster) -> None:
    cluster = module_cluster
    create_topic(cluster, "kcat-list-a", 3, 3)
    create_topic(cluster, "kcat-list-b", 5, 2)
    brokers, controller, topics = parse_listing(kcat(cluster, "-L").stdout)
    assert brokers == {bid: ("127.0.0.1", b.port) for bid, b in cluster.brokers.items()}
    assert controller == controller_of(cluster)[0]
    zk = cluster.zk_client()
    for name, count, rf in (("kcat-list-a", 3, 3), ("kcat-list-b", 5, 2)):
        t = topics[name]
        assert t["error"] is None and t["count"] == count and sorted(t["partitions"]) == list(range(count))
        assignment = json.loads(zk.get(f"/brokers/topics/{name}")[0])["partitions"]
        for p, (leader, replicas, isrs, error) in t["partitions"].items():
            state = partition_state(cluster, name, p)
            assert state is not None
            assert error is None
            assert list(replicas) == assignment[str(p)] and len(replicas) == rf
            assert leader == state["leader"] and sorted(isrs) == sorted(state["isr"]) == sorted(replicas)

    # One topic, and one that does not exist (not created: auto-creation is off).
    _, _, only = parse_listing(kcat(cluster, "-L", "-t", "kcat-list-a").stdout)
    assert list(only) == ["kcat-list-a"] and only["kcat-list-a"] == topics["kcat-list-a"]
    _, _, missing = parse_listing(kcat(cluster, "-L", "-t", "kcat-no-such-topic").stdout)
    assert missing == {"kcat-no-such-topic": {"count": 0, "error": "Broker: Unknown topic or partition",
                                              "partitions": {}}}
    assert cluster.zk_client().exists("/brokers/topics/kcat-no-such-topic") is None

    # JSON (-J) says the same.
    listing = json.loads(kcat(cluster, "-L", "-J", "-t", "kcat-list-b").stdout)
    assert listing["controllerid"] == controller
    assert {b["id"]: b["name"] for b in listing["brokers"]} == {
        bid: f"127.0.0.1:{b.port}" for bid, b in cluster.brokers.items()}
    (t,) = listing["topics"]
    assert {p["partition"]: (p["leader"], tuple(r["id"] for r in p["replicas"]), tuple(r["id"] for r in p["isrs"]))
            for p in t["partitions"]} == {p: v[:3] for p, v in topics["kcat-list-b"]["partitions"].items()}


# ----------------------------------------------------------------------------- -P / -C / -Q

_DELIVERED = re.compile(r"^% Message delivered to partition (\d+) \(offset (\d+)\)", re.M)


def test_produce_consume_query(module_cluster: LocalCluster) -> None:
    cluster = module_cluster
    topic = "kcat-records"
    info = create_topic(cluster, topic, len(CODECS), 3)
    records = make_records(250, seed=41, text_only=True)
    # One kcat -P per partition, each with its own codec and headers (-H applies to every
    # record of a run), so every stdin line's delivery report (printed at -v -v -v, in order
    # per partition) maps to one record.
    per_partition = {p: records[p::len(CODECS)] for p in info}
    acked: list[Rec] = []
    before = int(time.time() * 1000)
    for p, recs in per_partition.items():
        lines = "".join(f"{r.key.decode()}:{r.value.decode()}\n" for r in recs)  # type: ignore[union-attr]
        result = kcat(cluster, "-P", "-t", topic, "-p", str(p), "-K:", "-z", CODECS[p],
                      "-H", f"codec={CODECS[p]}", "-H", f"partition={p}", "-v", "-v", "-v", input=lines)
        delivered = [(int(a), int(b)) for a, b in _DELIVERED.findall(result.stderr)]
        assert delivered == [(p, i) for i in range(len(recs))], result.stderr[-2000:]
        for (partition, offset), r in zip(delivered, recs, strict=True):
            acked.append(Rec(partition, offset, r.key, r.value,
                             (("codec", CODECS[p].encode()), ("partition", str(p).encode())), -1))
    after = int(time.time() * 1000)
    counts = {p: len(recs) for p, recs in per_partition.items()}
    assert end_offsets(cluster.bootstrap_servers, topic, len(info)) == counts

    for p, meta in info.items():  # each partition's batches carry the codec kcat was told
        codecs = {h.compression.name.lower() for h in batch_headers(address_of(cluster, meta.leader), topic, p)}
        assert codecs == {CODECS[p]}, (p, codecs)

    out = kcat(cluster, "-C", "-t", topic, "-o", "beginning", "-e", "-f", FORMAT)
    consumed = []
    for line in out.stdout.splitlines():
        p, offset, key, value, headers, ts = line.split("\t")
        consumed.append(Rec(int(p), int(offset), key.encode(), value.encode(),
                            tuple((k, v.encode()) for k, v in (h.split("=", 1) for h in headers.split(","))),
                            int(ts)))
    assert all(before <= r.timestamp <= after for r in consumed), (before, after)
    timestamps = {(r.partition, r.offset): r.timestamp for r in consumed}
    acked = [Rec(r.partition, r.offset, r.key, r.value, r.headers, timestamps.get((r.partition, r.offset), -1))
             for r in acked]
    assert_read_back(acked, consumed)

    # One partition from an offset inside it, a fixed count.
    part = kcat(cluster, "-C", "-t", topic, "-p", "2", "-o", "10", "-c", "5", "-f", FORMAT)
    assert [tuple(line.split("\t")[:4]) for line in part.stdout.splitlines()] == [
        ("2", str(r.offset), r.key.decode(), r.value.decode())  # type: ignore[union-attr]
        for r in acked if r.partition == 2 and 10 <= r.offset < 15]

    # -Q: the first offset whose timestamp is >= the one asked (ListOffsets by time).
    for p in info:
        mine = sorted((r for r in consumed if r.partition == p), key=lambda r: r.offset)
        probe = mine[len(mine) // 2].timestamp
        want = next(r.offset for r in mine if r.timestamp >= probe)
        q = kcat(cluster, "-Q", "-t", f"{topic}:{p}:{probe}")
        assert q.stdout.split() == [topic, f"[{p}]", "offset", str(want)], q.stdout
