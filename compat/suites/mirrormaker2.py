"""Suite 5: MirrorMaker 2 (Kafka 3.9's connect-mirror, its dedicated driver
``org.apache.kafka.connect.mirror.MirrorMaker`` with a properties file) between two odradek
clusters: the matrix's cluster (alias ``primary``) and a second 3-broker cluster started here
(``backup``), replicating primary -> backup.

Checked by content on the backup cluster: the remote topic ``primary.<topic>`` with the
source's partition count and its non-default configs; every record, in order, per partition
(those written before MirrorMaker started and those written while it runs); the checkpoints
topic, and the consumer groups' offsets translated by ``RemoteClusterUtils.translateOffsets``
(a small Java program, compat/java's TranslateOffsets) and synced into the backup's groups;
heartbeats emitted into ``heartbeats`` and the primary's replicated as ``primary.heartbeats``.

Translation is exact for a group at the newest records (an offset sync for every record,
``offset.lag.max=0``); for one committed at older records MirrorMaker 3.9 keeps only some
syncs (ever sparser further back) and translates to an earlier offset, never a later one (a
consumer that fails over re-reads, never skips): that is what the half-way group checks.
Against Apache Kafka (``--reference``) the second cluster is Kafka's too.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from compat import java_build
from compat.connect_worker import JvmService, await_value
from compat.context import SuiteContext
from compat.kafka_tools import KafkaTools
from compat.setup_clients import SetupClients
from compat.suite import DURABLE, SuiteResult, Variant
from odradek.local.cluster import LocalCluster
from odradek.perf.kafka_ref import KafkaRefCluster

NAME = "mirrormaker2"
ORDER = 5
TITLE = "MirrorMaker 2 (Kafka 3.9's connect-mirror) between two odradek clusters"
VARIANTS = (Variant(quick=False),)
BROKER_OVERRIDES = DURABLE
MIRROR_MAKER = "org.apache.kafka.connect.mirror.MirrorMaker"
TRANSLATE = "odradek.compat.TranslateOffsets"
PARTITIONS = 3
RECORDS = 300  # per partition, before MirrorMaker starts; as many again while it runs
TOPIC_CONFIGS = {"retention.ms": "123456789", "max.message.bytes": "500000"}
TIMEOUT_S = 180.0


def prepare() -> None:
    """Compile compat/java (TranslateOffsets) unless this source state was built."""
    java_build.build()


def mm2_properties(primary: str, backup: str, topics: str, groups: str) -> dict[str, str]:
    """The driver's mm2.properties: primary -> backup, fast intervals, RF 3 everywhere."""
    return {
        "clusters": "primary, backup",
        "primary.bootstrap.servers": primary,
        "backup.bootstrap.servers": backup,
        "primary->backup.enabled": "true",
        "backup->primary.enabled": "false",
        "topics": topics,
        "groups": groups,
        "replication.factor": "3",
        "checkpoints.topic.replication.factor": "3",
        "heartbeats.topic.replication.factor": "3",
        "offset-syncs.topic.replication.factor": "3",
        "offset.storage.replication.factor": "3",
        "status.storage.replication.factor": "3",
        "config.storage.replication.factor": "3",
        "refresh.topics.interval.seconds": "2",
        "refresh.groups.interval.seconds": "2",
        "sync.topic.configs.interval.seconds": "2",
        "emit.checkpoints.interval.seconds": "1",
        "emit.heartbeats.interval.seconds": "1",
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": "1",
        # An offset sync for every record: translation exact to the record.
        "offset.lag.max": "0",
    }


def read_topic(config: Mapping[str, str], topic: str) -> dict[int, list[tuple[str, str]]]:
    """Every record of ``topic`` (keys and values), per partition, up to its end now."""
    consumer = Consumer({**config, "group.id": f"reader-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False})
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        records: dict[int, list[tuple[str, str]]] = {p: [] for p in partitions}
        deadline = time.monotonic() + 60
        while any(len(records[p]) < ends[p] for p in partitions) and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                if m.error() is None:
                    records[m.partition()].append(((m.key() or b"").decode(), (m.value() or b"").decode()))
        return records
    finally:
        consumer.close()


def count_records(config: Mapping[str, str], topic: str) -> int:
    """Records in ``topic`` now (end minus start offsets); 0 while it does not exist."""
    consumer = Consumer({**config, "group.id": "counter"})
    try:
        found = consumer.list_topics(topic, timeout=30).topics.get(topic)
        if found is None or found.error is not None:
            return 0
        total = 0
        for p in found.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            total += high - low
        return total
    finally:
        consumer.close()


class Mirror:
    """The two clusters, the topic and groups replicated, MirrorMaker's driver."""

    def __init__(self, primary: LocalCluster, backup: LocalCluster, ctx: SuiteContext) -> None:
        self.primary = primary
        self.backup = backup
        self.ctx = ctx
        run_id = uuid.uuid4().hex[:8]
        self.topic = f"mm2-data-{run_id}"
        self.remote = f"primary.{self.topic}"
        self.done_group = f"mm2-done-{run_id}"  # reads everything once it is mirrored
        self.half_group = f"mm2-half-{run_id}"  # committed half way before MirrorMaker starts
        self.source = SetupClients(primary)
        properties = ctx.path("mm2.properties")
        settings = mm2_properties(primary.bootstrap_servers, backup.bootstrap_servers,
                                  f"mm2-data-{run_id}", f"mm2-.*-{run_id}")
        properties.write_text("".join(f"{k} = {v}\n" for k, v in settings.items()))
        self.driver = JvmService(ctx, "mirror-maker", MIRROR_MAKER, [str(properties)])
        self.backup_config = backup.client_properties()
        self.admin = AdminClient(self.backup_config)

    def seed(self) -> None:
        """The topic with its configs and records, and the half-way group's offsets."""
        self.source.create_topic(self.topic, PARTITIONS, config=TOPIC_CONFIGS)
        for p in range(PARTITIONS):
            self.source.produce(self.topic, RECORDS, partition=p, prefix=f"p{p}-v")
        consumer = Consumer({**self.primary.client_properties(), "group.id": self.half_group})
        try:
            consumer.commit(offsets=[TopicPartition(self.topic, p, RECORDS // 2) for p in range(PARTITIONS)],
                            asynchronous=False)
        finally:
            consumer.close()

    def await_records(self) -> None:
        """Until the remote topic holds what the topic holds, then compare them record by record."""
        want = count_records(self.primary.client_properties(), self.topic)
        await_value(lambda: count_records(self.backup_config, self.remote) >= want or None,
                    f"{want} records in {self.remote}", TIMEOUT_S)
        source = read_topic(self.primary.client_properties(), self.topic)
        copy = read_topic(self.backup_config, self.remote)
        assert sorted(copy) == sorted(source), f"partitions {sorted(copy)}, the source has {sorted(source)}"
        for p, records in source.items():
            assert copy[p] == records, (f"partition {p}: {len(copy[p])} records, the source has {len(records)}; "
                                        f"first difference at {_first_difference(records, copy[p])}")

    def translate(self, group: str) -> dict[tuple[str, int], int]:
        """RemoteClusterUtils.translateOffsets(backup, "primary", group)."""
        done = self.ctx.jvm.run(TRANSLATE, [self.backup.bootstrap_servers, "primary", group],
                                classpath=java_build.classpath(), timeout=120)
        assert done.ok, f"TranslateOffsets {group}: {done.summary()}"
        offsets = {}
        for line in done.stdout.splitlines():
            fields = line.split("\t")
            if fields[0] == "OFFSET" and len(fields) == 4:
                offsets[(fields[1], int(fields[2]))] = int(fields[3])
        return offsets

    def synced_offsets(self, group: str) -> dict[tuple[str, int], int]:
        """The offsets MirrorMaker committed for ``group`` on the backup cluster."""
        admin = self.admin
        request = ConsumerGroupTopicPartitions(group)
        answer = admin.list_consumer_group_offsets([request])[group].result(30)
        return {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions if tp.offset >= 0}


def _first_difference(a: list[tuple[str, str]], b: list[tuple[str, str]]) -> str:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"offset {i}: {y} instead of {x}"
    return f"offset {min(len(a), len(b))} (one ends)"


def run(cluster: LocalCluster, ctx: SuiteContext, quick: bool) -> SuiteResult:
    result = SuiteResult(versions={"MirrorMaker 2": KafkaTools(ctx).version})
    backup = (KafkaRefCluster(ctx.path("backup-cluster"), 3, version=cluster.version, overrides=dict(BROKER_OVERRIDES))
              if isinstance(cluster, KafkaRefCluster)
              else LocalCluster(ctx.path("backup-cluster"), 3, overrides=dict(BROKER_OVERRIDES)))
    mirror: Mirror | None = None
    try:
        backup.start(timeout_s=180)
        mirror = Mirror(cluster, backup, ctx)
        _cases(mirror, result)
    finally:
        if mirror is not None:
            mirror.driver.stop(timeout_s=30)
        mirror = None  # its clients of the backup cluster go before the cluster does
        backup.stop()
    return result


def _cases(m: Mirror, result: SuiteResult) -> None:
    remote_topic = m.remote
    expected = {(remote_topic, p): 2 * RECORDS for p in range(PARTITIONS)}

    def started() -> None:
        m.seed()
        m.driver.start()
        await_value(lambda: count_records(m.backup_config, remote_topic) > 0 or None,
                    f"{remote_topic} on the backup cluster", TIMEOUT_S)

    def topic_and_configs() -> None:
        admin = m.admin
        meta = admin.list_topics(remote_topic, timeout=30).topics[remote_topic]
        assert len(meta.partitions) == PARTITIONS, f"{len(meta.partitions)} partitions"
        resource = ConfigResource(ConfigResource.Type.TOPIC, remote_topic)

        def synced() -> dict[str, str] | None:
            configs = admin.describe_configs([resource])[resource].result(30)
            shown = {k: configs[k].value for k in TOPIC_CONFIGS}
            return shown if shown == TOPIC_CONFIGS else None

        await_value(synced, f"{remote_topic}'s configs {TOPIC_CONFIGS}", TIMEOUT_S, interval_s=2)

    def records() -> None:
        m.await_records()
        for p in range(PARTITIONS):  # and while MirrorMaker runs
            m.source.produce(m.topic, RECORDS, partition=p, prefix=f"p{p}-live")
        m.await_records()
        m.source.commit_group(m.done_group, m.topic, PARTITIONS, 2 * RECORDS * PARTITIONS)

    def checkpoints() -> None:
        await_value(lambda: count_records(m.backup_config, "primary.checkpoints.internal") > 0 or None,
                    "records in primary.checkpoints.internal", TIMEOUT_S)

    def translated() -> None:
        await_value(lambda: m.translate(m.done_group) == expected or None,
                    f"{m.done_group} translated to {expected} (last: {m.translate(m.done_group)})", TIMEOUT_S, 3)
        # A partition with no sync kept at or before the group's offset gets no checkpoint.
        half = m.translate(m.half_group)
        assert set(half) <= set(expected) and all(0 <= t <= RECORDS // 2 for t in half.values()), (
            f"{m.half_group}, committed at {RECORDS // 2}, translated to {half}")
        result.versions["half-way group translated"] = (f"{sorted(half.values())} of {RECORDS // 2} "
                                                        f"({len(half)} of {PARTITIONS} partitions)")

    def synced() -> None:
        for group, want in ((m.done_group, expected), (m.half_group, m.translate(m.half_group))):
            await_value(lambda g=group, w=want: m.synced_offsets(g) == w or None,  # type: ignore[misc]
                        f"{group}'s offsets {want} on the backup cluster", TIMEOUT_S)

    def heartbeats() -> None:
        for topic in ("heartbeats", "primary.heartbeats"):
            first = await_value(lambda t=topic: count_records(m.backup_config, t) or None,  # type: ignore[misc]
                                f"records in {topic} on the backup cluster", TIMEOUT_S)
            await_value(lambda t=topic, n=first: count_records(m.backup_config, t) > n or None,  # type: ignore[misc]
                        f"more records in {topic} (it has {first})", 30)

    result.case("MirrorMaker started, remote topic created", started)
    result.case("topic: partitions and configs", topic_and_configs)
    result.case("records: all, in order, per partition", records)
    result.case("checkpoints flow", checkpoints)
    result.case("offsets translated (RemoteClusterUtils)", translated)
    result.case("group offsets synced to the backup cluster", synced)
    result.case("heartbeats flow", heartbeats)
