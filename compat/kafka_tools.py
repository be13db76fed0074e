"""Kafka's command-line tools, run from Kafka 3.9's jars (``jvm/kafka-3.9-tools``) by their
main classes with the JVM options their ``bin/kafka-*.sh`` scripts give them.

``KafkaTools(ctx).run("kafka-topics", "--bootstrap-server", ..., "--list")`` runs
``bin/kafka-topics.sh``'s class; on a secured cluster the administrator's client properties
are passed with the option the tool takes them by (``--command-config``, ``--producer.config``,
...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from compat.context import SuiteContext
from compat.jvm import TOOL_HEAP, JvmRun
from odradek.local.security import ADMIN
from odradek.perf.kafka_ref import jvm_classpath

__all__ = ["TOOLS", "KafkaTools", "Tool"]

PROJECT = "kafka-3.9-tools"


@dataclass(frozen=True)
class Tool:
    main: str
    config_option: str | None  # how it takes a client properties file (None: it connects to nothing)
    heap: tuple[str, ...] = TOOL_HEAP


# bin/<script>.sh -> its class (Kafka 3.9).  The console and perf tools' scripts raise the heap.
TOOLS: dict[str, Tool] = {
    "kafka-topics": Tool("org.apache.kafka.tools.TopicCommand", "--command-config"),
    "kafka-configs": Tool("kafka.admin.ConfigCommand", "--command-config"),
    "kafka-acls": Tool("kafka.admin.AclCommand", "--command-config"),
    "kafka-consumer-groups": Tool("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--command-config"),
    "kafka-reassign-partitions": Tool("org.apache.kafka.tools.reassign.ReassignPartitionsCommand", "--command-config"),
    "kafka-leader-election": Tool("org.apache.kafka.tools.LeaderElectionCommand", "--admin.config"),
    "kafka-log-dirs": Tool("org.apache.kafka.tools.LogDirsCommand", "--command-config"),
    "kafka-delete-records": Tool("org.apache.kafka.tools.DeleteRecordsCommand", "--command-config"),
    "kafka-get-offsets": Tool("org.apache.kafka.tools.GetOffsetShell", "--command-config"),
    "kafka-transactions": Tool("org.apache.kafka.tools.TransactionsCommand", "--command-config"),
    "kafka-console-producer": Tool("kafka.tools.ConsoleProducer", "--producer.config", ("-Xmx512M",)),
    "kafka-console-consumer": Tool("org.apache.kafka.tools.consumer.ConsoleConsumer", "--consumer.config",
                                   ("-Xmx512M",)),
    "kafka-producer-perf-test": Tool("org.apache.kafka.tools.ProducerPerformance", "--producer.config",
                                     ("-Xmx512M",)),
    "kafka-consumer-perf-test": Tool("org.apache.kafka.tools.ConsumerPerformance", "--consumer.config",
                                     ("-Xmx512M",)),
    "kafka-broker-api-versions": Tool("kafka.admin.BrokerApiVersionsCommand", "--command-config"),
    "kafka-dump-log": Tool("kafka.tools.DumpLogSegments", None),
    "kafka-streams-application-reset": Tool("org.apache.kafka.tools.StreamsResetter", "--config-file"),
}


class KafkaTools:
    """Runs Kafka's tools for one suite run (output in the run's jvm.log)."""

    def __init__(self, ctx: SuiteContext) -> None:
        self.ctx = ctx
        self.classpath = jvm_classpath(PROJECT)

    @property
    def version(self) -> str:
        """Kafka's version of the tools' jars (e.g. ``3.9.2``)."""
        return _version(self.classpath)

    def run(self, tool: str, *args: str, input: str | None = None, timeout: float = 120.0,
            user: str = ADMIN) -> JvmRun:
        """Run ``bin/<tool>.sh args`` as ``user`` (on a secured cluster)."""
        spec = TOOLS[tool]
        config = self.ctx.command_config(user)
        extra = [spec.config_option, str(config)] if config is not None and spec.config_option else []
        return self.ctx.jvm.run(spec.main, [*args, *extra], classpath=self.classpath, heap=spec.heap,
                                input=input, timeout=timeout)


def _version(classpath: list[Path]) -> str:
    for jar in classpath:
        if match := re.fullmatch(r"kafka-tools-(\d[\w.-]*)\.jar", jar.name):
            return match.group(1)
    return "?"
