"""kafka-reassign-partitions.sh's --execute and --verify (admin/reassign_partitions.py) over an
in-memory ZooKeeper: what is checked before ``/admin/reassign_partitions`` is written, what is
printed, and how --verify reads progress."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from odradek.admin.reassign_partitions import (
    ReassignmentError,
    execute_reassignment,
    parse_reassignment_json,
    verify_reassignment,
)
from odradek.zk.client import NodeExistsError
from odradek.zk.zk_data import ReassignPartitionsZNode, TopicAssignment

PATH = ReassignPartitionsZNode.path


class FakeZk:
    """The znodes a reassignment reads and writes, in memory."""

    def __init__(self, brokers: list[int], topics: dict[str, TopicAssignment]) -> None:
        self.brokers = brokers
        self.topics = topics
        self.data: dict[str, bytes] = {}

    async def exists(self, path: str) -> Any:
        return object() if path in self.data else None

    async def get(self, path: str) -> tuple[bytes, Any] | None:
        return (self.data[path], None) if path in self.data else None

    async def create(self, path: str, data: bytes = b"", *, makepath: bool = False) -> str:
        if path in self.data:
            raise NodeExistsError(path)
        self.data[path] = data
        return path

    async def get_all_broker_ids(self) -> list[int]:
        return list(self.brokers)

    async def get_topic_assignment(self, topic: str) -> tuple[TopicAssignment, int] | None:
        return (self.topics[topic], 0) if topic in self.topics else None


def plan(*entries: tuple[str, int, list[int]]) -> str:
    return json.dumps({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": r}
                                                    for t, p, r in entries]})


def zk_with_topic() -> FakeZk:
    return FakeZk([0, 1, 2, 3], {"t": TopicAssignment({0: [0, 1], 1: [1, 2]})})


def execute(zk: FakeZk, text: str) -> list[str]:
    lines: list[str] = []
    asyncio.run(execute_reassignment(zk, parse_reassignment_json(text), lines.append))
    return lines


def test_parse_reads_the_plan() -> None:
    assert parse_reassignment_json(plan(("t", 0, [2, 3]), ("t", 1, [3]))) == {("t", 0): [2, 3], ("t", 1): [3]}


@pytest.mark.parametrize(("text", "message"), [
    ("{", "the reassignment JSON is not valid"),
    ('{"partitions": [{"topic": "t"}]}', "the reassignment JSON is not valid"),
    ('{"partitions": []}', "the reassignment JSON lists no partitions"),
    (plan(("t", 0, [1]), ("t", 0, [2])), "Partition t-0 appears more than once"),
])
def test_parse_refuses_a_bad_plan(text: str, message: str) -> None:
    with pytest.raises(ReassignmentError) as raised:
        parse_reassignment_json(text)
    assert message in str(raised.value)


def test_execute_prints_the_rollback_plan_and_writes_the_request() -> None:
    zk = zk_with_topic()
    lines = execute(zk, plan(("t", 1, [3, 2]), ("t", 0, [2, 3])))
    assert lines == [
        "Current partition replica assignment\n",
        ReassignPartitionsZNode.encode({("t", 0): [0, 1], ("t", 1): [1, 2]}).decode(),
        "\nSave this to use as the --reassignment-json-file option during rollback",
        "Successfully started partition reassignments for t-0,t-1",
    ]
    assert ReassignPartitionsZNode.decode(zk.data[PATH]) == {("t", 0): [2, 3], ("t", 1): [3, 2]}


@pytest.mark.parametrize(("text", "message"), [
    (plan(("t", 5, [1])), "Partition t-5 does not exist"),
    (plan(("nope", 0, [1])), "Partition nope-0 does not exist"),
    (plan(("t", 0, [])), "Partition t-0 has an empty replica list"),
    (plan(("t", 0, [1, 1])), "Partition t-0 has duplicate replicas [1, 1]"),
    (plan(("t", 0, [1, 9, 7])), "Partition t-0: unknown broker id(s) [7, 9]"),
])
def test_execute_refuses_a_bad_plan_and_writes_nothing(text: str, message: str) -> None:
    zk = zk_with_topic()
    with pytest.raises(ReassignmentError) as raised:
        execute(zk, text)
    assert str(raised.value) == message
    assert zk.data == {}


def test_execute_refuses_while_another_reassignment_runs() -> None:
    zk = zk_with_topic()
    zk.data[PATH] = b"running"
    with pytest.raises(ReassignmentError, match=r"^There is an existing assignment running\.$"):
        execute(zk, plan(("t", 0, [2])))
    assert zk.data[PATH] == b"running"


def test_verify_reports_each_partition() -> None:
    zk = FakeZk([0, 1, 2], {"t": TopicAssignment({0: [2], 1: [1, 2], 2: [0, 1], 3: [0]},
                                                 adding_replicas={2: [1]})})
    zk.data[PATH] = ReassignPartitionsZNode.encode({("t", 1): [0]})
    wanted = {("t", 0): [2], ("t", 1): [0], ("t", 2): [0, 1], ("t", 3): [1]}
    lines: list[str] = []
    assert asyncio.run(verify_reassignment(zk, wanted, lines.append)) is False
    assert lines == [
        "Status of partition reassignment:",
        "Reassignment of partition t-0 is complete.",
        "Reassignment of partition t-1 is still in progress.",
        "Reassignment of partition t-2 is still in progress.",
        "Reassignment of partition t-3 failed: its replicas are [0].",
    ]
    lines.clear()
    assert asyncio.run(verify_reassignment(zk, {("t", 0): [2]}, lines.append)) is True
