"""Produce and Fetch handlers on a FakeBroker: real logs, the wire encodings, the error paths
(unknown topic, not leader, stale epochs, invalid requests, authorization) and a long poll."""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Sequence

from fake_broker import OTHER_BROKER, FakeBroker, FakeConnection, WithBroker, decode_answer
from kio.schema.fetch.v12 import request as fetch_req
from kio.schema.fetch.v12 import response as fetch_resp
from kio.schema.produce.v9 import request as produce_req
from kio.schema.produce.v9 import response as produce_resp
from kio.static.primitive import i32

from odradek.common import TopicPartition
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.records import SimpleRecord, build_batch, iter_batches
from odradek.security.acls import KafkaPrincipal, Operation, ResourceType

ALICE = KafkaPrincipal("User", "alice")
ADMIN = KafkaPrincipal("User", "admin")
TP = tuple[str, int]


def batch(*values: bytes, producer_id: int = -1, transactional: bool = False) -> bytes:
    return build_batch([SimpleRecord(v) for v in values], producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                       base_sequence=0 if producer_id >= 0 else -1, is_transactional=transactional,
                       timestamp=time.time_ns() // 1_000_000)


def produce(records: dict[TP, bytes | None], acks: int = 1, transactional_id: str | None = None
            ) -> produce_req.ProduceRequest:
    by_topic: dict[str, list[produce_req.PartitionProduceData]] = {}
    for (topic, partition), data in records.items():
        by_topic.setdefault(topic, []).append(produce_req.PartitionProduceData(index=i32(partition), records=data))
    return produce_req.ProduceRequest(
        transactional_id=transactional_id, acks=acks, timeout=datetime.timedelta(seconds=5),
        topic_data=tuple(produce_req.TopicProduceData(name=t, partition_data=tuple(ps)) for t, ps in by_topic.items()))


def fetch(offsets: dict[TP, int], *, replica_id: int = -1, max_wait_ms: int = 0, leader_epoch: int = -1,
          session_id: int = 0, session_epoch: int = -1) -> fetch_req.FetchRequest:
    by_topic: dict[str, list[fetch_req.FetchPartition]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(fetch_req.FetchPartition(
            partition=i32(partition), current_leader_epoch=i32(leader_epoch), fetch_offset=offset,
            partition_max_bytes=i32(1 << 20)))
    return fetch_req.FetchRequest(
        replica_id=i32(replica_id), max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=i32(1),
        session_id=i32(session_id), session_epoch=i32(session_epoch),
        topics=tuple(fetch_req.FetchTopic(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
        forgotten_topics_data=())


async def produced(broker: FakeBroker, request: produce_req.ProduceRequest, **options: object
                   ) -> dict[TP, produce_resp.PartitionProduceResponse]:
    response = await broker.call(request, produce_resp.ProduceResponse, **options)  # type: ignore[arg-type]
    return {(t.name, p.index): p for t in response.responses for p in t.partition_responses}


async def fetched(broker: FakeBroker, request: fetch_req.FetchRequest, **options: object
                  ) -> dict[TP, fetch_resp.PartitionData]:
    response = await broker.call(request, fetch_resp.FetchResponse, **options)  # type: ignore[arg-type]
    assert response.error_code == E.none
    return {(t.topic, p.partition_index): p for t in response.responses for p in t.partitions}


def values(records: bytes | None) -> list[int]:
    """The base offsets of the batches in a fetched partition."""
    return [header.base_offset for _, header in iter_batches(records or b"")]


# ----------------------------------------------------------------------------- produce


def test_produce_appends_on_the_leader_and_fetch_reads_it_back(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0])
        first = (await produced(b, produce({("t", 0): batch(b"a", b"b")})))[("t", 0)]
        assert (first.error_code, first.base_offset, first.log_start_offset) == (E.none, 0, 0)
        second = (await produced(b, produce({("t", 0): batch(b"c")}, acks=-1)))[("t", 0)]
        assert (second.error_code, second.base_offset) == (E.none, 2)  # the ISR is this broker alone
        got = (await fetched(b, fetch({("t", 0): 0})))[("t", 0)]
        assert (got.error_code, got.high_watermark, values(got.records)) == (E.none, 3, [0, 2])

    with_broker(body)


def test_produce_answers_each_partition_with_its_own_error(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0, 2])
        await b.lead("followed", [0], leader=OTHER_BROKER)
        got = await produced(b, produce({("t", 0): batch(b"a"), ("t", 1): batch(b"b"), ("t", 2): None,
                                         ("followed", 0): batch(b"c"), ("nope", 0): batch(b"d")}))
        assert {tp: p.error_code for tp, p in got.items()} == {
            ("t", 0): E.none, ("t", 1): E.unknown_topic_or_partition, ("t", 2): E.invalid_record,
            ("followed", 0): E.not_leader_or_follower, ("nope", 0): E.unknown_topic_or_partition}

    with_broker(body)


def test_invalid_produce_requests_append_nothing(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0])
        got = await produced(b, produce({("t", 0): batch(b"a")}, acks=2))
        assert got[("t", 0)].error_code == E.invalid_required_acks
        got = await produced(b, produce({("t", 0): batch(b"a", producer_id=7, transactional=True)}))
        assert got[("t", 0)].error_code == E.transactional_id_authorization_failed
        assert b.replica_manager.partitions[("t", 0)].log_end_offset == 0  # type: ignore[index]

    with_broker(body)


def test_produce_takes_exactly_one_whole_batch_per_partition(with_broker: WithBroker) -> None:
    """Kafka's ProduceRequest.validateRecords (found by the differential oracle): no batch, a
    cut one or two are INVALID_RECORD, answered without the log start offset; a fragment too
    short to be a second batch is dropped."""
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0, 1, 2, 3])
        one = batch(b"a")
        got = await produced(b, produce({("t", 0): b"", ("t", 1): one[:40], ("t", 2): one + batch(b"b"),
                                         ("t", 3): one + b"\x00" * 10}))
        assert {tp: (p.error_code, p.log_start_offset) for tp, p in got.items()} == {
            ("t", 0): (E.invalid_record, -1), ("t", 1): (E.invalid_record, -1), ("t", 2): (E.invalid_record, -1),
            ("t", 3): (E.none, 0)}
        assert [b.replica_manager.partitions[("t", p)].log_end_offset for p in range(4)] == [0, 0, 0, 1]  # type: ignore[index]
        got = await produced(b, produce({("t", 0): one[:8] + (2).to_bytes(4, "big") + one[12:]}))
        assert got[("t", 0)].error_code == E.corrupt_message  # a length below any batch's

    with_broker(body)


def test_clients_may_not_write_internal_topics(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("__consumer_offsets", [0])
        got = await produced(b, produce({("__consumer_offsets", 0): batch(b"a")}))
        assert (got[("__consumer_offsets", 0)].error_code, got[("__consumer_offsets", 0)].log_start_offset) == (
            E.invalid_topic_exception, -1)
        results, _ = b.replica_manager.append_records(1, 1000, [("__consumer_offsets", 0, batch(b"b"))],
                                                      internal_topics_allowed=True)
        assert [r.error for r in results.values()] == [E.none]

    with_broker(body)


def test_refused_appends_carry_the_log_start_offset_except_for_broken_batches(with_broker: WithBroker) -> None:
    """Kafka answers a refused append with the partition's log start offset, except the
    errors it catches before the log is asked (a corrupt or too large batch: -1)."""
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0])
        await produced(b, produce({("t", 0): batch(b"a", producer_id=9)}))  # sequence 0
        b.replica_manager.partitions[("t", 0)].log.maybe_increment_log_start_offset(1)  # type: ignore[index,union-attr]
        corrupt = bytearray(batch(b"c"))
        corrupt[-1] ^= 0xFF
        out_of_order = build_batch([SimpleRecord(b"x")], producer_id=9, producer_epoch=0, base_sequence=5,
                                   timestamp=time.time_ns() // 1_000_000)
        got = await produced(b, produce({("t", 0): bytes(corrupt)}))
        assert (got[("t", 0)].error_code, got[("t", 0)].log_start_offset) == (E.corrupt_message, -1)
        got = await produced(b, produce({("t", 0): out_of_order}))
        assert (got[("t", 0)].error_code, got[("t", 0)].log_start_offset) == (E.out_of_order_sequence_number, 1)

    with_broker(body)


def test_acks_zero_answers_nothing_and_closes_the_connection_on_an_error(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0])
        fine, failing = FakeConnection(), FakeConnection()
        assert b.send(produce({("t", 0): batch(b"a")}, acks=0), fine) is None
        assert b.send(produce({("nope", 0): batch(b"a")}, acks=0), failing) is None
        assert (fine.closed, failing.closed) == (False, True)
        assert b.replica_manager.partitions[("t", 0)].log_end_offset == 1  # type: ignore[index]

    with_broker(body)


def test_produce_needs_write_on_each_topic_and_on_the_transactional_id(with_broker: WithBroker) -> None:
    """Idempotent batches need nothing more than Write on the topic, since Kafka 3.0 (KIP-679;
    the differential oracle showed Kafka 3.9 taking them)."""
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0])
        await b.lead("secret", [0])
        b.enable_authorizer(ADMIN)
        b.allow(ALICE, Operation.WRITE, ResourceType.TOPIC, "t")
        got = await produced(b, produce({("t", 0): batch(b"a"), ("secret", 0): batch(b"b")}), principal=ALICE)
        assert {tp: p.error_code for tp, p in got.items()} == {
            ("t", 0): E.none, ("secret", 0): E.topic_authorization_failed}
        got = await produced(b, produce({("t", 0): batch(b"a", producer_id=7), ("secret", 0): batch(
            b"b", producer_id=8)}), principal=ALICE)
        assert {tp: p.error_code for tp, p in got.items()} == {
            ("t", 0): E.none, ("secret", 0): E.topic_authorization_failed}
        got = await produced(b, produce({("t", 0): batch(b"a", producer_id=7, transactional=True)},
                                        transactional_id="tx"), principal=ALICE)
        assert got[("t", 0)].error_code == E.transactional_id_authorization_failed
        refused = FakeConnection(ALICE)
        assert b.send(produce({("secret", 0): batch(b"c")}, acks=0), refused) is None
        assert refused.closed
        got = await produced(b, produce({("secret", 0): batch(b"d", producer_id=7)}), principal=ADMIN)
        assert got[("secret", 0)].error_code == E.none
        assert [b.replica_manager.partitions[(t, 0)].log_end_offset for t in ("t", "secret")] == [2, 1]  # type: ignore[index]

    with_broker(body)


class Verifier:
    """The transaction coordinator's KIP-890 answers, recording what it was asked."""

    def __init__(self, refused: set[TP]) -> None:
        self.refused = refused
        self.asked: list[tuple[str, list[TP]]] = []

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: Sequence[TopicPartition]) -> dict[TopicPartition, E]:
        self.asked.append((transactional_id, [tuple(tp) for tp in partitions]))
        return {tp: E.invalid_txn_state if tuple(tp) in self.refused else E.none for tp in partitions}


def test_transactional_produce_is_verified_with_the_coordinator_first(with_broker: WithBroker) -> None:
    verifier = Verifier({("t", 1)})

    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0, 1])
        got = await produced(b, produce({("t", 0): batch(b"a", producer_id=7, transactional=True),
                                         ("t", 1): batch(b"b", producer_id=7, transactional=True)},
                                        transactional_id="tx"))
        assert {tp: p.error_code for tp, p in got.items()} == {("t", 0): E.none, ("t", 1): E.invalid_txn_state}
        assert [b.replica_manager.partitions[("t", p)].log_end_offset for p in (0, 1)] == [1, 0]  # type: ignore[index]

    with_broker(body, txn_verifier=verifier)
    assert verifier.asked == [("tx", [("t", 0), ("t", 1)])]


# ----------------------------------------------------------------------------- fetch


def test_fetch_answers_each_partition_with_its_own_error(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0], leader_epoch=3)
        await b.lead("followed", [0], leader=OTHER_BROKER)
        got = await fetched(b, fetch({("t", 0): 5, ("t", 1): 0, ("followed", 0): 0, ("nope", 0): 0}))
        # A v11+ consumer may read from a follower (KIP-392; test_fetch_from_follower.py).
        assert {tp: p.error_code for tp, p in got.items()} == {
            ("t", 0): E.offset_out_of_range, ("t", 1): E.unknown_topic_or_partition,
            ("followed", 0): E.none, ("nope", 0): E.unknown_topic_or_partition}
        # As Kafka's createLogReadResult(e): no offsets; the aborted transactions are null once
        # the replica manager answered, empty for a partition refused before (as Kafka's).
        assert {tp: (p.high_watermark, p.last_stable_offset, p.log_start_offset, p.aborted_transactions)
                for tp, p in got.items() if tp != ("followed", 0)} == {
            ("t", 0): (-1, -1, -1, None), ("t", 1): (-1, -1, -1, ()),
            ("nope", 0): (-1, -1, -1, ())}
        for epoch, error in ((2, E.fenced_leader_epoch), (4, E.unknown_leader_epoch), (3, E.none)):
            got = await fetched(b, fetch({("t", 0): 0}, leader_epoch=epoch))
            assert got[("t", 0)].error_code == error

    with_broker(body)


def test_fetch_needs_read_on_the_topic_and_followers_cluster_action(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0])
        await b.lead("secret", [0])
        await produced(b, produce({("t", 0): batch(b"a"), ("secret", 0): batch(b"b")}))
        b.enable_authorizer()
        b.allow(ALICE, Operation.READ, ResourceType.TOPIC, "t")
        got = await fetched(b, fetch({("t", 0): 0, ("secret", 0): 0}), principal=ALICE)
        assert {tp: (p.error_code, values(p.records)) for tp, p in got.items()} == {
            ("t", 0): (E.none, [0]), ("secret", 0): (E.topic_authorization_failed, [])}
        got = await fetched(b, fetch({("t", 0): 0}, replica_id=OTHER_BROKER), principal=ALICE)
        assert got[("t", 0)].error_code == E.topic_authorization_failed

    with_broker(body)


def test_a_waiting_fetch_is_answered_when_records_arrive(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0])
        waiting = b.send(fetch({("t", 0): 0}, max_wait_ms=30_000), FakeConnection())
        assert isinstance(waiting, asyncio.Future) and not waiting.done()
        await produced(b, produce({("t", 0): batch(b"a")}))
        response = decode_answer(await asyncio.wait_for(waiting, 5), fetch_resp.FetchResponse)
        assert [(p.error_code, values(p.records)) for t in response.responses for p in t.partitions] == [(E.none, [0])]

    with_broker(body)


def test_fetch_sessions_answer_only_partitions_with_news(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await b.lead("t", [0, 1])
        full = await b.call(fetch({("t", 0): 0, ("t", 1): 0}, session_epoch=0), fetch_resp.FetchResponse)
        assert full.session_id != 0
        assert sorted(p.partition_index for t in full.responses for p in t.partitions) == [0, 1]
        await produced(b, produce({("t", 1): batch(b"a")}))
        news = await b.call(fetch({}, session_id=full.session_id, session_epoch=1), fetch_resp.FetchResponse)
        assert [(p.partition_index, values(p.records)) for t in news.responses for p in t.partitions] == [(1, [0])]
        unknown = await b.call(fetch({}, session_id=full.session_id + 1, session_epoch=1), fetch_resp.FetchResponse)
        assert unknown.error_code == E.fetch_session_id_not_found

    with_broker(body)
