"""Kafka 2.8's own command-line tools (kafka-configs.sh's ConfigCommand,
kafka-consumer-groups.sh's ConsumerGroupCommand, ...) run from the jars jvm/fetch caches, so a
test can compare what odradek's version of a tool prints with what Kafka's prints on the same
cluster.  A test is skipped when the jars or Java are missing."""

from __future__ import annotations

import subprocess

import pytest

from odradek.local.zookeeper import ZooKeeperError, find_java
from odradek.perf.kafka_ref import KafkaRefError, jvm_classpath

__all__ = ["kafka_tool"]

# What kafka-run-class.sh would give a tool, trimmed to start quickly: a small heap, the client
# compiler only, and Kafka's tools' log4j warnings silenced (only stdout is compared).
_JVM_OPTIONS = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Dlog4j.configuration=file:/dev/null")


def kafka_tool(main_class: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run Kafka 2.8's ``main_class`` (e.g. ``kafka.admin.ConfigCommand``) with ``args``."""
    try:
        classpath = ":".join(str(jar) for jar in jvm_classpath("kafka-2.8"))
        java = find_java()
    except (KafkaRefError, ZooKeeperError) as e:
        pytest.skip(f"Kafka 2.8's tools are not here: {e}")
    return subprocess.run([java, *_JVM_OPTIONS, "-cp", classpath, main_class, *args], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)
