"""Controller events: every ZooKeeper watch and every request to the controller becomes one.

Watch callbacks do nothing but enqueue one of these; the ControllerEventManager processes
them one at a time, in order.  A request handler that waits for the controller's answer puts
a ``ControllerRequestEvent``: its ``reply`` future is answered exactly once, by the handler
or, if the event is never processed (dropped on a session expiry, or the controller is
shutting down), by ``preempt()`` with NOT_CONTROLLER, as Kafka's ControllerEvent.preempt().
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from odradek.protocol.errors import ErrorCode

__all__ = [
    "AlterPartitionReceived",
    "AutoPreferredReplicaLeaderElection",
    "BrokerChange",
    "BrokerModifications",
    "ControlledShutdown",
    "ControllerChange",
    "ControllerEvent",
    "ControllerRequestEvent",
    "Expire",
    "LeaderAndIsrResponseReceived",
    "LogDirEventNotification",
    "PartitionModifications",
    "PartitionReassignment",
    "PreferredReplicaLeaderElection",
    "Reelect",
    "RegisterBrokerAndReelect",
    "Startup",
    "TopicChange",
    "TopicDeletion",
    "TopicDeletionStopReplicaResponseReceived",
    "TopicUncleanLeaderElectionEnable",
]


@dataclass(frozen=True, slots=True)
class ControllerEvent:
    """Base class; ``name`` is what the event log prints."""

    @property
    def name(self) -> str:
        return type(self).__name__

    def fail(self, error: ErrorCode) -> None:
        """The event could not be processed: tell whoever waits for it (nobody, by default)."""

    def preempt(self) -> None:
        """The event will not be processed: it was dropped from the queue, or the event
        manager is closing (Kafka's ControllerEvent.preempt())."""
        self.fail(ErrorCode.not_controller)


class ControllerRequestEvent(ControllerEvent):
    """An event a request handler waits on: ``reply`` receives ``(error code, result)`` once.

    Subclasses declare the ``reply`` field and say what an empty result is.
    """

    __slots__ = ()
    reply: asyncio.Future[Any] | None

    def empty_result(self) -> Any:
        return {}

    def answer(self, error: ErrorCode, result: Any) -> None:
        """Resolve ``reply``; later answers (or a reply nobody waits for) are ignored."""
        if self.reply is not None and not self.reply.done():
            self.reply.set_result((error, result))

    def fail(self, error: ErrorCode) -> None:
        self.answer(error, self.empty_result())


@dataclass(frozen=True, slots=True)
class Startup(ControllerEvent):
    pass


@dataclass(frozen=True, slots=True)
class ControllerChange(ControllerEvent):
    """``/controller`` was created, changed or deleted."""


@dataclass(frozen=True, slots=True)
class Reelect(ControllerEvent):
    pass


@dataclass(frozen=True, slots=True)
class Expire(ControllerEvent):
    """Our ZooKeeper session expired: resign if we were the controller."""


@dataclass(frozen=True, slots=True)
class RegisterBrokerAndReelect(ControllerEvent):
    """A new ZooKeeper session after an expiry: register again and take part in the election."""


@dataclass(frozen=True, slots=True)
class BrokerChange(ControllerEvent):
    """The children of ``/brokers/ids`` changed."""


@dataclass(frozen=True, slots=True)
class BrokerModifications(ControllerEvent):
    broker_id: int


@dataclass(frozen=True, slots=True)
class TopicChange(ControllerEvent):
    """The children of ``/brokers/topics`` changed."""


@dataclass(frozen=True, slots=True)
class PartitionModifications(ControllerEvent):
    """``/brokers/topics/<topic>`` changed (partitions added)."""

    topic: str


@dataclass(frozen=True, slots=True)
class TopicDeletion(ControllerEvent):
    """The children of ``/admin/delete_topics`` changed."""


@dataclass(frozen=True, slots=True)
class TopicDeletionStopReplicaResponseReceived(ControllerEvent):
    replica_id: int
    # (topic, partition) -> Kafka error code; top_error applies to all when non-zero
    partition_errors: dict[tuple[str, int], int] = field(hash=False, compare=False)
    top_error: int = 0


@dataclass(frozen=True, slots=True)
class LeaderAndIsrResponseReceived(ControllerEvent):
    broker_id: int
    partition_errors: dict[tuple[str, int], int] = field(hash=False, compare=False)
    top_error: int = 0


@dataclass(frozen=True, slots=True)
class LogDirEventNotification(ControllerEvent):
    """The children of ``/log_dir_event_notification`` changed: a broker's log directory failed."""


@dataclass(frozen=True, slots=True)
class PartitionReassignment(ControllerEvent):
    """``/admin/reassign_partitions`` was created."""


@dataclass(frozen=True, slots=True)
class PreferredReplicaLeaderElection(ControllerRequestEvent):
    """``/admin/preferred_replica_election`` was created, or an ElectLeaders request came."""

    partitions: frozenset[tuple[str, int]] | None = None
    reply: asyncio.Future[Any] | None = field(default=None, hash=False, compare=False)


@dataclass(frozen=True, slots=True)
class AutoPreferredReplicaLeaderElection(ControllerEvent):
    pass


@dataclass(frozen=True, slots=True)
class TopicUncleanLeaderElectionEnable(ControllerEvent):
    topic: str


@dataclass(frozen=True, slots=True)
class ControlledShutdown(ControllerRequestEvent):
    """A broker asks to move leadership away before it stops; the result is the list of
    partitions it still leads."""

    broker_id: int
    broker_epoch: int
    reply: asyncio.Future[Any] = field(hash=False, compare=False)

    def empty_result(self) -> Any:
        return []

    def fail(self, error: ErrorCode) -> None:
        # Kafka fails a controlled shutdown that reached no active controller with
        # ControllerMovedException, STALE_CONTROLLER_EPOCH on the wire (not NOT_CONTROLLER).
        self.answer(ErrorCode.stale_controller_epoch if error == ErrorCode.not_controller else error, [])


@dataclass(frozen=True, slots=True)
class AlterPartitionReceived(ControllerRequestEvent):
    """A leader asks to change a partition's ISR (AlterPartition / AlterIsr)."""

    broker_id: int
    broker_epoch: int
    # (topic id, partition) -> (leader_epoch, new_isr, partition_epoch)
    changes: dict[tuple[Any, int], tuple[int, tuple[int, ...], int]] = field(hash=False, compare=False)
    reply: asyncio.Future[Any] = field(hash=False, compare=False)
