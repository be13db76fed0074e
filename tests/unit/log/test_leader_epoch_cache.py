"""LeaderEpochFileCache: Kafka's assign/end_offset_for/truncate semantics and its file,
plus the KIP-101 / KIP-279 divergence cases on two real logs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from log_helpers import all_offsets, batch

from odradek.log.checkpoints import LeaderEpochCheckpointFile
from odradek.log.leader_epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochFileCache,
)
from odradek.log.log import Log

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def make_cache(tmp_path: Path, leo: int = 100) -> LeaderEpochFileCache:
    return LeaderEpochFileCache(LeaderEpochCheckpointFile(tmp_path / "leader-epoch-checkpoint"),
                                lambda: leo)


def pairs(cache: LeaderEpochFileCache) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in cache.entries]


def test_assign_keeps_entries_monotonic(tmp_path: Path) -> None:
    cache = make_cache(tmp_path)
    cache.assign(0, 0)
    cache.assign(0, 5)  # same epoch, later offset: nothing to record
    cache.assign(2, 10)
    cache.assign(4, 20)
    assert pairs(cache) == [(0, 0), (2, 10), (4, 20)]
    cache.assign(3, 15)  # a lower epoch drops the higher entries
    assert pairs(cache) == [(0, 0), (2, 10), (3, 15)]
    cache.assign(5, 12)  # a lower start offset drops entries starting at or after it
    assert pairs(cache) == [(0, 0), (2, 10), (5, 12)]
    cache.assign(5, 11)  # same epoch, earlier start: moves the start
    assert pairs(cache) == [(0, 0), (2, 10), (5, 11)]
    with pytest.raises(ValueError):
        cache.assign(-1, 3)
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n3\n0 0\n2 10\n5 11\n"
    assert pairs(make_cache(tmp_path)) == pairs(cache)


def test_end_offset_for(tmp_path: Path) -> None:
    cache = make_cache(tmp_path, leo=40)
    assert cache.end_offset_for(0) == UNDEFINED  # empty
    for epoch, start in [(2, 5), (3, 10), (6, 25)]:
        cache.assign(epoch, start)
    assert cache.end_offset_for(6) == (6, 40)  # latest epoch: the log end offset
    assert cache.end_offset_for(3) == (3, 25)
    assert cache.end_offset_for(4) == (3, 25)  # unknown epoch: floor epoch, next start
    assert cache.end_offset_for(5) == (3, 25)
    assert cache.end_offset_for(1) == (1, 5)  # older than every entry: first start
    assert cache.end_offset_for(7) == UNDEFINED
    assert cache.end_offset_for(UNDEFINED_EPOCH) == UNDEFINED


def test_truncation_and_epoch_for_offset(tmp_path: Path) -> None:
    cache = make_cache(tmp_path)
    for epoch, start in [(1, 0), (2, 10), (3, 20), (4, 30)]:
        cache.assign(epoch, start)
    assert cache.epoch_for_offset(25) == 3 and cache.epoch_for_offset(10) == 2
    cache.truncate_from_end(20)  # entries starting at or after 20 go
    assert pairs(cache) == [(1, 0), (2, 10)]
    cache.truncate_from_start(12)  # keeps the last entry before, moved to 12
    assert pairs(cache) == [(2, 12)]
    cache.truncate_from_start(6)  # nothing before 6
    assert pairs(cache) == [(2, 12)]
    cache.clear_and_flush()
    assert cache.entries == [] and make_cache(tmp_path).entries == []
    assert EpochEntry(1, 2) == EpochEntry(1, 2)


def replicate(leader: Log, follower: Log) -> None:
    """The follower's side of KIP-279: ask the leader for the end of the follower's latest
    epoch, truncate to what both agree on, then fetch the rest."""
    while True:
        epoch = follower.latest_epoch
        if epoch is None:
            target = 0
        else:
            leader_epoch, leader_end = leader.end_offset_for_epoch(epoch)
            if leader_epoch == UNDEFINED_EPOCH:
                target = follower.high_watermark
            else:
                own_epoch, own_end = follower.end_offset_for_epoch(leader_epoch)
                target = min(leader_end, own_end if own_epoch == leader_epoch else leader_end,
                             follower.log_end_offset)
        follower.truncate_to(target)
        if follower.latest_epoch is None or leader.end_offset_for_epoch(
                follower.latest_epoch)[1] >= follower.log_end_offset:
            break
    while follower.log_end_offset < leader.log_end_offset:
        follower.append_as_follower(leader.read(follower.log_end_offset, 1 << 20).read_bytes())


@pytest.mark.parametrize("follower_tail", [1, 2, 3])
def test_kip101_kip279_divergent_tails_are_truncated(open_log: Callable[..., Log],
                                                    follower_tail: int) -> None:
    """A and B share epoch 0. B led epoch 1 briefly and wrote a tail nobody else has; A
    became leader in epoch 2 and wrote different data at the same offsets. After B follows
    A, both logs are byte-identical (not just equal in length, which HW truncation gave)."""
    a = open_log(name="a-0")
    b = open_log(name="b-0")
    for _ in range(3):
        a.append_as_leader(batch(2), leader_epoch=0)
    b.append_as_follower(a.read(0, 1 << 20).read_bytes())
    a.update_high_watermark(6)
    b.update_high_watermark(6)
    for _ in range(follower_tail):
        b.append_as_leader(batch(1, size=30), leader_epoch=1)  # never replicated
    a.assign_epoch_start_offset(2, a.log_end_offset)
    for _ in range(2):
        a.append_as_leader(batch(1, size=17), leader_epoch=2)
    replicate(a, b)
    assert b.read(0, 1 << 20).read_bytes() == a.read(0, 1 << 20).read_bytes()
    assert pairs(b.leader_epoch_cache) == pairs(a.leader_epoch_cache) == [(0, 0), (2, 6)]
    assert all_offsets(b) == list(range(8))


def test_kip101_follower_keeps_replicated_tail_past_its_high_watermark(
        open_log: Callable[..., Log]) -> None:
    """KIP-101's data-loss case: the follower's high watermark lags its log end. Truncating
    to the HW would drop 6..7, which the leader also has; the epoch answer keeps them."""
    a = open_log(name="a-0")
    b = open_log(name="b-0")
    for _ in range(4):
        a.append_as_leader(batch(2), leader_epoch=0)
    b.append_as_follower(a.read(0, 1 << 20).read_bytes())
    b.update_high_watermark(6)
    a.assign_epoch_start_offset(1, a.log_end_offset)
    a.append_as_leader(batch(1), leader_epoch=1)
    assert a.end_offset_for_epoch(b.latest_epoch) == (0, 8)
    assert not b.truncate_to(8) and b.log_end_offset == 8
    replicate(a, b)
    assert b.read(0, 1 << 20).read_bytes() == a.read(0, 1 << 20).read_bytes()


@pytest.mark.parametrize("damage", ["0\n2\n0 0\n", "0\n1\n-3 0\n", "\xc5 not text"])
def test_an_unreadable_checkpoint_is_rebuilt_from_the_batches(open_log: Callable[..., Log], damage: str) -> None:
    """Instead of the log (and the broker) failing to open (fuzz/log_recovery.py found it)."""
    lg = open_log()
    for epoch in (0, 0, 2, 5):
        lg.append_as_leader(batch(2), leader_epoch=epoch)
    lg.close()
    (lg.dir / "leader-epoch-checkpoint").write_bytes(damage.encode("latin-1"))
    reopened = open_log()
    assert pairs(reopened.leader_epoch_cache) == [(0, 0), (2, 4), (5, 6)]
    assert LeaderEpochCheckpointFile(lg.dir / "leader-epoch-checkpoint").read() == [(0, 0), (2, 4), (5, 6)]
