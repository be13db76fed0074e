"""Kafka's ``partition.metadata`` file: the topic id a partition directory belongs to.

Format (Kafka 2.8+)::

    version: 0
    topic_id: <topic id as Kafka prints it: url-safe base64, no padding>

A directory whose topic id differs from the one asked for belongs to an older topic of the
same name; the caller must not reuse it (INCONSISTENT_TOPIC_ID).
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Iterable
from pathlib import Path

PARTITION_METADATA_FILE = "partition.metadata"


def topic_id_string(topic_id: str | uuid.UUID) -> str:
    """Kafka's text form of a topic id (``Uuid.toString``: url-safe base64, no padding)."""
    if isinstance(topic_id, uuid.UUID):
        return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()
    return topic_id


def read_topic_id(directory: Path) -> str | None:
    """The topic id recorded in ``directory``, or None if there is no (valid) file."""
    try:
        text = (directory / PARTITION_METADATA_FILE).read_bytes().decode()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:  # not a valid file either (fuzz/log_recovery.py found it)
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    if fields.get("version", "").strip() != "0":
        return None
    return fields.get("topic_id", "").strip() or None


def write_topic_ids(entries: Iterable[tuple[Path, str]]) -> None:
    """Record many topic ids at once, each atomically, with two file-system syncs in all
    instead of two fsyncs per file: write every temp file, sync, rename them into place,
    sync. Directories that vanished meanwhile (renamed for deletion) are skipped. The
    syncs also make newly created directories durable, so they run even with nothing to write."""
    staged: list[tuple[Path, Path]] = []
    for directory, topic_id in entries:
        path = directory / PARTITION_METADATA_FILE
        tmp = path.with_name(path.name + ".tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(f"version: 0\ntopic_id: {topic_id}\n".encode())
        except FileNotFoundError:
            continue
        staged.append((tmp, path))
    os.sync()
    for tmp, path in staged:
        try:
            os.replace(tmp, path)
        except FileNotFoundError:
            continue
    os.sync()
