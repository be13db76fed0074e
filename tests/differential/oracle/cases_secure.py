"""The cases of a secure broker per side (SASL on both listeners, the ACL authorizer on,
``allow.everyone.if.no.acl.found=false``): each API as the ``client`` user, who has no ACLs,
then with the ACLs an administrator grants it.  Setup steps run as the ``admin`` super-user
(``s.call(..., admin=True)``)."""

from __future__ import annotations

from typing import Any

from oracle import requests as rq
from oracle.case import Case, one
from oracle.side import Session

from odradek.protocol.api_keys import ApiKey as A
from odradek.protocol.errors import ErrorCode

__all__ = ["CASES"]

# Kafka's wire codes (AclBinding's enums).
TOPIC, GROUP, CLUSTER, TXN_ID = 2, 3, 4, 5
LITERAL, PREFIXED = 3, 4
READ, WRITE, CREATE, DESCRIBE, CLUSTER_ACTION, IDEMPOTENT_WRITE = 3, 4, 5, 8, 9, 12
ALLOW = 3


def topic_with_record(s: Session) -> str:
    t = s.topic()
    r = s.at(A.PRODUCE, 9)
    answer = s.call(rq.produce(r, t, rq.batch(b"a")), admin=True)
    assert answer.responses[0].partition_responses[0].error_code == ErrorCode.none, answer
    return t


def acl(r: Any, resource_type: int, name: str, operation: int, principal: str = "User:client",
        pattern: int = LITERAL) -> Any:
    return r.AclCreation(resource_type=resource_type, resource_name=name, resource_pattern_type=pattern,
                         principal=principal, host="*", operation=operation, permission_type=ALLOW)


def granted(grants: Any, build: Any) -> Any:
    """``grants(s)`` -> [(resource type, name, operation)] created as admin, then ``build(s)``
    sent as the client once the authorizer lets it through (or 5 s passed: a grant reaches
    either side's authorizer within a second, and where 2.8 refuses anyway the case waits
    that long on each side); the ACLs are deleted again, and awaited gone, so that the other
    cases see a client without ACLs."""
    def run(s: Session) -> Any:
        r = s.at(A.CREATE_ACLS, 2)
        created = s.call(r.CreateAclsRequest(creations=[acl(r, *g) for g in grants(s)]), admin=True)
        assert all(c.error_code == ErrorCode.none for c in created.results), created
        answer = s.poll(lambda: s.call(build(s)), _not_refused, timeout=5)
        x = s.at(A.DELETE_ACLS, 2)
        s.call(x.DeleteAclsRequest(filters=[x.DeleteAclsFilter(
            resource_type_filter=resource_type, resource_name_filter=name, pattern_type_filter=LITERAL,
            principal_filter="User:client", host_filter=None, operation=operation, permission_type=ALLOW)
            for resource_type, name, operation in grants(s)]), admin=True)
        s.poll(lambda: s.call(build(s)), lambda a: not _not_refused(a), timeout=10)
        return {"created": created, "answer": answer}
    return run


def _not_refused(answer: Any) -> bool:
    text = repr(answer)
    return "authorization_failed" not in text


def acl_round_trip(s: Session) -> Any:
    """CreateAcls, DescribeAcls and DeleteAcls as the administrator."""
    c, d, x = s.at(A.CREATE_ACLS, s.version), s.at(A.DESCRIBE_ACLS, s.version), s.at(A.DELETE_ACLS, s.version)
    name = s.name("acl")
    created = s.call(c.CreateAclsRequest(creations=[
        acl(c, TOPIC, name, READ), acl(c, TOPIC, name[:10], WRITE, pattern=PREFIXED),
        acl(c, GROUP, name + "-g", READ, principal="User:other"), acl(c, TOPIC, name, 99)]), admin=True)
    describe = d.DescribeAclsRequest(resource_type_filter=1, resource_name_filter=name, pattern_type_filter=1,
                                     principal_filter=None, host_filter=None, operation=1, permission_type=1)
    described = s.poll(lambda: s.call(describe, admin=True), lambda a: len(a.resources) >= 1, timeout=10)
    deleted = s.call(x.DeleteAclsRequest(filters=[x.DeleteAclsFilter(
        resource_type_filter=1, resource_name_filter=name, pattern_type_filter=1, principal_filter=None,
        host_filter=None, operation=1, permission_type=1)]), admin=True)
    return {"created": created, "described": described, "deleted": deleted}


def as_client(build: Any) -> Any:
    return one(build)


def elect_leaders(s: Session) -> Any:
    r = s.req
    election = {"election_type": 0} if s.version >= 1 else {}  # v0 elects the preferred leader only
    return r.ElectLeadersRequest(**election, timeout=30_000, topic_partitions=[
        r.TopicPartitions(topic=s.topic(), partitions=[0])])


def alter_reassignments(s: Session) -> Any:
    r = s.req
    return r.AlterPartitionReassignmentsRequest(timeout=30_000, topics=[r.ReassignableTopic(
        name=s.topic(), partitions=[r.ReassignablePartition(partition_index=0, replicas=[0])])])


def alter_replica_log_dirs(s: Session) -> Any:
    r = s.req
    return r.AlterReplicaLogDirsRequest(dirs=[r.AlterReplicaLogDir(path="/tmp/elsewhere", topics=[
        r.AlterReplicaLogDirTopic(name=s.topic(), partitions=[0])])])


def describe_client_quotas(s: Session) -> Any:
    r = s.req
    return r.DescribeClientQuotasRequest(components=[r.ComponentData(entity_type="user", match_type=1, match=None)],
                                         strict=False)


def alter_client_quotas(s: Session) -> Any:
    r = s.req
    return r.AlterClientQuotasRequest(validate_only=False, entries=[r.EntryData(
        entity=[r.EntityData(entity_type="client-id", entity_name=s.name("c"))],
        ops=[r.OpData(key="producer_byte_rate", value=1024.0, remove=False)])])


CASES = [
    # No ACLs: every request refused the way its API refuses.
    Case(A.METADATA, "denied-named", as_client(lambda s: rq.metadata(s.req, [topic_with_record(s), "no-such-topic"]))),
    Case(A.METADATA, "denied-all", as_client(lambda s: rq.metadata(s.req, None, cluster_ops=True))),
    Case(A.METADATA, "denied-auto-create", as_client(lambda s: rq.metadata(s.req, ["fresh-" + s.name()],
                                                                            auto_create=True)), versions=(4, 99)),
    Case(A.PRODUCE, "denied", as_client(lambda s: rq.produce(s.req, topic_with_record(s), rq.batch()))),
    Case(A.PRODUCE, "denied-idempotent", as_client(lambda s: rq.produce(s.req, topic_with_record(s), rq.batch(
        producer_id=5, producer_epoch=0, base_sequence=0)))),
    Case(A.PRODUCE, "denied-transactional", as_client(lambda s: rq.produce(s.req, topic_with_record(s), rq.batch(
        producer_id=5, producer_epoch=0, base_sequence=0, transactional=True), transactional_id="tx"))),
    Case(A.FETCH, "denied", as_client(lambda s: rq.fetch(s.req, {(topic_with_record(s), 0): 0}))),
    Case(A.FETCH, "denied-as-follower", as_client(lambda s: rq.fetch(s.req, {(topic_with_record(s), 0): 0},
                                                                     replica_id=0))),
    Case(A.LIST_OFFSETS, "denied", as_client(lambda s: rq.list_offsets(s.req, topic_with_record(s), -1))),
    Case(A.OFFSET_FOR_LEADER_EPOCH, "denied", as_client(lambda s: rq.offset_for_leader_epoch(
        s.req, topic_with_record(s), 0))),
    Case(A.FIND_COORDINATOR, "denied-group", as_client(lambda s: rq.find_coordinator(s.req, s.name("g")))),
    Case(A.FIND_COORDINATOR, "denied-transaction", as_client(lambda s: rq.find_coordinator(s.req, s.name("txn"), 1)),
         versions=(1, 99)),
    Case(A.JOIN_GROUP, "denied", as_client(lambda s: rq.join_group(s.req, s.name("g")))),
    Case(A.SYNC_GROUP, "denied", as_client(lambda s: rq.sync_group(s.req, s.name("g"), 1, "m"))),
    Case(A.HEARTBEAT, "denied", as_client(lambda s: rq.heartbeat(s.req, s.name("g"), 1, "m"))),
    Case(A.LEAVE_GROUP, "denied", as_client(lambda s: rq.leave_group(s.req, s.name("g"), "m"))),
    Case(A.OFFSET_COMMIT, "denied", as_client(lambda s: rq.offset_commit(s.req, s.name("g"), {(s.topic(), 0): 1}))),
    Case(A.OFFSET_FETCH, "denied", as_client(lambda s: rq.offset_fetch(s.req, s.name("g"), {s.topic(): [0]}))),
    Case(A.DESCRIBE_GROUPS, "denied", as_client(lambda s: rq.describe_groups(s.req, s.name("g")))),
    Case(A.LIST_GROUPS, "denied", as_client(lambda s: s.req.ListGroupsRequest(states_filter=[], types_filter=[]))),
    Case(A.DELETE_GROUPS, "denied", as_client(lambda s: rq.delete_groups(s.req, s.name("g")))),
    Case(A.OFFSET_DELETE, "denied", as_client(lambda s: rq.offset_delete(s.req, s.name("g"), {s.topic(): [0]}))),
    Case(A.CREATE_TOPICS, "denied", as_client(lambda s: rq.create_topics(s.req, (s.name("new"), 1, 1)))),
    Case(A.DELETE_TOPICS, "denied", as_client(lambda s: rq.delete_topics(s.req, s.topic()))),
    Case(A.CREATE_PARTITIONS, "denied", as_client(lambda s: rq.create_partitions(s.req, s.topic(), 2))),
    Case(A.DELETE_RECORDS, "denied", as_client(lambda s: rq.delete_records(s.req, topic_with_record(s), 1))),
    Case(A.INIT_PRODUCER_ID, "denied-idempotent", as_client(lambda s: rq.init_producer_id(s.req))),
    Case(A.INIT_PRODUCER_ID, "denied-transactional", as_client(lambda s: rq.init_producer_id(s.req, s.name("txn")))),
    Case(A.ADD_PARTITIONS_TO_TXN, "denied", as_client(lambda s: rq.add_partitions_to_txn(
        s.req, s.name("txn"), 5, 0, {s.topic(): [0]}))),
    Case(A.ADD_OFFSETS_TO_TXN, "denied", as_client(lambda s: rq.add_offsets_to_txn(
        s.req, s.name("txn"), 5, 0, s.name("g")))),
    Case(A.END_TXN, "denied", as_client(lambda s: rq.end_txn(s.req, s.name("txn"), 5, 0, True))),
    Case(A.TXN_OFFSET_COMMIT, "denied", as_client(lambda s: rq.txn_offset_commit(
        s.req, s.name("txn"), s.name("g"), 5, 0, {(s.topic(), 0): 1}))),
    Case(A.DESCRIBE_TRANSACTIONS, "denied", as_client(lambda s: s.req.DescribeTransactionsRequest(
        transactional_ids=[s.name("txn")]))),
    Case(A.LIST_TRANSACTIONS, "denied", as_client(lambda s: s.req.ListTransactionsRequest(
        state_filters=[], producer_id_filters=[]))),
    Case(A.DESCRIBE_PRODUCERS, "denied", as_client(lambda s: s.req.DescribeProducersRequest(
        topics=[s.req.TopicRequest(name=topic_with_record(s), partition_indexes=[0])]))),
    Case(A.WRITE_TXN_MARKERS, "denied", as_client(lambda s: s.req.WriteTxnMarkersRequest(markers=[
        s.req.WritableTxnMarker(producer_id=5, producer_epoch=0, transaction_result=True, coordinator_epoch=0,
                                topics=[s.req.WritableTxnMarkerTopic(name=s.topic(), partition_indexes=[0])])]))),
    Case(A.DESCRIBE_CONFIGS, "denied-topic", as_client(lambda s: rq.describe_configs(
        s.req, rq.TOPIC, s.topic(), ["retention.ms"]))),
    Case(A.DESCRIBE_CONFIGS, "denied-broker", as_client(lambda s: rq.describe_configs(
        s.req, rq.BROKER, "0", ["num.partitions"]))),
    Case(A.ALTER_CONFIGS, "denied", as_client(lambda s: rq.alter_configs(s.req, rq.TOPIC, s.topic(),
                                                                         {"retention.ms": "1000"}))),
    Case(A.INCREMENTAL_ALTER_CONFIGS, "denied", as_client(lambda s: rq.incremental_alter_configs(
        s.req, rq.BROKER, "0", [("log.cleaner.threads", rq.SET, "1")]))),
    Case(A.DESCRIBE_ACLS, "denied", as_client(lambda s: s.req.DescribeAclsRequest(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
        host_filter=None, operation=1, permission_type=1))),
    Case(A.CREATE_ACLS, "denied", as_client(lambda s: s.req.CreateAclsRequest(creations=[
        acl(s.req, TOPIC, s.topic(), READ)]))),
    Case(A.DELETE_ACLS, "denied", as_client(lambda s: s.req.DeleteAclsRequest(filters=[s.req.DeleteAclsFilter(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
        host_filter=None, operation=1, permission_type=1)]))),
    Case(A.DESCRIBE_CLUSTER, "denied", as_client(lambda s: s.req.DescribeClusterRequest(
        include_cluster_authorized_operations=True, endpoint_type=1))),
    Case(A.DESCRIBE_USER_SCRAM_CREDENTIALS, "denied", lambda s: s.call(s.req.DescribeUserScramCredentialsRequest(
        users=None), timeout=5)),
    Case(A.ALTER_USER_SCRAM_CREDENTIALS, "denied", as_client(lambda s: s.req.AlterUserScramCredentialsRequest(
        deletions=[s.req.ScramCredentialDeletion(name="client", mechanism=2)], upsertions=[]))),
    Case(A.SASL_HANDSHAKE, "after-login", as_client(lambda s: s.req.SaslHandshakeRequest(mechanism="PLAIN"))),
    # The operator's APIs (Alter or Describe on the cluster).
    Case(A.ELECT_LEADERS, "denied", as_client(elect_leaders)),
    Case(A.ALTER_PARTITION_REASSIGNMENTS, "denied", as_client(alter_reassignments)),
    Case(A.LIST_PARTITION_REASSIGNMENTS, "denied", as_client(lambda s: s.req.ListPartitionReassignmentsRequest(
        timeout=30_000, topics=None))),
    Case(A.DESCRIBE_LOG_DIRS, "denied", as_client(lambda s: s.req.DescribeLogDirsRequest(topics=None))),
    Case(A.ALTER_REPLICA_LOG_DIRS, "denied", as_client(alter_replica_log_dirs)),
    Case(A.DESCRIBE_CLIENT_QUOTAS, "denied", as_client(describe_client_quotas)),
    Case(A.ALTER_CLIENT_QUOTAS, "denied", as_client(alter_client_quotas)),
    # With ACLs granted by the administrator.
    Case(A.CREATE_ACLS, "round-trip", acl_round_trip),
    Case(A.METADATA, "granted-describe", granted(lambda s: [(TOPIC, s.name("t"), DESCRIBE)], lambda s: rq.metadata(
        s.req, [topic_with_record(s)], topic_ops=True))),
    Case(A.PRODUCE, "granted-write", granted(lambda s: [(TOPIC, s.name("t"), WRITE)], lambda s: rq.produce(
        s.req, topic_with_record(s), rq.batch(b"b")))),
    Case(A.PRODUCE, "granted-write-idempotent", granted(lambda s: [(TOPIC, s.name("t"), WRITE)], lambda s: rq.produce(
        s.req, topic_with_record(s), rq.batch(b"b", producer_id=5, producer_epoch=0, base_sequence=0)))),
    Case(A.INIT_PRODUCER_ID, "granted-topic-write", granted(lambda s: [(TOPIC, s.name("t"), WRITE)],
                                                            lambda s: rq.init_producer_id(s.req))),
    Case(A.FETCH, "granted-read", granted(lambda s: [(TOPIC, s.name("t"), READ)], lambda s: rq.fetch(
        s.req, {(topic_with_record(s), 0): 0}))),
    Case(A.FIND_COORDINATOR, "granted-describe-group", granted(lambda s: [(GROUP, s.name("g"), DESCRIBE)],
                                                                lambda s: rq.find_coordinator(s.req, s.name("g")))),
    Case(A.OFFSET_COMMIT, "granted-group-not-topic", granted(lambda s: [(GROUP, s.name("g"), READ)],
                                                              lambda s: rq.offset_commit(
                                                                  s.req, s.name("g"), {(s.topic(), 0): 1}))),
    Case(A.INIT_PRODUCER_ID, "granted-idempotent-write", granted(lambda s: [(CLUSTER, "kafka-cluster",
                                                                            IDEMPOTENT_WRITE)],
                                                                  lambda s: rq.init_producer_id(s.req))),
    Case(A.CREATE_TOPICS, "granted-create", granted(
        lambda s: [(TOPIC, s.name("new"), CREATE)], lambda s: rq.create_topics(s.req, (s.name("new"), 1, 1)))),
]
