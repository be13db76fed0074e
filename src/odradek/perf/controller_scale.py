"""The control plane under many partitions (bench/controller_scale.py, bench/vs_kafka.py): how
long a cluster takes to bring a large topic online, and to move the leaderships of a broker
that is shut down, killed, or is the controller.

Everything is timed from ZooKeeper, which Kafka's and odradek's controllers both write: a
partition is online once its state znode names a live leader, a broker is gone once its
``/brokers/ids`` znode is, a controller is elected once ``/controller`` names it.  The topic is
written to ZooKeeper directly (as ``kafka-topics --zookeeper`` did), the same znode for either
controller to pick up."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient

from odradek.local.cluster import LocalCluster, broker_metadata
from odradek.zk.admin_zk_client import AdminZkClient
from odradek.zk.client import KafkaZkClient

__all__ = ["controlled_shutdown", "controller_id", "create_topic", "failover", "leaders", "read_states",
           "wait_partition_states", "wait_settled"]


def create_topic(connect: str, topic: str, partitions: int, replication_factor: int = 3) -> float:
    """Write ``topic``'s assignment to ZooKeeper; the monotonic time just before the write."""
    async def run() -> float:
        zk = KafkaZkClient(connect, 30000)
        await zk.start()
        try:
            admin = AdminZkClient(zk)
            start = time.monotonic()
            await admin.create_topic(topic, partitions, replication_factor)
            return start
        finally:
            await zk.close()

    return asyncio.run(run())


def wait_partition_states(zk: KazooClient, topic: str, partitions: int, timeout: float = 300) -> float:
    """Until every partition of ``topic`` has its state znode (a leader and ISR, written by
    the controller); the monotonic time then.  Kafka's controller creates the partition
    znodes first and their states after, so the states are looked for one by one."""
    path = f"/brokers/topics/{topic}/partitions"
    missing = set(range(partitions))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if zk.exists(path) and len(zk.get_children(path)) >= partitions:
            asyncs = {p: zk.exists_async(f"{path}/{p}/state") for p in missing}
            missing = {p for p, a in asyncs.items() if a.get() is None}
            if not missing:
                return time.monotonic()
        time.sleep(0.01)
    raise TimeoutError(f"{len(missing)} partitions of {topic} without a state after {timeout:.0f} s")


def read_states(zk: KazooClient, topic: str, partitions: int | list[int]) -> dict[int, dict[str, Any]]:
    """The state znodes (leader, ISR, epochs) of partitions ``0..partitions-1`` (or those listed)."""
    numbers = range(partitions) if isinstance(partitions, int) else partitions
    asyncs = {p: zk.get_async(f"/brokers/topics/{topic}/partitions/{p}/state") for p in numbers}
    return {p: json.loads(a.get()[0]) for p, a in asyncs.items()}


def leaders(zk: KazooClient, topic: str, partitions: int) -> dict[int, int]:
    """Partition -> leader, as ZooKeeper says."""
    return {p: s["leader"] for p, s in read_states(zk, topic, partitions).items()}


def wait_settled(cluster: LocalCluster, zk: KazooClient, topic: str, partitions: int, replication_factor: int = 3,
                 timeout: float = 300) -> float:
    """Wait until every partition has its full ISR in ZooKeeper and every broker has applied
    the controller's requests (the controller sends a broker its LeaderAndIsr before the
    UpdateMetadata, one at a time, so a broker whose metadata shows every partition with a
    leader has applied both). Returns the seconds waited."""
    start = time.monotonic()
    deadline = start + timeout
    while time.monotonic() < deadline:
        states = read_states(zk, topic, partitions)
        if all(len(s["isr"]) == replication_factor and s["leader"] >= 0 for s in states.values()) and all(
                sum(1 for t in broker_metadata("127.0.0.1", b.port, [topic], 30).topics
                    for p in t.partitions if p.leader_id >= 0) == partitions
                for b in cluster.brokers.values()):
            return time.monotonic() - start
        time.sleep(0.2)
    raise TimeoutError("the cluster did not settle")


def controller_id(zk: KazooClient) -> int:
    return json.loads(zk.get("/controller")[0])["brokerid"]


class _LeadersAway:
    """Watches the partitions of ``topic`` that ``victim`` leads until each has a leader that
    is neither ``victim`` nor none (-1); ``done`` is set then, ``finished_at`` holds when."""

    def __init__(self, zk: KazooClient, topic: str, partitions: int, victim: int) -> None:
        self.zk, self.topic, self.victim = zk, topic, victim
        self.led = {p for p, leader in leaders(zk, topic, partitions).items() if leader == victim}
        self.pending = set(self.led)
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.finished_at: float | None = None
        if not self.pending:
            self.finished_at = time.monotonic()
            self.done.set()
        for p in self.led:
            zk.exists(self._path(p), watch=self._watch(p))

    def _path(self, p: int) -> str:
        return f"/brokers/topics/{self.topic}/partitions/{p}/state"

    def _watch(self, p: int) -> Callable[[object], None]:
        def watch(_event: object) -> None:
            with self.lock:
                if p not in self.pending:
                    return  # no need to watch it any more (and the client may be closing)
            data, _ = self.zk.get(self._path(p), watch=self._watch(p))
            leader = json.loads(data)["leader"]
            with self.lock:
                if leader not in (self.victim, -1) and p in self.pending:
                    self.pending.discard(p)
                    if not self.pending:
                        self.finished_at = time.monotonic()
                        self.done.set()
        return watch

    def wait(self, timeout_s: float) -> float:
        if not self.done.wait(timeout_s):
            raise TimeoutError(f"{len(self.pending)} partitions still without a live leader")
        assert self.finished_at is not None
        return self.finished_at


def failover(cluster: LocalCluster, zk: KazooClient, topic: str, partitions: int, victim: int,
             timeout_s: float = 300) -> dict[str, float]:
    """SIGKILL ``victim``: the seconds from the kill to the loss of its ZooKeeper session, and
    from then until every partition it led has a live leader again (when it was the
    controller, another broker is elected as soon as the session is gone, and the time
    includes its loading the cluster's state)."""
    away = _LeadersAway(zk, topic, partitions, victim)
    session_lost: list[float] = []

    def on_broker(event: Any) -> None:
        if event.type == "DELETED":
            session_lost.append(time.monotonic())

    zk.exists(f"/brokers/ids/{victim}", watch=on_broker)
    killed_at = time.monotonic()
    cluster.kill_broker(victim)
    finished_at = away.wait(timeout_s)
    deadline = time.monotonic() + timeout_s
    while not session_lost:
        if time.monotonic() > deadline:
            raise TimeoutError(f"broker {victim}'s session loss not seen")
        time.sleep(0.01)
    return {"led_partitions": len(away.led), "session_expiry_s": session_lost[0] - killed_at,
            "failover_s": max(0.0, finished_at - session_lost[0])}


def controlled_shutdown(cluster: LocalCluster, zk: KazooClient, topic: str, partitions: int, victim: int,
                        timeout_s: float = 300) -> dict[str, float]:
    """SIGTERM ``victim`` (a controlled shutdown: it asks the controller to move its
    leaderships, then stops): the seconds until every partition it led has another leader,
    and until its process exited."""
    away = _LeadersAway(zk, topic, partitions, victim)
    start = time.monotonic()
    cluster.stop_broker(victim, timeout_s=timeout_s)
    exited = time.monotonic() - start
    moved = away.wait(timeout_s) - start
    return {"led_partitions": len(away.led), "leaders_moved_s": max(0.0, moved), "exit_s": exited}
