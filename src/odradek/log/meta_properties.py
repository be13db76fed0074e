"""Kafka's ``meta.properties``: which broker and cluster a log directory belongs to.

Written as Java's ``Properties.store`` does (a comment line, a date line, ``key=value``)::

    #
    #Thu Jan 01 00:00:00 UTC 2026
    version=0
    broker.id=1
    cluster.id=Z3Cy2zWmSmqo5zBlc0H1fQ

A directory that names another broker or cluster is refused at start-up, so a disk moved
between brokers or clusters cannot silently serve the wrong data.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from odradek.config import parse_properties
from odradek.log.checkpoints import write_atomically

META_PROPERTIES = "meta.properties"


class InconsistentBrokerMetadataError(RuntimeError):
    """meta.properties disagrees with this broker's id or cluster id."""


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    broker_id: int
    cluster_id: str | None = None


def read_meta_properties(log_dir: Path) -> BrokerMetadata | None:
    """The metadata stored in ``log_dir``, or None if there is no meta.properties."""
    try:
        # ISO-8859-1, as java.util.Properties reads it: any bytes are text (fuzz/log_recovery.py
        # found a non-UTF-8 file stopping the broker with a UnicodeDecodeError).
        props = parse_properties((log_dir / META_PROPERTIES).read_bytes().decode("latin-1"))
    except FileNotFoundError:
        return None
    if props.get("version", "0") != "0":
        raise InconsistentBrokerMetadataError(
            f"{log_dir / META_PROPERTIES}: unsupported version {props.get('version')}")
    try:
        broker_id = int(props["broker.id"])
    except (KeyError, ValueError):
        raise InconsistentBrokerMetadataError(
            f"{log_dir / META_PROPERTIES}: missing or invalid broker.id") from None
    return BrokerMetadata(broker_id, props.get("cluster.id") or None)


def write_meta_properties(log_dir: Path, metadata: BrokerMetadata) -> None:
    """Write ``meta.properties`` atomically."""
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
    lines = ["#", f"#{stamp}", "version=0", f"broker.id={metadata.broker_id}"]
    if metadata.cluster_id:
        lines.append(f"cluster.id={metadata.cluster_id}")
    write_atomically(log_dir / META_PROPERTIES, ("\n".join(lines) + "\n").encode())


def check_and_write_meta_properties(log_dirs: Iterable[Path], broker_id: int,
                                    cluster_id: str | None) -> None:
    """Refuse directories that belong to another broker or cluster; write the file where
    it is missing or lacks the cluster id."""
    for log_dir in log_dirs:
        found = read_meta_properties(log_dir)
        if found is not None:
            if found.broker_id != broker_id:
                raise InconsistentBrokerMetadataError(
                    f"configured broker.id {broker_id} doesn't match stored broker.id "
                    f"{found.broker_id} in meta.properties of {log_dir}")
            if cluster_id and found.cluster_id and found.cluster_id != cluster_id:
                raise InconsistentBrokerMetadataError(
                    f"the cluster id {cluster_id} doesn't match the stored cluster id "
                    f"{found.cluster_id} in meta.properties of {log_dir}: the broker is trying "
                    "to join the wrong cluster")
            if found.cluster_id or not cluster_id:
                continue
        write_meta_properties(log_dir, BrokerMetadata(broker_id, cluster_id))
