"""Partition reassignment over ZooKeeper (Kafka's kafka.admin.ReassignPartitionsCommand,
``--zookeeper`` mode): ``--execute`` writes ``/admin/reassign_partitions`` for the controller
to act on, ``--verify`` reports how far it got.

Output lines go through a callable the caller passes; failures raise ReassignmentError.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from odradek.common import TopicPartition
from odradek.zk.client import NodeExistsError
from odradek.zk.zk_data import ReassignPartitionsZNode, TopicAssignment

__all__ = ["ReassignmentError", "execute_reassignment", "parse_reassignment_json", "verify_reassignment"]

Output = Callable[[str], None]
Reassignment = Mapping[tuple[str, int], list[int]]


class ReassignmentZk(Protocol):
    """The KafkaZkClient calls a reassignment makes."""

    async def exists(self, path: str) -> Any: ...

    async def get(self, path: str) -> tuple[bytes, Any] | None: ...

    async def create(self, path: str, data: bytes = b"", *, makepath: bool = False) -> str: ...

    async def get_all_broker_ids(self) -> list[int]: ...

    async def get_topic_assignment(self, topic: str) -> tuple[TopicAssignment, int] | None: ...


class ReassignmentError(Exception):
    """A reassignment that cannot start (bad JSON, unknown partitions or brokers, one already running)."""


def parse_reassignment_json(text: str) -> dict[tuple[str, int], list[int]]:
    """The ``{"partitions": [{"topic", "partition", "replicas"}, ...]}`` file's wanted replicas."""
    try:
        data = json.loads(text)
        entries = data["partitions"]
        result = {}
        for e in entries:
            key = TopicPartition(str(e["topic"]), int(e["partition"]))
            replicas = [int(b) for b in e["replicas"]]
            if key in result:
                raise ReassignmentError(f"Partition {key.topic}-{key.partition} appears more than once")
            result[key] = replicas
    except (ValueError, KeyError, TypeError) as e:
        raise ReassignmentError(f"the reassignment JSON is not valid: {e}") from None
    if not result:
        raise ReassignmentError("the reassignment JSON lists no partitions")
    return result


async def execute_reassignment(zk: ReassignmentZk, wanted: Reassignment, out: Output) -> None:
    """Check every partition and broker, print the current assignment (for a rollback), then
    start the reassignment; refused while another one runs."""
    if await zk.exists(ReassignPartitionsZNode.path) is not None:
        raise ReassignmentError("There is an existing assignment running.")
    brokers = set(await zk.get_all_broker_ids())
    current: dict[tuple[str, int], list[int]] = {}
    for (topic, partition), replicas in wanted.items():
        entry = await zk.get_topic_assignment(topic)
        if entry is None or partition not in entry[0].partitions:
            raise ReassignmentError(f"Partition {topic}-{partition} does not exist")
        if not replicas:
            raise ReassignmentError(f"Partition {topic}-{partition} has an empty replica list")
        if len(set(replicas)) != len(replicas):
            raise ReassignmentError(f"Partition {topic}-{partition} has duplicate replicas {replicas}")
        unknown = sorted(set(replicas) - brokers)
        if unknown:
            raise ReassignmentError(f"Partition {topic}-{partition}: unknown broker id(s) {unknown}")
        current[(topic, partition)] = list(entry[0].partitions[partition])
    out("Current partition replica assignment\n")
    out(ReassignPartitionsZNode.encode(current).decode())
    out("\nSave this to use as the --reassignment-json-file option during rollback")
    try:
        await zk.create(ReassignPartitionsZNode.path, ReassignPartitionsZNode.encode(wanted), makepath=True)
    except NodeExistsError:
        raise ReassignmentError("There is an existing assignment running.") from None
    out("Successfully started partition reassignments for "
        + ",".join(f"{t}-{p}" for t, p in sorted(wanted)))


async def verify_reassignment(zk: ReassignmentZk, wanted: Reassignment, out: Output) -> bool:
    """Print each partition's status; True if every one is complete."""
    got = await zk.get(ReassignPartitionsZNode.path)
    pending = ReassignPartitionsZNode.decode(got[0]) if got else {}
    out("Status of partition reassignment:")
    all_done = True
    for (topic, partition), replicas in sorted(wanted.items()):
        entry = await zk.get_topic_assignment(topic)
        actual = list(entry[0].partitions.get(partition, [])) if entry else []
        reassigning = bool(entry and (entry[0].adding_replicas.get(partition) or entry[0].removing_replicas.get(partition)))
        if (topic, partition) in pending or reassigning:
            out(f"Reassignment of partition {topic}-{partition} is still in progress.")
            all_done = False
        elif actual == replicas:
            out(f"Reassignment of partition {topic}-{partition} is complete.")
        else:
            out(f"Reassignment of partition {topic}-{partition} failed: its replicas are {actual}.")
            all_done = False
    return all_done
