"""Fetch sessions (KIP-227, Kafka's FetchSession.scala): the leader remembers what a fetcher
asked for, so that the fetcher need only send what changed and hear about what changed.

A follower fetching from a leader lists every partition it follows there, most of them idle
(the ``__consumer_offsets`` partitions, to begin with); without sessions every round trip
encodes, parses, reads and answers all of them.  With a session:

- a *full* request (epoch 0) lists everything and asks for a session; the response carries
  its id (0: the cache had no room), and every partition;
- an *incremental* request (the session's id and its next epoch) lists only partitions that
  are new or whose fetch fields changed, and the ones to forget; the leader reads every
  partition of the session, but answers only those with records, an error, or a high
  watermark or log start offset (or last stable offset) that moved since it last said;
- epoch -1 (or a version without sessions) is a full request without a session.

An incremental request for an unknown session gets FETCH_SESSION_ID_NOT_FOUND, one with the
wrong epoch INVALID_FETCH_SESSION_EPOCH; the fetcher then starts over with a full request.

Sans-IO: the handler passes the parsed request in and the read results through.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from odradek.broker.delayed_fetch import FetchPartitionRequest, FetchPartitionResult
from odradek.protocol.errors import ErrorCode
from odradek.protocol.fetch_request import FetchRequestView

__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "INVALID_SESSION_ID", "FetchContext", "FetchSessionCache"]

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1
# Kafka's FetchManager keeps a session at least this long before another may evict it.
EVICTION_MS = 120_000


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: wraps to 1, never to 0 (the initial epoch)."""
    return 1 if epoch >= _MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class CachedPartition:
    request: FetchPartitionRequest  # as last sent (with the fetcher's log start and last epoch)
    # What the leader last told the fetcher (-1: nothing yet, or an error since)
    high_watermark: int = -1
    leader_log_start_offset: int = -1
    last_stable_offset: int = -1

    def must_respond(self, result: FetchPartitionResult) -> bool:
        """Kafka's CachedPartition.maybeUpdateResponseData: include the partition when it has
        records, an error, a preferred read replica (KIP-392), a diverging epoch, or news of its offsets; remember
        what was said."""
        respond = bool(result.regions) or result.preferred_read_replica >= 0 or result.diverging_epoch is not None
        if result.error != ErrorCode.none:
            self.high_watermark = -1  # so the partition is sent again once the error is gone
            return True
        if result.high_watermark != self.high_watermark:
            self.high_watermark = result.high_watermark
            respond = True
        if result.log_start_offset != self.leader_log_start_offset:
            self.leader_log_start_offset = result.log_start_offset
            respond = True
        if result.last_stable_offset != self.last_stable_offset:
            self.last_stable_offset = result.last_stable_offset
            respond = True
        return respond


@dataclass(slots=True)
class FetchSession:
    id: int
    privileged: bool  # a follower's
    partitions: dict[tuple[str, int], CachedPartition]
    epoch: int  # the epoch the next request must carry
    last_used_ms: int


@dataclass(slots=True)
class FetchContext:
    """How to answer one fetch: ``partitions`` to read (the session's, for an incremental
    fetch), the ``session_id`` to answer with, or a top-level ``error``."""

    partitions: list[FetchPartitionRequest]
    session_id: int = INVALID_SESSION_ID
    error: ErrorCode = ErrorCode.none
    session: FetchSession | None = None
    incremental: bool = False

    def select(self, results: Mapping[tuple[str, int], FetchPartitionResult]) -> list[FetchPartitionRequest]:
        """The partitions to put in the response, in request order (all of them unless
        incremental); updates the session's record of what was said."""
        session = self.session
        if session is None:
            return self.partitions
        chosen = []
        for r in self.partitions:
            key = (r.topic, r.partition)
            cached = session.partitions.get(key)
            result = results.get(key)
            if cached is None or result is None:
                continue
            if cached.must_respond(result) or not self.incremental:
                chosen.append(r)
        return chosen


class FetchSessionCache:
    """The broker's fetch sessions (``max.incremental.fetch.session.cache.slots``)."""

    def __init__(self, max_slots: int = 1000, *, rng: random.Random | None = None) -> None:
        self.max_slots = max_slots
        self.sessions: dict[int, FetchSession] = {}
        self._rng = rng or random.Random()

    def __len__(self) -> int:
        return len(self.sessions)

    def new_context(self, request: FetchRequestView, requests: list[FetchPartitionRequest], now_ms: int
                    ) -> FetchContext:
        """Kafka's FetchManager.newContext for one parsed request (``requests`` are its
        partitions, as the handler built them)."""
        session_id, epoch = request.session_id, request.session_epoch
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):  # a full fetch
            if session_id != INVALID_SESSION_ID:
                self.sessions.pop(session_id, None)
            if epoch == FINAL_EPOCH:
                return FetchContext(requests)
            session = self._maybe_create(request, requests, now_ms)
            if session is None:
                return FetchContext(requests)
            return FetchContext(requests, session.id, session=session)
        session = self.sessions.get(session_id) if session_id != INVALID_SESSION_ID else None
        if session is None:
            return FetchContext([], error=ErrorCode.fetch_session_id_not_found)
        if session.epoch != epoch:
            return FetchContext([], error=ErrorCode.invalid_fetch_session_epoch)
        partitions = session.partitions
        for r in requests:
            key = (r.topic, r.partition)
            cached = partitions.get(key)
            if cached is None:
                partitions[key] = CachedPartition(r)
            else:
                cached.request = r
        for topic, forgotten in request.forgotten_topics:
            for partition in forgotten:
                partitions.pop((topic, partition), None)
        if not partitions:
            del self.sessions[session.id]
            return FetchContext([])
        session.epoch = next_epoch(epoch)
        session.last_used_ms = now_ms
        return FetchContext([c.request for c in partitions.values()], session.id, session=session,
                            incremental=True)

    def _maybe_create(self, request: FetchRequestView, requests: list[FetchPartitionRequest], now_ms: int
                      ) -> FetchSession | None:
        """A new session for a full fetch, if there is room (Kafka's maybeCreateSession: a
        session idle past EVICTION_MS may be evicted, and a follower's may evict a
        consumer's)."""
        privileged = request.replica_id >= 0
        if len(self.sessions) >= self.max_slots and not self._evict_one(privileged, now_ms):
            return None
        while True:
            session_id = self._rng.randint(1, _MAX_EPOCH)
            if session_id not in self.sessions:
                break
        partitions = {(r.topic, r.partition): CachedPartition(r) for r in requests}
        session = FetchSession(session_id, privileged, partitions, next_epoch(INITIAL_EPOCH), now_ms)
        self.sessions[session_id] = session
        return session

    def _evict_one(self, privileged: bool, now_ms: int) -> bool:
        stale = [s for s in self.sessions.values() if now_ms - s.last_used_ms > EVICTION_MS]
        if not stale and privileged:
            stale = [s for s in self.sessions.values() if not s.privileged]
        if not stale:
            return False
        victim = min(stale, key=lambda s: s.last_used_ms)
        del self.sessions[victim.id]
        return True
