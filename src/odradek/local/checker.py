"""The checker of the nemesis and durability runs: the anomalies Jepsen's Kafka checker
names (and, for transactional runs, KIP-98's promises), judged over plain data (no sockets,
no clients), each returned with concrete examples.

Inputs:
- a history: the nemesis workload's JSONL events (``send``, ``ack``, ``error``, ``poll``,
  ``commit``, ``session``), parsed by :func:`parse_history` and judged by :func:`check`; or a
  durability run's writes, reads and transactions, judged by :func:`check_durability`;
- the final read: every record of every partition after the run, ``{partition: {offset: value}}``,
  with each partition's high watermark (``ends``);
- the replicas' log bytes per partition and broker (the concatenated ``*.log`` segment files).

An offset below a partition's end that holds no record in the final read is a *hole*: a
control batch (transaction marker) or a record the cleaner removed. A consumer legitimately
jumps over holes, nowhere else.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field, replace

from odradek.local.txn_checker import PipelineTxn, Txn, TxnRecord, TxnVerdict
from odradek.protocol.records import LOG_OVERHEAD, iter_batches

__all__ = [
    "Ack", "Commit", "History", "Poll", "Transactions", "Verdict", "batches_below", "check", "check_durability",
    "committed_offsets_backwards", "divergent_replicas", "duplicate_writers", "duplicated_values", "hanging_partitions",
    "longest_ack_gaps", "lost_writes", "misplaced_acks", "parse_history", "poll_order_anomalies",
    "transaction_verdict", "unavailability", "vanished_reads",
]

_EXAMPLES = 10  # per anomaly kind in the summary


@dataclass(frozen=True, slots=True)
class Ack:
    value: str
    partition: int
    offset: int | None  # librdkafka's implicit acks carry none (see local/durability.py)
    t: float


@dataclass(frozen=True, slots=True)
class Poll:
    session: str  # a consumer instance; a restart or a seek starts a new session
    partition: int
    offset: int
    value: str
    t: float


@dataclass(frozen=True, slots=True)
class Commit:
    group: str
    partition: int
    offset: int  # the next offset to read, as Kafka stores it
    generation: int
    t: float


@dataclass
class History:
    sends: int = 0
    acks: list[Ack] = field(default_factory=list)
    errors: list[dict[str, object]] = field(default_factory=list)
    polls: list[Poll] = field(default_factory=list)
    commits: list[Commit] = field(default_factory=list)
    # the transactional roles (local/txn_checker.py)
    txns: list[Txn] = field(default_factory=list)
    txn_reads: list[Poll] = field(default_factory=list)  # the transactional producers' read_committed reads
    pipeline: list[PipelineTxn] = field(default_factory=list)


def parse_history(lines: Iterable[str]) -> History:
    """A workload's JSONL history. A torn last line (the writer was killed) is ignored."""
    history = History()
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        kind = event.get("type")
        if kind == "send":
            history.sends += 1
        elif kind == "ack":
            history.acks.append(Ack(event["value"], event["partition"], event.get("offset"), event["t"]))
        elif kind == "error":
            history.errors.append(event)
        elif kind == "poll":
            history.polls.append(Poll(event["session"], event["partition"], event["offset"], event["value"],
                                      event["t"]))
        elif kind == "commit":
            history.commits.append(Commit(event["group"], event["partition"], event["offset"],
                                          event.get("generation", -1), event["t"]))
        elif kind == "txn":
            history.txns.append(Txn(event["id"], event["outcome"],
                                    tuple(TxnRecord(v, p, o) for v, p, o in event["records"]), tuple(event["read"])))
        elif kind == "txn-read":
            history.txn_reads.append(Poll(f"txn-reader-{event.get('reader', 0)}", event["partition"], event["offset"],
                                          event["value"], event["t"]))
        elif kind == "pipeline":
            history.pipeline.append(PipelineTxn(event["id"], event["outcome"],
                                                {int(p): o for p, o in event["offsets"].items()}, event["records"]))
    return history


# ---------------------------------------------------------------------- the anomalies

def misplaced_acks(acked: Mapping[str, tuple[int, int | None]],
                   positions: Mapping[str, list[tuple[int, int]]]) -> list[str]:
    """Acknowledged ids not in the final log where acknowledged: at the acknowledged
    (partition, offset), or anywhere in the partition when the acknowledgement carried no
    offset. ``positions`` maps each id to every (partition, offset) holding it. A second copy
    elsewhere does not make a write lost: it is a duplicate (:func:`duplicated_values`)."""
    misplaced = []
    for record_id, (partition, offset) in acked.items():
        found = positions.get(record_id)
        if offset is None:
            ok = any(p == partition for p, _ in found or ())
        else:
            ok = (partition, offset) in (found or ())
        if not ok:
            misplaced.append(f"{record_id} acked at {(partition, offset)}, found at {found}")
    return misplaced


def _positions(final: Mapping[int, Mapping[int, str]]) -> dict[str, list[tuple[int, int]]]:
    positions: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for partition, records in sorted(final.items()):
        for offset, value in sorted(records.items()):
            positions[value].append((partition, offset))
    return positions


def lost_writes(acks: Iterable[Ack], final: Mapping[int, Mapping[int, str]]) -> list[str]:
    """Acknowledged values missing from their acknowledged offset (from their partition, for
    an ack without an offset). A value acknowledged twice (it cannot be: values are unique)
    keeps its last acknowledgement."""
    return misplaced_acks({a.value: (a.partition, a.offset) for a in acks}, _positions(final))


def duplicated_values(final: Mapping[int, Mapping[int, str]]) -> list[str]:
    """Values present more than once in the final log, with where."""
    return [f"{value} at {where}" for value, where in _positions(final).items() if len(where) > 1]


def duplicate_writers(final: Mapping[int, Mapping[int, str]], logs: Mapping[int, Mapping[int, bytes]]
                      ) -> tuple[list[str], list[str]]:
    """The values present more than once, split by who wrote each copy (the producer id,
    epoch and sequence of its batch, read from a replica's log bytes): ``(resent, same_writer)``.

    *resent*: every copy under a different idempotent producer id or epoch. A producer that
    bumps its epoch (KIP-360; librdkafka does after a message timeout or an out-of-order
    sequence) sends what it still holds again from sequence 0, as new records: no broker can
    tell them from new ones (librdkafka issue 4953). *same_writer*: the rest, two copies under
    one producer id and epoch (or without one), which an idempotent broker should not keep."""
    writer_at: dict[tuple[int, int], tuple[int, int, int]] = {}
    for partition, per_broker in logs.items():
        for data in per_broker.values():
            for _, h in iter_batches(data, partial_tail_ok=True):
                for delta in range(h.last_offset_delta + 1):
                    writer_at.setdefault((partition, h.base_offset + delta),
                                         (h.producer_id, h.producer_epoch,
                                          h.base_sequence + delta if h.base_sequence >= 0 else -1))
    resent, same_writer = [], []
    for value, where in _positions(final).items():
        if len(where) < 2:
            continue
        writers = [writer_at.get(position) for position in where]
        described = ", ".join(f"p{p}@{o} by " + (f"pid {w[0]} epoch {w[1]} seq {w[2]}" if w else "?")
                              for (p, o), w in zip(where, writers, strict=True))
        idempotent = [w for w in writers if w is not None and w[0] >= 0]
        distinct = {(w[0], w[1]) for w in idempotent}
        (resent if len(idempotent) == len(writers) and len(distinct) == len(writers) else same_writer).append(
            f"{value}: {described}")
    return resent, same_writer


def _holes(final: Mapping[int, Mapping[int, str]], ends: Mapping[int, int]) -> dict[int, set[int]]:
    """Per partition, the offsets below its end that hold no record (markers, cleaned records)."""
    return {p: set(range(end)) - set(final.get(p, {})) for p, end in ends.items()}


def poll_order_anomalies(polls: Iterable[Poll], final: Mapping[int, Mapping[int, str]],
                         ends: Mapping[int, int]) -> tuple[list[str], list[str]]:
    """(nonmonotonic, skipped): within one session and partition, each read offset must be
    the previous one plus one, except over holes. An offset at or below the previous one is
    nonmonotonic; a jump over an offset that holds a record is a skip."""
    holes = _holes(final, ends)
    last: dict[tuple[str, int], int] = {}
    nonmonotonic, skipped = [], []
    for poll in polls:
        key = (poll.session, poll.partition)
        previous = last.get(key)
        last[key] = poll.offset
        if previous is None:
            continue
        if poll.offset <= previous:
            nonmonotonic.append(f"session {poll.session} p{poll.partition}: {previous} then {poll.offset}")
            continue
        missed = [o for o in range(previous + 1, poll.offset) if o not in holes.get(poll.partition, set())]
        if missed:
            skipped.append(f"session {poll.session} p{poll.partition}: {previous} then {poll.offset} "
                           f"(skipped {len(missed)} records from {missed[0]})")
    return nonmonotonic, skipped


def vanished_reads(polls: Iterable[Poll], final: Mapping[int, Mapping[int, str]]) -> list[str]:
    """Records a consumer read that the final log no longer holds at that offset."""
    vanished = []
    for poll in polls:
        now = final.get(poll.partition, {}).get(poll.offset)
        if now != poll.value:
            vanished.append(f"p{poll.partition}@{poll.offset}: read {poll.value} (session {poll.session}), "
                            f"final log has {now}")
    return vanished


def committed_offsets_backwards(commits: Iterable[Commit]) -> list[str]:
    """Per group and partition, in the order the commits succeeded, an offset below the
    previous committed one."""
    last: dict[tuple[str, int], Commit] = {}
    backwards = []
    for commit in sorted(commits, key=lambda c: c.t):
        key = (commit.group, commit.partition)
        previous = last.get(key)
        if previous is not None and commit.offset < previous.offset:
            backwards.append(f"group {commit.group} p{commit.partition}: committed {previous.offset} "
                             f"(generation {previous.generation}) then {commit.offset} "
                             f"(generation {commit.generation})")
        last[key] = commit if previous is None or commit.offset >= previous.offset else previous
    return backwards


def batches_below(log: bytes, high_watermark: int) -> bytes:
    """The record batches of a log whose last offset is below ``high_watermark``, byte for
    byte (a torn batch at the end is not one)."""
    end = 0
    for position, header in iter_batches(log, partial_tail_ok=True):
        if header.base_offset + header.last_offset_delta >= high_watermark:
            break
        end = position + header.batch_length + LOG_OVERHEAD
    return log[:end]


def divergent_replicas(logs: Mapping[int, Mapping[int, bytes]], ends: Mapping[int, int]) -> list[str]:
    """Partitions whose replicas' logs differ below the high watermark. ``logs`` maps each
    partition to each broker's log bytes."""
    divergent = []
    for partition, per_broker in sorted(logs.items()):
        prefixes = {broker: batches_below(data, ends.get(partition, 0)) for broker, data in per_broker.items()}
        if len(set(prefixes.values())) > 1:
            sizes = {broker: len(data) for broker, data in sorted(prefixes.items())}
            divergent.append(f"p{partition}: replicas differ below the high watermark "
                             f"{ends.get(partition)} (bytes per broker {sizes})")
    return divergent


def unavailability(acks: Iterable[Ack], start: float, end: float, partitions: int) -> dict[int, float]:
    """Per partition, the longest stretch of [start, end] (a fault, until its ISRs are full
    again) without a successful ack; the whole window for a partition with none."""
    times: dict[int, list[float]] = {p: [] for p in range(partitions)}
    for ack in acks:
        if start < ack.t < end and ack.partition in times:
            times[ack.partition].append(ack.t)
    longest = {}
    for p, ts in times.items():
        points = [start, *sorted(ts), end]
        longest[p] = max(b - a for a, b in itertools.pairwise(points))
    return longest


def longest_ack_gaps(acks: Iterable[Ack]) -> dict[int, float]:
    """Per partition with acks, the longest time between two of them in a row."""
    times: dict[int, list[float]] = defaultdict(list)
    for ack in acks:
        times[ack.partition].append(ack.t)
    return {p: max((b - a for a, b in itertools.pairwise(sorted(ts))), default=0.0) for p, ts in times.items()}


# ---------------------------------------------------------------------- transactions

@dataclass(frozen=True, slots=True)
class Transactions:
    """What a transactional producer did: each record's transaction (``of``: value ->
    transaction number) and each transaction's outcome as the client learnt it
    (``committed``, ``aborted`` or ``unknown``)."""

    of: Mapping[str, int]
    outcome: Mapping[int, str]


def transaction_verdict(txn_of: Mapping[str, int], outcome: Mapping[int, str], visible: Set[str],
                        read: Set[str]) -> tuple[list[str], list[str]]:
    """(aborted records visible, partly visible transactions): records of aborted transactions
    a read_committed consumer finds in the final log (``visible``) or read during the run
    (``read``), and transactions some but not all of whose records are visible, whatever the
    client learnt of their outcome. ``txn_of`` maps each record to its transaction."""
    aborted = {i for i, t in txn_of.items() if outcome.get(t) == "aborted"}
    aborted_visible = sorted(aborted & visible) + sorted(f"{i} (read during the run)" for i in aborted & read)
    members: dict[int, list[str]] = defaultdict(list)
    for record_id, txn in txn_of.items():
        members[txn].append(record_id)
    partial = []
    for txn, ids in sorted(members.items()):
        present = sum(1 for i in ids if i in visible)
        if 0 < present < len(ids):
            partial.append(f"transaction {txn} ({outcome.get(txn, 'unknown')}): {present} of {len(ids)} records visible")
    return aborted_visible, partial


def hanging_partitions(end_offsets: Mapping[int, tuple[int, int]]) -> list[str]:
    """Partitions whose last stable offset is not their high watermark once every
    transaction should have completed; ``end_offsets`` maps each to (LSO, HW)."""
    return [f"partition {p}: LSO {lso} < HW {hw}" for p, (lso, hw) in end_offsets.items() if lso != hw]


# ---------------------------------------------------------------------- the verdict

@dataclass
class Verdict:
    sends: int = 0
    acknowledged: int = 0
    acknowledged_without_offset: int = 0
    polls: int = 0
    commits: int = 0
    errors: int = 0
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    # of the duplicated: copies under different producer epochs or ids (duplicate_writers),
    # a client's re-sends; and the rest, which a broker should have kept once
    duplicated_resent: list[str] = field(default_factory=list)
    duplicated_same_writer: list[str] = field(default_factory=list)
    nonmonotonic: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    vanished: list[str] = field(default_factory=list)
    commits_backwards: list[str] = field(default_factory=list)
    divergent: list[str] = field(default_factory=list)
    # transactional runs
    aborted_visible: list[str] = field(default_factory=list)
    partial_transactions: list[str] = field(default_factory=list)
    hanging: list[str] = field(default_factory=list)
    # the nemesis workload's transactional roles
    transactions: TxnVerdict | None = None

    @property
    def anomalies(self) -> int:
        """Every anomaly but lost and duplicated writes (counted on their own)."""
        return (len(self.nonmonotonic) + len(self.skipped) + len(self.vanished) + len(self.commits_backwards)
                + len(self.divergent) + len(self.aborted_visible) + len(self.partial_transactions)
                + len(self.hanging) + (self.transactions.anomalies if self.transactions else 0))

    @property
    def ok(self) -> bool:
        """Nothing lost, no anomaly, and no value twice but for a client's re-sends under a new
        producer epoch (librdkafka's KIP-360 bump, which no broker can tell from new records:
        docs/COMPATIBILITY.md, "An idempotent producer's epoch bumps")."""
        return not (self.lost or self.duplicated_same_writer or self.anomalies)

    def examples(self) -> dict[str, list[str]]:
        """Up to a few examples of each anomaly kind present."""
        kinds = {"lost": self.lost, "duplicated_same_writer": self.duplicated_same_writer,
                 "duplicated_resent": self.duplicated_resent, "nonmonotonic": self.nonmonotonic,
                 "skipped": self.skipped, "vanished": self.vanished, "commits_backwards": self.commits_backwards,
                 "divergent": self.divergent, "aborted_visible": self.aborted_visible,
                 "partial_transactions": self.partial_transactions, "hanging": self.hanging}
        examples = {kind: found[:_EXAMPLES] for kind, found in kinds.items() if found}
        return examples | (self.transactions.examples() if self.transactions else {})


def check(history: History, final: Mapping[int, Mapping[int, str]], ends: Mapping[int, int],
          replica_logs: Mapping[int, Mapping[int, bytes]] | None = None) -> Verdict:
    """Every check over one nemesis run."""
    nonmonotonic, skipped = poll_order_anomalies(history.polls, final, ends)
    return replace(
        _final_log_checks(final, ends, history.polls, replica_logs),
        sends=history.sends, acknowledged=len(history.acks),
        acknowledged_without_offset=sum(1 for a in history.acks if a.offset is None),
        commits=len(history.commits), errors=len(history.errors), lost=lost_writes(history.acks, final),
        nonmonotonic=nonmonotonic, skipped=skipped, commits_backwards=committed_offsets_backwards(history.commits),
    )


def check_durability(writes: Mapping[str, tuple[int, int | None]], reads: Iterable[Poll],
                     final: Mapping[int, Mapping[int, str]], ends: Mapping[int, int],
                     replica_logs: Mapping[int, Mapping[int, bytes]], *, transactions: Transactions | None = None,
                     end_offsets: Mapping[int, tuple[int, int]] | None = None) -> Verdict:
    """The checks over one durability run (local/durability.py). ``writes``: each value that
    must be in the final log where acknowledged, and once (but for a client's re-sends), with
    its (partition, offset or None) -- every acknowledged one; in a transactional run every one of a committed
    transaction, with no offset where no delivery report came. ``reads``: what the run's
    read_committed consumer read, one per offset. With ``transactions``: aborted records never
    visible, every transaction all or nothing. ``end_offsets``: each partition's (LSO, HW)
    after the run; they differ where a partition hangs. Poll order and commits are the nemesis
    workload's to judge: this run's reader is not in a group."""
    reads = list(reads)
    verdict = replace(
        _final_log_checks(final, ends, reads, replica_logs),
        acknowledged=len(writes), acknowledged_without_offset=sum(1 for _, o in writes.values() if o is None),
        lost=misplaced_acks(writes, _positions(final)), hanging=hanging_partitions(end_offsets or {}),
    )
    if transactions is not None:
        visible = {value for records in final.values() for value in records.values()}
        verdict.aborted_visible, verdict.partial_transactions = transaction_verdict(
            transactions.of, transactions.outcome, visible, {r.value for r in reads})
    return verdict


def _final_log_checks(final: Mapping[int, Mapping[int, str]], ends: Mapping[int, int], polls: Sequence[Poll],
                      replica_logs: Mapping[int, Mapping[int, bytes]] | None) -> Verdict:
    """What both runs check of the final log: values twice, reads that vanished, replicas
    that differ below the high watermark."""
    duplicated = duplicated_values(final)
    resent, same_writer = duplicate_writers(final, replica_logs or {}) if duplicated else ([], [])
    return Verdict(polls=len(polls), duplicated=duplicated, duplicated_resent=resent, duplicated_same_writer=same_writer,
                   vanished=vanished_reads(polls, final), divergent=divergent_replicas(replica_logs or {}, ends))
