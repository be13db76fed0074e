"""The transaction coordinator on a real 3-broker cluster, driven with raw requests:
FindCoordinator creates __transaction_state and names the leader of the id's partition;
InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, DescribeTransactions and
ListTransactions answer from the replicated state; an abandoned transaction is aborted at
its timeout with the epoch bumped; a second InitProducerId fences an open transaction; the
coordinator's broker is SIGKILLed and another loads the state; KIP-890 verification refuses a
transactional batch for a partition not yet in the transaction.  Completion (markers, then
CompleteCommit) is checked where the brokers serve WriteTxnMarkers."""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.local.cluster import LocalCluster
from odradek.net.client import BrokerConnection
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import build, request_module, response_module
from support import ClusterFactory, create_topic, wait_until_async

TOPIC = "txn-data"
OVERRIDES = {
    "transaction.state.log.num.partitions": "4",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "300",
}
E = ErrorCode


@pytest.fixture(scope="module")
def cluster(zookeeper: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    factory = ClusterFactory(zookeeper, tmp_path_factory.mktemp("txn-cluster"))
    try:
        c = factory(3, overrides=OVERRIDES)
        create_topic(c, TOPIC, partitions=2, replication_factor=3)
        yield c
    finally:
        factory.stop_all()


class Wire:
    def __init__(self, conn: BrokerConnection) -> None:
        self.conn = conn

    async def call(self, api_key: int, version: int, cls: str, /, **fields: Any) -> Any:
        request = build(getattr(request_module(api_key, version), cls + "Request"), **fields)
        return await self.conn.send(request, getattr(response_module(api_key, version), cls + "Response"))

    @staticmethod
    def nested(api_key: int, version: int, cls: str, /, **fields: Any) -> Any:
        return build(getattr(request_module(api_key, version), cls), **fields)


async def connect(port: int) -> Wire:
    conn = BrokerConnection("127.0.0.1", port, "txn-test")
    await conn.connect()
    return Wire(conn)


async def find_coordinator(cluster: LocalCluster, txn_id: str, not_on: int | None = None) -> tuple[int, Wire]:
    """The coordinator of ``txn_id`` (once it is not ``not_on``, a broker that was killed)."""
    alive = next(b for b in cluster.brokers.values() if b.alive)
    wire = await connect(alive.port)
    try:
        async def found() -> Any:
            r = await wire.call(10, 3, "FindCoordinator", key=txn_id, key_type=1)
            assert r.error_code in (E.none, E.coordinator_not_available), r
            return r if r.error_code == E.none and r.node_id != not_on else None

        r = await wait_until_async(found, timeout=60, interval=0.3, message=f"a coordinator for {txn_id}")
    finally:
        await wire.conn.close()
    return r.node_id, await connect(r.port)


async def init_pid(wire: Wire, txn_id: str, timeout_ms: int = 60000) -> tuple[int, int]:
    async def attempt() -> Any:
        r = await wire.call(22, 4, "InitProducerId", transactional_id=txn_id, transaction_timeout=timeout_ms)
        if r.error_code in (E.coordinator_load_in_progress, E.concurrent_transactions):
            return None
        assert r.error_code == E.none, r
        return r.producer_id, r.producer_epoch
    return await wait_until_async(attempt, interval=0.2, message=f"InitProducerId for {txn_id}")


async def add_partitions(wire: Wire, txn_id: str, pid: int, epoch: int, partitions: tuple[int, ...]) -> list[Any]:
    r = await wire.call(24, 3, "AddPartitionsToTxn", v3_and_below_transactional_id=txn_id,
                        v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
                        v3_and_below_topics=(Wire.nested(24, 3, "AddPartitionsToTxnTopic", name=TOPIC,
                                                         partitions=partitions),))
    return [p.partition_error_code for t in r.results_by_topic_v3_and_below for p in t.results_by_partition]


async def describe(wire: Wire, txn_id: str) -> Any:
    r = await wire.call(65, 0, "DescribeTransactions", transactional_ids=(txn_id,))
    return r.transaction_states[0]


async def serves_markers(wire: Wire) -> bool:
    r = await wire.call(18, 3, "ApiVersions", client_software_name="t", client_software_version="1")
    return any(k.api_key == 27 for k in r.api_keys)


def test_transaction_life_cycle(cluster: LocalCluster) -> None:
    async def main() -> None:
        _, wire = await find_coordinator(cluster, "tx-life")
        try:
            pid, epoch = await init_pid(wire, "tx-life")
            assert epoch == 0
            assert await add_partitions(wire, "tx-life", pid, epoch, (0, 1)) == [E.none, E.none]
            assert await add_partitions(wire, "tx-life", pid, epoch + 1, (0,)) == [E.producer_fenced]
            r = await wire.call(25, 3, "AddOffsetsToTxn", transactional_id="tx-life", producer_id=pid,
                                producer_epoch=epoch, group_id="g")
            assert r.error_code == E.none
            state = await describe(wire, "tx-life")
            assert (state.transaction_state, state.producer_id, state.producer_epoch) == ("Ongoing", pid, epoch)
            topics = {t.topic: set(t.partitions) for t in state.topics}
            assert topics[TOPIC] == {0, 1} and "__consumer_offsets" in topics
            listed = await wire.call(66, 0, "ListTransactions", state_filters=("Ongoing",), producer_id_filters=())
            assert "tx-life" in {s.transactional_id for s in listed.transaction_states}
            r = await wire.call(26, 3, "EndTxn", transactional_id="tx-life", producer_id=pid, producer_epoch=epoch,
                                committed=True)
            assert r.error_code == E.none
            assert (await describe(wire, "tx-life")).transaction_state in ("PrepareCommit", "CompleteCommit")
            if await serves_markers(wire):
                async def complete() -> bool:
                    return (await describe(wire, "tx-life")).transaction_state == "CompleteCommit"
                await wait_until_async(complete, interval=0.2, message="CompleteCommit")
        finally:
            await wire.conn.close()
    asyncio.run(main())


def test_timeout_abort_and_fencing(cluster: LocalCluster) -> None:
    async def main() -> None:
        _, wire = await find_coordinator(cluster, "tx-timeout")
        try:
            pid, epoch = await init_pid(wire, "tx-timeout", timeout_ms=1000)
            assert await add_partitions(wire, "tx-timeout", pid, epoch, (0,)) == [E.none]

            async def aborted() -> Any:
                s = await describe(wire, "tx-timeout")
                return s if s.transaction_state in ("PrepareAbort", "CompleteAbort") else None
            state = await wait_until_async(aborted, interval=0.2, message="the timed-out transaction aborted")
            assert state.producer_epoch == epoch + 1  # fenced
            r = await wire.call(26, 3, "EndTxn", transactional_id="tx-timeout", producer_id=pid,
                                producer_epoch=epoch, committed=True)
            assert r.error_code == E.producer_fenced

            pid2, epoch2 = await init_pid(wire, "tx-fence")
            assert await add_partitions(wire, "tx-fence", pid2, epoch2, (1,)) == [E.none]
            r = await wire.call(22, 4, "InitProducerId", transactional_id="tx-fence", transaction_timeout=60000)
            assert r.error_code == E.concurrent_transactions
            state = await describe(wire, "tx-fence")
            assert state.transaction_state in ("PrepareAbort", "CompleteAbort")
            assert state.producer_epoch == epoch2 + 1
        finally:
            await wire.conn.close()
    asyncio.run(main())


def test_another_broker_takes_over_the_state(cluster: LocalCluster) -> None:
    async def main() -> tuple[int, int, int]:
        node, wire = await find_coordinator(cluster, "tx-failover")
        try:
            pid, epoch = await init_pid(wire, "tx-failover")
            assert await add_partitions(wire, "tx-failover", pid, epoch, (0,)) == [E.none]
        finally:
            await wire.conn.close()
        return node, pid, epoch

    node, pid, epoch = asyncio.run(main())
    cluster.kill_broker(node)
    try:
        async def after() -> None:
            _, wire = await find_coordinator(cluster, "tx-failover", not_on=node)
            try:

                async def loaded() -> Any:
                    s = await describe(wire, "tx-failover")
                    return s if s.error_code == E.none else None
                state = await wait_until_async(loaded, interval=0.2, message="the state loaded")
                assert (state.transaction_state, state.producer_id, state.producer_epoch) == ("Ongoing", pid, epoch)
            finally:
                await wire.conn.close()
        asyncio.run(after())
    finally:
        cluster.start_broker(node)


def _transactional_produce(port: int, txn_id: str, partition: int, pid: int, epoch: int) -> Any:
    from kio.schema.produce.v9 import request as produce_req
    from kio.schema.produce.v9 import response as produce_resp

    from odradek.protocol.records import SimpleRecord, build_batch

    batch = build_batch([SimpleRecord(b"v")], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                        is_transactional=True, timestamp=int(time.time() * 1000))
    request = produce_req.ProduceRequest(
        transactional_id=txn_id, acks=-1, timeout=datetime.timedelta(seconds=10),
        topic_data=(produce_req.TopicProduceData(name=TOPIC, partition_data=(
            produce_req.PartitionProduceData(index=partition, records=batch),)),))

    async def call() -> Any:
        wire = await connect(port)
        try:
            return (await wire.conn.send(request, produce_resp.ProduceResponse)).responses[0].partition_responses[0]
        finally:
            await wire.conn.close()
    return asyncio.run(call())


def test_kip890_verification_on_every_leader(cluster: LocalCluster) -> None:
    """A transactional batch is refused by each partition leader (the coordinator's broker or
    not) until its partition is in the transaction, then accepted."""
    async def begin() -> tuple[int, int]:
        _, wire = await find_coordinator(cluster, "tx-verify")
        try:
            return await init_pid(wire, "tx-verify")
        finally:
            await wire.conn.close()

    async def add(partition: int, pid: int, epoch: int) -> list[Any]:
        _, wire = await find_coordinator(cluster, "tx-verify")
        try:
            return await add_partitions(wire, "tx-verify", pid, epoch, (partition,))
        finally:
            await wire.conn.close()

    async def leader_port(partition: int) -> int:
        wire = await connect(next(iter(cluster.brokers.values())).port)
        try:
            r = await wire.call(3, 9, "Metadata", topics=(Wire.nested(3, 9, "MetadataRequestTopic", name=TOPIC),),
                                allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                                include_topic_authorized_operations=False)
            leader = next(p.leader_id for p in r.topics[0].partitions if p.partition_index == partition)
            return cluster.brokers[leader].port
        finally:
            await wire.conn.close()

    pid, epoch = asyncio.run(begin())
    for partition in (0, 1):
        port = asyncio.run(leader_port(partition))
        refused = _transactional_produce(port, "tx-verify", partition, pid, epoch)
        assert refused.error_code == E.invalid_txn_state, refused
        assert asyncio.run(add(partition, pid, epoch)) == [E.none]
        accepted = _transactional_produce(port, "tx-verify", partition, pid, epoch)
        assert accepted.error_code == E.none, accepted
