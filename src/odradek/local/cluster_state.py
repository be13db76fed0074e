"""What ZooKeeper says about a running cluster, for the tools that watch one (the demo, the
durability and nemesis runs, the benchmarks): partition states, the controller, registered
brokers, and a wait for every partition's ISR to be full. Every path and codec is
``zk/zk_data.py``'s; the reads go through a plain (synchronous) kazoo client, such as
``LocalCluster.zk_client()``."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError

from odradek.zk.zk_data import (
    BrokerIdsZNode,
    BrokerIdZNode,
    BrokerInfo,
    ControllerZNode,
    LeaderAndIsr,
    TopicPartitionStateZNode,
    TopicZNode,
)

__all__ = ["ClusterState", "poll_until"]

_log = logging.getLogger(__name__)


def poll_until(condition: Callable[[], object], timeout_s: float, *, interval_s: float = 0.2,
               stop: threading.Event | None = None) -> bool:
    """Ask ``condition`` every ``interval_s`` until it holds (True), or until ``timeout_s``
    has passed or ``stop`` is set (False)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline or (stop is not None and stop.is_set()):
            return False
        time.sleep(interval_s)
    return True


class ClusterState:
    """Reads of a cluster's ZooKeeper state. A znode that is not there reads as None (a
    partition before the controller wrote its state, a controller between two elections);
    any other ZooKeeper error is raised, except by :meth:`wait_isr_full`, which asks again."""

    def __init__(self, zk: KazooClient) -> None:
        self.zk = zk

    def partition_state(self, topic: str, partition: int) -> LeaderAndIsr | None:
        """The partition's leader and ISR as the controller last wrote them."""
        try:
            data, stat = self.zk.get(TopicPartitionStateZNode.path(topic, partition))
        except NoNodeError:
            return None
        return TopicPartitionStateZNode.decode(data, stat.version)

    def partition_states(self, topic: str, partitions: int) -> dict[int, LeaderAndIsr | None]:
        """The state of partitions ``0..partitions-1`` of ``topic``."""
        return {p: self.partition_state(topic, p) for p in range(partitions)}

    def leader(self, topic: str, partition: int) -> int | None:
        """The partition's leader; None without a state or while it has no leader."""
        state = self.partition_state(topic, partition)
        return state.leader if state is not None and state.leader >= 0 else None

    def controller(self) -> int | None:
        """The active controller's broker id (None between two elections)."""
        try:
            return ControllerZNode.decode(self.zk.get(ControllerZNode.path)[0])
        except NoNodeError:
            return None

    def broker(self, broker_id: int) -> BrokerInfo | None:
        """The broker's registration, None while it is not registered."""
        try:
            return BrokerIdZNode.decode(broker_id, self.zk.get(BrokerIdZNode.path(broker_id))[0])
        except NoNodeError:
            return None

    def registered_at_ms(self, broker_id: int) -> int | None:
        """When the broker's registration znode was created, by ZooKeeper's clock (the
        broker's own ``timestamp`` follows its clock, which a clock fault may have stepped);
        None while it is not registered."""
        try:
            return int(self.zk.get(BrokerIdZNode.path(broker_id))[1].ctime)
        except NoNodeError:
            return None

    def registered_brokers(self) -> set[int]:
        """The ids of the brokers registered now."""
        return {int(child) for child in self.zk.get_children(BrokerIdsZNode.path)}

    def topic_exists(self, topic: str) -> bool:
        """The topic's assignment znode exists (the controller removes it when deletion ends)."""
        return self.zk.exists(TopicZNode.path(topic)) is not None

    def isr_full(self, topic: str, partitions: int, replicas: int, brokers: Collection[int] = ()) -> bool:
        """Every partition of ``topic`` has a leader and ``replicas`` in-sync replicas, and
        every broker in ``brokers`` is registered."""
        states = self.partition_states(topic, partitions).values()
        if not all(s is not None and s.leader >= 0 and len(s.isr) >= replicas for s in states):
            return False
        return not brokers or set(brokers) <= self.registered_brokers()

    def wait_isr_full(self, topic: str, partitions: int, replicas: int, *, brokers: Collection[int] = (),
                      timeout_s: float, stop: threading.Event | None = None,
                      log: Callable[[str], None] | None = None) -> bool:
        """Until :meth:`isr_full` (True), ``timeout_s`` or ``stop`` (False). A failed read
        (e.g. an ensemble without its quorum) goes to ``log`` and is tried again."""
        def full() -> bool:
            try:
                return self.isr_full(topic, partitions, replicas, brokers)
            except KazooException as e:
                (log or _log.warning)(f"ZooKeeper read failed: {e!r}")
                return False
        return poll_until(full, timeout_s, stop=stop)
