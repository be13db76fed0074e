"""The transaction APIs' handlers end to end through their wire encodings (every version), on a
FakeBroker whose transaction coordinator runs on in-memory fakes."""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable

from fake_broker import FakeBroker, WithBroker
from kio.schema.add_offsets_to_txn.v0 import request as aot0
from kio.schema.add_offsets_to_txn.v0 import response as aot0_resp
from kio.schema.add_partitions_to_txn.v1 import request as apt1
from kio.schema.add_partitions_to_txn.v1 import response as apt1_resp
from kio.schema.add_partitions_to_txn.v4 import request as apt4
from kio.schema.add_partitions_to_txn.v4 import response as apt4_resp
from kio.schema.describe_transactions.v0 import request as dt_req
from kio.schema.describe_transactions.v0 import response as dt_resp
from kio.schema.end_txn.v3 import request as et3
from kio.schema.end_txn.v3 import response as et3_resp
from kio.schema.init_producer_id.v1 import request as ipi1
from kio.schema.init_producer_id.v1 import response as ipi1_resp
from kio.schema.init_producer_id.v4 import request as ipi4
from kio.schema.init_producer_id.v4 import response as ipi4_resp
from kio.schema.list_transactions.v0 import request as lt_req
from kio.schema.list_transactions.v0 import response as lt_resp
from kio.static.primitive import i16, i32, i64
from txn_fakes import Harness

from odradek.protocol.errors import ErrorCode as E
from odradek.security.acls import KafkaPrincipal, Operation, ResourceType

Test = Callable[[Harness, FakeBroker], Awaitable[None]]


def run(with_broker: WithBroker, test: Test) -> None:
    """Run ``test`` on a FakeBroker with the harness's coordinator, leading t-0, t-1 and t-2."""
    h = Harness()

    async def body(b: FakeBroker) -> None:
        await h.elect()
        await b.lead("t", [0, 1, 2])
        await test(h, b)

    with_broker(body, transaction_coordinator=h.coordinator)


def ms(n: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=n)


def test_a_transaction_through_the_wire(with_broker: WithBroker) -> None:
    async def t(h: Harness, b: FakeBroker) -> None:
        init = await b.call(ipi4.InitProducerIdRequest(transactional_id="tx", transaction_timeout=ms(60000)),
                          ipi4_resp.InitProducerIdResponse)
        assert (init.error_code, init.producer_id, init.producer_epoch) == (E.none, 1000, 0)
        added = await b.call(apt1.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id="tx", v3_and_below_producer_id=i64(1000), v3_and_below_producer_epoch=i16(0),
            v3_and_below_topics=(apt1.AddPartitionsToTxnTopic(name="t", partitions=(i32(0), i32(1))),)),
            apt1_resp.AddPartitionsToTxnResponse)
        assert [(r.name, p.partition_index, p.partition_error_code) for r in added.results_by_topic_v3_and_below
                for p in r.results_by_partition] == [("t", 0, E.none), ("t", 1, E.none)]
        offsets = await b.call(aot0.AddOffsetsToTxnRequest(transactional_id="tx", producer_id=i64(1000),
                                                            producer_epoch=i16(0), group_id="g"),
                             aot0_resp.AddOffsetsToTxnResponse)
        assert offsets.error_code == E.none
        assert ("__consumer_offsets", b.group_coordinator.partition_for("g")) in h.manager.txns["tx"].topic_partitions
        verified = await b.call(apt4.AddPartitionsToTxnRequest(transactions=(apt4.AddPartitionsToTxnTransaction(
            transactional_id="tx", producer_id=i64(1000), producer_epoch=i16(0), verify_only=True,
            topics=(apt4.AddPartitionsToTxnTopic(name="t", partitions=(i32(1), i32(2))),)),)),
            apt4_resp.AddPartitionsToTxnResponse)
        assert [(p.partition_index, p.partition_error_code) for r in verified.results_by_transaction
                for tr in r.topic_results for p in tr.results_by_partition] == [(1, E.none), (2, E.invalid_txn_state)]
        described = await b.call(dt_req.DescribeTransactionsRequest(transactional_ids=("tx", "nope")),
                               dt_resp.DescribeTransactionsResponse)
        first, second = described.transaction_states
        assert (first.transaction_state, first.producer_id, first.transaction_timeout) == ("Ongoing", 1000, ms(60000))
        assert {(d.topic, tuple(d.partitions)) for d in first.topics} >= {("t", (0, 1))}
        assert second.error_code == E.transactional_id_not_found
        assert (second.producer_id, second.producer_epoch) == (0, 0)  # Kafka's schema defaults, as its answer
        listed = await b.call(lt_req.ListTransactionsRequest(state_filters=("Ongoing", "Nah")),
                            lt_resp.ListTransactionsResponse)
        assert [(s.transactional_id, s.transaction_state) for s in listed.transaction_states] == [("tx", "Ongoing")]
        assert listed.unknown_state_filters == ("Nah",)
        ended = await b.call(et3.EndTxnRequest(transactional_id="tx", producer_id=i64(1000), producer_epoch=i16(0),
                                                committed=True), et3_resp.EndTxnResponse)
        assert ended.error_code == E.none
        await h.settle()
        assert h.manager.txns["tx"].state.name == "COMPLETE_COMMIT"
    run(with_broker, t)


def test_unknown_partitions_and_old_version_errors(with_broker: WithBroker) -> None:
    async def t(h: Harness, b: FakeBroker) -> None:
        await b.call(ipi4.InitProducerIdRequest(transactional_id="tx", transaction_timeout=ms(60000)),
                   ipi4_resp.InitProducerIdResponse)
        added = await b.call(apt1.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id="tx", v3_and_below_producer_id=i64(1000), v3_and_below_producer_epoch=i16(0),
            v3_and_below_topics=(apt1.AddPartitionsToTxnTopic(name="t", partitions=(i32(0), i32(9))),)),
            apt1_resp.AddPartitionsToTxnResponse)
        assert {p.partition_index: p.partition_error_code for r in added.results_by_topic_v3_and_below
                for p in r.results_by_partition} == {0: E.operation_not_attempted, 9: E.unknown_topic_or_partition}
        fenced = await b.call(apt1.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id="tx", v3_and_below_producer_id=i64(1000), v3_and_below_producer_epoch=i16(5),
            v3_and_below_topics=(apt1.AddPartitionsToTxnTopic(name="t", partitions=(i32(0),)),)),
            apt1_resp.AddPartitionsToTxnResponse)
        assert fenced.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == \
            E.invalid_producer_epoch  # v1 predates PRODUCER_FENCED
        old = await b.call(ipi1.InitProducerIdRequest(transactional_id="tx", transaction_timeout=ms(10**9)),
                         ipi1_resp.InitProducerIdResponse)
        assert old.error_code == E.invalid_transaction_timeout
        mixed = await b.call(ipi4.InitProducerIdRequest(transactional_id="tx", transaction_timeout=ms(1000),
                                                         producer_id=i64(1000), producer_epoch=i16(-1)),
                           ipi4_resp.InitProducerIdResponse)
        assert mixed.error_code == E.invalid_request
    run(with_broker, t)


def test_an_idempotent_producer_id_needs_idempotent_write_or_write_on_some_topic(with_broker: WithBroker) -> None:
    """KIP-679, as Kafka 3.9 answers (the differential oracle's find): Write on any topic is
    enough for an idempotent producer's id, as IdempotentWrite on the cluster is."""
    alice = KafkaPrincipal("User", "alice")
    request = ipi4.InitProducerIdRequest(transactional_id=None, transaction_timeout=ms(60000))

    async def body(b: FakeBroker) -> None:
        b.enable_authorizer()
        refused = await b.call(request, ipi4_resp.InitProducerIdResponse, principal=alice)
        assert refused.error_code == E.cluster_authorization_failed
        b.allow(alice, Operation.WRITE, ResourceType.TOPIC, "some-topic")
        granted = await b.call(request, ipi4_resp.InitProducerIdResponse, principal=alice)
        assert (granted.error_code, granted.producer_epoch) == (E.none, 0) and granted.producer_id >= 0

    with_broker(body)


def test_an_idempotent_producer_bumping_its_epoch_gets_a_new_id_at_epoch_0(with_broker: WithBroker) -> None:
    """Kafka answers an idempotent producer's KIP-360 bump (its id and epoch in the request)
    with a new producer id at epoch 0, as it answers a first InitProducerId."""
    async def body(b: FakeBroker) -> None:
        first = await b.call(ipi4.InitProducerIdRequest(transactional_id=None, transaction_timeout=ms(60000)),
                             ipi4_resp.InitProducerIdResponse)
        assert (first.error_code, first.producer_epoch) == (E.none, 0)
        bumped = await b.call(ipi4.InitProducerIdRequest(transactional_id=None, transaction_timeout=ms(60000),
                                                         producer_id=first.producer_id, producer_epoch=i16(0)),
                              ipi4_resp.InitProducerIdResponse)
        assert bumped.error_code == E.none and bumped.producer_epoch == 0
        assert bumped.producer_id not in (first.producer_id, -1)

    with_broker(body)
