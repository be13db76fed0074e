"""Client quotas on a real broker with real clients: a confluent-kafka producer held to its
``producer_byte_rate`` while another beside it, producing at four times that, gets all of it
and is never throttled; a consumer held under its ``consumer_byte_rate``; the connection of a client over its ``request_percentage`` muted for the
throttle time it is told (KIP-219), and ``odradek configs`` printing what Kafka 2.8's own
kafka-configs.sh prints on the same cluster.

The broker measures rates over ``quota.window.num=2`` windows of one second (Kafka's default is
11): a client that sends flat out is let through in bursts whenever old samples leave the
window, each as large as what left, so its bytes in an arbitrary 20-second stretch match the
quota only to within about one whole window's worth (Kafka 2.8 behaves the same; with its
defaults a flat-out producer got 547.6 KB/s against 500 KB/s in its first 20 s, odradek 549.3,
and both 500 KB/s over 22 s).  Two windows keep that within a few percent.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.list_groups.v4 import request as list_groups_req
from kio.schema.list_groups.v4 import response as list_groups_resp

from odradek.local.cluster import LocalCluster
from odradek.local.zookeeper import EmbeddedZooKeeper
from odradek.net.client import BrokerConnection
from support import ClusterFactory, create_topic, run_odradek, wait_until
from support.kafka_tools import kafka_tool

QUOTA = 500_000  # bytes per second
SECONDS = 20
CLIENT = Path(__file__).parent.parent / "support" / "flat_out_client.py"


@pytest.fixture(scope="module")
def cluster(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    factory = ClusterFactory(zookeeper, tmp_path_factory.mktemp("quotas"))
    try:
        yield factory(1, overrides={"quota.window.num": "2"})
    finally:
        factory.stop_all()


def set_quota(cluster: LocalCluster, *args: str) -> None:
    """``odradek configs --alter`` with ``args``, then wait for the broker to apply it."""
    log = next(iter(cluster.brokers.values())).log_path
    before = log.read_text().count("Processed client quota change")
    done = run_odradek("configs", "--bootstrap-server", cluster.bootstrap_servers, "--alter", *args)
    assert done.returncode == 0, done.stderr
    wait_until(lambda: log.read_text().count("Processed client quota change") > before, timeout=30,
               message="the broker applied the quota")


def start_client(cluster: LocalCluster, mode: str, topic: str, client_id: str, seconds: float, *extra: str
                 ) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(CLIENT), mode, "--bootstrap-servers", cluster.bootstrap_servers,
                             "--topic", topic, "--client-id", client_id, "--seconds", str(seconds), *extra],
                            stdout=subprocess.PIPE, text=True)


def finished(process: subprocess.Popen[str]) -> tuple[list[tuple[float, int]], int]:
    out, _ = process.communicate(timeout=180)
    assert process.returncode == 0
    result = json.loads(out)
    return [(t, n) for t, n in result["seen"]], result["throttle_max_ms"]


def rate(seen: list[tuple[float, int]], start: float, seconds: float) -> float:
    """Bytes per second from ``start`` for ``seconds``."""
    return sum(n for t, n in seen if start <= t < start + seconds) / seconds


def test_a_producer_is_held_to_its_byte_rate_and_the_one_beside_it_is_not(cluster: LocalCluster) -> None:
    for topic in ("quota-held", "quota-free"):
        create_topic(cluster, topic, 1, 1)
    set_quota(cluster, "--entity-type", "clients", "--entity-name", "held",
              "--add-config", f"producer_byte_rate={QUOTA}")
    held = start_client(cluster, "produce", "quota-held", "held", SECONDS + 4)
    free = start_client(cluster, "produce", "quota-free", "free", SECONDS + 4, "--pace", str(4 * QUOTA))
    held_seen, held_throttle_ms = finished(held)
    free_seen, free_throttle_ms = finished(free)
    held_rate = rate(held_seen, held_seen[0][0], SECONDS)
    free_rate = rate(free_seen, free_seen[0][0], SECONDS)
    print(f"producers over {SECONDS} s: held {held_rate:,.0f} B/s (quota {QUOTA:,}), free {free_rate:,.0f} B/s "
          f"(its pace {4 * QUOTA:,}); longest throttle: held {held_throttle_ms} ms, free {free_throttle_ms} ms")
    assert abs(held_rate / QUOTA - 1) < 0.10
    assert held_throttle_ms > 0
    assert free_throttle_ms == 0
    assert abs(free_rate / (4 * QUOTA) - 1) < 0.10


def test_a_consumer_is_held_to_its_byte_rate_and_the_one_beside_it_is_not(cluster: LocalCluster) -> None:
    create_topic(cluster, "quota-read", 1, 1)
    filler = start_client(cluster, "produce", "quota-read", "filler", 6)
    finished(filler)
    set_quota(cluster, "--entity-type", "clients", "--entity-name", "slow-reader",
              "--add-config", f"consumer_byte_rate={QUOTA}")
    held_seen, held_throttle_ms = finished(start_client(cluster, "consume", "quota-read", "slow-reader", 12))
    held_rate = rate(held_seen, held_seen[0][0], 10)
    free_seen, free_throttle_ms = finished(start_client(cluster, "consume", "quota-read", "fast-reader", 4))
    free_rate = rate(free_seen, free_seen[0][0], 2)
    print(f"consumers: held {held_rate:,.0f} B/s over 10 s (quota {QUOTA:,}), free {free_rate:,.0f} B/s over 2 s; "
          f"longest throttle: held {held_throttle_ms} ms, free {free_throttle_ms} ms")
    # A fetch that would take the consumer over its quota is answered empty and the consumer
    # waits (Kafka's fetch quota): with two windows it gets well under its quota (39 % here;
    # Kafka 2.8 and odradek both gave 515 KB/s over 10 s with the default eleven).
    assert QUOTA * 0.2 < held_rate < QUOTA * 1.1
    assert held_throttle_ms > 0 and free_throttle_ms == 0
    assert free_rate > 3 * QUOTA


def test_a_client_over_its_request_time_is_muted_for_the_time_it_is_told(cluster: LocalCluster) -> None:
    set_quota(cluster, "--entity-type", "clients", "--entity-name", "chatty", "--add-config",
              "request_percentage=0.1")  # 1 ms of request time a second: throttles of a few hundred ms

    async def exchange(client_id: str) -> list[tuple[float, float, int]]:
        """(sent, answered, throttle ms) of ListGroups requests sent one after another for 3 s."""
        host, port = cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
        conn = BrokerConnection(host, int(port), client_id)
        await conn.connect(timeout_s=10)
        exchanges = []
        try:
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                sent = time.monotonic()
                response = await conn.send(list_groups_req.ListGroupsRequest(states_filter=()),
                                           list_groups_resp.ListGroupsResponse, timeout_s=60)
                exchanges.append((sent, time.monotonic(), int(response.throttle_time.total_seconds() * 1000)))
        finally:
            await conn.close()
        return exchanges

    chatty = asyncio.run(exchange("chatty"))
    throttled = [(i, e) for i, e in enumerate(chatty[:-1]) if e[2] > 0]
    assert throttled, chatty
    for i, (sent, _, throttle_ms) in throttled:
        # The answer came at once; the next request was not read before the throttle time was up.
        # The mute starts when the broker handles the request (Kafka's ThrottledChannel), after
        # it was sent and before the client has read the answer, so the bound runs from the send
        # (less the event loop's timer resolution).
        next_answered = chatty[i + 1][1]
        assert next_answered - sent >= throttle_ms / 1000 - 0.005
    assert all(throttle_ms == 0 for _, _, throttle_ms in asyncio.run(exchange("quiet")))


def test_configs_prints_what_kafka_configs_prints(cluster: LocalCluster) -> None:
    """odradek configs and Kafka 2.8's kafka-configs.sh on the same cluster, side by side (each
    of Kafka's runs starts a JVM, so they are few)."""
    bootstrap = ["--bootstrap-server", cluster.bootstrap_servers]
    alterations = [
        (["--entity-type", "clients", "--entity-name", "app1"],
         "producer_byte_rate=10485760,consumer_byte_rate=2048,request_percentage=12.5"),
        (["--entity-type", "users", "--entity-name", "alice"], "producer_byte_rate=1024"),
        (["--entity-type", "users", "--entity-default"], "consumer_byte_rate=5000"),
        (["--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "app1"],
         "request_percentage=50"),
        (["--entity-type", "clients", "--entity-default"], "producer_byte_rate=1000000"),
        (["--user-defaults", "--client", "app"], "producer_byte_rate=1"),
        (["--entity-type", "users", "--entity-name", "bob", "--entity-type", "clients", "--entity-default"],
         "request_percentage=5"),
    ]
    for entity, config in alterations:
        done = run_odradek("configs", *bootstrap, "--alter", *entity, "--add-config", config)
        assert done.returncode == 0, done.stderr
    # Kafka's tool alters through odradek's AlterClientQuotas alike, and says the same.
    for entity, config in (alterations[3], alterations[5]):
        ours = run_odradek("configs", *bootstrap, "--alter", *entity, "--add-config", config)
        kafkas = kafka_tool("kafka.admin.ConfigCommand", *bootstrap, "--alter", *entity, "--add-config", config)
        assert (ours.returncode, ours.stdout) == (kafkas.returncode, kafkas.stdout), (ours.stderr, kafkas.stderr)
    assert run_odradek("configs", *bootstrap, "--alter", "--entity-type", "users", "--entity-name", "alice",
                       "--delete-config", "consumer_byte_rate").returncode == 1  # it has none
    for describe in (["--entity-type", "clients"], ["--entity-type", "users"],
                     ["--entity-type", "users", "--entity-type", "clients"],
                     ["--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients"],
                     ["--client-defaults"]):
        ours = run_odradek("configs", *bootstrap, "--describe", *describe)
        kafkas = kafka_tool("kafka.admin.ConfigCommand", *bootstrap, "--describe", *describe)
        assert ours.returncode == kafkas.returncode == 0, (ours.stderr, kafkas.stderr)
        assert ours.stdout == kafkas.stdout, describe
    assert "Quota configs for client-id 'app1' are consumer_byte_rate=2048.0, producer_byte_rate=1.048576E7, " \
           "request_percentage=12.5\n" in run_odradek("configs", *bootstrap, "--describe", "--entity-type",
                                                       "clients").stdout
