"""Replica assignment: Kafka's AdminUtils.assignReplicasToBrokers, its parse and validation.

Expected values come from three places: worked examples of Kafka's placement (a 5-broker table
and a 3-broker topic created, then grown by one partition, with kafka-topics.sh),
the expectations of Kafka's own unit tests (AdminRackAwareTest, AdminTest/AdminZkClientTest
testReplicaAssignment, testManualReplicaAssignment, testGetBrokerMetadatas), and invariants
that follow from the algorithm and are checked with Hypothesis.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from odradek.assignment import (
    AdminOperationError,
    BrokerMetadata,
    assign_new_partitions,
    assign_replicas_to_brokers,
    parse_replica_assignment,
    rack_alternated_broker_list,
    validate_replica_assignment,
)
from odradek.protocol.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
)
from support.examples import examples

# ----------------------------------------------------------------------------- helpers


class ScriptedRandom:
    """An rng whose draws are given up front; records the bound of every draw asked for.

    Running out of draws raises IndexError, so passing ``ScriptedRandom()`` also proves
    that a code path draws nothing.
    """

    def __init__(self, *draws: int) -> None:
        self._draws = list(draws)
        self.bounds: list[int] = []

    def randrange(self, n: int) -> int:
        self.bounds.append(n)
        value = self._draws.pop(0)
        assert 0 <= value < n, f"scripted draw {value} outside range({n})"
        return value


def with_racks(racks: Mapping[int, str]) -> list[BrokerMetadata]:
    """Broker metadata sorted by id, as Kafka's callers (and its tests' toBrokerMetadata) pass it."""
    return [BrokerMetadata(b, racks[b]) for b in sorted(racks)]


def leader_counts(assignment: Mapping[int, Sequence[int]], brokers: Sequence[int]) -> dict[int, int]:
    counts = Counter(replicas[0] for replicas in assignment.values())
    return {b: counts[b] for b in brokers}


def replica_counts(assignment: Mapping[int, Sequence[int]], brokers: Sequence[int]) -> dict[int, int]:
    counts = Counter(b for replicas in assignment.values() for b in replicas)
    return {b: counts[b] for b in brokers}


def rack_count(replicas: Sequence[int], racks: Mapping[int, str]) -> int:
    return len({racks[b] for b in replicas})


def check_distribution(assignment: Mapping[int, Sequence[int]], racks: Mapping[int, str],
                       n_partitions: int, rf: int, *, rack_aware: bool = True,
                       even_leaders: bool = True, even_replicas: bool = True) -> None:
    """The checks of Kafka's RackAwareTest.checkReplicaDistribution."""
    brokers = sorted(racks)
    assert len(assignment) == n_partitions
    for replicas in assignment.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf, f"a broker holds two replicas of one partition: {replicas}"
    if rack_aware:
        assert all(rack_count(r, racks) == rf for r in assignment.values()), assignment
    if even_leaders:
        assert set(leader_counts(assignment, brokers).values()) == {n_partitions // len(brokers)}
    if even_replicas:
        assert set(replica_counts(assignment, brokers).values()) == {
            n_partitions * rf // len(brokers)}


# ----------------------------------------------------------------------------- worked examples

# 5 brokers, 10 partitions, RF 3, start index 0.  One row per replica position:
# the partition whose n-th replica sits on broker-0 .. broker-4.
FIVE_BROKER_ROWS: list[tuple[int, list[int]]] = [
    (0, [0, 1, 2, 3, 4]),  # 1st replica
    (0, [5, 6, 7, 8, 9]),  # 1st replica
    (1, [4, 0, 1, 2, 3]),  # 2nd replica
    (1, [8, 9, 5, 6, 7]),  # 2nd replica
    (2, [3, 4, 0, 1, 2]),  # 3rd replica
    (2, [7, 8, 9, 5, 6]),  # 3rd replica
]

# Kafka's AdminTest / AdminRackAwareTest testReplicaAssignment: the same case as a map.
KAFKA_TEST_REPLICA_ASSIGNMENT = {
    0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
    5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2],
}


def test_five_brokers_ten_partitions_with_fixed_start_index_0():
    expected: dict[int, list[int | None]] = {p: [None, None, None] for p in range(10)}
    for replica, row in FIVE_BROKER_ROWS:
        for broker, partition in enumerate(row):
            expected[partition][replica] = broker

    assignment = assign_replicas_to_brokers(list(range(5)), 10, 3, fixed_start_index=0)

    assert assignment == expected
    assert assignment == KAFKA_TEST_REPLICA_ASSIGNMENT


def test_three_brokers_random_start_index_1_and_replica_shift_2():
    rng = ScriptedRandom(1, 2)  # Kafka draws the start index first, then the shift

    assignment = assign_replicas_to_brokers([0, 1, 2], 3, 3, rng=rng)

    assert assignment == {0: [1, 2, 0], 1: [2, 0, 1], 2: [0, 1, 2]}
    assert rng.bounds == [3, 3]  # both draws are bounded by the broker count


def test_three_brokers_added_fourth_partition():
    # kafka-topics.sh --alter --partitions 4: start index = position of the existing first
    # replica of partition 0 (broker 1), start partition id = the current count.
    assignment = assign_replicas_to_brokers(
        [0, 1, 2], 1, 3, fixed_start_index=1, start_partition_id=3, rng=ScriptedRandom())

    assert assignment == {3: [1, 2, 0]}


def test_fixed_start_index_draws_nothing_and_uses_it_as_shift_too():
    # 4 brokers, start 1: the shift is 1 as well, so replica 2 sits 2 places after the leader.
    assignment = assign_replicas_to_brokers([0, 1, 2, 3], 4, 2, fixed_start_index=1,
                                            rng=ScriptedRandom())

    assert assignment == {0: [1, 3], 1: [2, 0], 2: [3, 1], 3: [0, 2]}


def test_broker_order_is_kept_not_sorted():
    assignment = assign_replicas_to_brokers([30, 10, 20], 3, 1, fixed_start_index=0)

    assert assignment == {0: [30], 1: [10], 2: [20]}


def test_default_rng_varies_the_start_index():
    leaders = {assign_replicas_to_brokers(list(range(5)), 1, 1)[0][0] for _ in range(200)}

    assert len(leaders) > 1


def test_plain_ids_and_rackless_metadata_are_the_same_input():
    ints = assign_replicas_to_brokers([0, 1, 2, 3, 4], 10, 3, fixed_start_index=2)
    metas = assign_replicas_to_brokers([BrokerMetadata(b) for b in range(5)], 10, 3,
                                       fixed_start_index=2)

    assert ints == metas


# ----------------------------------------------------------------------------- Kafka: rack aware

SIX_BROKERS_3_RACKS = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}


def test_kafka_rack_alternated_broker_list():
    # AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}

    assert rack_alternated_broker_list(racks) == [0, 3, 1, 5, 4, 2]
    without_5 = {b: r for b, r in racks.items() if b != 5}
    assert rack_alternated_broker_list(without_5) == [0, 3, 1, 4, 2]


def test_kafka_rack_aware_assignment_with_fixed_start():
    # AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}

    assignment = assign_replicas_to_brokers(with_racks(racks), 7, 3, 0, 0)

    assert assignment == {
        0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2],
        4: [4, 2, 0], 5: [2, 0, 3], 6: [0, 4, 2],
    }


def test_rack_aware_differs_from_rack_unaware_on_the_same_ids():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}

    aware = assign_replicas_to_brokers(with_racks(racks), 7, 3, 0, 0)
    unaware = assign_replicas_to_brokers(sorted(racks), 7, 3, 0, 0)

    assert unaware[0] == [0, 1, 2]  # 1 and 2 share rack3: rack-unaware placement
    assert aware != unaware


# (Kafka test name, racks, partitions, RF, fixed start, start partition id, checks)
KAFKA_RACK_AWARE_CASES = [
    ("testAssignmentWithRackAware", SIX_BROKERS_3_RACKS, 6, 3, 2, 0, {}),
    ("testAssignmentWithRackAwareWithRandomStartIndex", SIX_BROKERS_3_RACKS, 6, 3, -1, -1, {}),
    ("testAssignmentWithRackAwareWithUnevenReplicas", SIX_BROKERS_3_RACKS, 13, 3, 0, 0,
     {"even_leaders": False, "even_replicas": False}),
    ("testAssignmentWithRackAwareWithUnevenRacks",
     {0: "rack1", 1: "rack1", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}, 12, 3, -1, -1,
     {"even_replicas": False}),
    ("testAssignmentWith2ReplicasRackAware", SIX_BROKERS_3_RACKS, 12, 2, -1, -1, {}),
    ("testRackAwareExpansion",
     {6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"}, 12, 2, -1, 12, {}),
    ("testAssignmentWith2ReplicasRackAwareWith6Partitions", SIX_BROKERS_3_RACKS, 6, 2, -1, -1, {}),
    ("testAssignmentWith2ReplicasRackAwareWith6PartitionsAnd3Brokers",
     {0: "rack1", 1: "rack2", 4: "rack3"}, 3, 2, -1, -1, {}),
    ("testLargeNumberPartitionsAssignment",
     {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1",
      6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack1", 11: "rack3"}, 96, 3, -1, -1, {}),
]


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize(("name", "racks", "n_partitions", "rf", "fixed", "start", "checks"),
                         KAFKA_RACK_AWARE_CASES, ids=[c[0] for c in KAFKA_RACK_AWARE_CASES])
def test_kafka_rack_aware_distribution(name, racks, n_partitions, rf, fixed, start, checks, seed):
    assignment = assign_replicas_to_brokers(with_racks(racks), n_partitions, rf, fixed, start,
                                            rng=random.Random(seed))

    first = max(0, start)
    assert sorted(assignment) == list(range(first, first + n_partitions))
    check_distribution(assignment, racks, n_partitions, rf, **checks)


@pytest.mark.parametrize("seed", range(10))
def test_kafka_more_replicas_than_racks(seed):
    # AdminRackAwareTest.testMoreReplicasThanRacks: RF 5 over 3 racks uses all 3 racks.
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}

    assignment = assign_replicas_to_brokers(with_racks(racks), 6, 5, rng=random.Random(seed))

    assert [len(r) for r in assignment.values()] == [5] * 6
    assert all(len(set(r)) == 5 for r in assignment.values())
    assert [rack_count(r, racks) for r in assignment.values()] == [3] * 6


@pytest.mark.parametrize("seed", range(10))
def test_kafka_less_replicas_than_racks(seed):
    # AdminRackAwareTest.testLessReplicasThanRacks
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}

    assignment = assign_replicas_to_brokers(with_racks(racks), 6, 2, rng=random.Random(seed))

    assert [rack_count(r, racks) for r in assignment.values()] == [2] * 6


@pytest.mark.parametrize("seed", range(10))
def test_kafka_single_rack(seed):
    # AdminRackAwareTest.testSingleRack: one rack degenerates to spreading over brokers.
    racks = dict.fromkeys(range(6), "rack1")

    assignment = assign_replicas_to_brokers(with_racks(racks), 6, 3, rng=random.Random(seed))

    assert all(len(set(r)) == 3 for r in assignment.values())
    assert leader_counts(assignment, range(6)) == dict.fromkeys(range(6), 1)


def test_kafka_skip_broker_with_replica_already_assigned():
    # AdminRackAwareTest.testSkipBrokerWithReplicaAlreadyAssigned: RF 4 over 3 racks with
    # rack "a" holding three brokers; once every rack has a replica the rack rule stops
    # filtering and only the "already a replica" rule prevents a duplicate broker.
    racks = {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}

    assignment = assign_replicas_to_brokers(with_racks(racks), 6, 4, fixed_start_index=2)

    check_distribution(assignment, racks, 6, 4, rack_aware=False, even_leaders=False,
                       even_replicas=False)
    assert all(rack_count(r, racks) == 3 for r in assignment.values())


def test_kafka_not_all_brokers_have_rack_information():
    # AdminZkClientTest.testGetBrokerMetadatas: broker 4 has no rack -> enforced mode fails.
    metas = [BrokerMetadata(0, "rack1"), BrokerMetadata(1, "rack2"), BrokerMetadata(2, "rack2"),
             BrokerMetadata(3, "rack1"), BrokerMetadata(4, None), BrokerMetadata(5, "rack3")]

    with pytest.raises(AdminOperationError, match="Not all brokers have rack information") as e:
        assign_replicas_to_brokers(metas, 3, 2)
    assert e.value.code == ErrorCode.invalid_replica_assignment


def test_disable_rack_aware_by_passing_ids_without_racks():
    # RackAwareMode.Disabled: the same brokers with their racks stripped get the rack-unaware
    # placement, mixed rack information no longer matters.
    metas = [BrokerMetadata(0, "rack1"), BrokerMetadata(1, "rack2"), BrokerMetadata(2, "rack2"),
             BrokerMetadata(3, "rack1"), BrokerMetadata(4, None), BrokerMetadata(5, "rack3")]

    disabled = assign_replicas_to_brokers([m.id for m in metas], 3, 2, fixed_start_index=0)

    assert disabled == {0: [0, 1], 1: [1, 2], 2: [2, 3]}


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize("n_partitions", [0, -1])
def test_partitions_must_be_positive(n_partitions):
    with pytest.raises(InvalidPartitionsError, match="larger than 0") as e:
        assign_replicas_to_brokers([0, 1, 2], n_partitions, 1)
    assert e.value.code == ErrorCode.invalid_partitions == 37


@pytest.mark.parametrize("rf", [0, -1])
def test_replication_factor_must_be_positive(rf):
    # AdminTest.testReplicaAssignment: "test 0 replication factor"
    with pytest.raises(InvalidReplicationFactorError, match="larger than 0") as e:
        assign_replicas_to_brokers(list(range(5)), 10, rf)
    assert e.value.code == ErrorCode.invalid_replication_factor == 38


@pytest.mark.parametrize("brokers", [list(range(5)), with_racks(SIX_BROKERS_3_RACKS)[:5]])
def test_replication_factor_larger_than_brokers(brokers):
    # AdminTest.testReplicaAssignment: "test wrong replication factor" (6 on 5 brokers)
    with pytest.raises(InvalidReplicationFactorError) as e:
        assign_replicas_to_brokers(brokers, 10, 6)
    assert str(e.value) == "Replication factor: 6 larger than available brokers: 5."
    assert e.value.code == ErrorCode.invalid_replication_factor


def test_partition_count_is_checked_before_replication_factor():
    with pytest.raises(InvalidPartitionsError):
        assign_replicas_to_brokers([0], 0, 5)


def test_validate_accepts_a_good_assignment():
    # AdminZkClientTest.testManualReplicaAssignment: "good assignment"
    assert validate_replica_assignment({0: [0, 1, 2], 1: [1, 2, 3]}, live_brokers=range(5)) is None


def test_validate_duplicate_brokers_within_a_partition():
    # AdminZkClientTest.testManualReplicaAssignment: Map(0 -> Seq(0, 0))
    with pytest.raises(AdminOperationError) as e:
        validate_replica_assignment({0: [1, 2], 1: [0, 0]})
    assert str(e.value) == "Partition replica lists may not contain duplicate entries: 0"
    assert e.value.code == ErrorCode.invalid_replica_assignment == 39
    assert isinstance(e.value, InvalidReplicaAssignmentError)


def test_validate_differing_replica_counts():
    # AdminZkClientTest.testManualReplicaAssignment: Map(0 -> Seq(0, 1), 1 -> Seq(0))
    with pytest.raises(AdminOperationError) as e:
        validate_replica_assignment({0: [0, 1], 1: [0]})
    assert str(e.value) == "Partition 1 has different replication factor: [0]"
    assert e.value.code == ErrorCode.invalid_replica_assignment


def test_validate_expected_replication_factor():
    # Adding partitions: new partitions must match the topic's existing replication factor.
    with pytest.raises(AdminOperationError, match="Partition 3 has different replication factor"):
        validate_replica_assignment({3: [0, 1]}, expected_replication_factor=3)


def test_validate_unknown_broker_ids():
    with pytest.raises(AdminOperationError) as e:
        validate_replica_assignment({0: [0, 1], 1: [7, 5]}, live_brokers=[0, 1, 2])
    message = str(e.value)
    assert "Unknown broker id(s) 5,7" in message
    assert "partition 1" in message
    assert "registered brokers: 0,1,2" in message
    assert e.value.code == ErrorCode.invalid_replica_assignment


def test_validate_without_live_brokers_does_not_check_ids():
    validate_replica_assignment({0: [100, 200]})


def test_validate_empty_assignment_and_empty_replica_list():
    with pytest.raises(InvalidPartitionsError):
        validate_replica_assignment({})
    with pytest.raises(InvalidReplicationFactorError, match="Partition 0 has no replicas"):
        validate_replica_assignment({0: []})


def test_added_partitions_start_at_the_first_partitions_leader() -> None:
    # kafka-topics.sh --alter --partitions 4/5 of the 3-broker topic above: the new
    # partitions continue from broker 1, the first replica of partition 0.
    existing = {0: [1, 2, 0], 1: [2, 0, 1], 2: [0, 1, 2]}
    assert assign_new_partitions([0, 1, 2], existing, 4) == {3: [1, 2, 0]}
    grown = assign_new_partitions([BrokerMetadata(0), BrokerMetadata(1), BrokerMetadata(2)], existing, 5)
    assert sorted(grown) == [3, 4] and grown[3] == [1, 2, 0] and grown[4][0] == 2


def test_parse_replica_assignment_three_brokers():
    # kafka-topics.sh --replica-assignment 1:2:0,2:0:1,0:1:2
    assert parse_replica_assignment("1:2:0,2:0:1,0:1:2") == {
        0: [1, 2, 0], 1: [2, 0, 1], 2: [0, 1, 2]}


def test_parse_replica_assignment_trims_spaces():
    assert parse_replica_assignment(" 1 : 2 , 2:0 ") == {0: [1, 2], 1: [2, 0]}


@pytest.mark.parametrize(("text", "message"), [
    ("0:0:1", "may not contain duplicate entries: 0"),
    ("0:1,2", "Partition 1 has different replication factor: [2]"),
    ("0:x", "broker ids must be integers"),
    ("", "broker ids must be integers"),
])
def test_parse_replica_assignment_errors(text, message):
    with pytest.raises(AdminOperationError) as e:
        parse_replica_assignment(text)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


# ----------------------------------------------------------------------------- invariants

# A list of distinct broker ids in arbitrary (not sorted) order.
broker_ids = st.lists(st.integers(0, 1000), min_size=1, max_size=12, unique=True)


@st.composite
def rack_unaware_cases(draw):
    brokers = draw(broker_ids)
    n = len(brokers)
    rf = draw(st.integers(1, n))
    n_partitions = draw(st.integers(1, 60))
    fixed = draw(st.one_of(st.just(-1), st.integers(0, 2 * n)))
    start = draw(st.integers(-1, 30))
    draws = (draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1)))
    return brokers, n_partitions, rf, fixed, start, draws


@given(rack_unaware_cases())
@settings(max_examples=examples(300))
def test_rack_unaware_invariants(case):
    brokers, n_partitions, rf, fixed, start, draws = case
    n = len(brokers)

    assignment = assign_replicas_to_brokers(brokers, n_partitions, rf, fixed, start,
                                            rng=ScriptedRandom(*draws))

    first = max(0, start)
    assert sorted(assignment) == list(range(first, first + n_partitions))
    for replicas in assignment.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert set(replicas) <= set(brokers)
    # Leaders are brokers[(p + start_index) % n] for consecutive p: round-robin, so no broker
    # leads more than one partition more than any other, and exactly P/n when n divides P.
    leaders = leader_counts(assignment, brokers)
    assert max(leaders.values()) - min(leaders.values()) <= 1
    if n_partitions % n == 0:
        assert set(leaders.values()) == {n_partitions // n}
    # Partitions p in [k*n, (k+1)*n) share one shift, and within such a round each replica
    # position is a rotation of the broker list.  With rounds aligned to the first partition,
    # whole rounds give every broker RF replicas and a partial round at most RF more.
    if first % n == 0:
        counts = replica_counts(assignment, brokers)
        assert max(counts.values()) - min(counts.values()) <= rf
        if n_partitions % n == 0:
            assert set(counts.values()) == {n_partitions * rf // n}


@given(broker_ids.filter(lambda b: len(b) >= 2), st.integers(0, 3), st.data())
@settings(max_examples=examples(100))
def test_rack_unaware_followers_of_one_leader_spread_over_the_others(brokers, rounds_in, data):
    # Kafka's goal 2: the shift grows by one per round of n partitions, so over n - 1 aligned
    # rounds the second replicas of the partitions one broker leads are every other broker once.
    n = len(brokers)
    start = rounds_in * n
    draws = (data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, n - 1)))

    assignment = assign_replicas_to_brokers(brokers, n * (n - 1), 2, -1, start,
                                            rng=ScriptedRandom(*draws))

    for leader in brokers:
        followers = [r[1] for r in assignment.values() if r[0] == leader]
        assert sorted(followers) == sorted(b for b in brokers if b != leader)


@st.composite
def rack_aware_cases(draw):
    brokers = draw(broker_ids)
    racks = {b: draw(st.sampled_from(["r0", "r1", "r2", "r3", "r4"])) for b in brokers}
    n = len(brokers)
    rf = draw(st.integers(1, n))
    n_partitions = draw(st.integers(1, 60))
    start = draw(st.integers(-1, 30))
    draws = (draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1)))
    return racks, n_partitions, rf, start, draws


@given(rack_aware_cases())
@settings(max_examples=examples(300))
def test_rack_aware_invariants(case):
    racks, n_partitions, rf, start, draws = case
    brokers = sorted(racks)
    n_racks = len(set(racks.values()))

    assignment = assign_replicas_to_brokers(with_racks(racks), n_partitions, rf, -1, start,
                                            rng=ScriptedRandom(*draws))

    for replicas in assignment.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        # A candidate is skipped while its rack holds a replica and some rack holds none, and
        # the scan visits every other broker, so a partition covers as many racks as it can.
        assert rack_count(replicas, racks) == min(rf, n_racks)
    leaders = leader_counts(assignment, brokers)
    assert max(leaders.values()) - min(leaders.values()) <= 1
    if n_partitions % len(brokers) == 0:
        assert set(leaders.values()) == {n_partitions // len(brokers)}


@given(st.integers(1, 5), st.integers(1, 5), st.integers(1, 3), st.integers(0, 2), st.data())
@settings(max_examples=examples(200))
def test_rack_aware_even_replicas_with_equal_racks(n_racks, per_rack, rounds, first_round, data):
    # What Kafka's rack-aware tests assert for equal-sized racks (testAssignmentWithRackAware,
    # testLargeNumberPartitionsAssignment): with whole, aligned rounds every broker holds the
    # same number of replicas.  Unlike the properties above this one is not derived; it has
    # been checked exhaustively for every start index and shift up to 5 racks x 5 brokers,
    # which bounds this test.  Uneven racks break it (testAssignmentWithRackAwareWithUnevenRacks).
    n = n_racks * per_rack
    ids = data.draw(st.permutations(range(100, 100 + n)))
    racks = {b: f"rack{i % n_racks}" for i, b in enumerate(ids)}
    rf = data.draw(st.integers(1, n))
    draws = (data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, n - 1)))

    assignment = assign_replicas_to_brokers(with_racks(racks), n * rounds, rf, -1,
                                            first_round * n, rng=ScriptedRandom(*draws))

    assert set(replica_counts(assignment, sorted(racks)).values()) == {rounds * rf}


@given(st.dictionaries(st.integers(0, 1000), st.sampled_from(["a", "b", "c", "d"]),
                       min_size=1, max_size=20))
def test_rack_alternated_list_properties(racks):
    arranged = rack_alternated_broker_list(racks)

    assert sorted(arranged) == sorted(racks)
    rack_names = sorted(set(racks.values()))
    for rack in rack_names:  # each rack's brokers in id order
        members = [b for b in arranged if racks[b] == rack]
        assert members == sorted(members)
    # While every rack still has brokers left, the list cycles through the racks in name order.
    smallest = min(Counter(racks.values()).values())
    head = arranged[: smallest * len(rack_names)]
    assert [racks[b] for b in head] == [rack_names[i % len(rack_names)] for i in range(len(head))]
