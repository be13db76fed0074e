"""ClusterState over a real ZooKeeper: znodes written with zk_data's codecs, as the controller
and the brokers write them, read back; and the wait for full ISRs."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from odradek.local.cluster_state import ClusterState, poll_until
from odradek.zk.client import ensure_chroot, split_chroot
from odradek.zk.zk_data import (
    BrokerIdZNode,
    BrokerInfo,
    ControllerZNode,
    EndPoint,
    LeaderAndIsr,
    TopicPartitionStateZNode,
    TopicZNode,
)


@pytest.fixture
def zk(zk_connect: str) -> Iterator[KazooClient]:
    hosts, chroot = split_chroot(zk_connect)
    ensure_chroot(hosts, chroot, 30)
    client = KazooClient(hosts=zk_connect, timeout=10)
    client.start(timeout=30)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def register(zk: KazooClient, broker_id: int) -> None:
    info = BrokerInfo(broker_id, (EndPoint("PLAINTEXT", "127.0.0.1", 9092 + broker_id),), timestamp_ms=1000 + broker_id)
    zk.create(BrokerIdZNode.path(broker_id), BrokerIdZNode.encode(info), makepath=True)


def write_state(zk: KazooClient, topic: str, partition: int, leader: int, isr: tuple[int, ...]) -> None:
    path = TopicPartitionStateZNode.path(topic, partition)
    data = TopicPartitionStateZNode.encode(LeaderAndIsr(leader, 3, isr, 1))
    if zk.exists(path):
        zk.set(path, data)
    else:
        zk.create(path, data, makepath=True)


def test_reads_what_the_controller_and_brokers_wrote(zk: KazooClient) -> None:
    state = ClusterState(zk)
    assert state.controller() is None and state.partition_state("t", 0) is None and not state.topic_exists("t")
    zk.create(ControllerZNode.path, ControllerZNode.encode(1))
    zk.create(TopicZNode.path("t"), b"{}", makepath=True)
    write_state(zk, "t", 0, 1, (1, 0))
    write_state(zk, "t", 1, -1, (0,))
    for broker_id in (0, 1):
        register(zk, broker_id)
    assert state.controller() == 1
    assert state.topic_exists("t")
    first = state.partition_state("t", 0)
    assert first is not None and (first.leader, first.leader_epoch, first.isr, first.zk_version) == (1, 3, (1, 0), 0)
    assert state.leader("t", 0) == 1 and state.leader("t", 1) is None and state.leader("t", 2) is None
    assert list(state.partition_states("t", 3)) == [0, 1, 2] and state.partition_states("t", 3)[2] is None
    assert state.registered_brokers() == {0, 1}
    registration = state.broker(1)
    assert registration is not None and registration.timestamp_ms == 1001 and state.broker(2) is None


def test_isr_full_needs_a_leader_every_replica_and_every_broker_registered(zk: KazooClient) -> None:
    state = ClusterState(zk)
    register(zk, 0)
    register(zk, 1)
    write_state(zk, "t", 0, 0, (0, 1))
    write_state(zk, "t", 1, -1, (0, 1))
    assert not state.isr_full("t", 2, 2)  # p1 has no leader
    write_state(zk, "t", 1, 1, (1, 0))
    assert state.isr_full("t", 2, 2, brokers=[0, 1])
    assert not state.isr_full("t", 3, 2)  # p2 has no state
    assert not state.isr_full("t", 2, 3)  # RF 3: one replica short
    assert not state.isr_full("t", 2, 2, brokers=[0, 1, 2])  # broker 2 is not registered
    assert not state.wait_isr_full("t", 2, 2, brokers=[0, 1, 2], timeout_s=0.3)
    threading.Timer(0.3, register, (zk, 2)).start()
    assert state.wait_isr_full("t", 2, 2, brokers=[0, 1, 2], timeout_s=30)


def test_a_failed_read_is_told_and_tried_again(zk: KazooClient) -> None:
    """A client that lost its connection raises on every read: the wait says so and times out."""
    register(zk, 0)
    write_state(zk, "t", 0, 0, (0,))
    told: list[str] = []
    zk.stop()
    assert not ClusterState(zk).wait_isr_full("t", 1, 1, timeout_s=0.5, log=told.append)
    assert told and all(line.startswith("ZooKeeper read failed: ") for line in told)


def test_poll_until_stops_when_told() -> None:
    stop = threading.Event()
    stop.set()
    assert not poll_until(lambda: False, 60, stop=stop)
    assert poll_until(lambda: True, 0)
