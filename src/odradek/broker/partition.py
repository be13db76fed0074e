"""One partition as this broker hosts it: leader or follower, leader epoch, ISR, replicas."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from odradek.protocol import control

__all__ = ["Partition"]


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
    # The partition's log, once the storage layer has opened or created it.
    log: Any = None
    # Follower state the leader tracks: replica id -> log end offset, last caught-up time.
    remote_leos: dict[int, int] = field(default_factory=dict)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def _apply(self, state: control.LeaderAndIsrPartitionState) -> None:
        self.controller_epoch = state.controller_epoch
        self.replicas = tuple(state.replicas)
        self.adding_replicas = tuple(state.adding_replicas)
        self.removing_replicas = tuple(state.removing_replicas)
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.zk_version

    def make_leader(self, state: control.LeaderAndIsrPartitionState) -> bool:
        """Become leader with the controller's ISR and epoch; True if we were not leader."""
        was_leader = self.is_leader
        self._apply(state)
        self.isr = tuple(state.isr)
        self.leader_id = self.local_broker_id
        if not was_leader:
            # Followers' positions are unknown until they fetch from the new leader.
            self.remote_leos = {r: -1 for r in self.replicas if r != self.local_broker_id}
        else:
            for r in self.replicas:
                if r != self.local_broker_id:
                    self.remote_leos.setdefault(r, -1)
            for r in list(self.remote_leos):
                if r not in self.replicas:
                    del self.remote_leos[r]
        return not was_leader

    def make_follower(self, state: control.LeaderAndIsrPartitionState) -> bool:
        """Follow ``state.leader``; True if the leader changed (fetching must restart)."""
        previous = self.leader_id
        self._apply(state)
        self.isr = ()  # only the leader tracks the ISR
        self.remote_leos = {}
        self.leader_id = state.leader
        return previous != state.leader
