"""odradek.admin.consumer_group_command without a cluster: a small in-memory GroupService, the
command's checks, parsing and what it prints (the integration test compares it with Kafka's
own tool on a real broker)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pytest

from odradek.admin.consumer_group_command import (
    GroupAction,
    GroupCommandError,
    GroupCommandOptions,
    ResetSpec,
    parse_datetime,
    parse_duration_ms,
    parse_topic_partitions,
    run_group_command,
)
from odradek.admin.group_admin import (
    EARLIEST,
    LATEST,
    GroupDescription,
    MemberDescription,
    TopicPartition,
)
from odradek.protocol.errors import ErrorCode, KafkaError, for_code

TP = TopicPartition


class FakeGroups:
    """Groups, their committed offsets and a topic's log ends, in memory."""

    def __init__(self) -> None:
        self.states = {"idle": "Empty", "busy": "Stable"}
        self.members = {"busy": (MemberDescription("m-1", "c-1", "/10.0.0.1", (("t", 0), ("t", 1))),)}
        self.offsets: dict[str, dict[TP, int]] = {"idle": {("t", 0): 5, ("t", 1): 7}, "busy": {("t", 0): 1}}
        self.log = {("t", 0): (2, 10), ("t", 1): (0, 8)}  # earliest, latest
        self.committed: list[tuple[str, dict[TP, int]]] = []

    async def list_groups(self, states: Iterable[str] = ()) -> list[tuple[str, str, str]]:
        wanted = set(states)
        return [(g, "consumer", s) for g, s in self.states.items() if not wanted or s in wanted]

    async def describe_group(self, group_id: str) -> GroupDescription:
        return GroupDescription(group_id, self.states.get(group_id, "Dead"), "consumer", "range",
                                self.members.get(group_id, ()), (1, "localhost", 9092))

    async def committed_offsets(self, group_id: str) -> dict[TP, int]:
        return dict(self.offsets.get(group_id, {}))

    async def partitions(self, topics: Sequence[str]) -> dict[str, list[int]] | KafkaError:
        if any(t != "t" for t in topics):
            return for_code(ErrorCode.unknown_topic_or_partition)("UNKNOWN_TOPIC_OR_PARTITION")
        return {"t": [0, 1]}

    async def list_offsets(self, partitions: Iterable[TP], timestamp: int) -> dict[TP, int | ErrorCode]:
        found: dict[TP, int | ErrorCode] = {}
        for tp in partitions:
            if tp not in self.log:
                found[tp] = ErrorCode.unknown_topic_or_partition
            else:
                earliest, latest = self.log[tp]
                found[tp] = earliest if timestamp == EARLIEST else latest if timestamp == LATEST else -1
        return found

    async def commit_offsets(self, group_id: str, offsets: Mapping[TP, int]) -> dict[TP, ErrorCode]:
        self.committed.append((group_id, dict(offsets)))
        self.offsets.setdefault(group_id, {}).update(offsets)
        return dict.fromkeys(offsets, ErrorCode.none)

    async def delete_group(self, group_id: str) -> ErrorCode:
        if group_id not in self.states:
            return ErrorCode.group_id_not_found
        if self.states[group_id] != "Empty":
            return ErrorCode.non_empty_group
        del self.states[group_id]
        return ErrorCode.none

    async def delete_offsets(self, group_id: str, partitions: Sequence[TP]
                             ) -> tuple[ErrorCode, dict[TP, ErrorCode]]:
        if group_id not in self.states:
            return ErrorCode.group_id_not_found, {}
        subscribed = group_id == "busy"
        return ErrorCode.none, {tp: ErrorCode.group_subscribed_to_topic if subscribed else ErrorCode.none
                                for tp in partitions}


def run(service: FakeGroups, action: GroupAction, **options: object) -> tuple[list[str], list[str]]:
    opts = GroupCommandOptions(action, **options)  # type: ignore[arg-type]
    opts.check()
    out: list[str] = []
    err: list[str] = []
    asyncio.run(run_group_command(service, opts, out.append, err.append))
    return out, err


def refused(action: GroupAction, **options: object) -> str:
    with pytest.raises(GroupCommandError) as raised:
        GroupCommandOptions(action, **options).check()  # type: ignore[arg-type]
    return str(raised.value)


def test_kafkas_option_checks() -> None:
    assert refused(GroupAction.DESCRIBE) == "Option [describe] takes one of these options: [group], [all-groups]"
    assert refused(GroupAction.LIST, groups=("g",)) == 'Option "[group]" can\'t be used with option "[list]"'
    assert "takes at most one" in refused(GroupAction.DESCRIBE, groups=("g",), members=True, offsets=True)
    assert refused(GroupAction.RESET_OFFSETS, groups=("g",), reset=((ResetSpec.TO_EARLIEST, None),)) == \
        "One of the reset scopes should be defined: --all-topics, --topic."
    assert "only accepts one of [execute] and [dry-run]" in refused(
        GroupAction.RESET_OFFSETS, groups=("g",), all_topics=True, reset=((ResetSpec.TO_EARLIEST, None),),
        dry_run=True, execute=True)
    assert refused(GroupAction.RESET_OFFSETS, groups=("g",), all_topics=True,
                   reset=((ResetSpec.SHIFT_BY, "x"),)) == "Cannot parse argument 'x' of option shift-by"
    assert refused(GroupAction.DELETE_OFFSETS, groups=("g",)) == \
        "Option [delete-offsets] takes the following options: [group], [topic]"
    assert "Invalid state list 'stable'" in refused(GroupAction.LIST, state="stable")


def test_parsing_of_topics_times_and_durations() -> None:
    assert parse_topic_partitions("t:0,2") == ("t", [0, 2])
    assert parse_topic_partitions("t") == ("t", None)
    assert parse_datetime("2020-01-01T00:00:00.000Z") == 1577836800000
    assert parse_datetime("2020-01-01T01:00:00.000+01:00") == 1577836800000
    assert parse_duration_ms("PT1H30M") == 5_400_000
    assert parse_duration_ms("P1DT0.5S") == 86_400_500
    assert parse_duration_ms("-PT1S") == -1000


def test_list_in_kafkas_order_and_with_states() -> None:
    groups = FakeGroups()
    # (as the broker listed them: cg-empty and cg-del-a share a bucket, kept in that order)
    names = ("cg-empty", "cg-del-a", "cg-del-b", "cg-off-a", "cg-off-b", "cg-reset-a", "cg-reset-b", "cg-live")
    groups.states = dict.fromkeys(names, "Empty")
    out, _ = run(groups, GroupAction.LIST)
    # The order Kafka 2.8's tool printed these in (its admin client's HashMap of group ids).
    assert out == ["cg-reset-a", "cg-reset-b", "cg-empty", "cg-del-a", "cg-off-a", "cg-del-b", "cg-off-b", "cg-live"]
    out, _ = run(FakeGroups(), GroupAction.LIST, state="Stable")
    assert out == ["GROUP           STATE", "busy            Stable"]


def test_describe_offsets_with_lag_and_members() -> None:
    out, err = run(FakeGroups(), GroupAction.DESCRIBE, groups=("idle",))
    assert out[1].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                              "HOST", "CLIENT-ID"]
    assert sorted(line.split() for line in out[2:]) == [["idle", "t", "0", "5", "10", "5", "-", "-", "-"],
                                                       ["idle", "t", "1", "7", "8", "1", "-", "-", "-"]]
    assert err == ["", "Consumer group 'idle' has no active members."]
    out, _ = run(FakeGroups(), GroupAction.DESCRIBE, groups=("busy",))
    # An assigned partition without a commit shows "-" for its offset and lag.
    assert [line.split()[2:6] for line in out[2:]] == [["0", "1", "10", "9"], ["1", "-", "8", "-"]]
    out, _ = run(FakeGroups(), GroupAction.DESCRIBE, groups=("busy",), members=True, verbose=True)
    assert out[2].split() == ["busy", "m-1", "/10.0.0.1", "c-1", "2", "t(0,1)"]
    out, _ = run(FakeGroups(), GroupAction.DESCRIBE, groups=("busy",), state="")
    assert out[2].split() == ["busy", "localhost:9092", "(1)", "range", "Stable", "1"]
    out, _ = run(FakeGroups(), GroupAction.DESCRIBE, groups=("gone",))
    assert out == ["", "Error: Consumer group 'gone' does not exist."]


def test_reset_offsets_dry_run_clamps_and_execute_commits() -> None:
    groups = FakeGroups()
    out, err = run(groups, GroupAction.RESET_OFFSETS, groups=("idle",), all_topics=True,
                   reset=((ResetSpec.SHIFT_BY, "-4"),))
    assert {tuple(line.split()[2:]) for line in out[2:]} == {("0", "2"), ("1", "3")}
    assert "New offset (1) is lower than earliest offset for topic partition t-0. Value will be set to 2" in err[1]
    assert groups.committed == []  # a dry run
    run(groups, GroupAction.RESET_OFFSETS, groups=("idle",), topics=("t:1",), reset=((ResetSpec.TO_LATEST, None),),
        execute=True)
    assert groups.committed == [("idle", {("t", 1): 8})]
    out, _ = run(groups, GroupAction.RESET_OFFSETS, groups=("busy",), all_topics=True,
                 reset=((ResetSpec.TO_EARLIEST, None),), execute=True)
    assert out[1] == "Error: Assignments can only be reset if the group 'busy' is inactive, but the current state " \
                     "is Stable."
    out, _ = run(groups, GroupAction.RESET_OFFSETS, groups=("idle",), topics=("t",),
                 reset=((ResetSpec.TO_OFFSET, "4"),), export=True)
    assert sorted(out[0].splitlines()) == ["t,0,4", "t,1,4"]


def test_reset_offsets_from_file(tmp_path: Path) -> None:
    plan = tmp_path / "plan.csv"
    plan.write_text("t,0,6\nt,1,2\n")
    groups = FakeGroups()
    run(groups, GroupAction.RESET_OFFSETS, groups=("idle",), reset=((ResetSpec.FROM_FILE, str(plan)),),
        execute=True)
    assert groups.committed == [("idle", {("t", 0): 6, ("t", 1): 2})]


def test_delete_and_delete_offsets_print_kafkas_lines() -> None:
    out, _ = run(FakeGroups(), GroupAction.DELETE, groups=("idle",))
    assert out == ["Deletion of requested consumer groups ('idle') was successful."]
    out, _ = run(FakeGroups(), GroupAction.DELETE, groups=("busy", "idle"))
    assert out[1:3] == ["Error: Deletion of some consumer groups failed:",
                        "* Group 'busy' could not be deleted due to: java.util.concurrent.ExecutionException: "
                        "org.apache.kafka.common.errors.GroupNotEmptyException: The group is not empty."]
    assert out[-1] == "These consumer groups were deleted successfully: 'idle'"
    out, _ = run(FakeGroups(), GroupAction.DELETE_OFFSETS, groups=("idle",), topics=("t:0",))
    assert out[0] == "Request succeed for deleting offsets with topic t:0 group idle"
    assert out[-1].split() == ["t", "0", "Successful"]
    out, _ = run(FakeGroups(), GroupAction.DELETE_OFFSETS, groups=("busy",), topics=("t", "nope"))
    assert out[1] == "Error: Encounter some partition level error, see the follow-up details:"
    statuses = {tuple(line.split()[:2]): line.split()[2] for line in out[4:]}
    assert statuses == {("nope", "Not"): "Provided", ("t", "0"): "Error:", ("t", "1"): "Error:"}
    out, _ = run(FakeGroups(), GroupAction.DELETE_OFFSETS, groups=("gone",), topics=("t",))
    assert out[1] == "Error: 'gone' does not exist."
