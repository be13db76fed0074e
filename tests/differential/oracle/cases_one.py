"""The cases of one broker per side: every API odradek advertises, valid requests and the
errors a client can provoke on its own.  One line per case where one request is the case;
a function where it takes a sequence (a joined member, a transaction, a fetch session).

Each case's topics and groups are its own (``s.topic()``, ``s.name()``), so cases run in
any order; a case at several versions gets one topic per version."""

from __future__ import annotations

import uuid
from typing import Any

from oracle import flows
from oracle import requests as rq
from oracle.case import Case, one
from oracle.side import Session, now_ms

from odradek.protocol.api_keys import ApiKey as A
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import CompressionType

__all__ = ["CASES"]

NO_TOPIC = "no-such-topic"
EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3


def _corrupt(batch: bytes) -> bytes:
    damaged = bytearray(batch)
    damaged[-1] ^= 0xFF  # inside the CRC's range
    return bytes(damaged)


# --- Produce -------------------------------------------------------------------------------


def produce_acks_zero(error: bool) -> Any:
    """acks=0 gets no answer; Kafka closes the connection when such a produce fails.  What
    a Metadata request on the same connection gets next shows which happened."""
    def run(s: Session) -> Any:
        topic = NO_TOPIC if error else s.topic()
        s.call(rq.produce(s.req, topic, rq.batch(), acks=0))
        after = s.call(rq.metadata(s.at(A.METADATA, 1), [s.topic()]))
        return {"then": "closed" if type(after).__name__ == "Closed" else "answered"}
    return run


def produce_idempotent(sequences: tuple[int, ...]) -> Any:
    """A fresh idempotent producer's batches with these base sequences, one after another."""
    def run(s: Session) -> Any:
        topic = s.topic()
        pid, epoch = flows.producer(s)
        return [s.call(rq.produce(s.req, topic, rq.batch(b"x", producer_id=pid, producer_epoch=epoch,
                                                          base_sequence=seq))) for seq in sequences]
    return run


def produce_unknown_producer(s: Session) -> Any:
    return s.call(rq.produce(s.req, s.topic(), rq.batch(b"x", producer_id=987_654, producer_epoch=0,
                                                        base_sequence=3)))


def produce_transactional_unverified(s: Session) -> Any:
    """A transactional batch for a partition never added to the transaction (KIP-890)."""
    txn = s.name("txn")
    pid, epoch = flows.producer(s, txn)
    return s.call(rq.produce(s.req, s.topic(), rq.batch(b"x", producer_id=pid, producer_epoch=epoch, base_sequence=0,
                                                        transactional=True), transactional_id=txn))


def produce_transactional_added(s: Session) -> Any:
    txn = s.name("txn")
    topic = s.topic()
    pid, epoch = flows.ongoing_transaction(s, txn, topic)
    return s.call(rq.produce(s.req, topic, rq.batch(b"y", producer_id=pid, producer_epoch=epoch, base_sequence=1,
                                                    transactional=True), transactional_id=txn))


def produce_two_partitions(s: Session) -> Any:
    topic = s.topic(partitions=2)
    r = s.req
    return s.call(r.ProduceRequest(transactional_id=None, acks=-1, timeout=10_000, topic_data=[
        r.TopicProduceData(name=topic, partition_data=[
            r.PartitionProduceData(index=0, records=rq.batch(b"p0")),
            r.PartitionProduceData(index=1, records=rq.batch(b"p1")),
            r.PartitionProduceData(index=7, records=rq.batch(b"p7"))]),
        r.TopicProduceData(name=NO_TOPIC, partition_data=[r.PartitionProduceData(index=0, records=rq.batch())])]))


def _topic_with(config: dict[str, str]) -> Any:
    return lambda s: s.topic(config=config)


PRODUCE = [
    Case(A.PRODUCE, "acks-all", one(lambda s: rq.produce(s.req, s.topic(), rq.batch(b"a", b"b")))),
    Case(A.PRODUCE, "acks-leader", one(lambda s: rq.produce(s.req, s.topic(), rq.batch(b"a"), acks=1))),
    Case(A.PRODUCE, "acks-none", produce_acks_zero(error=False)),
    Case(A.PRODUCE, "acks-none-unknown-topic", produce_acks_zero(error=True)),
    Case(A.PRODUCE, "invalid-acks", one(lambda s: rq.produce(s.req, s.topic(), rq.batch(), acks=2))),
    Case(A.PRODUCE, "unknown-topic", one(lambda s: rq.produce(s.req, NO_TOPIC, rq.batch()))),
    Case(A.PRODUCE, "unknown-partition", one(lambda s: rq.produce(s.req, s.topic(), rq.batch(), partition=3))),
    Case(A.PRODUCE, "negative-partition", one(lambda s: rq.produce(s.req, s.topic(), rq.batch(), partition=-1))),
    Case(A.PRODUCE, "two-partitions-and-errors", produce_two_partitions),
    Case(A.PRODUCE, "corrupt-crc", one(lambda s: rq.produce(s.req, s.topic(), _corrupt(rq.batch(b"crc"))))),
    Case(A.PRODUCE, "null-records", lambda s: s.call(rq.produce(s.req, s.topic(), None), timeout=5)),
    Case(A.PRODUCE, "empty-records", one(lambda s: rq.produce(s.req, s.topic(), b""))),
    Case(A.PRODUCE, "truncated-batch", one(lambda s: rq.produce(s.req, s.topic(), rq.batch(b"cut")[:40]))),
    Case(A.PRODUCE, "gzip", one(lambda s: rq.produce(s.req, s.topic(), rq.batch(
        b"z" * 300, compression=CompressionType.GZIP)))),
    Case(A.PRODUCE, "message-too-large", one(lambda s: rq.produce(s.req, s.topic(config={
        "max.message.bytes": "200"}), rq.batch(b"m" * 400)))),
    Case(A.PRODUCE, "compacted-null-key", one(lambda s: rq.produce(s.req, s.topic(config={
        "cleanup.policy": "compact"}), rq.batch(b"v", key=None)))),
    Case(A.PRODUCE, "not-enough-replicas", one(lambda s: rq.produce(s.req, s.topic(config={
        "min.insync.replicas": "2"}), rq.batch()))),
    Case(A.PRODUCE, "not-enough-replicas-acks-leader", one(lambda s: rq.produce(s.req, s.topic(config={
        "min.insync.replicas": "2"}), rq.batch(), acks=1))),
    Case(A.PRODUCE, "timestamp-out-of-range", one(lambda s: rq.produce(s.req, s.topic(config={
        "message.timestamp.difference.max.ms": "60000"}), rq.batch(timestamp=now_ms() - 3_600_000)))),
    Case(A.PRODUCE, "log-append-time", one(lambda s: rq.produce(s.req, s.topic(config={
        "message.timestamp.type": "LogAppendTime"}), rq.batch()))),
    Case(A.PRODUCE, "internal-topic", one(lambda s: rq.produce(s.req, "__consumer_offsets", rq.batch()))),
    Case(A.PRODUCE, "idempotent", produce_idempotent((0, 1))),
    Case(A.PRODUCE, "idempotent-duplicate", produce_idempotent((0, 0))),
    Case(A.PRODUCE, "idempotent-out-of-order", produce_idempotent((0, 5))),
    Case(A.PRODUCE, "idempotent-first-sequence-not-zero", produce_idempotent((4,))),
    Case(A.PRODUCE, "unknown-producer-id", produce_unknown_producer),
    Case(A.PRODUCE, "transactional-not-added", produce_transactional_unverified),
    Case(A.PRODUCE, "transactional-added", produce_transactional_added),
]


# --- Fetch ---------------------------------------------------------------------------------


def fetch_after(values: int, offset: int | None = 0, **fetch: Any) -> Any:
    """Fetch at ``offset`` (None: the log end) after ``values`` single-record batches."""
    def run(s: Session) -> Any:
        topic = s.topic()
        for i in range(values):
            flows.produced(s, topic, b"r%d" % i)
        return s.call(rq.fetch(s.req, {(topic, 0): values if offset is None else offset}, **fetch))
    return run


def fetch_session(steps: str) -> Any:
    """KIP-227: a full fetch that opens a session, then ``steps``: ``i`` an incremental fetch
    with the next epoch, ``e`` one with a wrong epoch, ``c`` closing the session."""
    def run(s: Session) -> Any:
        topic = s.topic()
        flows.produced(s, topic, b"one")
        first = s.call(rq.fetch(s.req, {(topic, 0): 0}, session_epoch=0))
        out = {"open": first}
        for i, step in enumerate(steps):
            epoch = i + 1
            sid = first.session_id
            if step == "i":
                out[f"{i}-incremental"] = s.call(rq.fetch(s.req, {}, session_id=sid, session_epoch=epoch))
            elif step == "e":
                out[f"{i}-wrong-epoch"] = s.call(rq.fetch(s.req, {}, session_id=sid, session_epoch=epoch + 5))
            elif step == "c":
                out[f"{i}-close"] = s.call(rq.fetch(s.req, {(topic, 0): 1}, session_id=sid, session_epoch=-1))
        return out
    return run


def fetch_read_committed(commit: bool | None) -> Any:
    """A read_committed fetch after a transactional batch: open (None), committed or aborted."""
    def run(s: Session) -> Any:
        txn = s.name("txn")
        topic = s.topic()
        flows.produced(s, topic, b"before")
        pid, epoch = flows.ongoing_transaction(s, txn, topic)
        if commit is not None:
            flows.ended(s, txn, pid, epoch, commit)
        flows.produced(s, topic, b"after") if commit is not None else None
        return s.call(rq.fetch(s.req, {(topic, 0): 0}, isolation_level=1))
    return run


FETCH = [
    Case(A.FETCH, "from-start", fetch_after(3)),
    Case(A.FETCH, "at-log-end", fetch_after(1, offset=None)),
    Case(A.FETCH, "long-poll-at-log-end", fetch_after(1, offset=None, max_wait_ms=300)),
    Case(A.FETCH, "middle", fetch_after(3, offset=1)),
    Case(A.FETCH, "out-of-range", fetch_after(1, offset=50)),
    Case(A.FETCH, "negative-offset", fetch_after(1, offset=-1)),
    Case(A.FETCH, "partition-max-bytes-small", fetch_after(2, partition_max_bytes=10)),
    Case(A.FETCH, "max-bytes-small", fetch_after(2, max_bytes=10), versions=(3, 99)),
    Case(A.FETCH, "unknown-topic", one(lambda s: rq.fetch(s.req, {(NO_TOPIC, 0): 0}))),
    Case(A.FETCH, "unknown-partition", one(lambda s: rq.fetch(s.req, {(s.topic(), 4): 0}))),
    Case(A.FETCH, "read-committed-open-transaction", fetch_read_committed(None)),
    Case(A.FETCH, "read-committed-after-commit", fetch_read_committed(True)),
    Case(A.FETCH, "read-committed-after-abort", fetch_read_committed(False)),
    Case(A.FETCH, "session-incremental", fetch_session("ii"), versions=(7, 99)),
    Case(A.FETCH, "session-wrong-epoch", fetch_session("e"), versions=(7, 99)),
    Case(A.FETCH, "session-close", fetch_session("c"), versions=(7, 99)),
    Case(A.FETCH, "session-unknown", one(lambda s: rq.fetch(s.req, {}, session_id=424242, session_epoch=3)),
         versions=(7, 99)),
    Case(A.FETCH, "future-leader-epoch", fetch_after(1, current_leader_epoch=7), versions=(9, 99)),
    Case(A.FETCH, "current-leader-epoch", fetch_after(1, current_leader_epoch=0), versions=(9, 99)),
    Case(A.FETCH, "rack-id", fetch_after(1, rack_id="r1"), versions=(11, 99)),
    Case(A.FETCH, "replica-not-assigned", fetch_after(1, replica_id=7)),
]


# --- ListOffsets ---------------------------------------------------------------------------


def list_offsets_after(values: int, timestamp: int, **kwargs: Any) -> Any:
    def run(s: Session) -> Any:
        topic = s.topic()
        for i in range(values):
            flows.produced(s, topic, b"r%d" % i, timestamp=now_ms() + i * 1000)
        return s.call(rq.list_offsets(s.req, topic, timestamp(s) if callable(timestamp) else timestamp, **kwargs))
    return run


def list_offsets_open_transaction(s: Session) -> Any:
    topic = s.topic()
    flows.produced(s, topic, b"before")
    flows.ongoing_transaction(s, s.name("txn"), topic)
    return {c: s.call(rq.list_offsets(s.req, topic, LATEST, isolation_level=level))
            for c, level in (("uncommitted", 0), ("committed", 1))}


LIST_OFFSETS = [
    Case(A.LIST_OFFSETS, "earliest", list_offsets_after(3, EARLIEST)),
    Case(A.LIST_OFFSETS, "latest", list_offsets_after(3, LATEST)),
    Case(A.LIST_OFFSETS, "latest-empty", list_offsets_after(0, LATEST)),
    Case(A.LIST_OFFSETS, "by-timestamp", list_offsets_after(3, now_ms() + 1000)),
    Case(A.LIST_OFFSETS, "by-timestamp-between", list_offsets_after(3, now_ms() + 1500)),
    Case(A.LIST_OFFSETS, "by-timestamp-after-all", list_offsets_after(3, now_ms() + 60_000)),
    Case(A.LIST_OFFSETS, "max-timestamp", list_offsets_after(3, MAX_TIMESTAMP), versions=(7, 99)),
    Case(A.LIST_OFFSETS, "unknown-special-timestamp", list_offsets_after(1, -7)),
    Case(A.LIST_OFFSETS, "unknown-topic", one(lambda s: rq.list_offsets(s.req, NO_TOPIC, LATEST))),
    Case(A.LIST_OFFSETS, "unknown-partition", one(lambda s: rq.list_offsets(s.req, s.topic(), LATEST, partition=2))),
    Case(A.LIST_OFFSETS, "open-transaction", list_offsets_open_transaction, versions=(2, 99)),
    Case(A.LIST_OFFSETS, "future-leader-epoch", list_offsets_after(1, LATEST, current_leader_epoch=3),
         versions=(4, 99)),
    Case(A.LIST_OFFSETS, "debug-replica-id", list_offsets_after(2, LATEST, replica_id=-2)),
]


# --- Metadata ------------------------------------------------------------------------------


def metadata_of_own_topics(s: Session) -> Any:
    """Metadata for two topics of the case's own, one of three partitions, one internal."""
    return s.call(rq.metadata(s.req, [s.topic("a"), s.topic("b", partitions=3), "__consumer_offsets"]))


def metadata_auto_create(s: Session) -> Any:
    name = s.name("auto")
    first = s.call(rq.metadata(s.req, [name], auto_create=True))
    # A refused creation never comes: give a created topic 10 s to get its leader.
    later = s.poll(lambda: s.call(rq.metadata(s.req, [name])), _led, timeout=10)
    return {"first": first, "later": later}


def _led(answer: Any) -> bool:
    """Whether every topic of a Metadata answer exists with a leader for each partition."""
    return all(t.error_code == ErrorCode.none and t.partitions and all(
        p.error_code == ErrorCode.none for p in t.partitions) for t in answer.topics)


def metadata_by_topic_id(s: Session) -> Any:
    topic = s.topic()
    return s.call(rq.metadata(s.req, [], topic_ids=[s.side.topic_id(topic)]))


METADATA = [
    Case(A.METADATA, "named-topics", metadata_of_own_topics),
    # v0 reads an empty list as "all topics", which depends on the other cases' topics.
    Case(A.METADATA, "no-topics", one(lambda s: rq.metadata(s.req, [])), versions=(1, 99)),
    Case(A.METADATA, "unknown-topic", one(lambda s: rq.metadata(s.req, [NO_TOPIC])), versions=(4, 99)),
    # v0-3 ask for auto-creation (odradek's default is off: docs/COMPATIBILITY.md).
    Case(A.METADATA, "unknown-topic-auto-created", one(lambda s: rq.metadata(s.req, [s.name("auto")])),
         versions=(0, 3)),
    Case(A.METADATA, "invalid-topic-name", one(lambda s: rq.metadata(s.req, ["bad name!"]))),
    Case(A.METADATA, "auto-create", metadata_auto_create, versions=(4, 99)),
    Case(A.METADATA, "by-topic-id", metadata_by_topic_id, versions=(10, 99)),
    Case(A.METADATA, "authorized-operations", one(lambda s: rq.metadata(
        s.req, [s.topic()], cluster_ops=True, topic_ops=True)), versions=(8, 99)),
]


# --- groups --------------------------------------------------------------------------------


def group_call(build: Any) -> Any:
    """One request about the case's group (``build(s, group)``), sent to its coordinator."""
    return lambda s: s.call(build(s, s.name("g")), flows.coordinator(s, s.name("g")))


def with_member(build: Any, instance_id: str | None = None) -> Any:
    """One request (``build(s, group, member_id, generation)``) about a group with one
    joined and synced member."""
    def run(s: Session) -> Any:
        group = s.name("g")
        member, generation = flows.joined(s, group, instance_id=instance_id)
        return s.call(build(s, group, member, generation), flows.coordinator(s, group))
    return run


def join_new_member(s: Session) -> Any:
    group = s.name("g")
    broker = flows.coordinator(s, group)
    first = s.call(rq.join_group(s.req, group), broker)
    out = {"first": first}
    if first.error_code == ErrorCode.member_id_required:
        out["again"] = s.call(rq.join_group(s.req, group, first.member_id), broker)
    return out


def join_second_member(s: Session) -> Any:
    """A second member joins a stable group (from v4 after MEMBER_ID_REQUIRED); once the
    group prepares its rebalance, the first member rejoins and both get the new generation."""
    group = s.name("g")
    broker = flows.coordinator(s, group)
    member, _generation = flows.joined(s, group)
    second = s.side.connect(broker)
    try:
        second.send(rq.join_group(s.req, group, rebalance_timeout_ms=10_000))
        if s.version >= 4:
            required = _read(second, s.req)
            assert required.error_code == ErrorCode.member_id_required, required
            second.send(rq.join_group(s.req, group, required.member_id, rebalance_timeout_ms=10_000))
        describe = s.at(A.DESCRIBE_GROUPS, 5)
        s.wait(lambda: s.call(rq.describe_groups(describe, group), broker).groups[0].group_state == "PreparingRebalance",
               f"{group} preparing a rebalance")
        rejoin = s.call(rq.join_group(s.at(A.JOIN_GROUP, 5), group, member, rebalance_timeout_ms=10_000), broker)
        answer = _read(second, s.req)
    finally:
        second.close()
    return {"first-rejoins": rejoin, "second": answer}


def _read(conn: Any, r: Any) -> Any:
    from odradek.protocol.framing import decode_response, response_schema
    return decode_response(conn.read_frame(), response_schema(r.api_key, r.version))[1]


def join_inconsistent_protocol(s: Session) -> Any:
    group = s.name("g")
    flows.joined(s, group)
    return s.call(rq.join_group(s.req, group, protocol_type="connect"), flows.coordinator(s, group))


def sync_as_leader(s: Session) -> Any:
    group = s.name("g")
    broker = flows.coordinator(s, group)
    join = s.at(A.JOIN_GROUP, 5)
    r = s.call(rq.join_group(join, group), broker)
    r = s.call(rq.join_group(join, group, r.member_id), broker)
    return s.call(rq.sync_group(s.req, group, r.generation_id, r.member_id, {r.member_id: b"mine"}), broker)


def describe_stable_group(s: Session) -> Any:
    group = s.name("g")
    flows.joined(s, group)
    return s.call(rq.describe_groups(s.req, group, "no-such-group", authorized_operations=True),
                  flows.coordinator(s, group))


def list_groups_of_case(s: Session) -> Any:
    group = s.name("g")
    flows.joined(s, group)
    answer = s.call(s.req.ListGroupsRequest(states_filter=["Stable"], types_filter=[]), flows.coordinator(s, group))
    # Other cases' groups come and go: keep only this case's.
    return {"error_code": answer.error_code, "groups": [g for g in answer.groups if g.group_id == group]}


def leave_after_join(s: Session) -> Any:
    group = s.name("g")
    member, _ = flows.joined(s, group)
    broker = flows.coordinator(s, group)
    return {"leave": s.call(rq.leave_group(s.req, group, member, "unknown-member"), broker),
            "described": s.call(rq.describe_groups(s.at(A.DESCRIBE_GROUPS, 5), group), broker)}


def delete_groups_cases(s: Session) -> Any:
    empty, active = s.name("empty"), s.name("active")
    flows.committed(s, empty, s.topic(), 1)
    flows.joined(s, active)
    broker = flows.coordinator(s, empty)
    assert broker == flows.coordinator(s, active) or len(s.side.cluster.brokers) > 1
    return s.call(rq.delete_groups(s.req, empty, active, "no-such-group", ""), broker)


def offset_delete_cases(subscribed: bool) -> Any:
    def run(s: Session) -> Any:
        group = s.name("g")
        topic = s.topic()
        flows.committed(s, group, topic, 1)
        if subscribed:
            flows.joined(s, group)
        return s.call(rq.offset_delete(s.req, group, {topic: [0, 3], NO_TOPIC: [0]}), flows.coordinator(s, group))
    return run


GROUPS = [
    Case(A.FIND_COORDINATOR, "group", one(lambda s: rq.find_coordinator(s.req, s.name("g")))),
    Case(A.FIND_COORDINATOR, "transaction", one(lambda s: rq.find_coordinator(s.req, s.name("txn"), 1)),
         versions=(1, 99)),
    Case(A.FIND_COORDINATOR, "invalid-key-type", one(lambda s: rq.find_coordinator(s.req, s.name("g"), 5)),
         versions=(1, 99)),
    Case(A.FIND_COORDINATOR, "empty-group-id", one(lambda s: rq.find_coordinator(s.req, ""))),
    Case(A.JOIN_GROUP, "new-member", join_new_member),
    Case(A.JOIN_GROUP, "second-member", join_second_member),
    Case(A.JOIN_GROUP, "static-member", group_call(lambda s, g: rq.join_group(s.req, g, instance_id="static-1")),
         versions=(5, 99)),
    Case(A.JOIN_GROUP, "unknown-member-id", group_call(lambda s, g: rq.join_group(s.req, g, "who-is-this"))),
    Case(A.JOIN_GROUP, "session-timeout-too-small", group_call(lambda s, g: rq.join_group(
        s.req, g, session_timeout_ms=10))),
    Case(A.JOIN_GROUP, "session-timeout-too-large", group_call(lambda s, g: rq.join_group(
        s.req, g, session_timeout_ms=3_600_000))),
    Case(A.JOIN_GROUP, "empty-protocol-type", group_call(lambda s, g: rq.join_group(s.req, g, protocol_type=""))),
    Case(A.JOIN_GROUP, "no-protocols", group_call(lambda s, g: rq.join_group(s.req, g, protocols=()))),
    Case(A.JOIN_GROUP, "empty-group-id", one(lambda s: rq.join_group(s.req, ""))),
    Case(A.JOIN_GROUP, "inconsistent-protocol-type", join_inconsistent_protocol),
    Case(A.SYNC_GROUP, "leader", sync_as_leader),
    Case(A.SYNC_GROUP, "unknown-member", group_call(lambda s, g: rq.sync_group(s.req, g, 1, "who-is-this"))),
    Case(A.SYNC_GROUP, "illegal-generation", with_member(lambda s, g, m, gen: rq.sync_group(s.req, g, gen + 3, m))),
    Case(A.SYNC_GROUP, "inconsistent-protocol", with_member(lambda s, g, m, gen: rq.sync_group(
        s.req, g, gen, m, protocol_type="connect")), versions=(5, 99)),
    Case(A.SYNC_GROUP, "empty-group-id", one(lambda s: rq.sync_group(s.req, "", 1, "m"))),
    Case(A.HEARTBEAT, "stable", with_member(lambda s, g, m, gen: rq.heartbeat(s.req, g, gen, m))),
    Case(A.HEARTBEAT, "illegal-generation", with_member(lambda s, g, m, gen: rq.heartbeat(s.req, g, gen + 1, m))),
    Case(A.HEARTBEAT, "unknown-member", with_member(lambda s, g, m, gen: rq.heartbeat(s.req, g, gen, "who"))),
    Case(A.HEARTBEAT, "unknown-group", group_call(lambda s, g: rq.heartbeat(s.req, g, 1, "who"))),
    Case(A.HEARTBEAT, "static-member-fenced", with_member(lambda s, g, m, gen: rq.heartbeat(
        s.req, g, gen, "other", instance_id="static-1"), instance_id="static-1"), versions=(3, 99)),
    Case(A.LEAVE_GROUP, "member-and-unknown", leave_after_join),
    Case(A.LEAVE_GROUP, "unknown-group", group_call(lambda s, g: rq.leave_group(s.req, g, "who"))),
    Case(A.DESCRIBE_GROUPS, "stable-and-unknown", describe_stable_group),
    Case(A.DESCRIBE_GROUPS, "empty-group-id", one(lambda s: rq.describe_groups(s.req, ""))),
    Case(A.LIST_GROUPS, "stable", list_groups_of_case, versions=(4, 99)),
    Case(A.DELETE_GROUPS, "empty-active-unknown", delete_groups_cases),
    Case(A.OFFSET_DELETE, "unsubscribed", offset_delete_cases(subscribed=False)),
    Case(A.OFFSET_DELETE, "subscribed", offset_delete_cases(subscribed=True)),
    Case(A.OFFSET_DELETE, "unknown-group", group_call(lambda s, g: rq.offset_delete(s.req, g, {s.topic(): [0]}))),
]


# --- offsets -------------------------------------------------------------------------------


def commit_then_fetch(metadata: str | None = "meta") -> Any:
    def run(s: Session) -> Any:
        group = s.name("g")
        topic = s.topic(partitions=2)
        broker = flows.coordinator(s, group)
        return {"commit": s.call(rq.offset_commit(s.req, group, {(topic, 0): 5, (topic, 1): 7, (NO_TOPIC, 0): 1},
                                                  metadata=metadata), broker),
                "fetch": s.call(rq.offset_fetch(s.at(A.OFFSET_FETCH, 7), group, {topic: [0, 1, 2]}), broker)}
    return run


def fetch_after_commit(topics: Any) -> Any:
    def run(s: Session) -> Any:
        group = s.name("g")
        topic = s.topic()
        flows.committed(s, group, topic, 3)
        return s.call(rq.offset_fetch(s.req, group, topics(topic)), flows.coordinator(s, group))
    return run


def offset_fetch_open_transaction(s: Session) -> Any:
    group, txn = s.name("g"), s.name("txn")
    topic = s.topic()
    pid, epoch = flows.ongoing_transaction(s, txn, topic)
    flows.txn_offsets(s, txn, group, pid, epoch, topic, 9)
    return s.call(rq.offset_fetch(s.req, group, {topic: [0]}, require_stable=True), flows.coordinator(s, group))


OFFSETS = [
    Case(A.OFFSET_COMMIT, "simple-consumer", commit_then_fetch()),
    Case(A.OFFSET_COMMIT, "null-metadata", commit_then_fetch(None)),
    Case(A.OFFSET_COMMIT, "metadata-too-large", commit_then_fetch("m" * 5000)),
    Case(A.OFFSET_COMMIT, "member-of-group", with_member(lambda s, g, m, gen: rq.offset_commit(
        s.req, g, {(s.topic(), 0): 1}, generation=gen, member_id=m))),
    Case(A.OFFSET_COMMIT, "illegal-generation", with_member(lambda s, g, m, gen: rq.offset_commit(
        s.req, g, {(s.topic(), 0): 1}, generation=gen + 1, member_id=m))),
    Case(A.OFFSET_COMMIT, "unknown-member", with_member(lambda s, g, m, gen: rq.offset_commit(
        s.req, g, {(s.topic(), 0): 1}, generation=gen, member_id="who"))),
    Case(A.OFFSET_COMMIT, "empty-group-id", one(lambda s: rq.offset_commit(s.req, "", {(s.topic(), 0): 1}))),
    Case(A.OFFSET_FETCH, "named-partitions", fetch_after_commit(lambda t: {t: [0, 1], NO_TOPIC: [0]})),
    Case(A.OFFSET_FETCH, "all-partitions", fetch_after_commit(lambda t: None), versions=(2, 99)),
    Case(A.OFFSET_FETCH, "unknown-group", group_call(lambda s, g: rq.offset_fetch(s.req, g, {s.topic(): [0]}))),
    Case(A.OFFSET_FETCH, "require-stable", offset_fetch_open_transaction, versions=(7, 99)),
]


# --- topics --------------------------------------------------------------------------------


def create_then(build: Any) -> Any:
    """CreateTopics as ``build(s, name)`` says, then the topic's metadata."""
    def run(s: Session) -> Any:
        name = s.name("new")
        created = s.call(build(s, name))
        return {"create": created, "metadata": s.call(rq.metadata(s.at(A.METADATA, 12), [name]))}
    return run


def create_existing(s: Session) -> Any:
    return s.call(rq.create_topics(s.req, (s.topic(), 1, 1)))


def delete_then(build: Any) -> Any:
    def run(s: Session) -> Any:
        topic = s.topic()
        deleted = s.call(build(s, topic))
        s.wait(lambda: not s.call(rq.metadata(s.at(A.METADATA, 12), [topic])).topics[0].partitions,
               f"{topic} deleted")
        return {"delete": deleted, "metadata": s.call(rq.metadata(s.at(A.METADATA, 12), [topic]))}
    return run


def create_partitions_then(count: int, assignments: Any = None, validate_only: bool = False,
                           partitions: int = 1) -> Any:
    def run(s: Session) -> Any:
        topic = s.topic(partitions=partitions)
        answer = s.call(rq.create_partitions(s.req, topic, count, assignments, validate_only))
        return {"create": answer, "metadata": s.call(rq.metadata(s.at(A.METADATA, 12), [topic]))}
    return run


TOPICS = [
    Case(A.CREATE_TOPICS, "valid", create_then(lambda s, n: rq.create_topics(s.req, (n, 2, 1)))),
    Case(A.CREATE_TOPICS, "with-configs", create_then(lambda s, n: rq.create_topics(
        s.req, (n, 1, 1), configs={"cleanup.policy": "compact", "retention.ms": "1000000"}))),
    Case(A.CREATE_TOPICS, "validate-only", create_then(lambda s, n: rq.create_topics(
        s.req, (n, 3, 1), validate_only=True))),
    Case(A.CREATE_TOPICS, "defaults", create_then(lambda s, n: rq.create_topics(s.req, (n, -1, -1))),
         versions=(4, 99)),
    Case(A.CREATE_TOPICS, "assignment", create_then(lambda s, n: rq.create_topics(
        s.req, (n, -1, -1), assignments={0: [0], 1: [0]}))),
    Case(A.CREATE_TOPICS, "assignment-unknown-broker", create_then(lambda s, n: rq.create_topics(
        s.req, (n, -1, -1), assignments={0: [5]}, timeout_ms=1000))),
    Case(A.CREATE_TOPICS, "assignment-with-counts", create_then(lambda s, n: rq.create_topics(
        s.req, (n, 1, 1), assignments={0: [0]}))),
    Case(A.CREATE_TOPICS, "assignment-duplicate-broker", create_then(lambda s, n: rq.create_topics(
        s.req, (n, -1, -1), assignments={0: [0, 0]}))),
    Case(A.CREATE_TOPICS, "assignment-gap", create_then(lambda s, n: rq.create_topics(
        s.req, (n, -1, -1), assignments={0: [0], 2: [0]}))),
    Case(A.CREATE_TOPICS, "exists", create_existing),
    Case(A.CREATE_TOPICS, "zero-partitions", create_then(lambda s, n: rq.create_topics(s.req, (n, 0, 1)))),
    Case(A.CREATE_TOPICS, "replication-factor-too-large", create_then(lambda s, n: rq.create_topics(
        s.req, (n, 1, 3)))),
    Case(A.CREATE_TOPICS, "zero-replication-factor", create_then(lambda s, n: rq.create_topics(s.req, (n, 1, 0)))),
    Case(A.CREATE_TOPICS, "invalid-name", one(lambda s: rq.create_topics(s.req, ("bad name!", 1, 1)))),
    Case(A.CREATE_TOPICS, "name-too-long", one(lambda s: rq.create_topics(s.req, ("x" * 250, 1, 1)))),
    Case(A.CREATE_TOPICS, "colliding-name", create_then(lambda s, n: rq.create_topics(
        s.req, (s.topic("-a.b").replace("-a.b", "-a_b"), 1, 1)))),
    Case(A.CREATE_TOPICS, "unknown-config", create_then(lambda s, n: rq.create_topics(
        s.req, (n, 1, 1), configs={"no.such.config": "1"}))),
    Case(A.CREATE_TOPICS, "invalid-config-value", create_then(lambda s, n: rq.create_topics(
        s.req, (n, 1, 1), configs={"retention.ms": "soon"}))),
    Case(A.CREATE_TOPICS, "null-config-value", create_then(lambda s, n: rq.create_topics(
        s.req, (n, 1, 1), configs={"retention.ms": None}))),
    Case(A.CREATE_TOPICS, "duplicate-in-request", one(lambda s: rq.create_topics(
        s.req, (s.name("dup"), 1, 1), (s.name("dup"), 1, 1)))),
    Case(A.CREATE_TOPICS, "internal-name", one(lambda s: rq.create_topics(s.req, ("__consumer_offsets", 1, 1)))),
    Case(A.DELETE_TOPICS, "valid", delete_then(lambda s, t: rq.delete_topics(s.req, t))),
    Case(A.DELETE_TOPICS, "by-topic-id", delete_then(lambda s, t: rq.delete_topics(
        s.req, topic_ids=[s.side.topic_id(t)])), versions=(6, 99)),
    Case(A.DELETE_TOPICS, "unknown", one(lambda s: rq.delete_topics(s.req, NO_TOPIC))),
    Case(A.DELETE_TOPICS, "unknown-topic-id", one(lambda s: rq.delete_topics(
        s.req, topic_ids=[uuid.UUID(int=0xABCD)])), versions=(6, 99)),
    Case(A.CREATE_PARTITIONS, "grow", create_partitions_then(3)),
    Case(A.CREATE_PARTITIONS, "validate-only", create_partitions_then(3, validate_only=True)),
    Case(A.CREATE_PARTITIONS, "same-count", create_partitions_then(2, partitions=2)),
    Case(A.CREATE_PARTITIONS, "shrink", create_partitions_then(1, partitions=2)),
    Case(A.CREATE_PARTITIONS, "assignment", create_partitions_then(2, assignments=[[0]])),
    Case(A.CREATE_PARTITIONS, "assignment-wrong-count", create_partitions_then(3, assignments=[[0]])),
    Case(A.CREATE_PARTITIONS, "assignment-unknown-broker", create_partitions_then(2, assignments=[[4]])),
    Case(A.CREATE_PARTITIONS, "unknown-topic", one(lambda s: rq.create_partitions(s.req, NO_TOPIC, 2))),
    Case(A.DELETE_RECORDS, "some", lambda s: _delete_records(s, 2)),
    Case(A.DELETE_RECORDS, "to-high-watermark", lambda s: _delete_records(s, -1)),
    Case(A.DELETE_RECORDS, "past-high-watermark", lambda s: _delete_records(s, 9)),
    Case(A.DELETE_RECORDS, "unknown-topic", one(lambda s: rq.delete_records(s.req, NO_TOPIC, 0))),
    Case(A.DELETE_RECORDS, "unknown-partition", one(lambda s: rq.delete_records(s.req, s.topic(), 0, partition=3))),
]


def _delete_records(s: Session, offset: int) -> Any:
    topic = s.topic()
    for i in range(3):
        flows.produced(s, topic, b"r%d" % i)
    return {"delete": s.call(rq.delete_records(s.req, topic, offset)),
            "earliest": s.call(rq.list_offsets(s.at(A.LIST_OFFSETS, 7), topic, EARLIEST))}


# --- configs -------------------------------------------------------------------------------

T, B = rq.TOPIC, rq.BROKER

CONFIGS = [
    Case(A.DESCRIBE_CONFIGS, "topic-all", one(lambda s: rq.describe_configs(s.req, T, s.topic(config={
        "retention.ms": "123456"})))),
    Case(A.DESCRIBE_CONFIGS, "topic-keys", one(lambda s: rq.describe_configs(s.req, T, s.topic(config={
        "retention.ms": "123456"}), ["retention.ms", "cleanup.policy", "no.such.config"], synonyms=True))),
    Case(A.DESCRIBE_CONFIGS, "topic-documentation", one(lambda s: rq.describe_configs(
        s.req, T, s.topic(), ["segment.bytes"], documentation=True)), versions=(3, 99)),
    Case(A.DESCRIBE_CONFIGS, "unknown-topic", one(lambda s: rq.describe_configs(s.req, T, NO_TOPIC))),
    Case(A.DESCRIBE_CONFIGS, "broker-keys", one(lambda s: rq.describe_configs(s.req, B, "0", [
        "num.partitions", "log.retention.hours", "min.insync.replicas", "no.such.config"], synonyms=True))),
    Case(A.DESCRIBE_CONFIGS, "other-broker", one(lambda s: rq.describe_configs(s.req, B, "7", ["num.partitions"]))),
    Case(A.DESCRIBE_CONFIGS, "broker-invalid-name", one(lambda s: rq.describe_configs(s.req, B, "zero"))),
    Case(A.DESCRIBE_CONFIGS, "unknown-resource-type", one(lambda s: rq.describe_configs(s.req, 9, "x"))),
    Case(A.ALTER_CONFIGS, "topic", lambda s: _alter_then_describe(s, lambda r, t: rq.alter_configs(
        r, T, t, {"retention.ms": "1000", "cleanup.policy": "compact"}))),
    Case(A.ALTER_CONFIGS, "topic-validate-only", lambda s: _alter_then_describe(s, lambda r, t: rq.alter_configs(
        r, T, t, {"retention.ms": "1000"}, validate_only=True))),
    Case(A.ALTER_CONFIGS, "topic-invalid-value", lambda s: _alter_then_describe(s, lambda r, t: rq.alter_configs(
        r, T, t, {"retention.ms": "soon"}))),
    Case(A.ALTER_CONFIGS, "topic-unknown-key", lambda s: _alter_then_describe(s, lambda r, t: rq.alter_configs(
        r, T, t, {"no.such.config": "1"}))),
    Case(A.ALTER_CONFIGS, "unknown-topic", one(lambda s: rq.alter_configs(s.req, T, NO_TOPIC, {"retention.ms": "1"}))),
    Case(A.ALTER_CONFIGS, "broker-static-key", one(lambda s: rq.alter_configs(
        s.req, B, "0", {"num.partitions": "3"}, validate_only=True))),
    Case(A.INCREMENTAL_ALTER_CONFIGS, "set-and-delete", lambda s: _alter_then_describe(
        s, lambda r, t: rq.incremental_alter_configs(r, T, t, [
            ("retention.ms", rq.SET, "1000"), ("segment.ms", rq.DELETE, None)]))),
    Case(A.INCREMENTAL_ALTER_CONFIGS, "append-subtract", lambda s: _alter_then_describe(
        s, lambda r, t: rq.incremental_alter_configs(r, T, t, [
            ("cleanup.policy", rq.APPEND, "compact"), ("leader.replication.throttled.replicas", rq.APPEND, "0:0")]))),
    Case(A.INCREMENTAL_ALTER_CONFIGS, "append-to-scalar", lambda s: _alter_then_describe(
        s, lambda r, t: rq.incremental_alter_configs(r, T, t, [("retention.ms", rq.APPEND, "5")]))),
    Case(A.INCREMENTAL_ALTER_CONFIGS, "invalid-operation", lambda s: _alter_then_describe(
        s, lambda r, t: rq.incremental_alter_configs(r, T, t, [("retention.ms", 7, "5")]))),
    Case(A.INCREMENTAL_ALTER_CONFIGS, "duplicate-key", lambda s: _alter_then_describe(
        s, lambda r, t: rq.incremental_alter_configs(r, T, t, [
            ("retention.ms", rq.SET, "5"), ("retention.ms", rq.SET, "6")]))),
    Case(A.INCREMENTAL_ALTER_CONFIGS, "invalid-value", lambda s: _alter_then_describe(
        s, lambda r, t: rq.incremental_alter_configs(r, T, t, [("retention.ms", rq.SET, "soon")]))),
    Case(A.INCREMENTAL_ALTER_CONFIGS, "unknown-topic", one(lambda s: rq.incremental_alter_configs(
        s.req, T, NO_TOPIC, [("retention.ms", rq.SET, "1")]))),
    Case(A.INCREMENTAL_ALTER_CONFIGS, "broker-dynamic", lambda s: _alter_broker_then_describe(s, [
        ("log.cleaner.threads", rq.SET, "1")])),
    Case(A.INCREMENTAL_ALTER_CONFIGS, "broker-static-key", one(lambda s: rq.incremental_alter_configs(
        s.req, B, "0", [("num.partitions", rq.SET, "3")], validate_only=True))),
]

_DESCRIBED = ["retention.ms", "cleanup.policy", "segment.ms", "leader.replication.throttled.replicas"]


def _alter_then_describe(s: Session, build: Any) -> Any:
    topic = s.topic(config={"segment.ms": "100000"})
    answer = s.call(build(s.req, topic))
    return {"alter": answer, "described": _described(s, T, topic, _DESCRIBED)}


def _alter_broker_then_describe(s: Session, ops: Any) -> Any:
    answer = s.call(rq.incremental_alter_configs(s.req, B, "0", ops))
    keys = [k for k, _, _ in ops]
    reset = s.call(rq.incremental_alter_configs(s.req, B, "0", [(k, rq.DELETE, None) for k in keys]))
    return {"alter": answer, "reset": reset}


def _described(s: Session, resource_type: int, name: str, keys: list[str]) -> Any:
    """The config values of ``keys`` once they settle (brokers apply changes through ZooKeeper)."""
    return s.call(rq.describe_configs(s.at(A.DESCRIBE_CONFIGS, 4), resource_type, name, keys))


# --- transactions --------------------------------------------------------------------------


def init_then_again(s: Session) -> Any:
    txn = s.name("txn")
    broker = flows.coordinator(s, txn, flows.TRANSACTION)
    first = s.call(rq.init_producer_id(s.req, txn), broker)
    again = s.call(rq.init_producer_id(s.req, txn, producer_id=first.producer_id,
                                       producer_epoch=first.producer_epoch), broker)
    return {"first": first, "again": again}


def init_wrong_epoch(s: Session) -> Any:
    txn = s.name("txn")
    pid, epoch = flows.producer(s, txn)
    return s.call(rq.init_producer_id(s.req, txn, producer_id=pid, producer_epoch=epoch + 3),
                  flows.coordinator(s, txn, flows.TRANSACTION))


def txn_call(build: Any, added: bool = False) -> Any:
    """A request (``build(s, txn, pid, epoch, topic)``) about a transactional id with a
    producer id (and, with ``added``, an ongoing transaction on the case's topic)."""
    def run(s: Session) -> Any:
        txn = s.name("txn")
        topic = s.topic()
        pid, epoch = flows.ongoing_transaction(s, txn, topic) if added else flows.producer(s, txn)
        return s.call(build(s, txn, pid, epoch, topic), flows.coordinator(s, txn, flows.TRANSACTION))
    return run


def end_and_describe(commit: bool) -> Any:
    def run(s: Session) -> Any:
        txn = s.name("txn")
        topic = s.topic()
        pid, epoch = flows.ongoing_transaction(s, txn, topic)
        broker = flows.coordinator(s, txn, flows.TRANSACTION)
        ended = s.call(rq.end_txn(s.req, txn, pid, epoch, commit), broker)
        state = "CompleteCommit" if commit else "CompleteAbort"
        described = s.wait(lambda: _state(s, txn, broker, state), f"{txn} {state}")
        return {"end": ended, "described": described,
                "fetched": s.call(rq.fetch(s.at(A.FETCH, 12), {(topic, 0): 0}, isolation_level=1))}
    return run


def _state(s: Session, txn: str, broker: int, state: str) -> Any:
    r = s.call(s.at(A.DESCRIBE_TRANSACTIONS, 0).DescribeTransactionsRequest(transactional_ids=[txn]), broker)
    return r if r.transaction_states[0].transaction_state == state else None


def txn_offset_commit_case(s: Session) -> Any:
    txn, group = s.name("txn"), s.name("g")
    topic = s.topic()
    pid, epoch = flows.ongoing_transaction(s, txn, topic)
    broker = flows.coordinator(s, txn, flows.TRANSACTION)
    added = s.call(rq.add_offsets_to_txn(s.at(A.ADD_OFFSETS_TO_TXN, 3), txn, pid, epoch, group), broker)
    committed = s.call(rq.txn_offset_commit(s.req, txn, group, pid, epoch, {(topic, 0): 4}),
                       flows.coordinator(s, group))
    return {"add-offsets": added, "commit": committed}


def describe_producers_case(s: Session) -> Any:
    topic = s.topic()
    pid, epoch = flows.producer(s)
    s.call(rq.produce(s.at(A.PRODUCE, 9), topic, rq.batch(b"a", b"b", producer_id=pid, producer_epoch=epoch,
                                                          base_sequence=0)))
    r = s.req
    return s.call(r.DescribeProducersRequest(topics=[r.TopicRequest(name=topic, partition_indexes=[0, 3]),
                                                     r.TopicRequest(name=NO_TOPIC, partition_indexes=[0])]))


def describe_ongoing_transaction(s: Session) -> Any:
    txn = s.name("txn")
    topic = s.topic()
    flows.ongoing_transaction(s, txn, topic)
    r = s.req
    return s.call(r.DescribeTransactionsRequest(transactional_ids=[txn, "no-such-txn"]),
                  flows.coordinator(s, txn, flows.TRANSACTION))


def list_transactions_case(s: Session) -> Any:
    txn = s.name("txn")
    pid, _ = flows.ongoing_transaction(s, txn, s.topic())
    r = s.req
    answer = s.call(r.ListTransactionsRequest(state_filters=["Ongoing", "NoSuchState"], producer_id_filters=[pid]))
    return answer


def write_markers_case(s: Session) -> Any:
    topic = s.topic()
    r = s.req
    return s.call(r.WriteTxnMarkersRequest(markers=[r.WritableTxnMarker(
        producer_id=555_000, producer_epoch=0, transaction_result=True, coordinator_epoch=0, topics=[
            r.WritableTxnMarkerTopic(name=topic, partition_indexes=[0, 5]),
            r.WritableTxnMarkerTopic(name=NO_TOPIC, partition_indexes=[0])])]))


TRANSACTIONS = [
    Case(A.INIT_PRODUCER_ID, "idempotent", one(lambda s: rq.init_producer_id(s.req))),
    Case(A.INIT_PRODUCER_ID, "transactional", lambda s: s.call(rq.init_producer_id(
        s.req, s.name("txn")), flows.coordinator(s, s.name("txn"), flows.TRANSACTION))),
    Case(A.INIT_PRODUCER_ID, "transactional-bump", init_then_again, versions=(3, 99)),
    Case(A.INIT_PRODUCER_ID, "transactional-wrong-epoch", init_wrong_epoch, versions=(3, 99)),
    Case(A.INIT_PRODUCER_ID, "timeout-too-large", lambda s: s.call(rq.init_producer_id(
        s.req, s.name("txn"), timeout_ms=3_600_000), flows.coordinator(s, s.name("txn"), flows.TRANSACTION))),
    Case(A.INIT_PRODUCER_ID, "not-coordinator-key", one(lambda s: rq.init_producer_id(s.req, ""))),
    Case(A.ADD_PARTITIONS_TO_TXN, "valid", txn_call(lambda s, txn, pid, epoch, t: rq.add_partitions_to_txn(
        s.req, txn, pid, epoch, {t: [0]}))),
    Case(A.ADD_PARTITIONS_TO_TXN, "unknown-partitions", txn_call(lambda s, txn, pid, epoch, t: rq.add_partitions_to_txn(
        s.req, txn, pid, epoch, {t: [0, 4], NO_TOPIC: [0]}))),
    Case(A.ADD_PARTITIONS_TO_TXN, "wrong-epoch", txn_call(lambda s, txn, pid, epoch, t: rq.add_partitions_to_txn(
        s.req, txn, pid, epoch + 1, {t: [0]}))),
    Case(A.ADD_PARTITIONS_TO_TXN, "unknown-producer", txn_call(lambda s, txn, pid, epoch, t: rq.add_partitions_to_txn(
        s.req, txn, pid + 1, epoch, {t: [0]}))),
    Case(A.ADD_PARTITIONS_TO_TXN, "verify-only-added", txn_call(lambda s, txn, pid, epoch, t: rq.add_partitions_to_txn(
        s.req, txn, pid, epoch, {t: [0]}, verify_only=True), added=True), versions=(4, 99)),
    Case(A.ADD_PARTITIONS_TO_TXN, "verify-only-not-added", txn_call(
        lambda s, txn, pid, epoch, t: rq.add_partitions_to_txn(s.req, txn, pid, epoch, {t: [0]}, verify_only=True)),
        versions=(4, 99)),
    Case(A.ADD_OFFSETS_TO_TXN, "valid", txn_call(lambda s, txn, pid, epoch, t: rq.add_offsets_to_txn(
        s.req, txn, pid, epoch, s.name("g")))),
    Case(A.ADD_OFFSETS_TO_TXN, "wrong-epoch", txn_call(lambda s, txn, pid, epoch, t: rq.add_offsets_to_txn(
        s.req, txn, pid, epoch + 1, s.name("g")))),
    Case(A.END_TXN, "commit", end_and_describe(True)),
    Case(A.END_TXN, "abort", end_and_describe(False)),
    Case(A.END_TXN, "commit-nothing-ongoing", txn_call(lambda s, txn, pid, epoch, t: rq.end_txn(
        s.req, txn, pid, epoch, True))),
    Case(A.END_TXN, "abort-nothing-ongoing", txn_call(lambda s, txn, pid, epoch, t: rq.end_txn(
        s.req, txn, pid, epoch, False))),
    Case(A.END_TXN, "wrong-epoch", txn_call(lambda s, txn, pid, epoch, t: rq.end_txn(
        s.req, txn, pid, epoch + 1, True), added=True)),
    Case(A.END_TXN, "unknown-transactional-id", one(lambda s: rq.end_txn(s.req, s.name("txn"), 5, 0, True),
                                                       lambda s: flows.coordinator(s, s.name("txn"), flows.TRANSACTION))),
    Case(A.TXN_OFFSET_COMMIT, "in-transaction", txn_offset_commit_case),
    Case(A.TXN_OFFSET_COMMIT, "offsets-not-added", txn_call(lambda s, txn, pid, epoch, t: rq.txn_offset_commit(
        s.req, txn, s.name("g"), pid, epoch, {(t, 0): 1}), added=True)),
    Case(A.WRITE_TXN_MARKERS, "no-such-producer", write_markers_case),
    Case(A.DESCRIBE_PRODUCERS, "idempotent-producer", describe_producers_case),
    Case(A.DESCRIBE_TRANSACTIONS, "ongoing-and-unknown", describe_ongoing_transaction),
    Case(A.LIST_TRANSACTIONS, "ongoing", list_transactions_case),
]


# --- cluster, security and the rest ---------------------------------------------------------


def offset_for_epoch(epoch: int, **kwargs: Any) -> Any:
    def run(s: Session) -> Any:
        topic = s.topic()
        flows.produced(s, topic, b"a")
        return s.call(rq.offset_for_leader_epoch(s.req, topic, epoch, **kwargs))
    return run


def scram_round_trip(s: Session) -> Any:
    r = s.req
    user = s.name("user")
    d = s.at(A.DESCRIBE_USER_SCRAM_CREDENTIALS, 0)
    upsert = s.call(r.AlterUserScramCredentialsRequest(deletions=[], upsertions=[r.ScramCredentialUpsertion(
        name=user, mechanism=2, iterations=4096, salt=b"salt" * 4, salted_password=b"p" * 64)]))
    described = s.call(d.DescribeUserScramCredentialsRequest(users=[d.UserName(name=user)]))
    deleted = s.call(r.AlterUserScramCredentialsRequest(upsertions=[], deletions=[
        r.ScramCredentialDeletion(name=user, mechanism=2)]))
    return {"upsert": upsert, "described": described, "deleted": deleted}


def scram_alter(**kwargs: Any) -> Any:
    def build(s: Session) -> Any:
        r = s.req
        upsert = {"name": s.name("user"), "mechanism": 1, "iterations": 4096, "salt": b"s" * 16,
                  "salted_password": b"p" * 32, **kwargs}
        return r.AlterUserScramCredentialsRequest(deletions=[], upsertions=[r.ScramCredentialUpsertion(**upsert)])
    return one(build)


def acl_filter(r: Any) -> dict[str, Any]:
    return {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
            "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}


CLUSTER = [
    Case(A.DESCRIBE_CLUSTER, "plain", one(lambda s: s.req.DescribeClusterRequest(
        include_cluster_authorized_operations=False, endpoint_type=1))),
    Case(A.DESCRIBE_CLUSTER, "authorized-operations", one(lambda s: s.req.DescribeClusterRequest(
        include_cluster_authorized_operations=True, endpoint_type=1))),
    Case(A.DESCRIBE_CLUSTER, "controller-endpoints", one(lambda s: s.req.DescribeClusterRequest(
        include_cluster_authorized_operations=False, endpoint_type=2)), versions=(1, 99)),
    Case(A.OFFSET_FOR_LEADER_EPOCH, "current-epoch", offset_for_epoch(0)),
    Case(A.OFFSET_FOR_LEADER_EPOCH, "future-epoch", offset_for_epoch(5)),
    Case(A.OFFSET_FOR_LEADER_EPOCH, "fenced-current-epoch", offset_for_epoch(0, current_leader_epoch=4)),
    Case(A.OFFSET_FOR_LEADER_EPOCH, "as-follower", offset_for_epoch(0, replica_id=0), versions=(3, 99)),
    Case(A.OFFSET_FOR_LEADER_EPOCH, "unknown-topic", one(lambda s: rq.offset_for_leader_epoch(s.req, NO_TOPIC, 0))),
    Case(A.DESCRIBE_USER_SCRAM_CREDENTIALS, "unknown-user", one(lambda s: s.req.DescribeUserScramCredentialsRequest(
        users=[s.req.UserName(name="nobody")]))),
    Case(A.DESCRIBE_USER_SCRAM_CREDENTIALS, "duplicate-user", one(lambda s: s.req.DescribeUserScramCredentialsRequest(
        users=[s.req.UserName(name="twice"), s.req.UserName(name="twice")]))),
    Case(A.ALTER_USER_SCRAM_CREDENTIALS, "upsert-describe-delete", scram_round_trip),
    Case(A.ALTER_USER_SCRAM_CREDENTIALS, "too-few-iterations", scram_alter(iterations=10)),
    Case(A.ALTER_USER_SCRAM_CREDENTIALS, "unknown-mechanism", scram_alter(mechanism=9)),
    Case(A.ALTER_USER_SCRAM_CREDENTIALS, "empty-user", scram_alter(name="")),
    Case(A.ALTER_USER_SCRAM_CREDENTIALS, "delete-unknown", one(lambda s: s.req.AlterUserScramCredentialsRequest(
        upsertions=[], deletions=[s.req.ScramCredentialDeletion(name="nobody", mechanism=1)]))),
    Case(A.DESCRIBE_ACLS, "no-authorizer", one(lambda s: s.req.DescribeAclsRequest(**acl_filter(s.req)))),
    Case(A.CREATE_ACLS, "no-authorizer", one(lambda s: s.req.CreateAclsRequest(creations=[s.req.AclCreation(
        resource_type=2, resource_name="t", resource_pattern_type=3, principal="User:a", host="*", operation=3,
        permission_type=3)]))),
    Case(A.DELETE_ACLS, "no-authorizer", one(lambda s: s.req.DeleteAclsRequest(
        filters=[s.req.DeleteAclsFilter(**acl_filter(s.req))]))),
    Case(A.SASL_HANDSHAKE, "plaintext-listener", one(lambda s: s.req.SaslHandshakeRequest(mechanism="PLAIN"))),
    Case(A.SASL_AUTHENTICATE, "without-handshake", one(lambda s: s.req.SaslAuthenticateRequest(
        auth_bytes=b"\0u\0p"))),
    # The api keys themselves are test_api_versions' (kafka_versions.py, known.ADVERTISED).
    Case(A.API_VERSIONS, "answer", one(lambda s: s.req.ApiVersionsRequest(
        client_software_name="oracle", client_software_version="1.0")),
         normalise=lambda tree: {k: v for k, v in tree.items() if k != "api_keys"}),
    Case(A.API_VERSIONS, "invalid-client-software", one(lambda s: s.req.ApiVersionsRequest(
        client_software_name="bad name!", client_software_version="1.0")), versions=(3, 99)),
]


CASES = PRODUCE + FETCH + LIST_OFFSETS + METADATA + GROUPS + OFFSETS + TOPICS + CONFIGS + TRANSACTIONS + CLUSTER
