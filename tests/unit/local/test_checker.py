"""The checker over hand-built runs: nemesis histories (a clean one, and one per anomaly) and
durability runs (acknowledgements with and without offsets, transactions)."""

from __future__ import annotations

import json

from odradek.local.checker import (
    Ack,
    Commit,
    History,
    Poll,
    Transactions,
    batches_below,
    check,
    check_durability,
    divergent_replicas,
    duplicate_writers,
    longest_ack_gaps,
    misplaced_acks,
    parse_history,
    transaction_verdict,
    unavailability,
)
from odradek.protocol.records import SimpleRecord, build_batch


def clean_run() -> tuple[History, dict[int, dict[int, str]], dict[int, int]]:
    """Two partitions; p1 has a marker (hole) at offset 2; every read in order."""
    final = {0: {0: "v0", 1: "v1", 2: "v2"}, 1: {0: "v3", 1: "v4", 3: "v5"}}
    ends = {0: 3, 1: 4}
    history = History(
        sends=6,
        acks=[Ack("v0", 0, 0, 1.0), Ack("v1", 0, 1, 1.1), Ack("v2", 0, None, 1.2),
              Ack("v3", 1, 0, 1.0), Ack("v4", 1, 1, 1.1), Ack("v5", 1, 3, 1.3)],
        polls=[Poll("a", 0, 0, "v0", 2.0), Poll("a", 0, 1, "v1", 2.1), Poll("a", 0, 2, "v2", 2.2),
               Poll("a", 1, 0, "v3", 2.0), Poll("a", 1, 1, "v4", 2.1), Poll("a", 1, 3, "v5", 2.3),
               # a new session starts wherever it is told to
               Poll("b", 0, 1, "v1", 3.0), Poll("b", 0, 2, "v2", 3.1)],
        commits=[Commit("g", 0, 1, 1, 2.0), Commit("g", 0, 3, 2, 3.0), Commit("g", 1, 4, 2, 3.0)],
    )
    return history, final, ends


def test_a_clean_history_has_no_anomaly() -> None:
    history, final, ends = clean_run()
    verdict = check(history, final, ends)
    assert verdict.ok, verdict.examples()
    assert (verdict.acknowledged, verdict.acknowledged_without_offset, verdict.polls) == (6, 1, 8)


def test_a_lost_write_is_an_ack_not_where_acknowledged() -> None:
    history, final, ends = clean_run()
    del final[0][1]  # v1 gone
    final[1][3] = "other"  # v5 replaced
    verdict = check(history, final, ends)
    assert verdict.lost == ["v1 acked at (0, 1), found at None", "v5 acked at (1, 3), found at None"]


def test_a_value_twice_in_the_log_is_duplicated() -> None:
    history, final, ends = clean_run()
    final[0][3] = "v0"
    ends[0] = 4
    verdict = check(history, final, ends)
    assert verdict.duplicated == ["v0 at [(0, 0), (0, 3)]"]
    # Still where it was acknowledged: a duplicate, not a lost write; without the replicas'
    # logs nothing shows a client re-sent it, so it counts against the brokers.
    assert verdict.lost == []
    assert verdict.duplicated_same_writer == ["v0: p0@0 by ?, p0@3 by ?"] and not verdict.ok
    final[0][0] = "moved"
    assert check(history, final, ends).lost == ["v0 acked at (0, 0), found at [(0, 3)]"]


def test_a_duplicate_resent_under_a_new_epoch_is_told_from_one_written_twice_by_one_writer() -> None:
    """A copy under a new producer epoch is a client's re-send (KIP-360); two copies under one
    producer id, epoch and sequence are a broker's failed deduplication."""
    final = {0: {0: "a", 1: "b", 2: "b", 3: "c", 4: "c"}}
    log = (build_batch([SimpleRecord(b"a"), SimpleRecord(b"b")], base_offset=0, producer_id=7, producer_epoch=5,
                       base_sequence=10)
           + build_batch([SimpleRecord(b"b")], base_offset=2, producer_id=7, producer_epoch=6, base_sequence=0)
           + build_batch([SimpleRecord(b"c")], base_offset=3, producer_id=7, producer_epoch=6, base_sequence=1)
           + build_batch([SimpleRecord(b"c")], base_offset=4, producer_id=7, producer_epoch=6, base_sequence=1))
    resent, same_writer = duplicate_writers(final, {0: {1: log}})
    assert resent == ["b: p0@1 by pid 7 epoch 5 seq 11, p0@2 by pid 7 epoch 6 seq 0"]
    assert same_writer == ["c: p0@3 by pid 7 epoch 6 seq 1, p0@4 by pid 7 epoch 6 seq 1"]
    # Without idempotence (no producer id) a copy cannot be told from a retry: not a re-send.
    plain = build_batch([SimpleRecord(b"x"), SimpleRecord(b"x")], base_offset=0)
    assert duplicate_writers({0: {0: "x", 1: "x"}}, {0: {0: plain}}) == (
        [], ["x: p0@0 by pid -1 epoch -1 seq -1, p0@1 by pid -1 epoch -1 seq -1"])
    verdict = check(History(), final, {0: 5}, {0: {1: log}})
    assert len(verdict.duplicated) == 2 and verdict.duplicated_resent == resent
    assert verdict.duplicated_same_writer == same_writer and not verdict.ok
    # A client's re-send alone leaves the verdict ok: reported, not held against the brokers.
    del final[0][4]
    verdict = check(History(), final, {0: 5}, {0: {1: log}})
    assert verdict.duplicated_resent == resent and verdict.duplicated_same_writer == [] and verdict.ok


def test_polls_going_back_are_nonmonotonic_and_jumps_over_records_are_skips() -> None:
    history, final, ends = clean_run()
    history.polls += [Poll("a", 0, 1, "v1", 4.0),  # back from 2 to 1 in session a
                      Poll("c", 1, 0, "v3", 4.0), Poll("c", 1, 3, "v5", 4.1)]  # jumps over v4 at 1 (2 is a hole)
    verdict = check(history, final, ends)
    assert verdict.nonmonotonic == ["session a p0: 2 then 1"]
    assert verdict.skipped == ["session c p1: 0 then 3 (skipped 1 records from 1)"]
    assert verdict.anomalies == 2 and not verdict.ok


def test_a_read_record_that_later_vanishes() -> None:
    history, final, ends = clean_run()
    history.polls.append(Poll("d", 0, 3, "ghost", 5.0))  # read beyond what survived
    verdict = check(history, final, ends)
    assert verdict.vanished == ["p0@3: read ghost (session d), final log has None"]


def test_committed_offsets_going_backwards() -> None:
    history, final, ends = clean_run()
    history.commits += [Commit("g", 0, 2, 3, 4.0), Commit("g", 0, 3, 3, 5.0), Commit("other", 0, 0, 1, 6.0)]
    verdict = check(history, final, ends)
    assert verdict.commits_backwards == ["group g p0: committed 3 (generation 2) then 2 (generation 3)"]


def test_replicas_must_match_below_the_high_watermark_only() -> None:
    first = build_batch([SimpleRecord(b"a"), SimpleRecord(b"b")], base_offset=0)
    second = build_batch([SimpleRecord(b"c")], base_offset=2)
    other = build_batch([SimpleRecord(b"X")], base_offset=2)
    assert batches_below(first + second, 2) == first
    assert batches_below(first + second + second[:20], 3) == first + second  # a torn tail is not a batch
    # Below HW 3 both batches count: a different record at offset 2 diverges; below HW 2 it does not.
    logs = {0: {0: first + second, 1: first + other, 2: first + second}}
    assert divergent_replicas(logs, {0: 2}) == []
    found = divergent_replicas(logs, {0: 3})
    assert len(found) == 1 and found[0].startswith("p0: replicas differ below the high watermark 3")


def test_parse_history_reads_each_event_and_ignores_a_torn_last_line() -> None:
    lines = [json.dumps(e) for e in (
        {"type": "send", "t": 1.0, "value": "v0", "partition": 0},
        {"type": "ack", "t": 1.1, "value": "v0", "partition": 0, "offset": None},
        {"type": "error", "t": 1.2, "where": "producer", "error": "timed out"},
        {"type": "poll", "t": 1.3, "session": "s", "partition": 0, "offset": 0, "value": "v0"},
        {"type": "commit", "t": 1.4, "group": "g", "partition": 0, "offset": 1, "generation": 4},
    )] + ['{"type": "ack", "t"']
    history = parse_history(lines)
    assert history.sends == 1
    assert history.acks == [Ack("v0", 0, None, 1.1)]
    assert len(history.errors) == 1
    assert history.polls == [Poll("s", 0, 0, "v0", 1.3)]
    assert history.commits == [Commit("g", 0, 1, 4, 1.4)]


def test_unavailability_is_the_longest_stretch_without_an_ack_per_partition() -> None:
    acks = [Ack("a", 0, 0, 9.0),  # before the window: not counted
            Ack("b", 0, 1, 11.0), Ack("c", 0, 2, 16.0), Ack("d", 0, 3, 17.0),
            Ack("e", 1, 0, 10.5), Ack("f", 1, 1, 19.5)]
    longest = unavailability(acks, 10.0, 20.0, 3)
    assert longest == {0: 5.0, 1: 9.0, 2: 10.0}  # p0: 11→16; p1: 10.5→19.5; p2: no ack at all


def test_longest_ack_gap_per_partition_over_the_whole_run() -> None:
    acks = [Ack("a", 0, 0, 3.0), Ack("b", 0, 1, 1.0), Ack("c", 0, 2, 7.0), Ack("d", 1, 0, 2.0)]
    assert longest_ack_gaps(acks) == {0: 4.0, 1: 0.0}  # p0 in time order: 1, 3, 7


# ---------------------------------------------------------------------- durability runs

def test_an_ack_with_an_offset_must_be_found_there() -> None:
    # A second copy beside the acknowledged one is a duplicate (duplicated_values), not a loss.
    acked = {"a": (0, 5), "b": (0, 6), "c": (1, 0), "d": (2, 3)}
    positions = {"a": [(0, 5)], "b": [(0, 7)], "c": [(1, 0), (1, 1)]}
    assert misplaced_acks(acked, positions) == [
        "b acked at (0, 6), found at [(0, 7)]",
        "d acked at (2, 3), found at None",
    ]


def test_an_ack_without_an_offset_must_be_found_in_its_partition() -> None:
    # librdkafka reports an implicitly acknowledged record with no offset (None in Python).
    acked = {"kept": (0, None), "gone": (0, None), "twice": (1, None), "elsewhere": (2, None)}
    positions = {"kept": [(0, 18933)], "twice": [(1, 4), (1, 9)], "elsewhere": [(0, 2)]}
    assert misplaced_acks(acked, positions) == [
        "gone acked at (0, None), found at None",
        "elsewhere acked at (2, None), found at [(0, 2)]",
    ]


TXN_OF = {"c1": 0, "c2": 0, "a1": 1, "a2": 1, "u1": 2, "u2": 2, "u3": 2}
OUTCOME = {0: "committed", 1: "aborted", 2: "unknown"}


def test_a_clean_transactional_log_has_no_verdict() -> None:
    assert transaction_verdict(TXN_OF, OUTCOME, {"c1", "c2", "u1", "u2", "u3"}, {"c1"}) == ([], [])
    assert transaction_verdict(TXN_OF, OUTCOME, {"c1", "c2"}, set()) == ([], [])  # unknown: none visible


def test_aborted_records_visible_at_the_end_or_during_the_run() -> None:
    aborted, partial = transaction_verdict(TXN_OF, OUTCOME, {"c1", "c2", "a1", "a2"}, {"a2"})
    assert aborted == ["a1", "a2", "a2 (read during the run)"]
    assert partial == []


def test_a_partly_visible_transaction_whatever_its_outcome() -> None:
    aborted, partial = transaction_verdict(TXN_OF, OUTCOME, {"c1", "u1", "u3"}, set())
    assert aborted == []
    assert partial == ["transaction 0 (committed): 1 of 2 records visible",
                       "transaction 2 (unknown): 2 of 3 records visible"]


def durability_run() -> tuple[dict[str, tuple[int, int | None]], list[Poll], dict[int, dict[int, str]],
                               dict[int, int], dict[int, dict[int, bytes]]]:
    """Writes on two partitions (one acknowledged without an offset), a reader, equal replicas."""
    writes = {"id0": (0, 0), "id1": (0, 1), "id2": (1, None)}
    reads = [Poll("reader", 0, 0, "id0", 1.0), Poll("reader", 1, 0, "id2", 1.0)]
    final = {0: {0: "id0", 1: "id1"}, 1: {0: "id2"}}
    ends = {0: 2, 1: 1}
    log = build_batch([SimpleRecord(b"id0"), SimpleRecord(b"id1")], base_offset=0)
    return writes, reads, final, ends, {0: {0: log, 1: log}}


def test_a_clean_durability_run_has_no_anomaly() -> None:
    verdict = check_durability(*durability_run(), end_offsets={0: (2, 2), 1: (1, 1)})
    assert verdict.ok, verdict.examples()
    assert (verdict.acknowledged, verdict.acknowledged_without_offset, verdict.polls) == (3, 1, 2)


def test_a_durability_run_loses_duplicates_and_loses_reads() -> None:
    writes, reads, final, ends, logs = durability_run()
    final[0] = {0: "id0", 2: "id0"}  # id1 gone, id0 twice
    ends[0] = 3
    reads.append(Poll("reader", 0, 1, "id1", 2.0))  # read, then gone
    verdict = check_durability(writes, reads, final, ends, logs)
    assert verdict.lost == ["id1 acked at (0, 1), found at None"]
    assert verdict.duplicated == ["id0 at [(0, 0), (0, 2)]"]
    assert verdict.vanished == ["p0@1: read id1 (session reader), final log has None"]
    assert verdict.nonmonotonic == [] and verdict.skipped == []  # poll order is not this run's to judge


def test_a_transactional_durability_run_judges_transactions_and_hanging_partitions() -> None:
    writes, reads, final, ends, logs = durability_run()
    final[1][1] = "a1"  # an aborted record visible
    reads.append(Poll("reader", 1, 1, "a1", 2.0))
    transactions = Transactions({"id0": 0, "id1": 0, "id2": 1, "a1": 2, "a2": 2}, {0: "committed", 1: "unknown", 2: "aborted"})
    verdict = check_durability(writes, reads, final, ends, logs, transactions=transactions,
                               end_offsets={0: (2, 2), 1: (0, 2)})
    assert verdict.aborted_visible == ["a1", "a1 (read during the run)"]
    assert verdict.partial_transactions == ["transaction 2 (aborted): 1 of 2 records visible"]
    assert verdict.hanging == ["partition 1: LSO 0 < HW 2"]
    assert verdict.anomalies == 4 and not verdict.ok
