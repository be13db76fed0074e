"""The checks of the nemesis workload's transactional roles (local/nemesis_workload.py), over
plain data: what Jepsen's Kafka workload checks of transactions.

- **Transactions** (``txn`` events): each transactional producer first reads, read_committed,
  what its reader has not yet seen of the transactional topic, then writes one transaction of
  records ``t<producer>.<n>.<i>`` to several partitions and commits it or, on purpose, aborts
  it. The event names the transactions whose records it read before it began (``read``).
- **A consume-transform-produce pipeline** (``pipeline`` events, KIP-447): a group member reads
  the idempotent topic and writes, in one transaction with the consumed offsets
  (``sendOffsetsToTransaction``), a record ``<partition>:<offset>:<value>`` per record read.

The anomalies held against the brokers:
- *aborted reads*: a record of an aborted transaction read with read_committed, during the
  run or in the final read;
- *torn transactions*: some but not all records of a transaction in the final read (whatever
  the client learnt of its outcome);
- *lost committed writes*: a record of a committed transaction not where its delivery report
  put it;
- *duplicates*: a record of the transactional topic twice;
- *nonmonotonic and skipped reads*: a reader going back, or jumping over a record the final
  read_committed read holds (aborted records and markers are the holes it may jump; judged with
  the checker's poll order, local/nemesis.py);
- *circular information flow*: a cycle of transactions each of which read the one before it
  (a read_committed reader only sees transactions committed before it read, and every
  transaction here reads before it begins, so no such cycle can exist);
- *hung transactions committed*: a producer stopped mid-transaction past its timeout (the
  nemesis's ``hung-txn`` fault) whose commit, once it was continued, was not refused;
- for the pipeline: an input record below the group's committed offset with no output, or
  with two; an output for an input at or past the committed offset (the consumed offsets and
  the output committed apart); an output whose value is not the input's.

Write cycles (G0: transactions whose records two partitions order differently) are counted,
not held: Kafka's protocol does not order concurrent transactions' writes across partitions
(Jepsen's Redpanda 21.10.1 analysis discusses it; Kafka allows the same).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from odradek.graph import cycles

__all__ = ["PipelineTxn", "Txn", "TxnRecord", "TxnVerdict", "check_transactions", "transaction_of"]

_EXAMPLES = 10


@dataclass(frozen=True, slots=True)
class TxnRecord:
    value: str
    partition: int
    offset: int | None  # None: no delivery report came


@dataclass(frozen=True, slots=True)
class Txn:
    id: str  # t<producer>.<n>
    outcome: str  # committed | aborted | unknown (to the client)
    records: tuple[TxnRecord, ...]
    read: tuple[str, ...]  # the transactions whose records it read before it began


@dataclass(frozen=True, slots=True)
class PipelineTxn:
    id: str
    outcome: str
    offsets: Mapping[int, int]  # input partition -> the next offset to read, sent with the transaction
    records: int


def transaction_of(value: str) -> str:
    """``t0.17.3`` -> ``t0.17``."""
    return value.rsplit(".", 1)[0]


@dataclass
class TxnVerdict:
    committed: int = 0
    aborted: int = 0
    unknown: int = 0
    reads: int = 0
    aborted_reads: list[str] = field(default_factory=list)
    torn: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    read_cycles: list[str] = field(default_factory=list)
    nonmonotonic_reads: list[str] = field(default_factory=list)
    skipped_reads: list[str] = field(default_factory=list)
    hung: int = 0
    hung_not_aborted: list[str] = field(default_factory=list)
    write_cycles: list[str] = field(default_factory=list)  # counted, not held (see the module's doc)
    pipeline_committed: int = 0
    pipeline_records: int = 0  # outputs in the final read
    pipeline_missing: list[str] = field(default_factory=list)
    pipeline_duplicated: list[str] = field(default_factory=list)
    pipeline_beyond: list[str] = field(default_factory=list)
    pipeline_wrong: list[str] = field(default_factory=list)

    def held(self) -> dict[str, list[str]]:
        """The anomalies held against the brokers, by kind."""
        return {"aborted_reads": self.aborted_reads, "torn": self.torn, "lost_committed": self.lost,
                "duplicated_in_transactions": self.duplicated, "read_cycles": self.read_cycles,
                "nonmonotonic_reads": self.nonmonotonic_reads, "skipped_reads": self.skipped_reads,
                "hung_not_aborted": self.hung_not_aborted,
                "pipeline_missing": self.pipeline_missing, "pipeline_duplicated": self.pipeline_duplicated,
                "pipeline_beyond_committed": self.pipeline_beyond, "pipeline_wrong": self.pipeline_wrong}

    @property
    def anomalies(self) -> int:
        return sum(len(found) for found in self.held().values())

    def examples(self) -> dict[str, list[str]]:
        kinds = {**self.held(), "write_cycles": self.write_cycles}
        return {kind: found[:_EXAMPLES] for kind, found in kinds.items() if found}


def check_transactions(txns: Sequence[Txn], reads: Iterable[tuple[int, int, str]],
                       final: Mapping[int, Mapping[int, str]], *, pipeline: Sequence[PipelineTxn] = (),
                       pipeline_input: Mapping[int, Mapping[int, str]] | None = None,
                       pipeline_output: Mapping[int, Mapping[int, str]] | None = None,
                       pipeline_committed: Mapping[int, int] | None = None, hung: Sequence[Txn] = ()) -> TxnVerdict:
    """Every transactional check. ``reads``: (partition, offset, value) of each record the
    producers' read_committed readers read during the run; ``final``: the transactional
    topic's final read_committed read. The pipeline's: its transactions, the final read of its
    input and output topics, and its group's committed offsets after the run. ``hung``: the
    hung-txn faults' transactions, each aborted by its coordinator unless the checks say not."""
    txns = [*txns, *hung]
    outcome = {t.id: t.outcome for t in txns}
    verdict = TxnVerdict(committed=sum(t.outcome == "committed" for t in txns),
                         aborted=sum(t.outcome == "aborted" for t in txns),
                         unknown=sum(t.outcome == "unknown" for t in txns))
    reads = list(reads)
    verdict.reads = len(reads)
    verdict.hung = len(hung)
    verdict.hung_not_aborted = [f"{t.id}: {t.outcome} after its timeout" for t in hung if t.outcome != "aborted"]
    verdict.aborted_reads = [f"{v} at p{p}@{o} (read during the run)" for p, o, v in reads
                             if outcome.get(transaction_of(v)) == "aborted"]
    positions: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for partition, records in sorted(final.items()):
        for offset, value in sorted(records.items()):
            positions[value].append((partition, offset))
    verdict.aborted_reads += [f"{v} at {where} (final read)" for v, where in positions.items()
                              if outcome.get(transaction_of(v)) == "aborted"]
    verdict.duplicated = [f"{v} at {where}" for v, where in positions.items() if len(where) > 1]
    for t in txns:
        present = sum(1 for r in t.records if r.value in positions)
        if 0 < present < len(t.records):
            verdict.torn.append(f"{t.id} ({t.outcome}): {present} of {len(t.records)} records visible")
        if t.outcome == "committed":
            for r in t.records:
                found = positions.get(r.value, [])
                if not (any(p == r.partition for p, _ in found) if r.offset is None else (r.partition, r.offset) in found):
                    verdict.lost.append(f"{r.value} of committed {t.id} acked at {(r.partition, r.offset)}, found at {found}")
    reads_from = {t.id: {w for w in t.read if w != t.id} for t in txns}
    verdict.read_cycles = [_describe(c) for c in cycles(reads_from)]
    verdict.write_cycles = [_describe(c) for c in cycles(_write_order(final))]
    if pipeline_output is not None:
        _check_pipeline(verdict, pipeline, pipeline_input or {}, pipeline_output, pipeline_committed or {})
    return verdict


def _write_order(final: Mapping[int, Mapping[int, str]]) -> dict[str, set[str]]:
    """Edges a -> b where, in some partition, a record of transaction a comes right before
    one of b (ww dependencies, by offset)."""
    after: dict[str, set[str]] = defaultdict(set)
    for records in final.values():
        previous = None
        for _, value in sorted(records.items()):
            txn = transaction_of(value)
            if previous is not None and previous != txn:
                after[previous].add(txn)
            previous = txn
    return after


def _describe(component: list[str]) -> str:
    shown = ", ".join(component[:6]) + (", ..." if len(component) > 6 else "")
    return f"{len(component)} transactions: {shown}"


def _check_pipeline(verdict: TxnVerdict, pipeline: Sequence[PipelineTxn], inputs: Mapping[int, Mapping[int, str]],
                    outputs: Mapping[int, Mapping[int, str]], committed: Mapping[int, int]) -> None:
    """Exactly once through the pipeline: the group's committed offset on each input partition
    splits its records into those with exactly one output (below) and those with none."""
    verdict.pipeline_committed = sum(t.outcome == "committed" for t in pipeline)
    seen: dict[tuple[int, int], int] = defaultdict(int)
    for records in outputs.values():
        for value in records.values():
            verdict.pipeline_records += 1
            partition, offset, original = value.split(":", 2)
            key = (int(partition), int(offset))
            seen[key] += 1
            if inputs.get(key[0], {}).get(key[1]) != original:
                verdict.pipeline_wrong.append(f"output {value}: the input holds {inputs.get(key[0], {}).get(key[1])}")
            if key[1] >= committed.get(key[0], 0):
                verdict.pipeline_beyond.append(f"output of p{key[0]}@{key[1]}, committed offset {committed.get(key[0], 0)}")
    verdict.pipeline_duplicated = [f"p{p}@{o}: {n} outputs" for (p, o), n in sorted(seen.items()) if n > 1]
    for partition, records in sorted(inputs.items()):
        end = committed.get(partition, 0)
        verdict.pipeline_missing += [f"p{partition}@{o} ({v}): below committed offset {end}, no output"
                                     for o, v in sorted(records.items()) if o < end and (partition, o) not in seen]
