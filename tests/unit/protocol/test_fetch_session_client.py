"""The follower's fetch session (KIP-227) against the rules of Kafka 2.8's FetchSessionHandler:
full first, incremental after, only new or changed partitions sent, partitions left out of a
round forgotten, epochs that wrap, and the ways a session ends."""

from __future__ import annotations

from odradek.protocol.errors import ErrorCode
from odradek.protocol.fetch_session_client import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    FollowerFetchSession,
    next_epoch,
)
from odradek.protocol.replica_fetch import FetchPartitionSpec

S = 12345


def spec(topic: str, partition: int, offset: int = 0, *, leader_epoch: int = 1, last_epoch: int = 1,
         log_start: int = 0, max_bytes: int = 1 << 20) -> FetchPartitionSpec:
    return (topic, partition, leader_epoch, offset, last_epoch, log_start, max_bytes)


def keys(specs: list[FetchPartitionSpec]) -> list[tuple[str, int]]:
    return [(s[0], s[1]) for s in specs]


WANTED = [spec("a", 0, 5), spec("a", 1, 7), spec("__consumer_offsets", 3, 0)]


def established() -> FollowerFetchSession:
    session = FollowerFetchSession()
    session.build(WANTED)
    assert session.on_response(S, ErrorCode.none, keys(WANTED))
    return session


def test_the_first_request_is_full_and_asks_for_a_session() -> None:
    session = FollowerFetchSession()
    request = session.build(WANTED)
    assert (request.session_id, request.session_epoch) == (INVALID_SESSION_ID, INITIAL_EPOCH) == (0, 0)
    assert request.partitions == WANTED and request.forgotten == [] and request.is_full


def test_after_a_session_is_made_requests_are_incremental_from_epoch_1() -> None:
    session = established()
    assert (session.session_id, session.epoch) == (S, 1)
    request = session.build(WANTED)
    assert (request.session_id, request.session_epoch, request.partitions, request.forgotten) == (S, 1, [], [])
    assert not request.is_full
    assert session.on_response(S, ErrorCode.none, [])
    assert session.build(WANTED).session_epoch == 2


def test_only_partitions_new_or_changed_are_sent() -> None:
    session = established()
    changes = [
        spec("a", 0, 6),  # fetch offset
        spec("a", 1, 7, log_start=3),  # log start offset
        spec("__consumer_offsets", 3, 0, max_bytes=10),  # partition max bytes
    ]
    wanted = list(WANTED)
    for changed in changes:
        wanted = [changed if s[:2] == changed[:2] else s for s in wanted]
        request = session.build(wanted)
        assert request.partitions == [changed] and request.forgotten == []
        assert session.on_response(S, ErrorCode.none, [])
        assert session.build(wanted).partitions == []  # sent once, then part of the session
        assert session.on_response(S, ErrorCode.none, [])
    for field_change in ({"leader_epoch": 2}, {"last_epoch": 0}):
        changed = spec("b", 0, 1, **field_change)
        session.build([*wanted, spec("b", 0, 1)])
        session.on_response(S, ErrorCode.none, [])
        assert session.build([*wanted, changed]).partitions == [changed]
        session.on_response(S, ErrorCode.none, [])


def test_new_partitions_come_first_then_the_changed_ones_in_session_order() -> None:
    session = established()
    wanted = [spec("c", 0), spec("a", 1, 8), spec("a", 0, 6), spec("__consumer_offsets", 3, 0)]
    request = session.build(wanted)
    assert request.partitions == [spec("c", 0), spec("a", 0, 6), spec("a", 1, 8)]
    assert session.partitions == [("a", 0), ("a", 1), ("__consumer_offsets", 3), ("c", 0)]


def test_partitions_left_out_of_a_round_are_forgotten_and_sent_in_full_when_back() -> None:
    session = established()
    request = session.build([WANTED[0]])  # a-1 and the offsets partition back off (or left)
    assert request.partitions == [] and request.forgotten == [("a", 1), ("__consumer_offsets", 3)]
    assert session.partitions == [("a", 0)]
    assert session.on_response(S, ErrorCode.none, [])
    request = session.build(WANTED)
    assert request.partitions == [WANTED[1], WANTED[2]] and request.forgotten == []
    assert session.on_response(S, ErrorCode.none, [])
    assert session.build([]).forgotten == keys(WANTED)


def test_an_incremental_response_may_leave_partitions_out_but_not_add_any() -> None:
    session = established()
    session.build(WANTED)
    assert session.on_response(S, ErrorCode.none, [("a", 1)])
    assert session.epoch == 2
    session.build(WANTED)
    assert not session.on_response(S, ErrorCode.none, [("a", 1), ("zz", 0)])  # not in the session
    assert (session.session_id, session.epoch) == (S, INITIAL_EPOCH)  # close it, ask for a new one
    request = session.build(WANTED)
    assert request.is_full and request.partitions == WANTED and (request.session_id, request.session_epoch) == (S, 0)


def test_a_full_response_must_answer_every_partition() -> None:
    session = FollowerFetchSession()
    session.build(WANTED)
    assert not session.on_response(S, ErrorCode.none, keys(WANTED)[:2])
    assert (session.session_id, session.epoch) == (0, 0)
    session.build(WANTED)
    assert not session.on_response(S, ErrorCode.none, [*keys(WANTED), ("zz", 0)])
    assert (session.session_id, session.epoch) == (0, 0)


def test_an_empty_full_response_that_throttles_is_not_used() -> None:
    session = FollowerFetchSession()
    session.build(WANTED)
    assert not session.on_response(S, ErrorCode.none, [], throttle_time_ms=100)
    assert session.build(WANTED).is_full


def test_a_leader_that_makes_no_session_gets_full_requests() -> None:
    session = FollowerFetchSession()
    for _ in range(3):
        request = session.build(WANTED)
        assert (request.session_id, request.session_epoch, request.partitions) == (0, 0, WANTED)
        assert session.on_response(INVALID_SESSION_ID, ErrorCode.none, keys(WANTED))


def test_a_leader_closing_the_session_in_an_incremental_response_ends_it() -> None:
    session = established()
    session.build(WANTED)
    assert session.on_response(INVALID_SESSION_ID, ErrorCode.none, [("a", 0)])  # still used
    request = session.build(WANTED)
    assert (request.session_id, request.session_epoch, request.partitions) == (0, 0, WANTED)


def test_session_id_not_found_starts_over_without_the_id() -> None:
    session = established()
    session.build(WANTED)
    assert not session.on_response(INVALID_SESSION_ID, ErrorCode.fetch_session_id_not_found, [])
    request = session.build(WANTED)
    assert (request.session_id, request.session_epoch, request.partitions) == (0, 0, WANTED)
    assert session.on_response(77, ErrorCode.none, keys(WANTED))
    assert (session.session_id, session.epoch) == (77, 1)


def test_other_top_level_errors_close_the_session_and_ask_for_a_new_one() -> None:
    for error in (ErrorCode.invalid_fetch_session_epoch, ErrorCode.unknown_server_error):
        session = established()
        session.build(WANTED)
        assert not session.on_response(INVALID_SESSION_ID, error, [])
        # Kafka's nextCloseExisting: a full request with the old id and epoch 0.
        request = session.build(WANTED)
        assert (request.session_id, request.session_epoch, request.partitions) == (S, 0, WANTED)
        assert session.on_response(S + 1, ErrorCode.none, keys(WANTED))
        assert (session.session_id, session.epoch) == (S + 1, 1)


def test_a_per_partition_error_does_not_end_the_session() -> None:
    # The handler sees only which partitions came back; their error codes are the fetcher's.
    session = established()
    session.build(WANTED)
    assert session.on_response(S, ErrorCode.none, [("a", 0)])
    assert (session.session_id, session.epoch) == (S, 2)


def test_a_lost_request_closes_the_session_and_reset_forgets_it() -> None:
    session = established()
    session.build(WANTED)
    session.on_send_error()
    request = session.build(WANTED)
    assert (request.session_id, request.session_epoch, request.partitions) == (S, 0, WANTED)
    session.reset()
    assert (session.session_id, session.epoch) == (0, 0) and session.build(WANTED).is_full


def test_epochs_wrap_past_the_largest_int32_to_1() -> None:
    assert next_epoch(0) == 1 and next_epoch(41) == 42
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH
    session = established()
    session.epoch = 2**31 - 2
    for expected in (2**31 - 2, 2**31 - 1, 1, 2):
        assert session.build(WANTED).session_epoch == expected
        assert session.on_response(S, ErrorCode.none, [])
