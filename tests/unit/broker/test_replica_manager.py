"""ReplicaManager's control plane: LeaderAndIsr (becomeLeaderOrFollower), StopReplica and
UpdateMetadata, with Kafka's controller-epoch, broker-epoch and leader-epoch rules."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from control_helpers import (
    OTHER_TOPIC_ID,
    TOPIC_ID,
    lai_state,
    leader_and_isr,
    stop_replica,
    um_broker,
    um_state,
    update_metadata,
)

from odradek.broker.metadata_cache import MetadataCache
from odradek.broker.partition import Partition
from odradek.broker.replica_manager import ReplicaManager, TimeSlice
from odradek.common import TopicPartition
from odradek.config import KafkaConfig
from odradek.log.log_manager import LogManager, LogManagerConfig
from odradek.protocol import control
from odradek.protocol.errors import ErrorCode
from odradek.protocol.framing import decode_response, encode_response

BROKER = 1
BROKER_EPOCH = 100
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


class Hooks:
    def __init__(self, rm: ReplicaManager) -> None:
        self.leaders: list[list[str]] = []
        self.followers: list[list[str]] = []
        self.stopped: list[list[tuple[bool, TopicPartition, bool]]] = []
        rm.on_become_leader.append(lambda ps: self.leaders.append([p.name for p in ps]))
        rm.on_become_follower.append(lambda ps: self.followers.append([p.name for p in ps]))
        rm.on_stop_replica.append(
            lambda items: self.stopped.append([(p is not None, t, d) for p, t, d in items]))


def _rm(tmp_path: Path) -> tuple[ReplicaManager, Hooks]:
    config = KafkaConfig.from_props({"broker.id": str(BROKER), "zookeeper.connect": "unused:2181",
                                     "log.dirs": str(tmp_path / "logs")})
    log_manager = LogManager(LogManagerConfig.from_kafka_config(config), config.log_config())
    log_manager.startup()
    rm = ReplicaManager(BROKER, config, MetadataCache(BROKER), log_manager, broker_epoch=lambda: BROKER_EPOCH)
    return rm, Hooks(rm)


def become(rm: ReplicaManager, correlation_id: int, request: control.LeaderAndIsrRequest
           ) -> control.LeaderAndIsrResponse:
    """Apply a LeaderAndIsr request as the broker does (under the state-change lock)."""
    async def apply() -> control.LeaderAndIsrResponse:
        async with rm.state_change_lock:
            return await rm.become_leader_or_follower(correlation_id, request)
    return asyncio.run(apply())


def leos(partition: Partition) -> dict[int, int]:
    """The leader's view of its followers' log end offsets."""
    return {r: state.log_end_offset for r, state in partition.remote.items()}


def _errors(response: control.LeaderAndIsrResponse) -> dict[tuple[object, int], int]:
    return {(t.topic_id, p.partition_index): int(p.error_code) for t in response.topics for p in t.partition_errors}

# ----------------------------------------------------------------------------- LeaderAndIsr


def test_become_leader_and_follower_bookkeeping(tmp_path: Path) -> None:
    rm, hooks = _rm(tmp_path)
    response = become(rm, 7, leader_and_isr([
        lai_state(0, leader=1, leader_epoch=3, isr=(1, 2), replicas=(1, 2, 0), zk_version=4, controller_epoch=2),
        lai_state(1, leader=2, leader_epoch=5, isr=(2, 1), replicas=(2, 1)),
    ], controller_epoch=2))

    assert response.error_code == ErrorCode.none
    assert _errors(response) == {(TOPIC_ID, 0): 0, (TOPIC_ID, 1): 0}
    assert rm.controller_epoch == 2

    leader = rm.get_partition("t", 0)
    assert leader is not None and leader.is_leader
    assert (leader.leader_id, leader.leader_epoch, leader.isr, leader.replicas) == (1, 3, (1, 2), (1, 2, 0))
    assert (leader.partition_epoch, leader.controller_epoch, leader.topic_id) == (4, 2, TOPIC_ID)
    # A new leader does not know where its followers are.
    assert leos(leader) == {2: -1, 0: -1}

    follower = rm.get_partition("t", 1)
    assert follower is not None and not follower.is_leader
    assert (follower.leader_id, follower.leader_epoch, follower.isr, follower.remote) == (2, 5, (2, 1), {})

    assert hooks.leaders == [["t-0"]] and hooks.followers == [["t-1"]]
    assert [p.name for p in rm.leader_partitions()] == ["t-0"]


def test_request_from_a_stale_controller_epoch_is_refused_whole(tmp_path: Path) -> None:
    rm, hooks = _rm(tmp_path)
    become(rm, 1, leader_and_isr([lai_state(0, 1, 3, (1,), (1,))], controller_epoch=5))
    response = become(rm, 2, leader_and_isr(
        [lai_state(0, 2, 9, (2, 1), (1, 2)), lai_state(1, 1, 0, (1,), (1,))], controller_epoch=4))

    assert response.error_code == ErrorCode.stale_controller_epoch
    assert set(_errors(response).values()) == {int(ErrorCode.stale_controller_epoch)}
    assert len(_errors(response)) == 2
    assert rm.controller_epoch == 5
    assert rm.get_partition("t", 0).leader_epoch == 3  # type: ignore[union-attr]
    assert rm.get_partition("t", 1) is None
    assert len(hooks.leaders) == 1 and hooks.followers == []


def test_request_with_a_stale_broker_epoch_is_refused_whole(tmp_path: Path) -> None:
    rm, hooks = _rm(tmp_path)
    response = become(rm, 1, leader_and_isr(
        [lai_state(0, 1, 0, (1,), (1,))], broker_epoch=BROKER_EPOCH - 1))
    assert response.error_code == ErrorCode.stale_broker_epoch
    assert _errors(response) == {(TOPIC_ID, 0): int(ErrorCode.stale_broker_epoch)}
    assert rm.partitions == {} and hooks.leaders == []

    # The current epoch, a newer one and "unknown" (-1) are all accepted.
    for epoch, partition in ((BROKER_EPOCH, 0), (BROKER_EPOCH + 1, 1), (-1, 2)):
        response = become(rm, 1, leader_and_isr(
            [lai_state(partition, 1, 0, (1,), (1,))], broker_epoch=epoch))
        assert response.error_code == ErrorCode.none
    assert set(rm.partitions) == {T0, T1, TopicPartition("t", 2)}


def test_leader_epoch_rules(tmp_path: Path) -> None:
    rm, hooks = _rm(tmp_path)
    become(rm, 1, leader_and_isr([lai_state(0, 2, 5, (2, 1), (2, 1))]))
    before = rm.get_partition("t", 0)
    assert before is not None and before.leader_id == 2

    # Older leader epoch: refused with STALE_CONTROLLER_EPOCH (Kafka's code for it), no change.
    response = become(rm, 2, leader_and_isr([lai_state(0, 1, 4, (1,), (2, 1))]))
    assert response.error_code == ErrorCode.none
    assert _errors(response) == {(TOPIC_ID, 0): int(ErrorCode.stale_controller_epoch)}
    assert (before.leader_id, before.leader_epoch) == (2, 5)

    # Same leader epoch, same topic: nothing to do, no error.
    response = become(rm, 3, leader_and_isr([lai_state(0, 1, 5, (1,), (2, 1))]))
    assert _errors(response) == {(TOPIC_ID, 0): 0}
    assert before.leader_id == 2

    # Same leader epoch but another topic id (the topic was recreated): refused.
    response = become(rm, 4, leader_and_isr([lai_state(0, 1, 5, (1,), (2, 1))],
                                                              topic_id=OTHER_TOPIC_ID))
    assert _errors(response) == {(OTHER_TOPIC_ID, 0): int(ErrorCode.stale_controller_epoch)}
    assert before.leader_id == 2
    assert len(hooks.followers) == 1 and hooks.leaders == []

    # Newer leader epoch: applied; the follower becomes leader.
    response = become(rm, 5, leader_and_isr([lai_state(0, 1, 6, (1, 2), (2, 1))]))
    assert _errors(response) == {(TOPIC_ID, 0): 0}
    assert rm.get_partition("t", 0) is before
    assert (before.is_leader, before.leader_epoch, before.isr) == (True, 6, (1, 2))
    assert leos(before) == {2: -1}
    assert hooks.leaders == [["t-0"]]


def test_broker_not_among_the_replicas_gets_unknown_topic_or_partition(tmp_path: Path) -> None:
    rm, hooks = _rm(tmp_path)
    response = become(rm, 1, leader_and_isr([
        lai_state(0, 2, 1, (2, 3), (2, 3)),
        lai_state(1, 1, 1, (1,), (1,)),
    ]))
    assert _errors(response) == {(TOPIC_ID, 0): int(ErrorCode.unknown_topic_or_partition), (TOPIC_ID, 1): 0}
    assert T0 not in rm.partitions
    assert hooks.followers == [] and hooks.leaders == [["t-1"]]


def test_a_leader_that_stays_leader_tracks_the_new_replicas_and_forgets_old_positions(tmp_path: Path) -> None:
    rm, _ = _rm(tmp_path)
    become(rm, 1, leader_and_isr([lai_state(0, 1, 1, (1, 2, 3), (1, 2, 3))]))
    partition = rm.get_partition("t", 0)
    assert partition is not None
    partition.remote[2].log_end_offset = 40
    partition.remote[3].log_end_offset = 35
    # Replica 3 is reassigned away, 4 comes in; the ISR shrinks.
    become(rm, 2, leader_and_isr([lai_state(0, 1, 2, (1, 2), (1, 2, 4))]))
    # A new leader epoch resets every remote log end offset (Kafka's Partition.makeLeader).
    assert leos(partition) == {2: -1, 4: -1}
    assert partition.isr == (1, 2)


def test_several_topics_in_one_request_report_errors_per_topic_id(tmp_path: Path) -> None:
    rm, _ = _rm(tmp_path)
    request = leader_and_isr([lai_state(0, 1, 0, (1,), (1,))], more=[
        control.LeaderAndIsrTopicState(topic_name="u", topic_id=OTHER_TOPIC_ID, partition_states=(
            lai_state(3, 0, 0, (0,), (0,)),))])
    response = become(rm, 1, request)
    assert _errors(response) == {(TOPIC_ID, 0): 0, (OTHER_TOPIC_ID, 3): int(ErrorCode.unknown_topic_or_partition)}
    # The response goes out on the wire and comes back the same.
    _, decoded = decode_response(encode_response(response, 1)[4:], control.LeaderAndIsrResponse)
    assert _errors(decoded) == _errors(response)


# ----------------------------------------------------------------------------- StopReplica


def _with_partitions(rm: ReplicaManager) -> tuple[Partition, Partition]:
    become(rm, 1, leader_and_isr([
        lai_state(0, 1, 5, (1, 2), (1, 2)), lai_state(1, 2, 5, (2, 1), (2, 1))], controller_epoch=3))
    p0, p1 = rm.get_partition("t", 0), rm.get_partition("t", 1)
    assert p0 is not None and p1 is not None
    return p0, p1


def _stop_errors(response: control.StopReplicaResponse) -> dict[tuple[str, int], int]:
    return {(p.topic_name, p.partition_index): int(p.error_code) for p in response.partition_errors}


def test_stop_replica_fences_older_leader_epochs(tmp_path: Path) -> None:
    rm, hooks = _rm(tmp_path)
    _with_partitions(rm)
    response = rm.stop_replicas(2, stop_replica([("t", 0, 4, True), ("t", 1, 6, False)], controller_epoch=3))
    assert response.error_code == ErrorCode.none
    assert _stop_errors(response) == {("t", 0): int(ErrorCode.fenced_leader_epoch), ("t", 1): 0}
    assert T0 in rm.partitions  # fenced: not deleted
    assert hooks.stopped == [[(True, T1, False)]]
    assert T1 in rm.partitions  # stopped without delete: still hosted


def test_stop_replica_with_delete_hands_back_the_checkpoints_without_the_deleted_partitions(tmp_path: Path) -> None:
    """The handler writes them off the event loop, before it answers."""
    rm, _ = _rm(tmp_path)
    _with_partitions(rm)
    response, checkpoints = rm.stop_replicas_then_checkpoint(2, stop_replica([("t", 0, -2, True)], controller_epoch=3))
    assert _stop_errors(response) == {("t", 0): 0} and T0 not in rm.partitions
    assert sorted(w.path.name for w in checkpoints) == [
        "log-start-offset-checkpoint", "recovery-point-offset-checkpoint", "replication-offset-checkpoint"]
    assert all(set(w.offsets) == {T1} for w in checkpoints), [w.offsets for w in checkpoints]
    _, none = rm.stop_replicas_then_checkpoint(3, stop_replica([("t", 1, -2, False)], controller_epoch=3))
    assert none == []  # nothing deleted, nothing to rewrite


def test_stop_replica_sentinel_epochs_bypass_the_check_and_delete_removes_the_partition(tmp_path: Path) -> None:
    rm, hooks = _rm(tmp_path)
    _with_partitions(rm)
    response = rm.stop_replicas(2, stop_replica(
        [("t", 0, -2, True), ("t", 1, -1, True), ("gone", 4, 9, True)], controller_epoch=3))
    assert set(_stop_errors(response).values()) == {0}
    assert T0 not in rm.partitions and T1 not in rm.partitions
    # A partition this broker does not host is still reported deleted (its log may be on disk).
    assert hooks.stopped == [[(True, T0, True), (True, T1, True), (False, TopicPartition("gone", 4), True)]]


def test_stop_replica_with_the_current_leader_epoch_is_applied(tmp_path: Path) -> None:
    rm, _ = _rm(tmp_path)
    _with_partitions(rm)
    response = rm.stop_replicas(2, stop_replica([("t", 0, 5, True)], controller_epoch=3))
    assert _stop_errors(response) == {("t", 0): 0}
    assert T0 not in rm.partitions


def test_a_topic_deleted_here_takes_its_meters_only_with_its_last_partition(tmp_path: Path) -> None:
    rm, _ = _rm(tmp_path)
    _with_partitions(rm)
    rm.topic_stats.topic("t").bytes_in = 10
    rm.stop_replicas(2, stop_replica([("t", 0, -2, True)], controller_epoch=3))
    assert rm.topic_stats.topics["t"].bytes_in == 10  # partition 1 is still here
    rm.stop_replicas(3, stop_replica([("t", 1, -2, True)], controller_epoch=3))
    assert "t" not in rm.topic_stats.topics


def test_stop_replica_from_stale_controller_or_broker_epoch_changes_nothing(tmp_path: Path) -> None:
    rm, hooks = _rm(tmp_path)
    _with_partitions(rm)
    response = rm.stop_replicas(2, stop_replica([("t", 0, -2, True)], controller_epoch=2))
    assert (response.error_code, response.partition_errors) == (ErrorCode.stale_controller_epoch, ())
    response = rm.stop_replicas(3, stop_replica([("t", 0, -2, True)], controller_epoch=3,
                                                broker_epoch=BROKER_EPOCH - 1))
    # As Kafka answers them (the differential oracle): the error alone, no partition errors.
    assert (response.error_code, response.partition_errors) == (ErrorCode.stale_broker_epoch, ())
    assert T0 in rm.partitions and hooks.stopped == []


# ----------------------------------------------------------------------------- UpdateMetadata


def test_update_metadata_applies_to_the_cache_and_deletes_with_leader_minus_two(tmp_path: Path) -> None:
    rm, _ = _rm(tmp_path)
    request = update_metadata({"t": (TOPIC_ID, [um_state(0, 1, 2, (1,), (1,)), um_state(1, 1)])},
                              [um_broker(1)], controller_epoch=3)
    assert rm.maybe_update_metadata_cache(1, request) == ErrorCode.none
    assert rm.controller_epoch == 3
    assert rm.metadata_cache.partition("t", 0) is not None

    delete = update_metadata({"t": (TOPIC_ID, [um_state(0, -2), um_state(1, -2)])}, [um_broker(1)],
                             controller_epoch=3)
    assert rm.maybe_update_metadata_cache(2, delete) == ErrorCode.none
    assert not rm.metadata_cache.contains_topic("t")


def test_update_metadata_from_a_stale_epoch_is_refused_and_epochs_are_shared(tmp_path: Path) -> None:
    rm, _ = _rm(tmp_path)
    assert rm.maybe_update_metadata_cache(1, update_metadata(
        {"t": (TOPIC_ID, [um_state(0, 1)])}, [um_broker(1)], controller_epoch=4)) == ErrorCode.none
    stale = update_metadata({"t": (TOPIC_ID, [um_state(0, -2)])}, [], controller_epoch=3)
    assert rm.maybe_update_metadata_cache(2, stale) == ErrorCode.stale_controller_epoch
    assert rm.metadata_cache.contains_topic("t") and rm.metadata_cache.alive_broker_ids() == [1]
    stale_broker = update_metadata({}, [], controller_epoch=4, broker_epoch=BROKER_EPOCH - 1)
    assert rm.maybe_update_metadata_cache(3, stale_broker) == ErrorCode.stale_broker_epoch
    assert rm.metadata_cache.alive_broker_ids() == [1]
    # The epoch learnt from UpdateMetadata fences LeaderAndIsr from the old controller too.
    response = become(rm, 4, leader_and_isr([lai_state(0, 1, 0, (1,), (1,))],
                                                              controller_epoch=3))
    assert response.error_code == ErrorCode.stale_controller_epoch


def test_a_large_leader_and_isr_lets_the_event_loop_run_and_matches_the_one_go_result(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    states = [lai_state(p, BROKER if p % 2 else 2, 1, (BROKER, 2), (BROKER, 2)) for p in range(50)]
    rm_sliced, _ = _rm(tmp_path / "a")
    rm_whole, _ = _rm(tmp_path / "s")

    async def apply(rm: ReplicaManager) -> tuple[control.LeaderAndIsrResponse, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.ensure_future(ticker())
        await asyncio.sleep(0)
        async with rm.state_change_lock:
            response = await rm.become_leader_or_follower(1, leader_and_isr(states))
        task.cancel()
        return response, ticks

    monkeypatch.setattr(TimeSlice, "SLICE_S", 3600.0)  # never yields
    whole, whole_ticks = asyncio.run(apply(rm_whole))
    monkeypatch.setattr(TimeSlice, "SLICE_S", 0.0)  # yields after every partition
    sliced, sliced_ticks = asyncio.run(apply(rm_sliced))
    assert whole_ticks <= 2 and sliced_ticks > 50  # other work ran between partitions
    assert _errors(sliced) == _errors(whole)
    for rm in (rm_sliced, rm_whole):
        roles = {p: (rm.get_partition("t", p).leader_id, rm.get_partition("t", p).leader_epoch)  # type: ignore[union-attr]
                 for p in range(50)}
        assert roles == {p: (BROKER if p % 2 else 2, 1) for p in range(50)}
        assert all(rm.log_manager.get_log("t", p) is not None for p in range(50))
