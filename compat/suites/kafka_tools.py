"""Suite 2: Kafka's own command-line tools (Kafka 3.9's jars, run by their main classes as
``bin/kafka-*.sh`` runs them) against odradek.  Each case runs one tool (or one of its modes)
and checks what it prints, not only its exit code; a tool that calls an API odradek lacks
fails with that API as its cause.  On the SASL_SSL cluster the cases marked ``secured`` run
again with the administrator's ``--command-config``."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from compat.context import SuiteContext
from compat.jvm import JvmRun
from compat.kafka_tools import KafkaTools
from compat.setup_clients import SetupClients
from compat.suite import DURABLE, MissingApi, SuiteResult, Variant
from compat.tool_output import api_versions, table, topic_description, unsupported_api
from odradek.broker.apis import load_handlers
from odradek.local.cluster import LocalCluster

NAME = "kafka-tools"
ORDER = 2
TITLE = "Kafka's command-line tools (bin/kafka-*.sh) from Kafka 3.9's jars"
VARIANTS = (Variant(), Variant("sasl_ssl", security="sasl_ssl", quick=False))
BROKER_OVERRIDES = DURABLE


class Bench:
    """What the cases share: the tools, the setup clients and unique names."""

    def __init__(self, cluster: LocalCluster, ctx: SuiteContext, quick: bool) -> None:
        self.cluster = cluster
        self.ctx = ctx
        self.quick = quick  # the quick subset runs each tool's main modes only (a JVM start each)
        self.tools = KafkaTools(ctx)
        self.setup = SetupClients(cluster)
        self.bootstrap = cluster.bootstrap_servers
        self.run_id = uuid.uuid4().hex[:8]

    def name(self, stem: str) -> str:
        return f"tools-{stem}-{self.run_id}"

    def run(self, tool: str, *args: str, api: str | None = None, **kwargs: object) -> JvmRun:
        """Run a tool that connects to the cluster (``--bootstrap-server`` added); with ``api``,
        an UnsupportedVersionException in its output fails the case naming that API."""
        done = self.tools.run(tool, "--bootstrap-server", self.bootstrap, *args, **kwargs)  # type: ignore[arg-type]
        if api is not None and (evidence := unsupported_api(done.output)):
            raise MissingApi(api, evidence)
        return done

    def expect(self, tool: str, *args: str, says: tuple[str, ...] = (), api: str | None = None,
               **kwargs: object) -> JvmRun:
        """``run``, which must succeed and print each of ``says``."""
        done = self.run(tool, *args, api=api, **kwargs)
        ok(done, *says, what=f"{tool} {' '.join(args)}")
        return done

    def file(self, name: str, content: str) -> Path:
        path = self.ctx.path(f"{self.run_id}-{name}")
        path.write_text(content)
        return path


def ok(done: JvmRun, *says: str, what: str) -> None:
    """The tool succeeded and printed each of ``says``."""
    assert done.ok, f"{what}: {done.summary()}"
    missing = [s for s in says if s not in done.output]
    assert not missing, f"{what} did not print {missing}: {done.summary()}"


@dataclass(frozen=True)
class ToolCase:
    name: str
    body: Callable[[Bench], None]
    quick: bool = False
    secured: bool = False  # also on the SASL_SSL cluster


# ----------------------------------------------------------------------------- kafka-broker-api-versions


def broker_api_versions(b: Bench) -> None:
    done = b.expect("kafka-broker-api-versions")
    seen = api_versions(done.stdout)
    assert set(seen) == set(b.cluster.brokers), f"brokers listed: {sorted(seen)}: {done.summary()}"
    for broker_id, apis in seen.items():
        for spec in load_handlers().values():
            shown = apis.get(spec.name)
            if spec.name in apis:  # the tool lists the APIs its client knows
                # (the advertised minimum may be lower than the implemented one: see api_versions.py)
                assert shown is not None and shown[0] == spec.api_key and shown[2] == spec.max_version, (
                    f"broker {broker_id}: {spec.name} shown as {shown}, odradek offers up to {spec.max_version}")
        for name in ("Produce", "Fetch", "Metadata", "ApiVersions"):
            assert apis.get(name), f"broker {broker_id}: {name} is {apis.get(name, 'not listed')}"


# ----------------------------------------------------------------------------- kafka-topics


def topics(b: Bench) -> None:
    topic = b.name("topics")
    b.expect("kafka-topics", "--create", "--topic", topic, "--partitions", "3", "--replication-factor", "3",
             "--config", "min.insync.replicas=2", says=(f"Created topic {topic}.",))
    listed = b.expect("kafka-topics", "--list", "--exclude-internal").stdout.split()
    assert topic in listed and "__consumer_offsets" not in listed, f"--list: {listed}"
    summary, partitions = _described(b, topic)
    assert (summary.get("PartitionCount"), summary.get("ReplicationFactor")) == ("3", "3"), summary
    # Configs lists every non-default value, the cluster's server.properties ones included.
    assert "min.insync.replicas=2" in summary.get("Configs", "").split(","), f"Configs: {summary.get('Configs')!r}"
    assert len(summary.get("TopicId", "")) == 22, f"TopicId: {summary.get('TopicId')!r}"
    for p in partitions:
        replicas = p["Replicas"].split(",")
        assert len(replicas) == 3 and sorted(p["Isr"].split(",")) == sorted(replicas) and p["Leader"] in replicas, p
    b.expect("kafka-topics", "--alter", "--topic", topic, "--partitions", "4")
    assert _described(b, topic)[0].get("PartitionCount") == "4", "PartitionCount after --alter --partitions 4"
    b.expect("kafka-topics", "--delete", "--topic", topic)
    if b.quick:
        return
    _await(lambda: topic not in b.expect("kafka-topics", "--list").stdout.split(), f"{topic} gone from --list")
    for flag in ("--under-replicated-partitions", "--unavailable-partitions", "--under-min-isr-partitions"):
        shown = b.expect("kafka-topics", "--describe", flag).stdout.strip()
        assert not shown, f"--describe {flag}: {shown!r}"
    absent = b.run("kafka-topics", "--describe", "--topic", topic)
    assert not absent.ok and "does not exist" in absent.output, f"describing a deleted topic: {absent.summary()}"


def _described(b: Bench, topic: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    done = b.expect("kafka-topics", "--describe", "--topic", topic)
    summary, partitions = topic_description(done.stdout, topic)
    assert summary and len(partitions) == int(summary.get("PartitionCount", -1)), f"--describe: {done.summary()}"
    return summary, partitions


def _await(condition: Callable[[], bool], what: str, tries: int = 15) -> None:
    """Ask again (each try runs a tool: a few seconds) until ``condition`` holds."""
    for _ in range(tries):
        if condition():
            return
    raise AssertionError(f"no {what} after {tries} tries")


# ----------------------------------------------------------------------------- kafka-configs


def configs_topics(b: Bench) -> None:
    topic = b.name("configs")
    b.setup.create_topic(topic)
    entity = ("--entity-type", "topics", "--entity-name", topic)
    b.expect("kafka-configs", *entity, "--alter", "--add-config", "retention.ms=86400000,cleanup.policy=[compact,delete]",
             says=(f"Completed updating config for topic {topic}.",))
    described = b.expect("kafka-configs", *entity, "--describe",
                         says=(f"Dynamic configs for topic {topic} are:",
                               "retention.ms=86400000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=86400000",
                               "cleanup.policy=compact,delete sensitive=false"))
    assert "min.insync.replicas" not in described.stdout, f"a config never set: {described.stdout}"
    b.expect("kafka-configs", *entity, "--alter", "--delete-config", "retention.ms")
    after = b.expect("kafka-configs", *entity, "--describe").stdout
    assert "retention.ms" not in after and "cleanup.policy" in after, f"after --delete-config: {after}"
    everything = b.expect("kafka-configs", *entity, "--describe", "--all").stdout
    assert "segment.bytes=1073741824 sensitive=false synonyms={DEFAULT_CONFIG:log.segment.bytes=1073741824}" in \
        everything, f"--all: {everything[:600]}"


def configs_brokers(b: Bench) -> None:
    everything = b.expect("kafka-configs", "--entity-type", "brokers", "--entity-name", "0", "--describe", "--all",
                          says=("All configs for broker 0 are:",)).stdout
    assert "num.partitions=1 sensitive=false synonyms={STATIC_BROKER_CONFIG:num.partitions=1, " \
           "DEFAULT_CONFIG:num.partitions=1}" in everything, f"--all: {everything[:600]}"
    default = ("--entity-type", "brokers", "--entity-default")
    b.expect("kafka-configs", *default, "--alter", "--add-config", "log.cleaner.backoff.ms=20000",
             says=("Completed updating default config for brokers in the cluster.",))
    try:
        b.expect("kafka-configs", *default, "--describe",
                 says=("Default configs for brokers in the cluster are:",
                       "log.cleaner.backoff.ms=20000 sensitive=false "
                       "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.backoff.ms=20000"))
        _await(lambda: "log.cleaner.backoff.ms=20000" in b.expect(
            "kafka-configs", "--entity-type", "brokers", "--entity-name", "1", "--describe", "--all").stdout,
            "broker 1's log.cleaner.backoff.ms=20000")
        refused = b.run("kafka-configs", "--entity-type", "brokers", "--entity-name", "1", "--alter",
                        "--add-config", "broker.id=7")
        assert not refused.ok and "broker.id" in refused.output, f"a static config altered: {refused.summary()}"
    finally:
        b.expect("kafka-configs", *default, "--alter", "--delete-config", "log.cleaner.backoff.ms")


def configs_users(b: Bench) -> None:
    user = b.name("bob")
    entity = ("--entity-type", "users", "--entity-name", user)
    b.expect("kafka-configs", *entity, "--alter", "--add-config", "SCRAM-SHA-512=[iterations=8192,password=bob-secret]",
             says=(f"Completed updating config for user {user}.",), api="AlterUserScramCredentials")
    b.expect("kafka-configs", *entity, "--describe", api="DescribeClientQuotas",
             says=(f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-512=iterations=8192",))
    b.expect("kafka-configs", *entity, "--alter", "--delete-config", "SCRAM-SHA-512")
    after = b.expect("kafka-configs", *entity, "--describe", api="DescribeClientQuotas").stdout
    assert "SCRAM-SHA-512" not in after, f"after --delete-config: {after}"


def configs_client_quotas(b: Bench) -> None:
    entity = ("--entity-type", "clients", "--entity-name", b.name("client"))
    b.expect("kafka-configs", *entity, "--alter", "--add-config", "producer_byte_rate=1024",
             api="AlterClientQuotas", says=("Completed updating config for client",))
    b.expect("kafka-configs", *entity, "--describe", api="DescribeClientQuotas",
             says=("producer_byte_rate=1024.0",))


# ----------------------------------------------------------------------------- kafka-acls


def acls(b: Bench) -> None:
    topic = b.name("acls")
    if not b.ctx.secured:
        # No authorizer on this cluster: Kafka's answer is SECURITY_DISABLED, and the tool says so.
        done = b.run("kafka-acls", "--list")
        assert "SecurityDisabledException" in done.output and "No Authorizer is configured" in done.output, (
            f"kafka-acls --list without an authorizer: {done.summary()}")
        return
    pattern = f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)"
    b.expect("kafka-acls", "--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Write",
             "--topic", topic,
             says=(f"Adding ACLs for resource `{pattern}`", "(principal=User:alice, host=*, operation=READ, "
                   "permissionType=ALLOW)", "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)"))
    group = b.name("acl-group")
    b.expect("kafka-acls", "--add", "--consumer", "--allow-principal", "User:bob", "--topic", topic, "--group", group)
    listed = b.expect("kafka-acls", "--list", "--topic", topic, says=(f"Current ACLs for resource `{pattern}`",)).stdout
    for entry in ("User:alice, host=*, operation=READ", "User:bob, host=*, operation=DESCRIBE",
                  "User:bob, host=*, operation=READ"):
        assert entry in listed, f"--list lacks {entry}: {listed}"
    b.expect("kafka-acls", "--list", "--group", group, says=("User:bob, host=*, operation=READ",))
    prefix = b.name("pfx")
    b.expect("kafka-acls", "--add", "--allow-principal", "User:carol", "--operation", "Write", "--topic", prefix,
             "--resource-pattern-type", "prefixed", says=("patternType=PREFIXED",))
    b.expect("kafka-acls", "--list", "--topic", prefix + "-x", "--resource-pattern-type", "match",
             says=("User:carol, host=*, operation=WRITE",))
    b.expect("kafka-acls", "--remove", "--force", "--topic", topic)
    b.expect("kafka-acls", "--remove", "--force", "--group", group)
    b.expect("kafka-acls", "--remove", "--force", "--topic", prefix, "--resource-pattern-type", "prefixed")
    left = b.expect("kafka-acls", "--list", "--principal", "User:bob", says=("ACLs for principal `User:bob`",)).stdout
    assert "Current ACLs for resource" not in left, f"ACLs left after --remove: {left}"


# ----------------------------------------------------------------------------- console producer/consumer


def console_producer_consumer(b: Bench) -> None:
    topic = b.name("console")
    group = b.name("console-group")
    b.setup.create_topic(topic)
    lines = [f"key{i}:value {i}" for i in range(20)]
    b.expect("kafka-console-producer", "--topic", topic, "--producer-property", "acks=all",
             "--property", "parse.key=true", "--property", "key.separator=:", input="\n".join(lines) + "\n")
    done = b.expect("kafka-console-consumer", "--topic", topic, "--group", group, "--from-beginning",
                    "--max-messages", "20", "--timeout-ms", "60000", "--property", "print.key=true",
                    "--property", "key.separator=:", says=("Processed a total of 20 messages",))
    assert done.stdout.splitlines() == lines, f"consumed {done.stdout.splitlines()[:5]}..."
    # The group committed what it read: a second run in the group finds nothing new.
    again = b.run("kafka-console-consumer", "--topic", topic, "--group", group, "--timeout-ms", "5000")
    assert "Processed a total of 0 messages" in again.output, f"the group read again: {again.summary()}"


# ----------------------------------------------------------------------------- kafka-consumer-groups


def _groups(b: Bench, *args: str, **kwargs: object) -> JvmRun:
    """kafka-consumer-groups, which must succeed; it gives up after 5 s by default (and --list
    then shows what it had): too short on a loaded machine."""
    return b.expect("kafka-consumer-groups", "--timeout", "30000", *args, **kwargs)  # type: ignore[arg-type]


def consumer_groups(b: Bench) -> None:
    topic = b.name("groups")
    group = b.name("group")
    b.setup.create_topic(topic, 2)
    for p in (0, 1):
        b.setup.produce(topic, 10, partition=p)
    b.setup.commit_group(group, topic, 2, 20)
    assert group in _groups(b, "--list").stdout.split(), "--list lacks the group"
    assert _offsets(b, group, topic) == {0: ("10", "10", "0"), 1: ("10", "10", "0")}, "--describe"
    if not b.quick:
        _describe_modes(b, group, topic)
    _groups(b, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    assert _offsets(b, group, topic) == {0: ("0", "10", "10"), 1: ("0", "10", "10")}, "after --to-earliest"
    if not b.quick:
        _shift_and_delete_offsets(b, group, topic)
    _groups(b, "--delete", "--group", group, says=(f"Deletion of requested consumer groups ('{group}') was successful.",))
    assert group not in _groups(b, "--list").stdout.split(), "--list after --delete"


def _describe_modes(b: Bench, group: str, topic: str) -> None:
    """--state, --members and a --dry-run reset of an empty group."""
    # GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS: the strategy of an empty group is blank.
    state = _groups(b, "--describe", "--group", group, "--state").stdout
    (row,) = [line.split() for line in state.splitlines() if line.startswith(group)] or [[]]
    assert row[-2:] == ["Empty", "0"] and row[2][1:-1] in map(str, b.cluster.brokers), f"--state: {state}"
    _groups(b, "--describe", "--group", group, "--members", says=(f"Consumer group '{group}' has no active members.",))
    # Kafka 3.9 prints this table's rows without line breaks: read it as groups of four words.
    dry = _groups(b, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--dry-run").stdout
    words = dry.split()
    rows = [words[i:i + 4] for i in range(4, len(words), 4)] if words[:4] == [
        "GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"] else []
    assert sorted((r[2], r[3]) for r in rows) == [("0", "0"), ("1", "0")], f"--dry-run: {dry}"
    assert _offsets(b, group, topic)[0][0] == "10", "--dry-run changed the offsets"


def _shift_and_delete_offsets(b: Bench, group: str, topic: str) -> None:
    """--shift-by on one partition, then --delete-offsets (OffsetDelete) of the other."""
    _groups(b, "--reset-offsets", "--group", group, "--topic", f"{topic}:0", "--shift-by", "3", "--execute")
    assert _offsets(b, group, topic)[0] == ("3", "10", "7"), "after --shift-by 3 on partition 0"
    deleted = _groups(b, "--delete-offsets", "--group", group, "--topic", f"{topic}:1",
                      api="OffsetDelete", says=(f"Request succeed for deleting offsets with topic {topic}:1 group {group}",))
    # Kafka 3.9's tool prints this table's header and rows without line breaks between them.
    words = deleted.stdout.split()
    start = words.index("TOPIC") if "TOPIC" in words else len(words)
    assert words[start:] == ["TOPIC", "PARTITION", "STATUS", topic, "1", "Successful"], (
        f"--delete-offsets: {deleted.stdout}")
    assert set(_offsets(b, group, topic)) == {0}, "partition 1's offset after --delete-offsets"


def _offsets(b: Bench, group: str, topic: str) -> dict[int, tuple[str, str, str]]:
    """--describe: partition -> (CURRENT-OFFSET, LOG-END-OFFSET, LAG) of the partitions with a committed offset."""
    rows = table(_groups(b, "--describe", "--group", group).stdout, "GROUP")
    return {int(r["PARTITION"]): (r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"])
            for r in rows if r["TOPIC"] == topic and r["CURRENT-OFFSET"] != "-"}


# ----------------------------------------------------------------------------- offsets and records


def get_offsets(b: Bench) -> None:
    topic = b.name("offsets")
    b.setup.create_topic(topic, 2)
    b.setup.produce(topic, 7, partition=0)
    b.setup.produce(topic, 3, partition=1)
    assert _get_offsets(b, topic) == {f"{topic}:0:7", f"{topic}:1:3"}, "latest offsets"
    assert _get_offsets(b, topic, "--time", "-2") == {f"{topic}:0:0", f"{topic}:1:0"}, "earliest offsets"
    assert _get_offsets(b, topic, "--time", "-1", "--partitions", "1") == {f"{topic}:1:3"}, "--partitions 1"


def _get_offsets(b: Bench, topic: str, *args: str) -> set[str]:
    return set(b.expect("kafka-get-offsets", "--topic", topic, *args).stdout.split())


def delete_records(b: Bench) -> None:
    topic = b.name("delete-records")
    b.setup.create_topic(topic)
    b.setup.produce(topic, 10)
    spec = b.file("delete.json", json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "offset": 4}]}))
    b.expect("kafka-delete-records", "--offset-json-file", str(spec),
             says=("Records delete operation completed:", f"partition: {topic}-0\tlow_watermark: 4"))
    assert _get_offsets(b, topic, "--time", "-2") == {f"{topic}:0:4"}, "earliest after deleting"


# ----------------------------------------------------------------------------- kafka-transactions


def transactions(b: Bench) -> None:
    topic = b.name("txn")
    txn_id = b.name("txn-id")
    b.setup.create_topic(topic)
    producer = b.setup.transactional_producer(txn_id)
    try:
        producer.begin_transaction()
        producer.produce(topic, b"open", partition=0)
        assert producer.flush(30) == 0
        listed = [r for r in table(b.expect("kafka-transactions", "list").stdout, "TransactionalId")
                  if r["TransactionalId"] == txn_id]
        assert [r["TransactionState"] for r in listed] == ["Ongoing"], f"list: {listed}"
        described = table(b.expect("kafka-transactions", "describe", "--transactional-id", txn_id).stdout,
                          "CoordinatorId")
        assert [(r["TransactionState"], r["TopicPartitions"]) for r in described] == [("Ongoing", f"{topic}-0")], (
            f"describe: {described}")
        producers = table(b.expect("kafka-transactions", "describe-producers", "--topic", topic, "--partition",
                                   "0").stdout, "ProducerId")
        assert [r["CurrentTransactionStartOffset"] for r in producers] == ["0"], f"describe-producers: {producers}"
        leader = _leader(b, topic)
        hanging = b.expect("kafka-transactions", "find-hanging", "--broker-id", str(leader),
                           says=("Topic\tPartition\tProducerId",)).stdout
        assert table(hanging, "Topic") == [], f"find-hanging: {hanging}"
        # abort writes the ABORT marker itself (WriteTxnMarkers to the leader), as for a hanging transaction.
        b.expect("kafka-transactions", "abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
        after = table(b.expect("kafka-transactions", "describe-producers", "--topic", topic, "--partition",
                               "0").stdout, "ProducerId")
        assert [r["CurrentTransactionStartOffset"] for r in after] == ["None"], f"after abort: {after}"
        producer.abort_transaction(30)
    finally:
        producer.flush(5)


def _leader(b: Bench, topic: str) -> int:
    return int(_described(b, topic)[1][0]["Leader"])


# ----------------------------------------------------------------------------- perf tests


def perf_tests(b: Bench) -> None:
    topic = b.name("perf")
    b.setup.create_topic(topic, 3)
    produced = b.tools.run("kafka-producer-perf-test", "--topic", topic, "--num-records", "50000", "--record-size",
                           "100", "--throughput", "-1", "--producer-props", f"bootstrap.servers={b.bootstrap}",
                           "acks=all", timeout=300)
    ok(produced, "50000 records sent", what="kafka-producer-perf-test")
    consumed = b.expect("kafka-consumer-perf-test", "--topic", topic, "--messages", "50000", "--timeout", "60000",
                        timeout=300)
    lines = consumed.stdout.splitlines()  # a CSV: a header, then one line of values
    header = next((i for i, line in enumerate(lines) if line.startswith("start.time")), len(lines) - 1)
    values = dict(zip(lines[header].split(", "), lines[header + 1].split(", ") if header + 1 < len(lines) else [],
                      strict=False))
    assert values.get("data.consumed.in.nMsg") == "50000", f"kafka-consumer-perf-test: {consumed.summary()}"


# ----------------------------------------------------------------------------- APIs of the operator's issue


def reassign_generate(b: Bench) -> None:
    topic = b.name("reassign-gen")
    b.setup.create_topic(topic, 2)
    moved = b.file("topics.json", json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    done = b.expect("kafka-reassign-partitions", "--generate", "--topics-to-move-json-file", str(moved),
                    "--broker-list", "0,1,2",
                    says=("Current partition replica assignment", "Proposed partition reassignment configuration"))
    current, proposed = (json.loads(line) for line in done.stdout.splitlines() if line.startswith("{"))
    described = {int(p["Partition"]): [int(r) for r in p["Replicas"].split(",")] for p in _described(b, topic)[1]}
    assert {p["partition"]: p["replicas"] for p in current["partitions"]} == described, f"current: {current}"
    assert sorted(p["partition"] for p in proposed["partitions"]) == [0, 1], f"proposed: {proposed}"


def reassign_execute(b: Bench) -> None:
    topic = b.name("reassign")
    b.setup.create_topic(topic)
    replicas = [int(r) for r in _described(b, topic)[1][0]["Replicas"].split(",")]
    target = replicas[1:] + replicas[:1]
    plan = b.file("plan.json", json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": target}]}))
    b.expect("kafka-reassign-partitions", "--execute", "--reassignment-json-file", str(plan),
             api="AlterPartitionReassignments", says=("Successfully started partition reassignment",))
    _await(lambda: "is completed" in b.expect("kafka-reassign-partitions", "--verify", "--reassignment-json-file",
                                              str(plan), api="ListPartitionReassignments").stdout,
           "completed reassignment")
    assert _described(b, topic)[1][0]["Replicas"] == ",".join(map(str, target)), "replicas after the reassignment"


def leader_election(b: Bench) -> None:
    topic = b.name("elect")
    b.setup.create_topic(topic, 2)
    done = b.expect("kafka-leader-election", "--election-type", "preferred", "--topic", topic, "--partition", "0",
                    api="ElectLeaders")
    assert "Valid replica already elected for partitions" in done.output or \
        "Successfully completed leader election" in done.output, f"kafka-leader-election: {done.summary()}"


def log_dirs(b: Bench) -> None:
    topic = b.name("log-dirs")
    b.setup.create_topic(topic)
    done = b.expect("kafka-log-dirs", "--describe", "--topic-list", topic, api="DescribeLogDirs",
                    says=("Received log directory information from brokers",))
    (found,) = (json.loads(line) for line in done.stdout.splitlines() if line.startswith("{"))
    holders = {broker["broker"] for broker in found["brokers"] for d in broker["logDirs"]
               for p in d["partitions"] if p["partition"] == f"{topic}-0"}
    assert holders == set(b.cluster.brokers), f"brokers holding {topic}-0: {holders}"


# ----------------------------------------------------------------------------- kafka-dump-log


def dump_log(b: Bench) -> None:
    """kafka-dump-log reads odradek's own files: data segments (plain, compressed and
    transactional batches, control records), the offset and time indexes of the rolled ones
    (verified against their logs; the active segment's index may lag on disk, as odradek
    writes index entries in batches), and the __consumer_offsets and __transaction_state
    segments with their decoders."""
    topic = b.name("dump")
    group = b.name("dump-group")
    txn_id = b.name("dump-txn")
    # Small segments, an index entry per batch, one record per batch: several rolled segments.
    b.setup.create_topic(topic, config={"index.interval.bytes": "1", "segment.bytes": "1024"})
    b.setup.produce(topic, 40, prefix="plain", **{"batch.num.messages": "1", "linger.ms": "0"})
    b.setup.produce(topic, 5, prefix="zstd", **{"compression.type": "zstd"})
    producer = b.setup.transactional_producer(txn_id)
    producer.begin_transaction()
    producer.produce(topic, b"in-txn", partition=0)
    producer.commit_transaction(30)
    b.setup.commit_group(group, topic, 1, 46)
    leader = b.cluster.brokers[_leader(b, topic)]
    data = leader.config_path.parent / "data"
    segments = sorted((data / f"{topic}-0").glob("*.log"))
    assert len(segments) >= 3, f"segments of {topic}-0: {[s.name for s in segments]}"
    dumped = _dump(b, ",".join(map(str, segments)), "--print-data-log")  # --files takes a list
    for expected in ("payload: plain0", "payload: plain39", "payload: zstd4", "compresscodec: zstd",
                     "isTransactional: true", "payload: in-txn", "endTxnMarker: COMMIT"):
        assert expected in dumped, f"the dump of {len(segments)} segments lacks {expected!r}"
    batches = [line for line in dumped.splitlines() if line.startswith("baseOffset:")]
    assert len(batches) >= 43 and all("isvalid: true" in line for line in batches), f"batches: {batches[:5]}"
    indexes = [s.with_suffix(suffix) for s in segments[:-1] for suffix in (".index", ".timeindex")]
    checked = _dump(b, ",".join(map(str, indexes)), "--verify-index-only")
    assert checked.count("Dumping ") == len(indexes), f"indexes checked: {checked[:600]}"
    for complaint in ("Mismatches", "mismatch", "out of order", "not sequential", "is empty"):
        assert complaint not in checked, f"{complaint!r} in the index check: {checked[:800]}"
    offsets_logs = sorted(p for p in data.glob("__consumer_offsets-*/*.log") if p.stat().st_size > 0)
    decoded = "".join(_dump(b, str(p), "--offsets-decoder") for p in offsets_logs)
    assert f'"group":"{group}"' in decoded and f'"topic":"{topic}"' in decoded, (
        f"no commit of {group} in {len(offsets_logs)} __consumer_offsets segments of broker {leader.broker_id}")
    txn_logs = sorted(p for p in b.cluster.dir.glob("broker-*/data/__transaction_state-*/*.log")
                      if p.stat().st_size > 0)
    decoded = "".join(_dump(b, str(p), "--transaction-log-decoder") for p in txn_logs)
    assert f"transactionalId={txn_id}" in decoded and "CompleteCommit" in decoded, (
        f"no CompleteCommit of {txn_id} in {len(txn_logs)} __transaction_state segments")


def _dump(b: Bench, *args: str, says: tuple[str, ...] = ()) -> str:
    done = b.tools.run("kafka-dump-log", "--files", *args)
    ok(done, *says, what=f"kafka-dump-log --files {' '.join(args)}")
    for problem in ("Exception", "isvalid: false"):
        assert problem not in done.output, f"kafka-dump-log {args[0]}: {done.summary(800)}"
    return done.stdout


CASES = (
    ToolCase("kafka-broker-api-versions", broker_api_versions, secured=True),
    ToolCase("kafka-topics", topics, quick=True, secured=True),
    ToolCase("kafka-configs (topics)", configs_topics, secured=True),
    ToolCase("kafka-configs (brokers)", configs_brokers),
    ToolCase("kafka-configs (users: SCRAM)", configs_users, secured=True),
    ToolCase("kafka-configs (client quotas)", configs_client_quotas),
    ToolCase("kafka-acls", acls, secured=True),
    ToolCase("kafka-console-producer/consumer", console_producer_consumer, secured=True),
    ToolCase("kafka-consumer-groups", consumer_groups, quick=True, secured=True),
    ToolCase("kafka-get-offsets", get_offsets),
    ToolCase("kafka-delete-records", delete_records),
    ToolCase("kafka-transactions", transactions),
    ToolCase("kafka-producer/consumer-perf-test", perf_tests),
    ToolCase("kafka-reassign-partitions --generate", reassign_generate),
    ToolCase("kafka-reassign-partitions --execute/--verify", reassign_execute),
    ToolCase("kafka-leader-election", leader_election),
    ToolCase("kafka-log-dirs", log_dirs),
    ToolCase("kafka-dump-log", dump_log, quick=True),
)


def run(cluster: LocalCluster, ctx: SuiteContext, quick: bool) -> SuiteResult:
    bench = Bench(cluster, ctx, quick)
    result = SuiteResult(versions={"kafka tools": bench.tools.version})
    for case in selected(CASES, quick=quick, secured=ctx.secured):
        result.case(case.name, lambda body=case.body: body(bench))  # type: ignore[misc]
    return result


def selected(cases: tuple[ToolCase, ...], *, quick: bool, secured: bool) -> list[ToolCase]:
    """The cases a run takes: the quick ones in quick mode, the secured ones on a secured cluster."""
    return [c for c in cases if (c.quick or not quick) and (c.secured or not secured)]
