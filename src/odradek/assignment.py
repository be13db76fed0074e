"""Replica placement: Kafka's ``AdminUtils.assignReplicasToBrokers``.

Three goals, in Kafka's words: spread replicas evenly among brokers; for the partitions led
by one broker, spread their other replicas over the other brokers; and when every broker has
a rack, put each partition's replicas on different racks where possible.

Without racks: the first replica of each partition goes round-robin from a random start
index in the broker list; the remaining replicas follow it at an increasing shift, bumped
every time the partition id wraps around the broker count.  With racks, the broker list is
first rearranged to alternate racks, and a candidate replica is skipped while its rack (or
broker) already holds a replica of the partition and other racks (brokers) don't.

Worked through: 3 brokers, start index 1 and replica shift 2 give ``{0: [1, 2, 0], 1: [2, 0, 1], 2: [0, 1, 2]}``.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from odradek.protocol.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
)

__all__ = [
    "AdminOperationError",
    "BrokerMetadata",
    "assign_new_partitions",
    "assign_replicas_to_brokers",
    "validate_replica_assignment",
]


class AdminOperationError(InvalidReplicaAssignmentError):
    """An admin request that cannot be carried out as asked (Kafka's AdminOperationException)."""


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    id: int
    rack: str | None = None


def assign_replicas_to_brokers(
    brokers: Sequence[BrokerMetadata | int],
    n_partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    *,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Place ``n_partitions`` partitions of ``replication_factor`` replicas on ``brokers``.

    ``brokers`` keep their order (Kafka's callers pass them sorted by id).  A negative
    ``fixed_start_index`` draws the start index and the replica shift at random; a
    non-negative one uses it for both, as Kafka does.  Returns ``{partition: [broker, ...]}``
    whose first broker is the preferred leader.
    """
    metas = [b if isinstance(b, BrokerMetadata) else BrokerMetadata(b) for b in brokers]
    if n_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(metas):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(metas)}."
        )
    rng = rng or random.Random()
    if all(m.rack is None for m in metas):
        return _assign_rack_unaware(
            n_partitions, replication_factor, [m.id for m in metas],
            fixed_start_index, start_partition_id, rng,
        )
    if any(m.rack is None for m in metas):
        raise AdminOperationError(
            "Not all brokers have rack information for replica rack aware assignment."
        )
    return _assign_rack_aware(
        n_partitions, replication_factor, {m.id: m.rack for m in metas},  # type: ignore[misc]
        fixed_start_index, start_partition_id, rng,
    )


def assign_new_partitions(brokers: Sequence[BrokerMetadata | int], existing: Mapping[int, Sequence[int]],
                          num_partitions: int) -> dict[int, list[int]]:
    """Place the partitions that grow a topic from ``len(existing)`` to ``num_partitions``, as
    Kafka's addPartitions does: the start index is the position of the existing first
    partition's first replica in ``brokers``, partition ids continue from the current count,
    and the replication factor is the existing one."""
    first_partition = existing[min(existing)]
    ids = [b.id if isinstance(b, BrokerMetadata) else b for b in brokers]
    start_index = next((i for i, b in enumerate(ids) if b >= first_partition[0]), 0)
    return assign_replicas_to_brokers(brokers, num_partitions - len(existing), len(first_partition),
                                      start_index, len(existing))


def _replica_index(first_replica_index: int, second_replica_shift: int, replica_index: int,
                   n_brokers: int) -> int:
    shift = 1 + (second_replica_shift + replica_index) % (n_brokers - 1)
    return (first_replica_index + shift) % n_brokers


def _start_and_shift(fixed_start_index: int, n_brokers: int, rng: random.Random) -> tuple[int, int]:
    if fixed_start_index >= 0:
        return fixed_start_index, fixed_start_index
    # Two draws, start index first, as Kafka's rand.nextInt calls.
    start_index = rng.randrange(n_brokers)
    return start_index, rng.randrange(n_brokers)


def _first_replicas(n_partitions: int, n_brokers: int, fixed_start_index: int, start_partition_id: int,
                    rng: random.Random) -> Iterator[tuple[int, int, int]]:
    """For each partition to place: its id, the index of its first replica in the broker
    list, and the shift of the rest, which grows by one each time the ids wrap around the
    brokers (the walk both of Kafka's assigners share)."""
    start_index, next_replica_shift = _start_and_shift(fixed_start_index, n_brokers, rng)
    first_id = max(0, start_partition_id)
    for partition in range(first_id, first_id + n_partitions):
        if partition > 0 and partition % n_brokers == 0:
            next_replica_shift += 1
        yield partition, (partition + start_index) % n_brokers, next_replica_shift


def _assign_rack_unaware(n_partitions: int, replication_factor: int, broker_list: list[int],
                         fixed_start_index: int, start_partition_id: int,
                         rng: random.Random) -> dict[int, list[int]]:
    n = len(broker_list)
    assignment: dict[int, list[int]] = {}
    for partition, first, shift in _first_replicas(n_partitions, n, fixed_start_index, start_partition_id, rng):
        replicas = [broker_list[first]]
        replicas.extend(broker_list[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1))
        assignment[partition] = replicas
    return assignment


def rack_alternated_broker_list(broker_racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered so consecutive entries sit on different racks: racks in name order,
    each rack's brokers in id order, taking one broker per rack in turn."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in broker_racks.items():
        by_rack.setdefault(rack, []).append(broker)
    iterators = {rack: iter(sorted(ids)) for rack, ids in by_rack.items()}
    racks = sorted(iterators)
    result: list[int] = []
    rack_index = 0
    while len(result) < len(broker_racks):
        nxt = next(iterators[racks[rack_index]], None)
        if nxt is not None:
            result.append(nxt)
        rack_index = (rack_index + 1) % len(racks)
    return result


def _assign_rack_aware(n_partitions: int, replication_factor: int, broker_racks: dict[int, str],
                       fixed_start_index: int, start_partition_id: int,
                       rng: random.Random) -> dict[int, list[int]]:
    n_racks = len(set(broker_racks.values()))
    arranged = rack_alternated_broker_list(broker_racks)
    n = len(arranged)
    assignment: dict[int, list[int]] = {}
    for partition, first, shift in _first_replicas(n_partitions, n, fixed_start_index, start_partition_id, rng):
        leader = arranged[first]
        replicas = [leader]
        racks_with_replicas = {broker_racks[leader]}
        brokers_with_replicas = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first, shift * n_racks, k, n)]
                rack = broker_racks[broker]
                k += 1
                # Skip a broker whose rack already holds a replica, unless every rack does;
                # likewise skip a broker already holding one, unless every broker does.
                if (rack not in racks_with_replicas or len(racks_with_replicas) == n_racks) and (
                    broker not in brokers_with_replicas or len(brokers_with_replicas) == n
                ):
                    replicas.append(broker)
                    racks_with_replicas.add(rack)
                    brokers_with_replicas.add(broker)
                    break
        assignment[partition] = replicas
    return assignment


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """Parse kafka-topics.sh's ``--replica-assignment 1:2:0,2:0:1`` (partition order by
    position; the first broker of each is the preferred leader)."""
    assignment: dict[int, list[int]] = {}
    for partition, part in enumerate(text.split(",")):
        try:
            brokers = [int(s.strip()) for s in part.split(":")]
        except ValueError:
            raise AdminOperationError(
                f"Invalid replica assignment {text!r}: broker ids must be integers "
                f"separated by ':' within a partition and ',' between partitions."
            ) from None
        assignment[partition] = brokers
    validate_replica_assignment(assignment)
    return assignment


def validate_replica_assignment(assignment: Mapping[int, Sequence[int]],
                                live_brokers: Iterable[int] | None = None,
                                expected_replication_factor: int | None = None) -> None:
    """Kafka's checks on an explicit assignment: no duplicate broker within a partition,
    the same replica count everywhere, and (when ``live_brokers`` is given) only known
    brokers.  Raises :class:`AdminOperationError` (INVALID_REPLICA_ASSIGNMENT)."""
    if not assignment:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    known = set(live_brokers) if live_brokers is not None else None
    first_size = expected_replication_factor
    for partition in sorted(assignment):
        replicas = list(assignment[partition])
        if not replicas:
            raise InvalidReplicationFactorError(
                f"Partition {partition} has no replicas; replication factor must be larger than 0."
            )
        duplicates = sorted({b for b in replicas if replicas.count(b) > 1})
        if duplicates:
            raise AdminOperationError(
                "Partition replica lists may not contain duplicate entries: "
                + ",".join(map(str, duplicates))
            )
        if first_size is None:
            first_size = len(replicas)
        elif len(replicas) != first_size:
            raise AdminOperationError(
                f"Partition {partition} has different replication factor: {replicas}"
            )
        if known is not None:
            unknown = sorted(set(replicas) - known)
            if unknown:
                raise AdminOperationError(
                    f"Unknown broker id(s) {','.join(map(str, unknown))} in the replica "
                    f"assignment of partition {partition}; registered brokers: "
                    f"{','.join(map(str, sorted(known))) or 'none'}."
                )
