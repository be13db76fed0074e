"""The transactional checker over hand-built runs: a clean one, then one per anomaly kind, and
the write cycles it counts without holding them against the brokers."""

from __future__ import annotations

import json

from odradek.graph import cycles
from odradek.local.checker import Poll, Verdict, parse_history
from odradek.local.txn_checker import PipelineTxn, Txn, TxnRecord, check_transactions


def txn(id_: str, outcome: str, *placed: tuple[int, int | None], read: tuple[str, ...] = ()) -> Txn:
    return Txn(id_, outcome, tuple(TxnRecord(f"{id_}.{i}", p, o) for i, (p, o) in enumerate(placed)), read)


def clean() -> tuple[list[Txn], dict[int, dict[int, str]]]:
    """t0.0 committed on p0 and p1; t0.1 aborted (markers and its records hidden); t1.0
    committed after reading t0.0, one delivery report missing. Offsets 2, 3 and 5: markers."""
    txns = [txn("t0.0", "committed", (0, 0), (1, 0)), txn("t0.1", "aborted", (0, 2), (1, 2)),
            txn("t1.0", "committed", (0, 4), (1, None), read=("t0.0",))]
    final = {0: {0: "t0.0.0", 4: "t1.0.0"}, 1: {0: "t0.0.1", 4: "t1.0.1"}}
    return txns, final


def test_a_clean_run_has_no_anomaly() -> None:
    txns, final = clean()
    verdict = check_transactions(txns, [(0, 0, "t0.0.0"), (1, 0, "t0.0.1")], final)
    assert (verdict.committed, verdict.aborted, verdict.unknown, verdict.reads) == (2, 1, 0, 2)
    assert verdict.anomalies == 0 and verdict.examples() == {}


def test_aborted_reads_during_the_run_and_in_the_final_read() -> None:
    txns, final = clean()
    final[0][2] = "t0.1.0"
    verdict = check_transactions(txns, [(1, 2, "t0.1.1")], final)
    assert verdict.aborted_reads == ["t0.1.1 at p1@2 (read during the run)", "t0.1.0 at [(0, 2)] (final read)"]
    # the aborted transaction is also half visible
    assert verdict.torn == ["t0.1 (aborted): 1 of 2 records visible"]


def test_a_torn_committed_transaction_is_also_a_lost_write() -> None:
    txns, final = clean()
    del final[1][0]
    verdict = check_transactions(txns, [], final)
    assert verdict.torn == ["t0.0 (committed): 1 of 2 records visible"]
    assert verdict.lost == ["t0.0.1 of committed t0.0 acked at (1, 0), found at []"]


def test_an_unknown_outcome_is_all_or_nothing() -> None:
    txns, final = clean()
    txns.append(txn("t1.1", "unknown", (0, 6), (1, 6)))
    assert check_transactions(txns, [], final).anomalies == 0  # none of it: fine
    final[0][6] = "t1.1.0"
    assert check_transactions(txns, [], final).torn == ["t1.1 (unknown): 1 of 2 records visible"]
    final[1][6] = "t1.1.1"
    assert check_transactions(txns, [], final).anomalies == 0  # all of it: fine


def test_a_record_at_another_offset_or_twice() -> None:
    txns, final = clean()
    final[0] = {1: "t0.0.0", 4: "t1.0.0"}
    assert check_transactions(txns, [], final).lost == ["t0.0.0 of committed t0.0 acked at (0, 0), found at [(0, 1)]"]
    txns, final = clean()
    final[0][5] = "t1.0.0"
    assert check_transactions(txns, [], final).duplicated == ["t1.0.0 at [(0, 4), (0, 5)]"]


def test_circular_information_flow_is_held_write_cycles_are_counted() -> None:
    # each read the other before it began: impossible with read_committed
    txns = [txn("t0.0", "committed", (0, 0), read=("t1.0",)), txn("t1.0", "committed", (1, 0), read=("t0.0",))]
    verdict = check_transactions(txns, [], {0: {0: "t0.0.0"}, 1: {0: "t1.0.0"}})
    assert verdict.read_cycles == ["2 transactions: t0.0, t1.0"] and verdict.anomalies == 1
    # two partitions order two concurrent transactions differently: G0, which Kafka permits
    txns = [txn("t0.0", "committed", (0, 0), (1, 1)), txn("t1.0", "committed", (0, 1), (1, 0))]
    verdict = check_transactions(txns, [], {0: {0: "t0.0.0", 1: "t1.0.0"}, 1: {0: "t1.0.1", 1: "t0.0.1"}})
    assert verdict.write_cycles == ["2 transactions: t0.0, t1.0"]
    assert verdict.anomalies == 0 and verdict.examples() == {"write_cycles": verdict.write_cycles}


def test_cycles_finds_every_strongly_connected_component() -> None:
    edges = {"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": ["e"], "e": ["d"], "f": ["a"], "g": []}
    assert cycles(edges) == [["a", "b", "c"], ["d", "e"]]
    assert cycles({"a": ["a"]}) == []  # a transaction is not its own cycle
    chain = {str(i): [str(i + 1)] for i in range(5000)}  # deep, without recursion
    assert cycles(chain) == []
    chain["5000"] = ["0"]
    assert len(cycles(chain)[0]) == 5001


def pipeline_run() -> tuple[dict[int, dict[int, str]], dict[int, dict[int, str]], dict[int, int]]:
    """Input p0 offsets 0-3, committed at 3: outputs for 0, 1 and 2 only."""
    inputs = {0: {0: "a", 1: "b", 2: "c", 3: "d"}}
    outputs = {0: {0: "0:0:a", 1: "0:1:b", 3: "0:2:c"}}  # offset 2: an aborted batch's marker
    return inputs, outputs, {0: 3}


def check_pipeline(inputs, outputs, committed):  # type: ignore[no-untyped-def]
    return check_transactions([], [], {}, pipeline=[PipelineTxn("c0.0", "committed", {0: 3}, 3)],
                              pipeline_input=inputs, pipeline_output=outputs, pipeline_committed=committed)


def test_the_pipeline_exactly_once() -> None:
    verdict = check_pipeline(*pipeline_run())
    assert verdict.pipeline_committed == 1 and verdict.pipeline_records == 3 and verdict.anomalies == 0


def test_the_pipeline_outputs_missing_twice_beyond_the_offsets_or_wrong() -> None:
    inputs, outputs, committed = pipeline_run()
    del outputs[0][1]
    assert check_pipeline(inputs, outputs, committed).pipeline_missing == ["p0@1 (b): below committed offset 3, no output"]
    inputs, outputs, committed = pipeline_run()
    outputs[0][4] = "0:1:b"
    assert check_pipeline(inputs, outputs, committed).pipeline_duplicated == ["p0@1: 2 outputs"]
    inputs, outputs, committed = pipeline_run()
    outputs[0][4] = "0:3:d"  # committed without its offset
    assert check_pipeline(inputs, outputs, committed).pipeline_beyond == ["output of p0@3, committed offset 3"]
    inputs, outputs, committed = pipeline_run()
    outputs[0][0] = "0:0:z"
    assert check_pipeline(inputs, outputs, committed).pipeline_wrong == ["output 0:0:z: the input holds a"]


def test_the_history_carries_the_transactional_events_into_the_verdict() -> None:
    lines = [json.dumps(e) for e in [
        {"type": "txn", "t": 1.0, "id": "t0.0", "producer": 0, "outcome": "committed", "read": [],
         "records": [["t0.0.0", 0, 0], ["t0.0.1", 1, None]]},
        {"type": "txn-read", "t": 1.5, "reader": 1, "partition": 0, "offset": 0, "value": "t0.0.0"},
        {"type": "pipeline", "t": 2.0, "id": "c0.0", "outcome": "aborted", "records": 2, "offsets": {"0": 7}},
    ]]
    history = parse_history(lines)
    assert history.txns == [txn("t0.0", "committed", (0, 0), (1, None))]
    assert history.txn_reads == [Poll("txn-reader-1", 0, 0, "t0.0.0", 1.5)]
    assert history.pipeline == [PipelineTxn("c0.0", "aborted", {0: 7}, 2)]
    verdict = Verdict(transactions=check_transactions(history.txns, [(0, 0, "t0.0.0")], {0: {0: "t0.0.0"}}))
    assert verdict.anomalies == 2 and not verdict.ok  # t0.0.1 lost: a torn transaction and a lost write
    assert list(verdict.examples()) == ["torn", "lost_committed"]


def test_a_hung_transaction_must_have_been_aborted() -> None:
    txns, final = clean()
    hung = [txn("h0", "aborted", (0, 6)), txn("h1", "committed", (1, 6))]
    final[1][6] = "h1.0"
    verdict = check_transactions(txns, [], final, hung=hung)
    assert verdict.hung == 2 and verdict.hung_not_aborted == ["h1: committed after its timeout"]
    assert verdict.anomalies == 1
    final[0][6] = "h0.0"  # the aborted one visible
    assert check_transactions(txns, [], final, hung=hung).aborted_reads == ["h0.0 at [(0, 6)] (final read)"]
