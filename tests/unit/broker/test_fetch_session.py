"""Fetch sessions (KIP-227): the leader's session cache, sans-IO."""

from __future__ import annotations

import random

from odradek.broker.delayed_fetch import FetchPartitionRequest, FetchPartitionResult
from odradek.broker.fetch_session import (
    EVICTION_MS,
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    FetchSessionCache,
    next_epoch,
)
from odradek.log.log_info import FileRegion
from odradek.protocol.errors import ErrorCode
from odradek.protocol.fetch_request import FetchPartitionView, FetchRequestView

DATA = (FileRegion(3, 0, 100, None),)  # type: ignore[arg-type]


def fetch(session_id: int, epoch: int, parts: list[tuple[str, int, int]], *, replica_id: int = 1,
          forgotten: list[tuple[str, list[int]]] | None = None) -> tuple[FetchRequestView, list[FetchPartitionRequest]]:
    views = [FetchPartitionView(t, p, offset, 1 << 20) for t, p, offset in parts]
    request = FetchRequestView(replica_id, 500, 1, 1 << 20, 0, session_id, epoch, views, forgotten or [])
    return request, [FetchPartitionRequest(v.topic, v.partition, v.fetch_offset, v.partition_max_bytes) for v in views]


def results(ctx_partitions: list[FetchPartitionRequest], hw: int = 10, **special: FetchPartitionResult
            ) -> dict[tuple[str, int], FetchPartitionResult]:
    out = {(r.topic, r.partition): FetchPartitionResult(ErrorCode.none, hw, 0, (), hw) for r in ctx_partitions}
    for key, result in special.items():
        topic, partition = key.rsplit("_", 1)
        out[(topic, int(partition))] = result
    return out


def names(chosen: list[FetchPartitionRequest]) -> list[tuple[str, int]]:
    return [(r.topic, r.partition) for r in chosen]


def test_full_fetch_creates_a_session_and_answers_everything() -> None:
    cache = FetchSessionCache(rng=random.Random(1))
    ctx = cache.new_context(*fetch(0, INITIAL_EPOCH, [("a", 0, 5), ("b", 1, 7)]), now_ms=0)
    assert ctx.error == ErrorCode.none and ctx.session_id != INVALID_SESSION_ID and len(cache) == 1
    assert names(ctx.select(results(ctx.partitions))) == [("a", 0), ("b", 1)]
    assert cache.sessions[ctx.session_id].epoch == 1


def test_incremental_fetch_reads_the_whole_session_and_answers_only_news() -> None:
    cache = FetchSessionCache(rng=random.Random(2))
    full = cache.new_context(*fetch(0, 0, [("a", 0, 5), ("a", 1, 9), ("b", 0, 1)]), now_ms=0)
    full.select(results(full.partitions))
    # Nothing changed: one partition sent (new offset), all three read, none answered.
    inc = cache.new_context(*fetch(full.session_id, 1, [("a", 1, 10)]), now_ms=1)
    assert inc.incremental and inc.session_id == full.session_id
    assert [(r.topic, r.partition, r.fetch_offset) for r in inc.partitions] == [("a", 0, 5), ("a", 1, 10), ("b", 0, 1)]
    assert inc.select(results(inc.partitions)) == []
    # Records, a high watermark that moved, an error: answered; the rest not.
    inc2 = cache.new_context(*fetch(full.session_id, 2, []), now_ms=2)
    got = results(inc2.partitions, a_0=FetchPartitionResult(ErrorCode.none, 10, 0, DATA, 10),
                  b_0=FetchPartitionResult(ErrorCode.none, 11, 0, (), 11))
    assert names(inc2.select(got)) == [("a", 0), ("b", 0)]
    inc3 = cache.new_context(*fetch(full.session_id, 3, []), now_ms=3)
    err = results(inc3.partitions, a_1=FetchPartitionResult(ErrorCode.not_leader_or_follower))
    # a-1's error is answered; b-0's high watermark went from 11 back to 10: answered too.
    assert names(inc3.select(err)) == [("a", 1), ("b", 0)]


def test_an_error_is_answered_and_the_partition_sent_again_once_it_clears() -> None:
    cache = FetchSessionCache(rng=random.Random(3))
    full = cache.new_context(*fetch(0, 0, [("a", 0, 5)]), now_ms=0)
    full.select(results(full.partitions))
    inc = cache.new_context(*fetch(full.session_id, 1, []), now_ms=1)
    assert names(inc.select({("a", 0): FetchPartitionResult(ErrorCode.not_leader_or_follower)})) == [("a", 0)]
    inc = cache.new_context(*fetch(full.session_id, 2, []), now_ms=2)
    assert names(inc.select(results(inc.partitions))) == [("a", 0)]  # same HW as before, but after an error
    inc = cache.new_context(*fetch(full.session_id, 3, []), now_ms=3)
    assert inc.select(results(inc.partitions)) == []


def test_forgotten_partitions_leave_the_session_and_an_empty_session_closes() -> None:
    cache = FetchSessionCache(rng=random.Random(4))
    full = cache.new_context(*fetch(0, 0, [("a", 0, 5), ("a", 1, 5)]), now_ms=0)
    inc = cache.new_context(*fetch(full.session_id, 1, [], forgotten=[("a", [1])]), now_ms=1)
    assert names(inc.partitions) == [("a", 0)]
    last = cache.new_context(*fetch(full.session_id, 2, [], forgotten=[("a", [0])]), now_ms=2)
    assert last.partitions == [] and last.session_id == INVALID_SESSION_ID and len(cache) == 0


def test_unknown_session_and_wrong_epoch_are_refused() -> None:
    cache = FetchSessionCache(rng=random.Random(5))
    assert cache.new_context(*fetch(12345, 1, []), now_ms=0).error == ErrorCode.fetch_session_id_not_found
    assert cache.new_context(*fetch(0, 3, []), now_ms=0).error == ErrorCode.fetch_session_id_not_found
    full = cache.new_context(*fetch(0, 0, [("a", 0, 5)]), now_ms=0)
    assert cache.new_context(*fetch(full.session_id, 2, []), now_ms=1).error == ErrorCode.invalid_fetch_session_epoch
    assert cache.new_context(*fetch(full.session_id, 1, []), now_ms=1).error == ErrorCode.none  # still usable


def test_final_epoch_closes_the_session_and_fetches_without_one() -> None:
    cache = FetchSessionCache(rng=random.Random(6))
    full = cache.new_context(*fetch(0, 0, [("a", 0, 5)]), now_ms=0)
    ctx = cache.new_context(*fetch(full.session_id, FINAL_EPOCH, [("a", 0, 5)]), now_ms=1)
    assert ctx.session_id == INVALID_SESSION_ID and len(cache) == 0
    assert names(ctx.select(results(ctx.partitions))) == [("a", 0)]
    sessionless = cache.new_context(*fetch(0, FINAL_EPOCH, [("b", 0, 1)]), now_ms=1)
    assert sessionless.session_id == INVALID_SESSION_ID and len(cache) == 0


def test_a_full_cache_gives_no_session_unless_one_can_be_evicted() -> None:
    cache = FetchSessionCache(max_slots=1, rng=random.Random(7))
    consumer = cache.new_context(*fetch(0, 0, [("a", 0, 5)], replica_id=-1), now_ms=0)
    assert consumer.session_id != INVALID_SESSION_ID
    other = cache.new_context(*fetch(0, 0, [("b", 0, 5)], replica_id=-1), now_ms=1)
    assert other.session_id == INVALID_SESSION_ID  # no room: a sessionless full fetch
    follower = cache.new_context(*fetch(0, 0, [("c", 0, 5)], replica_id=2), now_ms=2)
    assert follower.session_id != INVALID_SESSION_ID and list(cache.sessions) == [follower.session_id]
    late = cache.new_context(*fetch(0, 0, [("d", 0, 5)], replica_id=-1), now_ms=3 + EVICTION_MS)
    assert late.session_id != INVALID_SESSION_ID and list(cache.sessions) == [late.session_id]


def test_epochs_wrap_to_one() -> None:
    assert next_epoch(0) == 1 and next_epoch(41) == 42 and next_epoch(2**31 - 1) == 1
