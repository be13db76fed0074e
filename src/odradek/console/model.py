"""What the console's pages show, computed from plain data without I/O: the placement map's
cells, under-replicated and offline partitions, a group's lag history and messages-in rates
from the brokers' Prometheus counters."""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["BrokerInfo", "ClusterSnapshot", "LagHistory", "MessagesInRates", "PartitionInfo", "PlacementRow",
           "ReplicaState", "messages_in_totals", "placement_rows", "sparkline_svg"]

# The counter the brokers export for BrokerTopicMetrics.MessagesInPerSec, as the JMX exporter names it.
MESSAGES_IN = "kafka_server_brokertopicmetrics_messagesin"


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    broker_id: int
    host: str
    port: int
    rack: str | None
    alive: bool = True  # False: named by a replica list but absent from the brokers' metadata


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """One partition as a Metadata response describes it."""

    topic: str
    partition: int
    leader: int  # -1: no leader (offline)
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()

    @property
    def preferred_leader(self) -> int | None:
        return self.replicas[0] if self.replicas else None


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """One Metadata answer, with brokers that replica lists name but the answer left out (dead)."""

    brokers: dict[int, BrokerInfo]
    controller_id: int
    partitions: tuple[PartitionInfo, ...]

    @classmethod
    def of(cls, live: Iterable[BrokerInfo], controller_id: int, partitions: Iterable[PartitionInfo],
           known: Mapping[int, BrokerInfo] | None = None) -> ClusterSnapshot:
        """The snapshot of a Metadata answer; brokers its replica lists name that it does not
        list are kept as dead, with what ``known`` (earlier answers) said of them."""
        brokers = {b.broker_id: b for b in live}
        parts = tuple(sorted(partitions, key=lambda p: (p.topic, p.partition)))
        for p in parts:
            for replica in p.replicas:
                if replica not in brokers:
                    seen = (known or {}).get(replica)
                    brokers[replica] = BrokerInfo(replica, seen.host if seen else "?", seen.port if seen else -1,
                                                  seen.rack if seen else None, alive=False)
        return cls(dict(sorted(brokers.items())), controller_id, parts)

    def topics(self) -> list[str]:
        return sorted({p.topic for p in self.partitions})

    def of_topic(self, topic: str | None) -> list[PartitionInfo]:
        return [p for p in self.partitions if topic is None or p.topic == topic]

    def under_replicated(self) -> list[PartitionInfo]:
        """Partitions with a leader whose ISR is smaller than their replica list."""
        return [p for p in self.partitions if p.leader >= 0 and len(p.isr) < len(p.replicas)]

    def offline(self) -> list[PartitionInfo]:
        """Partitions without a live leader."""
        return [p for p in self.partitions if p.leader < 0 or not self._alive(p.leader)]

    def _alive(self, broker_id: int) -> bool:
        broker = self.brokers.get(broker_id)
        return broker is not None and broker.alive


class ReplicaState(enum.Enum):
    LEADER = "leader"
    FOLLOWER = "follower"  # in the ISR
    OUT_OF_ISR = "out-of-isr"  # its broker is up, but it is not in sync
    OFFLINE = "offline"  # its broker is down or its log directory failed


@dataclass(frozen=True, slots=True)
class PlacementCell:
    broker_id: int
    state: ReplicaState
    preferred: bool  # the first replica: the leader a preferred election restores


@dataclass(frozen=True, slots=True)
class PlacementRow:
    partition: PartitionInfo
    cells: dict[int, PlacementCell] = field(default_factory=dict)  # by broker id; absent: no replica there


def replica_state(p: PartitionInfo, broker: BrokerInfo | None) -> ReplicaState:
    if broker is None or not broker.alive or broker.broker_id in p.offline_replicas:
        return ReplicaState.OFFLINE
    if broker.broker_id == p.leader:
        return ReplicaState.LEADER
    return ReplicaState.FOLLOWER if broker.broker_id in p.isr else ReplicaState.OUT_OF_ISR


def placement_rows(snapshot: ClusterSnapshot, topic: str | None) -> list[PlacementRow]:
    """The placement map's rows: one per partition of ``topic`` (None: every topic)."""
    rows = []
    for p in snapshot.of_topic(topic):
        cells = {r: PlacementCell(r, replica_state(p, snapshot.brokers.get(r)), i == 0)
                 for i, r in enumerate(p.replicas)}
        rows.append(PlacementRow(p, cells))
    return rows


class LagHistory:
    """A short history of each (group, topic, partition)'s lag: the last ``size`` samples."""

    def __init__(self, size: int = 60) -> None:
        self.size = size
        self._samples: dict[tuple[str, str, int], deque[tuple[float, int]]] = {}

    def record(self, group: str, lags: Mapping[tuple[str, int], int], at: float) -> None:
        for (topic, partition), lag in lags.items():
            self._samples.setdefault((group, topic, partition), deque(maxlen=self.size)).append((at, lag))

    def of(self, group: str, topic: str, partition: int) -> list[tuple[float, int]]:
        return list(self._samples.get((group, topic, partition), ()))


def sparkline_svg(values: Sequence[int], width: int = 120, height: int = 24) -> str:
    """A tiny inline SVG line of ``values`` (oldest first); empty for fewer than two values."""
    if len(values) < 2:
        return ""
    top = max(max(values), 1)
    step = width / (len(values) - 1)
    points = " ".join(f"{i * step:.1f},{height - 1 - (v / top) * (height - 2):.1f}" for i, v in enumerate(values))
    return (f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}">'
            f'<polyline fill="none" stroke="currentColor" stroke-width="1.5" points="{points}"/></svg>')


def messages_in_totals(exposition: str) -> dict[str, float]:
    """Per topic, the MessagesInPerSec counter's total in one broker's /metrics text."""
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(exposition):
        if family.name != MESSAGES_IN:
            continue
        for sample in family.samples:
            topic = sample.labels.get("topic")
            if sample.name.endswith("_total") and topic:
                totals[topic] = totals.get(topic, 0.0) + sample.value
    return totals


class MessagesInRates:
    """Messages in per second per topic, from successive samples of the brokers' counters."""

    def __init__(self) -> None:
        self._last: tuple[float, dict[tuple[str, str], float]] | None = None
        self.rates: dict[str, float] = {}

    def update(self, at: float, per_broker: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
        """Take a sample (broker URL -> topic -> counter); the rates since the previous one.  A
        counter that went down (its broker restarted) counts from zero."""
        now = {(url, topic): value for url, totals in per_broker.items() for topic, value in totals.items()}
        if self._last is not None and at > self._last[0]:
            then, before = self._last
            rates: dict[str, float] = {}
            for (url, topic), value in now.items():
                delta = value - before.get((url, topic), 0.0)
                rates[topic] = rates.get(topic, 0.0) + (delta if delta >= 0 else value) / (at - then)
            self.rates = rates
        self._last = (at, now)
        return self.rates
