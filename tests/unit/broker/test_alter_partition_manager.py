"""AlterPartitionManager bookkeeping: an answer applies only to the change it answers, and a
change dropped by a LeaderAndIsr while queued is skipped (the sender keeps running)."""

from __future__ import annotations

import asyncio
import uuid

from kio.schema.alter_partition.v2 import response as resp

from odradek.broker.alter_partition import AlterPartitionManager
from odradek.broker.metadata_cache import MetadataCache
from odradek.broker.partition import Partition, PendingIsrChange
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import build
from support import wait_until_async

TOPIC_ID = uuid.UUID("0d7e2a41-0000-4000-8000-000000000001")


def leader(epoch: int = 5, partition_epoch: int = 3) -> Partition:
    return Partition("t", 0, local_broker_id=1, topic_id=TOPIC_ID, leader_id=1, leader_epoch=epoch,
                     partition_epoch=partition_epoch, isr=(1,), replicas=(1, 2))


def answer(isr: tuple[int, ...], leader_epoch: int, partition_epoch: int,
           error: ErrorCode = ErrorCode.none) -> resp.AlterPartitionResponse:
    return build(resp.AlterPartitionResponse, throttle_time=0, error_code=ErrorCode.none, topics=(
        build(resp.TopicData, topic_id=TOPIC_ID, partitions=(build(
            resp.PartitionData, partition_index=0, error_code=error, leader_id=1, leader_epoch=leader_epoch,
            isr=isr, leader_recovery_state=0, partition_epoch=partition_epoch),)),))


def manager(applied: list[Partition]) -> AlterPartitionManager:
    return AlterPartitionManager(1, lambda: 10, MetadataCache(1), "PLAINTEXT", applied.append)


def test_answer_applies_to_the_change_it_answers() -> None:
    applied: list[Partition] = []
    p = leader()
    sent = p.pending_isr = PendingIsrChange((1, 2), 5, 3)
    manager(applied)._handle_response({("t", 0): (p, sent)}, answer((1, 2), 5, 4))
    assert (p.isr, p.partition_epoch, p.pending_isr) == ((1, 2), 4, None)
    assert applied == [p]


def test_late_answer_leaves_a_newer_pending_change_alone() -> None:
    applied: list[Partition] = []
    p = leader()
    sent = PendingIsrChange((1, 2), 4, 2)  # proposed at epoch 4; a LeaderAndIsr (epoch 5) came since
    newer = p.pending_isr = PendingIsrChange((1, 2), 5, 3)
    manager(applied)._handle_response({("t", 0): (p, sent)}, answer((1, 2), 4, 3, ErrorCode.fenced_leader_epoch))
    assert p.pending_isr is newer
    assert p.isr == (1,) and not applied


def test_unanswered_change_is_cleared_so_the_leader_can_propose_again() -> None:
    p = leader()
    sent = p.pending_isr = PendingIsrChange((1, 2), 5, 3)
    refused = build(resp.AlterPartitionResponse, throttle_time=0, error_code=ErrorCode.not_controller, topics=())
    manager([])._handle_response({("t", 0): (p, sent)}, refused)
    assert p.pending_isr is None


def test_change_dropped_while_queued_is_skipped_and_the_sender_survives() -> None:
    async def scenario() -> None:
        m = manager([])
        m.start()
        p = leader()
        assert m.submit(p, (1, 2))
        p.pending_isr = None  # what make_leader / make_follower do
        # The sender takes the queue, finds nothing pending, and waits for the next change.
        await wait_until_async(lambda: not m._queue and not m._wakeup.is_set())
        assert m._task is not None and not m._task.done()
        # A new proposal is accepted and stays pending: no controller is known, so the
        # sender puts it back and retries after a backoff.
        assert m.submit(p, (1, 2))
        await wait_until_async(lambda: ("t", 0) in m._queue and not m._wakeup.is_set())
        assert not m._task.done()
        assert p.pending_isr is not None
        await m.stop()

    asyncio.run(scenario())


def test_accepted_changes_are_counted_as_isr_shrinks_and_expands() -> None:
    m = manager([])
    p = leader()
    grow = p.pending_isr = PendingIsrChange((1, 2), 5, 3)
    m._handle_response({("t", 0): (p, grow)}, answer((1, 2), 5, 4))
    shrink = p.pending_isr = PendingIsrChange((1,), 5, 4)
    m._handle_response({("t", 0): (p, shrink)}, answer((1,), 5, 5))
    refused = p.pending_isr = PendingIsrChange((1, 2), 5, 5)
    m._handle_response({("t", 0): (p, refused)}, answer((1, 2), 5, 6, ErrorCode.invalid_update_version))
    assert (m.isr_expands, m.isr_shrinks) == (1, 1)
