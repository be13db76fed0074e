"""The cases of three brokers per side: what needs other brokers to show.  Requests sent to a
broker that is not the partition's leader, not the controller, not the coordinator;
replicated topics; control requests from a controller that is not (or no longer) one; and,
with ``auto.create.topics.enable`` on both sides, Kafka's auto-creation.

Topics of a case are replicated on all three brokers with partition ``p`` led by broker
``p % 3`` (oracle.side.Side.topic); the controller and the coordinators are whichever broker
each side elected, so a case picks "some other broker" by role, never by id."""

from __future__ import annotations

from typing import Any

from oracle import flows
from oracle import requests as rq
from oracle.case import Case, one
from oracle.cases_one import metadata_auto_create
from oracle.side import Session

from odradek.protocol.api_keys import ApiKey as A

__all__ = ["CASES"]

def topic(s: Session) -> str:
    """The case's topic: 3 partitions on all three brokers (partition p led by broker p)."""
    return s.topic(partitions=3, replication_factor=3)


def follower(s: Session) -> int:
    """A broker that follows partition 0 of the case's topic (broker 0 leads it)."""
    return 1


def not_controller(s: Session) -> int:
    controller = s.side.controller
    return next(b for b in sorted(s.side.cluster.brokers) if b != controller)


def not_group_coordinator(s: Session) -> int:
    return (flows.coordinator(s, s.name("g")) + 1) % 3


def not_txn_coordinator(s: Session) -> int:
    return (flows.coordinator(s, s.name("txn"), flows.TRANSACTION) + 1) % 3


def _erase_node_ids(tree: Any) -> Any:
    """FindCoordinator's node ids: each side placed its internal topics' leaders at random."""
    if isinstance(tree, dict):
        return {k: "<broker>" if k == "node_id" and isinstance(v, int) and v >= 0 else _erase_node_ids(v)
                for k, v in tree.items()}
    if isinstance(tree, list):
        return [_erase_node_ids(v) for v in tree]
    return tree


def produce_to_each(s: Session) -> Any:
    """acks=all to partition 0 on its leader and on a follower."""
    t = topic(s)
    return {broker: s.call(rq.produce(s.req, t, rq.batch(b"x")), broker) for broker in (0, 1)}


def fetch_after_produce(broker: Any, **fetch: Any) -> Any:
    """A fetch from offset 0 after one record, asked until the answer holds it (a follower's
    high watermark follows the leader's a moment later) or 10 s passed."""
    def run(s: Session) -> Any:
        t = topic(s)
        flows.produced(s, t, b"a")
        to = broker(s) if callable(broker) else broker
        return s.poll(lambda: s.call(rq.fetch(s.req, {(t, 0): 0}, **fetch), to),
                      lambda a: a.responses[0].partitions[0].high_watermark == 1, timeout=10)
    return run


def offsets_after_produce(build: Any, broker: Any) -> Any:
    def run(s: Session) -> Any:
        t = topic(s)
        flows.produced(s, t, b"a")
        return s.call(build(s, t), broker(s) if callable(broker) else broker)
    return run


def create_then_describe(build: Any, broker: Any) -> Any:
    """CreateTopics, then Metadata from the same broker (the one whose cache the answer awaited)."""
    def run(s: Session) -> Any:
        name = s.name("new")
        to = broker(s)
        created = s.call(build(s, name), to)
        return {"create": created, "metadata": s.call(rq.metadata(s.at(A.METADATA, 12), [name]), to)}
    return run


def _erase_placement(tree: Any) -> Any:
    """An auto-created topic's replicas: each side placed them from a random first broker."""
    if isinstance(tree, dict):
        if "replica_nodes" in tree:
            return {**tree, "leader_id": "<replica>", "replica_nodes": len(tree["replica_nodes"]),
                    "isr_nodes": len(tree["isr_nodes"])}
        return {k: _erase_placement(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_erase_placement(v) for v in tree]
    return tree


def stale_control(build: Any) -> Any:
    """A control request (``build(s, topic id)``) from a controller with a stale epoch."""
    def run(s: Session) -> Any:
        t = topic(s)
        return s.call(build(s, t, s.side.topic_id(t)), 1)
    return run


def leader_and_isr(s: Session, t: str, topic_id: Any, controller_epoch: int = 0, broker_epoch: int = -1) -> Any:
    r = s.req
    return r.LeaderAndIsrRequest(controller_id=0, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
                                 type=0, live_leaders=[r.LeaderAndIsrLiveLeader(broker_id=0, host_name="localhost",
                                                                                port=9)],
                                 topic_states=[r.LeaderAndIsrTopicState(topic_name=t, topic_id=topic_id,
                                                                        partition_states=[r.LeaderAndIsrPartitionState(
                                     partition_index=0, controller_epoch=0, leader=2, leader_epoch=9, isr=[2],
                                     zk_version=0, replicas=[0, 1, 2])])])


def update_metadata(s: Session, t: str, topic_id: Any, controller_epoch: int = 0, broker_epoch: int = -1) -> Any:
    r = s.req
    return r.UpdateMetadataRequest(controller_id=0, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
                                   topic_states=[], live_brokers=[])


def stop_replica(s: Session, t: str, topic_id: Any, controller_epoch: int = 0, broker_epoch: int = -1) -> Any:
    r = s.req
    return r.StopReplicaRequest(controller_id=0, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
                                topic_states=[r.StopReplicaTopicState(topic_name=t, partition_states=[
                                    r.StopReplicaPartitionState(partition_index=0, leader_epoch=0,
                                                                delete_partition=False)])])


def alter_partition(to: Any, broker_epoch: int = -1) -> Any:
    """The leader of partition 0 asks to shrink its ISR (with a stale broker epoch)."""
    def run(s: Session) -> Any:
        t = topic(s)
        return s.call(rq.alter_partition(s.req, 0, broker_epoch, s.side.topic_id(t), 0, 0, [0], 0), to(s))
    return run


def controlled_shutdown(to: Any) -> Any:
    return lambda s: s.call(s.req.ControlledShutdownRequest(broker_id=2, broker_epoch=1), to(s))


def txn_on(broker: Any, build: Any) -> Any:
    """A transactional request (``build(s, txn, pid, epoch, topic)``) for a producer with an id,
    sent to ``broker``."""
    def run(s: Session) -> Any:
        txn = s.name("txn")
        t = topic(s)
        pid, epoch = flows.producer(s, txn)
        return s.call(build(s, txn, pid, epoch, t), broker(s))
    return run


def group_on(broker: Any, build: Any) -> Any:
    return lambda s: s.call(build(s, s.name("g")), broker(s))


CASES = [
    # Leadership: partition 0 is led by broker 0; brokers 1 and 2 follow it.
    Case(A.PRODUCE, "leader-and-follower", produce_to_each),
    Case(A.FETCH, "leader", fetch_after_produce(0)),
    Case(A.FETCH, "consumer-on-follower", fetch_after_produce(follower)),
    Case(A.FETCH, "consumer-on-follower-with-rack", fetch_after_produce(follower, rack_id="r1"), versions=(11, 99)),
    Case(A.FETCH, "as-replica-on-follower", fetch_after_produce(follower, replica_id=2)),
    Case(A.LIST_OFFSETS, "on-follower", offsets_after_produce(lambda s, t: rq.list_offsets(s.req, t, -1), follower)),
    Case(A.LIST_OFFSETS, "debug-on-follower", offsets_after_produce(
        lambda s, t: rq.list_offsets(s.req, t, -2, replica_id=-2), follower)),
    Case(A.OFFSET_FOR_LEADER_EPOCH, "on-follower", offsets_after_produce(
        lambda s, t: rq.offset_for_leader_epoch(s.req, t, 0), follower)),
    Case(A.OFFSET_FOR_LEADER_EPOCH, "as-follower-on-leader", offsets_after_produce(
        lambda s, t: rq.offset_for_leader_epoch(s.req, t, 0, replica_id=1), 0), versions=(3, 99)),
    Case(A.DELETE_RECORDS, "on-follower", offsets_after_produce(lambda s, t: rq.delete_records(s.req, t, 1), follower)),
    Case(A.DESCRIBE_PRODUCERS, "on-follower", offsets_after_produce(lambda s, t: s.req.DescribeProducersRequest(
        topics=[s.req.TopicRequest(name=t, partition_indexes=[0, 1, 2])]), follower)),
    Case(A.WRITE_TXN_MARKERS, "on-follower", offsets_after_produce(lambda s, t: s.req.WriteTxnMarkersRequest(
        markers=[s.req.WritableTxnMarker(producer_id=555_000, producer_epoch=0, transaction_result=True,
                                         coordinator_epoch=0, topics=[s.req.WritableTxnMarkerTopic(
                                             name=t, partition_indexes=[0])])]), follower)),
    Case(A.METADATA, "replicated-topic", one(lambda s: rq.metadata(s.req, [topic(s)]), 2)),
    Case(A.METADATA, "auto-create-enabled", metadata_auto_create, versions=(4, 99), normalise=_erase_placement),
    # The controller.
    Case(A.CREATE_TOPICS, "on-controller", create_then_describe(lambda s, n: rq.create_topics(s.req, (n, 3, 3)),
                                                               lambda s: s.side.controller),
         normalise=_erase_placement),
    Case(A.CREATE_TOPICS, "not-on-controller", create_then_describe(lambda s, n: rq.create_topics(s.req, (n, 3, 3)),
                                                                   not_controller)),
    Case(A.DELETE_TOPICS, "not-on-controller", lambda s: s.call(rq.delete_topics(s.req, topic(s)), not_controller(s))),
    Case(A.CREATE_PARTITIONS, "not-on-controller", lambda s: s.call(rq.create_partitions(s.req, topic(s), 4),
                                                                    not_controller(s))),
    # Metadata from the controller: its cache is the one the answer awaited, another broker's may lag.
    Case(A.CREATE_PARTITIONS, "on-controller", lambda s: {
        "grow": s.call(rq.create_partitions(s.req, topic(s), 5, [[1, 2, 0], [2, 0, 1]]), s.side.controller),
        "metadata": s.call(rq.metadata(s.at(A.METADATA, 12), [topic(s)]), s.side.controller)}),
    Case(A.ALTER_PARTITION, "not-on-controller", alter_partition(not_controller)),
    Case(A.ALTER_PARTITION, "stale-broker-epoch", alter_partition(lambda s: s.side.controller, broker_epoch=1)),
    Case(A.CONTROLLED_SHUTDOWN, "not-on-controller", controlled_shutdown(not_controller)),
    Case(A.CONTROLLED_SHUTDOWN, "stale-broker-epoch", controlled_shutdown(lambda s: s.side.controller)),
    Case(A.LEADER_AND_ISR, "stale-controller-epoch", stale_control(leader_and_isr)),
    Case(A.LEADER_AND_ISR, "stale-broker-epoch", stale_control(
        lambda s, t, i: leader_and_isr(s, t, i, controller_epoch=99, broker_epoch=1))),
    Case(A.UPDATE_METADATA, "stale-controller-epoch", stale_control(update_metadata)),
    Case(A.UPDATE_METADATA, "stale-broker-epoch", stale_control(
        lambda s, t, i: update_metadata(s, t, i, controller_epoch=99, broker_epoch=1))),
    Case(A.STOP_REPLICA, "stale-controller-epoch", stale_control(stop_replica)),
    Case(A.STOP_REPLICA, "stale-broker-epoch", stale_control(
        lambda s, t, i: stop_replica(s, t, i, controller_epoch=99, broker_epoch=1))),
    # Coordinators: each side's own, by role.
    Case(A.FIND_COORDINATOR, "group", one(lambda s: rq.find_coordinator(s.req, s.name("g")), 2),
         normalise=_erase_node_ids),
    Case(A.JOIN_GROUP, "not-coordinator", group_on(not_group_coordinator, lambda s, g: rq.join_group(s.req, g))),
    Case(A.SYNC_GROUP, "not-coordinator", group_on(not_group_coordinator, lambda s, g: rq.sync_group(
        s.req, g, 1, "m"))),
    Case(A.HEARTBEAT, "not-coordinator", group_on(not_group_coordinator, lambda s, g: rq.heartbeat(s.req, g, 1, "m"))),
    Case(A.LEAVE_GROUP, "not-coordinator", group_on(not_group_coordinator, lambda s, g: rq.leave_group(s.req, g, "m"))),
    Case(A.OFFSET_COMMIT, "not-coordinator", group_on(not_group_coordinator, lambda s, g: rq.offset_commit(
        s.req, g, {(topic(s), 0): 1}))),
    Case(A.OFFSET_FETCH, "not-coordinator", group_on(not_group_coordinator, lambda s, g: rq.offset_fetch(
        s.req, g, {topic(s): [0]}))),
    Case(A.DESCRIBE_GROUPS, "not-coordinator", group_on(not_group_coordinator, lambda s, g: rq.describe_groups(
        s.req, g))),
    Case(A.DELETE_GROUPS, "not-coordinator", group_on(not_group_coordinator, lambda s, g: rq.delete_groups(
        s.req, g))),
    Case(A.OFFSET_DELETE, "not-coordinator", group_on(not_group_coordinator, lambda s, g: rq.offset_delete(
        s.req, g, {topic(s): [0]}))),
    Case(A.INIT_PRODUCER_ID, "not-coordinator", group_on(not_txn_coordinator, lambda s, g: rq.init_producer_id(
        s.req, s.name("txn")))),
    Case(A.ADD_PARTITIONS_TO_TXN, "not-coordinator", txn_on(
        not_txn_coordinator, lambda s, txn, pid, epoch, t: rq.add_partitions_to_txn(s.req, txn, pid, epoch, {t: [0]}))),
    Case(A.ADD_OFFSETS_TO_TXN, "not-coordinator", txn_on(
        not_txn_coordinator, lambda s, txn, pid, epoch, t: rq.add_offsets_to_txn(s.req, txn, pid, epoch, "g"))),
    Case(A.END_TXN, "not-coordinator", txn_on(
        not_txn_coordinator, lambda s, txn, pid, epoch, t: rq.end_txn(s.req, txn, pid, epoch, True))),
    Case(A.DESCRIBE_TRANSACTIONS, "not-coordinator", group_on(not_txn_coordinator, lambda s, g: (
        s.req.DescribeTransactionsRequest(transactional_ids=[s.name("txn")])))),
    Case(A.TXN_OFFSET_COMMIT, "not-coordinator", txn_on(
        lambda s: (flows.coordinator(s, "g-" + s.name("txn")) + 1) % 3,
        lambda s, txn, pid, epoch, t: rq.txn_offset_commit(s.req, txn, "g-" + txn, pid, epoch, {(t, 0): 1}))),
    # Replication settings.
    Case(A.PRODUCE, "min-insync-replicas-met", one(lambda s: rq.produce(s.req, s.topic(
        "-isr", replication_factor=3, config={"min.insync.replicas": "3"}), rq.batch()))),
    Case(A.DESCRIBE_CONFIGS, "another-broker", one(lambda s: rq.describe_configs(
        s.req, rq.BROKER, "1", ["num.partitions", "broker.id"]), 0)),
    Case(A.INCREMENTAL_ALTER_CONFIGS, "another-broker", one(lambda s: rq.incremental_alter_configs(
        s.req, rq.BROKER, "1", [("log.cleaner.threads", rq.SET, "1")], validate_only=True), 0)),
]

