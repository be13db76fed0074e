"""Apache Kafka's own brokers, in ZooKeeper mode, as the reference odradek is measured and
checked against: ``KafkaRefCluster`` is a ``LocalCluster`` whose brokers are Kafka's JVMs
(``kafka.Kafka server.properties``), so a benchmark or test written for a local odradek
cluster takes it as it is.

The jars are those of the pinned Maven projects under ``jvm/`` (``kafka-3.9``: Kafka 3.9,
the last line with ZooKeeper mode; ``kafka-2.8``: the line odradek follows), which
``sh scripts/bootstrap --test`` copies into a cache outside the repository (``jvm/fetch``).
Each broker runs with the JVM options Kafka's start scripts give it (``jvm_settings()``), the
same broker settings a local odradek cluster gets (``LOCAL_DEFAULTS`` plus the replication
factors capped at the broker count), and any ``overrides`` (``inter.broker.protocol.version``
for a cluster that mixes Kafka and odradek brokers on one ZooKeeper chroot, for instance).
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from odradek.local.cluster import BrokerProcess, LocalCluster
from odradek.local.zookeeper import find_java

__all__ = ["HEAP_OPTS", "PERFORMANCE_OPTS", "VERSIONS", "KafkaRefCluster", "KafkaRefError", "jvm_cache",
           "jvm_classpath", "jvm_settings"]

# The Maven project (jvm/<project>/pom.xml) of each Kafka line a cluster can run.
VERSIONS = {"3.9": "kafka-3.9", "2.8": "kafka-2.8"}

# kafka-server-start.sh's KAFKA_HEAP_OPTS.
HEAP_OPTS = ("-Xmx1G", "-Xms1G")
# kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS (the same in 2.8 and 3.9): G1 with short pauses.
PERFORMANCE_OPTS = ("-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
                    "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true")
# kafka-run-class.sh's KAFKA_JMX_OPTS (local JMX only: no port is opened).
JMX_OPTS = ("-Dcom.sun.management.jmxremote", "-Dcom.sun.management.jmxremote.authenticate=false",
            "-Dcom.sun.management.jmxremote.ssl=false")

_REPO_JVM = Path(__file__).resolve().parents[3] / "jvm"

# Kafka's own log4j layout, in the broker's directory: everything to stdout (server.log, as an
# odradek broker's), the controller, state-change and log cleaner loggers to files of their own
# (log-cleaner.log, where an odradek broker writes its cleaner's summaries too).
_LOG4J = """\
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.appender.controller=org.apache.log4j.FileAppender
log4j.appender.controller.File={dir}/controller.log
log4j.appender.controller.layout=org.apache.log4j.PatternLayout
log4j.appender.controller.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.appender.stateChange=org.apache.log4j.FileAppender
log4j.appender.stateChange.File={dir}/state-change.log
log4j.appender.stateChange.layout=org.apache.log4j.PatternLayout
log4j.appender.stateChange.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.appender.cleaner=org.apache.log4j.FileAppender
log4j.appender.cleaner.File={dir}/log-cleaner.log
log4j.appender.cleaner.layout=org.apache.log4j.PatternLayout
log4j.appender.cleaner.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka=INFO
log4j.logger.kafka.network.RequestChannel$=WARN
log4j.logger.kafka.request.logger=WARN
log4j.logger.kafka.controller=TRACE, controller
log4j.additivity.kafka.controller=false
log4j.logger.state.change.logger=INFO, stateChange
log4j.additivity.state.change.logger=false
log4j.logger.kafka.log.LogCleaner=INFO, cleaner
log4j.additivity.kafka.log.LogCleaner=false
"""


class KafkaRefError(RuntimeError):
    """Kafka's jars or Java are missing, or the jars are not those the poms pin."""


def jvm_cache() -> Path:
    """Where jvm/fetch puts each project's jars (``<cache>/<project>/lib``)."""
    configured = os.environ.get("ODRADEK_JVM_CACHE")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "odradek" / "jvm"


def jvm_classpath(project: str) -> list[Path]:
    """The jars of ``jvm/<project>`` (``kafka-3.9``, ``kafka-2.8``, ``kafka-3.9-tools``,
    ``spark-sql-kafka``) as jvm/fetch left them; KafkaRefError when they are missing or were
    fetched for other poms than this checkout's."""
    cached = jvm_cache()
    jars = sorted((cached / project / "lib").glob("*.jar"))
    fix = "run `sh scripts/bootstrap --test` (jvm/fetch)"
    if not jars:
        raise KafkaRefError(f"no jars of jvm/{project} in {cached}: {fix}")
    for pom in (Path("pom.xml"), Path(project) / "pom.xml"):
        if (_REPO_JVM / pom).exists() and (_REPO_JVM / pom).read_bytes() != _read_or_none(cached / pom):
            raise KafkaRefError(f"the jars in {cached} were fetched for another jvm/{pom}: {fix}")
    return jars


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


@functools.cache
def _java_version() -> str:
    """The first line of ``java -version`` (e.g. ``openjdk version "17.0.15" 2025-04-15``)."""
    done = subprocess.run([find_java(), "-version"], capture_output=True, text=True, timeout=60)
    return (done.stderr or done.stdout).strip().splitlines()[0]


def jvm_settings() -> str:
    """The Java and the JVM options a reference broker runs with, in one line for a
    benchmark's header."""
    return (f"{_java_version()}; {' '.join(HEAP_OPTS + PERFORMANCE_OPTS)} "
            "(kafka-server-start.sh's heap, kafka-run-class.sh's G1 flags)")


class KafkaRefCluster(LocalCluster):
    """``num_brokers`` Apache Kafka brokers of ``version`` ("3.9" or "2.8") on an embedded
    ZooKeeper of their own, or on ``zookeeper_connect`` (a chroot included); ``security`` as a
    local cluster's (``odradek up --security``: the same listeners, users and authorizer). The
    same constructor, life cycle (context manager, ``start_broker`` / ``stop_broker`` /
    ``kill_broker``, ``wait_for_brokers``) and cluster.json as ``LocalCluster``; each broker's
    log.dirs is ``<dir>/broker-<id>/data`` and its logs are beside it."""

    def __init__(self, directory: str | os.PathLike[str], num_brokers: int = 3, *, version: str = "3.9",
                 racks: Sequence[str | None] | None = None, zookeeper_connect: str | None = None,
                 zookeeper_port: int = 0, ports: Sequence[int] | None = None,
                 overrides: Mapping[str, str] | None = None, first_broker_id: int = 0,
                 zookeepers: int = 1, security: str | None = None) -> None:
        if version not in VERSIONS:
            raise ValueError(f"no Kafka {version!r} here: choose one of {', '.join(VERSIONS)}")
        super().__init__(directory, num_brokers, racks=racks, zookeeper_connect=zookeeper_connect,
                         zookeeper_port=zookeeper_port, ports=ports, overrides=overrides,
                         first_broker_id=first_broker_id, zookeepers=zookeepers, security=security)
        self.version = version
        self.start_timeout_s = 180.0  # a JVM takes longer to start than an odradek broker
        self.classpath = jvm_classpath(VERSIONS[version])

    @property
    def kafka_version(self) -> str:
        """The full version of the broker's jar (e.g. ``3.9.2``)."""
        core = next(j.name for j in self.classpath if j.name.startswith("kafka_2.13-"))
        return core.removeprefix("kafka_2.13-").removesuffix(".jar")

    def describe(self) -> str:
        """What this cluster runs, in one line (for a benchmark's header)."""
        brokers = f"{len(self.brokers)} broker{'s' if len(self.brokers) != 1 else ''}"
        return f"Apache Kafka {self.kafka_version} (ZooKeeper mode), {brokers}; {jvm_settings()}"

    def broker_command(self, broker: BrokerProcess) -> list[str]:
        """The broker's argv: kafka-run-class.sh's, with the broker's directory as LOG_DIR (its
        log4j.properties is written there first)."""
        home = broker.config_path.parent
        (home / "log4j.properties").write_text(_LOG4J.format(dir=home))
        gc_log = f"-Xlog:gc*:file={home / 'kafkaServer-gc.log'}:time,tags:filecount=10,filesize=100M"
        return [find_java(), *HEAP_OPTS, *PERFORMANCE_OPTS, gc_log, *JMX_OPTS,
                f"-Dlog4j.configuration=file:{home / 'log4j.properties'}", f"-Dkafka.logs.dir={home}",
                "-cp", os.pathsep.join(str(j) for j in self.classpath),
                "kafka.Kafka", str(broker.config_path)]

    def cluster_json(self) -> dict[str, object]:
        return {**super().cluster_json(), "kafka": self.kafka_version, "jvm": jvm_settings()}
