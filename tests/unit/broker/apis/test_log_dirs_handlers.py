"""DescribeLogDirs and AlterReplicaLogDirs on a FakeBroker with two log directories: sizes and
volumes, a move while the partition keeps taking records, Kafka's errors (LOG_DIR_NOT_FOUND,
unknown topic, REPLICA_NOT_AVAILABLE, authorization), and a directory failing for real (its
segment is /dev/full): KAFKA_STORAGE_ERROR everywhere the partition is asked for, the other
directory serving on, the controller told."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from control_helpers import (
    lai_state,
    leader_and_isr,
    stop_replica,
    um_broker,
    um_state,
    update_metadata,
)
from fake_broker import BROKER_ID, OTHER_BROKER, FakeBroker, WithBroker
from kio.schema.alter_replica_log_dirs.v2 import request as alter_req
from kio.schema.alter_replica_log_dirs.v2 import response as alter_resp
from kio.schema.describe_log_dirs.v1 import request as describe_v1_req
from kio.schema.describe_log_dirs.v1 import response as describe_v1_resp
from kio.schema.describe_log_dirs.v4 import request as describe_req
from kio.schema.describe_log_dirs.v4 import response as describe_resp
from test_produce_fetch_handlers import batch, fetch, fetched, produce, produced

from odradek.broker.log_dir_failure_handler import LogDirFailureHandler
from odradek.protocol.errors import ErrorCode as E
from odradek.security.acls import KafkaPrincipal, Operation, ResourceType
from support import wait_until_async

ALICE = KafkaPrincipal("User", "alice")


def two_dirs(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    return d1, d2, {"log.dirs": f"{d1},{d2}"}


def describe(topics: dict[str, list[int]] | None = None) -> describe_req.DescribeLogDirsRequest:
    return describe_req.DescribeLogDirsRequest(topics=None if topics is None else tuple(
        describe_req.DescribableLogDirTopic(topic=t, partitions=tuple(ps)) for t, ps in topics.items()))


def alter(moves: dict[tuple[str, int], str]) -> alter_req.AlterReplicaLogDirsRequest:
    by_dir: dict[str, dict[str, list[int]]] = {}
    for (topic, partition), path in moves.items():
        by_dir.setdefault(path, {}).setdefault(topic, []).append(partition)
    return alter_req.AlterReplicaLogDirsRequest(dirs=tuple(
        alter_req.AlterReplicaLogDir(path=path, topics=tuple(
            alter_req.AlterReplicaLogDirTopic(name=t, partitions=tuple(ps)) for t, ps in topics.items()))
        for path, topics in by_dir.items()))


async def described(b: FakeBroker, topics: dict[str, list[int]] | None = None, **options: object
                    ) -> dict[str, tuple[E, dict[tuple[str, int], tuple[int, int, bool]]]]:
    """Each directory's error and replicas: (topic, partition) -> (size, offset lag, is future)."""
    response = await b.call(describe(topics), describe_resp.DescribeLogDirsResponse, **options)  # type: ignore[arg-type]
    assert response.error_code == E.none
    return {r.log_dir: (r.error_code, {(t.name, p.partition_index): (p.partition_size, p.offset_lag, p.is_future_key)
                                       for t in r.topics for p in t.partitions}) for r in response.results}


async def altered(b: FakeBroker, moves: dict[tuple[str, int], str], **options: object) -> dict[tuple[str, int], E]:
    response = await b.call(alter(moves), alter_resp.AlterReplicaLogDirsResponse, **options)  # type: ignore[arg-type]
    return {(t.topic_name, p.partition_index): p.error_code for t in response.results for p in t.partitions}


def test_describe_lists_each_dir_in_order_with_its_replicas_and_volume(with_broker: WithBroker, tmp_path: Path) -> None:
    d1, d2, props = two_dirs(tmp_path)

    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0, 1, 2])  # placed by the fewest-logs rule: d1, d2, d1
        assert (await produced(b, produce({("t", 0): batch(b"a", b"b"), ("t", 1): batch(b"c")})))[("t", 0)].error_code \
            == E.none
        sizes = {p: b.log_manager.get_log("t", p).size for p in range(3)}
        assert sizes[0] > sizes[1] > 0 == sizes[2]
        assert await described(b) == {
            str(d1): (E.none, {("t", 0): (sizes[0], 0, False), ("t", 2): (0, 0, False)}),
            str(d2): (E.none, {("t", 1): (sizes[1], 0, False)})}
        assert await described(b, {"t": [0], "missing": [0]}) == {  # an unknown topic is not an error
            str(d1): (E.none, {("t", 0): (sizes[0], 0, False)}), str(d2): (E.none, {})}
        response = await b.call(describe(), describe_resp.DescribeLogDirsResponse)
        stat = os.statvfs(d1)
        assert response.results[0].total_bytes == stat.f_blocks * stat.f_frsize
        assert 0 < response.results[0].usable_bytes <= response.results[0].total_bytes
        v1 = await b.call(describe_v1_req.DescribeLogDirsRequest(topics=None), describe_v1_resp.DescribeLogDirsResponse)
        assert [r.log_dir for r in v1.results] == [str(d1), str(d2)]

    with_broker(body, props=props)


def test_describe_needs_describe_and_alter_needs_alter_on_the_cluster(with_broker: WithBroker, tmp_path: Path) -> None:
    d1, d2, props = two_dirs(tmp_path)

    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0])
        b.enable_authorizer()
        refused = await b.call(describe(), describe_resp.DescribeLogDirsResponse, principal=ALICE)
        assert (refused.error_code, refused.results) == (E.cluster_authorization_failed, ())
        refused_v1 = await b.call(describe_v1_req.DescribeLogDirsRequest(topics=None),
                                  describe_v1_resp.DescribeLogDirsResponse, principal=ALICE)
        assert refused_v1.results == ()  # v1 has no error field: an empty answer, as Kafka 2.8
        assert await altered(b, {("t", 0): str(d2)}, principal=ALICE) == {("t", 0): E.cluster_authorization_failed}
        b.allow(ALICE, Operation.DESCRIBE, ResourceType.CLUSTER)
        assert list(await described(b, principal=ALICE)) == [str(d1), str(d2)]
        assert await altered(b, {("t", 0): str(d2)}, principal=ALICE) == {("t", 0): E.cluster_authorization_failed}
        b.allow(ALICE, Operation.ALTER, ResourceType.CLUSTER)
        assert await altered(b, {("t", 0): str(d2)}, principal=ALICE) == {("t", 0): E.none}

    with_broker(body, props=props)


def test_alter_answers_kafkas_errors(with_broker: WithBroker, tmp_path: Path) -> None:
    d1, d2, props = two_dirs(tmp_path)

    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0])  # in d1
        # A partition the cluster has, hosted elsewhere.
        b.metadata_cache.update(update_metadata(
            {"elsewhere": (None, [um_state(0, OTHER_BROKER, replicas=(OTHER_BROKER,), isr=(OTHER_BROKER,))])},
            [um_broker(BROKER_ID)]))
        assert await altered(b, {
            ("t", 0): str(tmp_path / "not-configured"), ("missing", 0): str(d2), ("elsewhere", 0): str(d2)}) == {
            ("t", 0): E.log_dir_not_found, ("missing", 0): E.unknown_topic_or_partition,
            ("elsewhere", 0): E.replica_not_available}
        assert await altered(b, {("t", 0): "d2"}) == {("t", 0): E.log_dir_not_found}  # not an absolute path
        assert await altered(b, {("t", 0): str(d1)}) == {("t", 0): E.none}  # already there: nothing to do
        assert b.log_manager.future_log("t", 0) is None
        assert await altered(b, {("t" * 220, 0): str(d2)}) == {("t" * 220, 0): E.invalid_topic_exception}
        # The partition LeaderAndIsr creates later goes where it was asked to.
        await b.lead("elsewhere", [0])
        assert b.log_manager.get_log("elsewhere", 0).dir.parent == d2

    with_broker(body, props=props)


def test_a_replica_moves_while_it_keeps_taking_records(with_broker: WithBroker, tmp_path: Path) -> None:
    d1, d2, props = two_dirs(tmp_path)

    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0])
        for i in range(20):
            await produced(b, produce({("t", 0): batch(b"before-%d" % i)}))
        assert await altered(b, {("t", 0): str(d2)}) == {("t", 0): E.none}
        # The copy has not run yet (the handler does not yield): the future log is listed.
        dirs = await described(b)
        assert dirs[str(d2)][1] == {("t", 0): (0, 20, True)}
        assert dirs[str(d1)][1][("t", 0)][2] is False

        async def keep_producing() -> None:
            for i in range(200):
                assert (await produced(b, produce({("t", 0): batch(b"during-%d" % i)})))[("t", 0)].error_code == E.none
                await asyncio.sleep(0)

        writer = asyncio.create_task(keep_producing())
        await wait_until_async(lambda: b.log_manager.get_log("t", 0).dir.parent == d2, message="the swap")
        await writer
        lg = b.log_manager.get_log("t", 0)
        assert b.replica_manager.get_partition("t", 0).log is lg and b.log_manager.future_log("t", 0) is None
        assert lg.log_end_offset == 220 and lg.high_watermark == 220
        data = b"".join(lg.read_chunks(1 << 20))
        assert data.count(b"before-") == 20 and data.count(b"during-") == 200
        assert list(await described(b)) == [str(d1), str(d2)]
        assert (await described(b))[str(d2)][1][("t", 0)][2] is False

    with_broker(body, props=props)


def test_a_failed_dir_answers_storage_errors_and_the_other_keeps_serving(with_broker: WithBroker,
                                                                        tmp_path: Path) -> None:
    d1, d2, props = two_dirs(tmp_path)
    (d1 / "t-0").mkdir(parents=True)
    os.symlink("/dev/full", d1 / "t-0" / "00000000000000000000.log")  # every write: ENOSPC

    async def body(b: FakeBroker) -> None:
        notified: list[int] = []

        async def notify() -> None:
            notified.append(BROKER_ID)

        handler = LogDirFailureHandler(b.log_manager.failure_channel, b.replica_manager, notify, halt=pytest_fail)
        handler.start()
        try:
            await b.lead("t", [0, 1])  # t-0 already in d1; t-1 goes to d2
            assert b.log_manager.get_log("t", 1).dir.parent == d2
            first = await produced(b, produce({("t", 0): batch(b"x"), ("t", 1): batch(b"y")}))
            assert (first[("t", 0)].error_code, first[("t", 1)].error_code) == (E.kafka_storage_error, E.none)
            await wait_until_async(lambda: notified, message="the controller notified")
            assert b.log_manager.offline_log_dirs == [d1] and b.log_manager.offline_log_directory_count == 1
            again = await produced(b, produce({("t", 0): batch(b"x"), ("t", 1): batch(b"y")}))
            assert (again[("t", 0)].error_code, again[("t", 1)].error_code) == (E.kafka_storage_error, E.none)
            reads = await fetched(b, fetch({("t", 0): 0, ("t", 1): 0}))
            assert (reads[("t", 0)].error_code, reads[("t", 1)].error_code) == (E.kafka_storage_error, E.none)
            assert await described(b) == {str(d1): (E.kafka_storage_error, {}),
                                          str(d2): (E.none, {("t", 1): (b.log_manager.get_log("t", 1).size, 0, False)})}
            assert await altered(b, {("t", 1): str(d1), ("t", 0): str(d2)}) == {
                ("t", 1): E.kafka_storage_error, ("t", 0): E.kafka_storage_error}
            async with b.replica_manager.state_change_lock:
                lai = await b.replica_manager.become_leader_or_follower(2, leader_and_isr(
                    [lai_state(0, BROKER_ID, 1, (BROKER_ID,), (BROKER_ID,)),
                     lai_state(2, BROKER_ID, 0, (BROKER_ID,), (BROKER_ID,)),
                     lai_state(3, BROKER_ID, 0, (BROKER_ID,), (BROKER_ID,), is_new=True)]))
            assert {p.partition_index: p.error_code for t in lai.topics for p in t.partition_errors} == {
                0: E.kafka_storage_error,  # in the failed directory
                2: E.kafka_storage_error,  # not new: its log may be in the failed directory
                3: E.none}
            assert b.log_manager.get_log("t", 3).dir.parent == d2
            stopped = b.replica_manager.stop_replicas(3, stop_replica([("t", 0, 1, False)]))
            assert [p.error_code for p in stopped.partition_errors] == [E.kafka_storage_error]
            assert notified == [BROKER_ID]
        finally:
            await handler.shutdown()

    with_broker(body, props=props)


def pytest_fail(reason: str) -> None:
    raise AssertionError(f"the broker would halt: {reason}")
