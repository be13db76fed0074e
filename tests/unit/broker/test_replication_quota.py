"""Replication throttles: the rate bookkeeping of ReplicationQuotaManager (a fake clock), and
the leader's fetch path holding back a throttled follower outside the ISR."""

from __future__ import annotations

from pathlib import Path

from control_helpers import lai_state, leader_and_isr
from test_replica_manager import _rm, become

from odradek.broker.delayed_fetch import FetchPartitionRequest
from odradek.broker.replication_quota import (
    UNBOUNDED,
    ReplicationQuotaManager,
    throttled_partitions,
)
from odradek.protocol.records import SimpleRecord, build_batch


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_throttled_replicas_are_those_of_this_broker_or_all() -> None:
    assert throttled_partitions("0:1, 0:2,1:2,3:1", 1) == frozenset({0, 3})
    assert throttled_partitions("0:2", 1) == frozenset()
    assert throttled_partitions("*", 1) is None
    quota = ReplicationQuotaManager(1, "leader.replication.throttled.replicas")
    quota.update_topic("t", {"leader.replication.throttled.replicas": "0:1,2:1"})
    quota.update_topic("u", {"leader.replication.throttled.replicas": "*"})
    assert [quota.is_throttled("t", p) for p in range(3)] == [True, False, True]
    assert quota.is_throttled("u", 7) and not quota.is_throttled("v", 0)
    assert not quota.active  # no rate yet
    quota.update_bound(1000)
    assert quota.active
    quota.update_topic("t", {})
    quota.update_topic("u", {"follower.replication.throttled.replicas": "*"})
    assert not quota.active and not quota.is_throttled("t", 0)


def test_the_rate_stays_within_the_bound_over_the_windows() -> None:
    clock = Clock()
    quota = ReplicationQuotaManager(1, "leader.replication.throttled.replicas", window_num=11, window_s=1.0,
                                    clock=clock)
    assert quota.allowance() == UNBOUNDED
    quota.update_bound(1000)
    assert quota.allowance() == 1000  # one window's worth to start with
    sent = 0
    for _ in range(300):  # 30 s of sending whatever is allowed, every 100 ms
        allowed = quota.allowance()
        if allowed > 0:
            quota.record(allowed)
            sent += allowed
        clock.now += 0.1
    assert 29_000 <= sent <= 31_000
    assert quota.is_quota_exceeded() or quota.allowance() <= 100
    quota.record(5000)  # a batch bigger than the allowance goes whole: the next ones wait
    assert quota.is_quota_exceeded() and 4.0 <= quota.delay_s() <= 5.1
    clock.now += 20  # idle: the windows expire
    assert quota.allowance() == 1000


def test_the_leader_sends_a_throttled_follower_outside_the_isr_no_more_than_the_rate(tmp_path: Path) -> None:
    rm, _ = _rm(tmp_path)  # broker 1
    become(rm, 1, leader_and_isr([lai_state(0, leader=1, leader_epoch=0, isr=(1, 0), replicas=(1, 0, 2))]))
    log = rm.get_partition("t", 0).log
    for i in range(20):
        log.append_as_leader(build_batch([SimpleRecord(bytes(900), key=str(i).encode())], base_offset=0), 0)
    request = [FetchPartitionRequest("t", 0, 0, 1 << 20)]

    def fetched(replica: int) -> int:
        return rm.read_from_local_log(replica, 1 << 20, request)[next(iter(rm.partitions))].size

    unthrottled = fetched(2)
    rm.leader_quota.update_bound(3000)
    rm.update_throttled_replicas("t", {"leader.replication.throttled.replicas": "0:1"})
    assert rm.leader_quota.active
    first = fetched(2)  # outside the ISR: what one window of 3000 B/s allows
    assert 0 < first <= 3000
    assert fetched(0) == unthrottled  # in the ISR: never held back, but its bytes count
    assert fetched(2) == 0  # the rate is used up
    rm.update_throttled_replicas("t", {})
    assert not rm.leader_quota.active and fetched(2) == unthrottled
