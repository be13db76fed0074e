"""odradek: a Kafka-compatible, replicated, partitioned commit log (ZooKeeper-mode control plane)."""

__version__ = "0.1.0"
