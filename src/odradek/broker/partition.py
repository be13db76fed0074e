"""One partition as this broker hosts it: leader or follower, its log, ISR and high watermark.

As leader it tracks each follower's log end offset (from the offsets the follower fetches
at) and log start offset (which its fetches report), keeps the high watermark at the smallest
log end offset in the ISR, and proposes ISR changes to the controller (it never writes the
ISR itself).  While a change is in flight
the ISR used for the high watermark is the *maximal* one (current plus any replica being
added), so the high watermark never gets ahead of a replica that may yet be in the ISR.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from odradek.protocol import control

if TYPE_CHECKING:
    from collections.abc import Container

    from odradek.log.log import Log

log = logging.getLogger(__name__)

__all__ = ["Partition", "PendingIsrChange", "RemoteReplica"]


@dataclass(slots=True)
class RemoteReplica:
    """The leader's view of one follower."""

    log_end_offset: int = -1
    last_caught_up_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = -1
    last_fetch_time_ms: int = 0
    # What its last fetch said its log start offset was (Fetch v5+; -1: not known since this
    # broker became leader): DeleteRecords waits for it (Kafka's Replica.logStartOffset).
    log_start_offset: int = -1


@dataclass(frozen=True, slots=True)
class PendingIsrChange:
    isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int


@dataclass
class Partition:
    topic: str
    partition: int
    local_broker_id: int
    topic_id: Any = None
    leader_id: int | None = None
    leader_epoch: int = -1
    partition_epoch: int = -1
    controller_epoch: int = -1
    isr: tuple[int, ...] = ()
    replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    log: Log | None = None
    remote: dict[int, RemoteReplica] = field(default_factory=dict)
    pending_isr: PendingIsrChange | None = None
    # The log end offset when this broker became leader at the current epoch: a follower is
    # only caught up once it has everything up to here (Kafka's leaderEpochStartOffset).
    leader_epoch_start_offset: int = 0
    # Follower: truncation by leader epoch must happen before fetching (KIP-101/279).
    needs_truncation: bool = False

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR plus replicas whose addition is in flight."""
        if self.pending_isr is None:
            return self.isr
        return tuple(dict.fromkeys(self.isr + self.pending_isr.isr))

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark if self.log is not None else 0

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset if self.log is not None else 0

    # ------------------------------------------------------------------ role changes

    def _apply(self, state: control.LeaderAndIsrPartitionState) -> None:
        self.controller_epoch = state.controller_epoch
        self.replicas = tuple(state.replicas)
        self.adding_replicas = tuple(state.adding_replicas)
        self.removing_replicas = tuple(state.removing_replicas)
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.zk_version

    def make_leader(self, state: control.LeaderAndIsrPartitionState, now_ms: int) -> bool:
        """Lead at the controller's epoch with its ISR; True if we were not leader before.
        Returns after possibly advancing the high watermark (the ISR may be just us)."""
        was_leader = self.is_leader
        self._apply(state)
        self.isr = tuple(state.isr)
        self.pending_isr = None
        self.leader_id = self.local_broker_id
        self.needs_truncation = False
        assert self.log is not None
        leo = self.log.log_end_offset
        # Record where this epoch begins, so followers can truncate against it.
        self.log.assign_epoch_start_offset(self.leader_epoch, leo)
        self.leader_epoch_start_offset = leo
        # Every new leader epoch forgets what the followers had (Kafka's Partition.makeLeader
        # resets the log end offset of remote replicas): the high watermark then moves only on offsets the
        # followers fetch at in this epoch. ISR members count as caught up now, so the reset
        # does not shrink the ISR before they have had a chance to fetch.
        self.remote = {r: RemoteReplica(-1, now_ms if r in self.isr else 0, leo, now_ms)
                       for r in self.replicas if r != self.local_broker_id}
        return not was_leader

    def make_follower(self, state: control.LeaderAndIsrPartitionState) -> bool:
        """Follow ``state.leader``; True if the leader or epoch changed (fetching restarts
        from a truncation by leader epoch)."""
        previous = (self.leader_id, self.leader_epoch)
        self._apply(state)
        self.isr = tuple(state.isr)
        self.pending_isr = None
        self.remote = {}
        self.leader_id = state.leader
        changed = previous != (state.leader, state.leader_epoch)
        if changed:
            self.needs_truncation = True
        return changed

    # ------------------------------------------------------------------ leader bookkeeping

    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int, now_ms: int,
                                    log_start_offset: int = -1) -> bool:
        """A follower fetched at ``fetch_offset`` (so its log end offset is that), reporting its
        ``log_start_offset``.  Returns True if what delayed requests wait for moved: the high
        watermark, or this replica's log start offset (the low watermark DeleteRecords waits for)."""
        replica = self.remote.get(replica_id)
        if replica is None or self.log is None:
            return False
        leader_leo = self.log.log_end_offset
        # Kafka's rule: caught up now if it fetched at our LEO; caught up as of its previous
        # fetch if it has reached what our LEO was then.
        if fetch_offset >= leader_leo:
            replica.last_caught_up_time_ms = now_ms
        elif fetch_offset >= replica.last_fetch_leader_log_end_offset:
            replica.last_caught_up_time_ms = max(replica.last_caught_up_time_ms, replica.last_fetch_time_ms)
        moved = replica.log_end_offset != fetch_offset
        replica.log_end_offset = fetch_offset
        replica.last_fetch_leader_log_end_offset = leader_leo
        replica.last_fetch_time_ms = now_ms
        start_moved = replica.log_start_offset != log_start_offset
        replica.log_start_offset = log_start_offset
        # Only a replica that moved can move the high watermark (the leader's own appends
        # and ISR changes try it themselves).
        return (moved and self.maybe_increment_high_watermark()) or start_moved

    def low_watermark(self, alive: Container[int]) -> int:
        """The smallest log start offset among the leader and the followers whose brokers are
        ``alive``, in the ISR or not (Kafka's lowWatermarkIfLeader): records below it are gone
        from every live replica, which is what DeleteRecords waits for."""
        assert self.log is not None
        low = self.log.log_start_offset
        for broker_id, replica in self.remote.items():
            if replica.log_start_offset < low and broker_id in alive:
                low = replica.log_start_offset
        return low

    def maybe_increment_high_watermark(self) -> bool:
        """High watermark = the smallest log end offset among the (maximal) ISR."""
        if self.log is None or not self.is_leader:
            return False
        new_hw = self.log.log_end_offset
        for r in self.maximal_isr:
            if r == self.local_broker_id:
                continue
            replica = self.remote.get(r)
            leo = replica.log_end_offset if replica is not None else -1
            if leo < new_hw:
                new_hw = leo
        if new_hw < 0:
            return False
        return self.log.maybe_increment_high_watermark(new_hw)

    def isr_expansion_candidate(self, replica_id: int) -> bool:
        """A follower not in the ISR rejoins once it has caught up to the high watermark and to
        the start of the current leader epoch."""
        if not self.is_leader or self.pending_isr is not None or replica_id in self.isr:
            return False
        if replica_id not in self.replicas or replica_id in self.removing_replicas:
            return False
        replica = self.remote.get(replica_id)
        return (replica is not None and replica.log_end_offset >= self.high_watermark
                and replica.log_end_offset >= self.leader_epoch_start_offset)

    def out_of_sync_replicas(self, now_ms: int, max_lag_ms: int) -> list[int]:
        """ISR members that have not caught up with the leader for ``max_lag_ms``."""
        if not self.is_leader or self.pending_isr is not None:
            return []
        stale = []
        for r in self.isr:
            if r == self.local_broker_id:
                continue
            replica = self.remote.get(r)
            if replica is None or now_ms - replica.last_caught_up_time_ms > max_lag_ms:
                stale.append(r)
        return stale

    def min_insync_replicas(self) -> int:
        return self.log.config.min_insync_replicas if self.log is not None else 1

    def enough_replicas_reached(self, required_offset: int) -> tuple[bool, bool]:
        """For acks=-1: (done, enough ISR).  Done once the high watermark passes
        ``required_offset``; then the ISR must still be at least min.insync.replicas."""
        if self.high_watermark >= required_offset:
            return True, len(self.isr) >= self.min_insync_replicas()
        return False, True
