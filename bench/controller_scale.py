"""Control-plane scale benchmark.

1. Create one topic of 10,000 partitions, RF 3, on 3 brokers: seconds from the topic znode
   write until every partition has its state znode (leader and ISR written by the controller).
2. SIGKILL a broker leading about a third of them: seconds from the loss of its ZooKeeper
   session (its /brokers/ids znode vanishing) until every partition has a live leader again.
   Run once with a non-controller victim and once with the controller as the victim. Each
   kill waits first until the cluster has settled (every broker has applied the controller's
   requests, every ISR is full), so it measures failover, not the tail of the creation.

    .venv/bin/python bench/controller_scale.py [--partitions 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
import threading
import time
from pathlib import Path

from kazoo.client import KazooClient

from odradek.local.cluster import LocalCluster, broker_metadata
from odradek.zk.admin_zk_client import AdminZkClient
from odradek.zk.client import KafkaZkClient


def create_topic(connect: str, topic: str, partitions: int) -> float:
    async def run() -> float:
        zk = KafkaZkClient(connect, 30000)
        await zk.start()
        try:
            admin = AdminZkClient(zk)
            start = time.monotonic()
            await admin.create_topic(topic, partitions, 3)
            return start
        finally:
            await zk.close()

    return asyncio.run(run())


def wait_partition_states(zk: KazooClient, topic: str, partitions: int, timeout: float = 120) -> float:
    path = f"/brokers/topics/{topic}/partitions"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if zk.exists(path) and len(zk.get_children(path)) >= partitions:
            # The partition znode and its state are created in the same transaction.
            return time.monotonic()
        time.sleep(0.01)
    raise TimeoutError("partitions did not come online")


def wait_settled(cluster: LocalCluster, zk: KazooClient, topic: str, partitions: int, timeout: float = 300) -> float:
    """Wait until every partition has its full ISR in ZooKeeper and every broker has applied
    the controller's requests (the controller sends a broker its LeaderAndIsr before the
    UpdateMetadata, one at a time, so a broker whose metadata shows every partition with a
    leader has applied both). Returns the seconds waited."""
    start = time.monotonic()
    deadline = start + timeout
    while time.monotonic() < deadline:
        states = read_states(zk, topic, partitions)
        if all(len(s["isr"]) == 3 and s["leader"] >= 0 for s in states.values()) and all(
                sum(1 for t in broker_metadata("127.0.0.1", b.port, [topic], 30).topics
                    for p in t.partitions if p.leader_id >= 0) == partitions
                for b in cluster.brokers.values()):
            return time.monotonic() - start
        time.sleep(0.2)
    raise TimeoutError("the cluster did not settle")


def read_states(zk: KazooClient, topic: str, partitions: int) -> dict[int, dict]:
    asyncs = {p: zk.get_async(f"/brokers/topics/{topic}/partitions/{p}/state") for p in range(partitions)}
    return {p: json.loads(a.get()[0]) for p, a in asyncs.items()}


def failover(cluster: LocalCluster, zk: KazooClient, topic: str, partitions: int, victim: int) -> dict[str, float]:
    states = read_states(zk, topic, partitions)
    led = {p for p, s in states.items() if s["leader"] == victim}
    pending = set(led)
    lock = threading.Lock()
    done = threading.Event()
    finished_at: list[float] = []
    session_lost_at: list[float] = []

    def on_state(p: int):
        def watch(event) -> None:
            with lock:
                if p not in pending:
                    return  # no need to watch it any more (and the client may be closing)
            data, _ = zk.get(f"/brokers/topics/{topic}/partitions/{p}/state", watch=on_state(p))
            leader = json.loads(data)["leader"]
            with lock:
                if leader not in (victim, -1) and p in pending:
                    pending.discard(p)
                    if not pending:
                        finished_at.append(time.monotonic())
                        done.set()
        return watch

    for p in led:
        zk.exists(f"/brokers/topics/{topic}/partitions/{p}/state", watch=on_state(p))

    def on_broker(event) -> None:
        if event.type == "DELETED":
            session_lost_at.append(time.monotonic())

    zk.exists(f"/brokers/ids/{victim}", watch=on_broker)
    killed_at = time.monotonic()
    cluster.kill_broker(victim)
    if not done.wait(120):
        raise TimeoutError(f"{len(pending)} partitions still without a live leader")
    return {
        "led_partitions": len(led),
        "session_expiry_s": session_lost_at[0] - killed_at,
        "failover_s": finished_at[0] - session_lost_at[0],
    }


def controller_id(zk: KazooClient) -> int:
    return json.loads(zk.get("/controller")[0])["brokerid"]


def phase_times(log_path: Path) -> list[str]:
    """The controller's own timing lines for the events it processed."""
    return [line.strip() for line in log_path.read_text().splitlines()
            if re.search(r"Processed controller event|became controller|Broker failure callback|Controller failover", line)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=10000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="odradek-bench-") as tmp:
        cluster = LocalCluster(tmp, 3)
        cluster.start()
        try:
            zk = cluster.zk_client()
            topic = "scale"
            start = create_topic(cluster.zookeeper_connect, topic, args.partitions)
            online_at = wait_partition_states(zk, topic, args.partitions)
            states = read_states(zk, topic, args.partitions)
            assert all(s["leader"] >= 0 for s in states.values())
            print(f"create {args.partitions} partitions RF 3: every partition online with a leader in ZooKeeper "
                  f"after {online_at - start:.2f} s")
            settled = wait_settled(cluster, zk, topic, args.partitions)
            print(f"  (every broker had applied the LeaderAndIsr and UpdateMetadata {online_at - start + settled:.2f} s "
                  "after the topic was written)")
            ctrl = controller_id(zk)
            victim = next(b for b in range(3) if b != ctrl)
            result = failover(cluster, zk, topic, args.partitions, victim)
            print(f"kill broker {victim} (not the controller), leading {result['led_partitions']} partitions: "
                  f"session expired {result['session_expiry_s']:.1f} s after SIGKILL; every partition had a live "
                  f"leader {result['failover_s']:.2f} s after the session loss")
            cluster.start_broker(victim)
            settled = wait_settled(cluster, zk, topic, args.partitions)
            print(f"  (broker {victim} restarted and back in every ISR after {settled:.1f} s more)")
            ctrl = controller_id(zk)
            result = failover(cluster, zk, topic, args.partitions, ctrl)
            print(f"kill broker {ctrl} (the controller), leading {result['led_partitions']} partitions: "
                  f"every partition had a live leader {result['failover_s']:.2f} s after the session loss "
                  f"(includes the new controller's election and loading {args.partitions} partition states)")
            for b in cluster.brokers.values():
                for line in phase_times(b.config_path.parent / "server.log"):
                    print(f"  broker {b.broker_id}: {line}")
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
