"""The data source against a SASL_SSL cluster: Spark's Kafka-source security options
(``kafka.security.protocol``, ``kafka.sasl.*``, ``kafka.ssl.*`` in Java's names) reach the
clients it builds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from odradek.local.cluster import LocalCluster
from odradek.local.security import ADMIN
from support import create_topic, produce, unique_chroot


@pytest.fixture(scope="module")
def secure_cluster(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path_factory.mktemp("spark-secure"), 1,
                           zookeeper_connect=unique_chroot(zookeeper, "spark-secure"), security="sasl_ssl")
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def test_batch_read_with_java_style_security_options(spark, secure_cluster: LocalCluster) -> None:
    assert secure_cluster.security is not None
    create_topic(secure_cluster, "secure-spark", 2, 1)
    produce(secure_cluster.bootstrap_servers, "secure-spark",
            [(i % 2, None, f"v{i}".encode()) for i in range(10)], **secure_cluster.security.librdkafka_properties())
    java = secure_cluster.security.java_properties(ADMIN)
    rows = (spark.read.format("odradek")
            .option("kafka.bootstrap.servers", secure_cluster.bootstrap_servers)
            .options(**{f"kafka.{k}": v for k, v in java.items()})
            .option("subscribe", "secure-spark")
            .load().collect())
    assert sorted(r.value for r in rows) == sorted(f"v{i}".encode() for i in range(10))
