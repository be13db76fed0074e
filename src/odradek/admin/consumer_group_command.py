"""kafka-consumer-groups.sh (Kafka 2.8's ConsumerGroupCommand) over a small ``GroupService``,
without the terminal: ``--list``, ``--describe`` (offsets and lag, ``--members``, ``--state``),
``--reset-offsets``, ``--delete`` and ``--delete-offsets``.

Output goes through two callables, ``out`` (what Kafka prints on stdout, including its
``Error: ...`` lines: Kafka reports a missing group or a failed deletion there, exit status 0)
and ``err`` (its warnings on stderr).  Tables are Kafka's, column for column; rows come in the
order Kafka's tool prints them, which follows the hash order of the Java maps its admin client
fills (:mod:`odradek.admin.java_order`) where Kafka does not sort.  Refused input raises
:class:`GroupCommandError` with Kafka's message (the command line: one line, exit status 1).
"""

from __future__ import annotations

import csv
import datetime
import io
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Final, Protocol

from odradek.admin.group_admin import EARLIEST, LATEST, GroupDescription, TopicPartition
from odradek.admin.java_errors import java_exception
from odradek.admin.java_order import hash_map_order, java_string_hash
from odradek.common import now_ms
from odradek.protocol.errors import ErrorCode, KafkaError

__all__ = ["GroupAction", "GroupCommandError", "GroupCommandOptions", "GroupService", "ResetSpec",
           "run_group_command"]

Output = Callable[[str], None]
MISSING: Final = "-"
STATES: Final = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")
_INACTIVE: Final = frozenset({"Empty", "Dead"})
EXECUTE_WARNING: Final = (
    "WARN: No action will be performed as the --execute option is missing.In a future major release, the default "
    "behavior of this command will be to prompt the user before executing the reset rather than doing a dry run. You "
    "should add the --dry-run option explicitly if you are scripting this command and want to keep the current "
    "default behavior without prompting.")


class GroupCommandError(Exception):
    """Refused input (Kafka's IllegalArgumentException or option checks); one line."""


class CommandFailed(Exception):
    """What Kafka's tool reports as ``Error: Executing consumer group command failed due to
    <message>`` on stdout (its catch-all), exit status 0."""


def _failed(code: int) -> CommandFailed:
    return CommandFailed(java_exception(code))


class GroupAction(Enum):
    LIST = "--list"
    DESCRIBE = "--describe"
    DELETE = "--delete"
    RESET_OFFSETS = "--reset-offsets"
    DELETE_OFFSETS = "--delete-offsets"


class ResetSpec(Enum):
    """The reset scenarios; the value is the option."""

    TO_DATETIME = "to-datetime"
    BY_DURATION = "by-duration"
    TO_EARLIEST = "to-earliest"
    TO_LATEST = "to-latest"
    TO_OFFSET = "to-offset"
    SHIFT_BY = "shift-by"
    FROM_FILE = "from-file"
    TO_CURRENT = "to-current"


class GroupService(Protocol):
    """What the command asks of the cluster (odradek.admin.group_admin.GroupAdminConnection)."""

    def list_groups(self, states: Iterable[str] = ()) -> Awaitable[list[tuple[str, str, str]]]: ...

    def describe_group(self, group_id: str) -> Awaitable[GroupDescription]: ...

    def committed_offsets(self, group_id: str) -> Awaitable[dict[TopicPartition, int]]: ...

    def partitions(self, topics: Sequence[str]) -> Awaitable[dict[str, list[int]] | KafkaError]: ...

    def list_offsets(self, partitions: Iterable[TopicPartition], timestamp: int
                     ) -> Awaitable[dict[TopicPartition, int | ErrorCode]]: ...

    def commit_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]
                       ) -> Awaitable[dict[TopicPartition, ErrorCode]]: ...

    def delete_group(self, group_id: str) -> Awaitable[ErrorCode]: ...

    def delete_offsets(self, group_id: str, partitions: Sequence[TopicPartition]
                       ) -> Awaitable[tuple[ErrorCode, dict[TopicPartition, ErrorCode]]]: ...


@dataclass(frozen=True, slots=True)
class GroupCommandOptions:
    """What kafka-consumer-groups.sh was asked (Kafka's ConsumerGroupCommandOptions)."""

    action: GroupAction
    groups: tuple[str, ...] = ()
    all_groups: bool = False
    topics: tuple[str, ...] = ()
    all_topics: bool = False
    members: bool = False
    offsets: bool = False
    state: str | None = None  # --state: None if absent, "" without a value
    verbose: bool = False
    reset: tuple[tuple[ResetSpec, str | None], ...] = ()  # the scenarios given, with their values
    dry_run: bool = False
    execute: bool = False
    export: bool = False

    def check(self) -> None:
        """ConsumerGroupCommandOptions.checkArgs, with Kafka's messages."""
        action = self.action
        if action is not GroupAction.DESCRIBE and (self.members or self.offsets or self.verbose):
            flags = [f for f, on in (("members", self.members), ("offsets", self.offsets),
                                     ("verbose", self.verbose)) if on]
            raise GroupCommandError(f"Option(s) [{', '.join(flags)}] are unavailable given other options on the "
                                    "command line")
        if self.state is not None and action not in (GroupAction.DESCRIBE, GroupAction.LIST):
            raise GroupCommandError("Option(s) [state] are unavailable given other options on the command line")
        if action is GroupAction.LIST:
            if self.groups or self.all_groups:
                raise GroupCommandError('Option "[group]" can\'t be used with option "[list]"')
            list_states(self.state)  # refuses an invalid state list
        elif action in (GroupAction.DESCRIBE, GroupAction.DELETE, GroupAction.RESET_OFFSETS):
            if not self.groups and not self.all_groups:
                raise GroupCommandError(f"Option [{action.value[2:]}] takes one of these options: [group], "
                                        "[all-groups]")
            if action is GroupAction.DESCRIBE and sum((self.members, self.offsets, self.state is not None)) > 1:
                raise GroupCommandError("Option [describe] takes at most one of these options: [members], [offsets], "
                                        "[state]")
            if action is GroupAction.DELETE and self.topics:
                raise GroupCommandError("The consumer does not support topic-specific offset deletion from a "
                                        "consumer group.")
        if action is GroupAction.DELETE_OFFSETS:
            if not self.groups or not self.topics:
                raise GroupCommandError("Option [delete-offsets] takes the following options: [group], [topic]")
            if len(self.groups) > 1:
                raise GroupCommandError("Found multiple arguments for option group, but you asked for only one")
        if action is GroupAction.RESET_OFFSETS:
            self._check_reset()
        elif self.reset or self.dry_run or self.execute or self.export or self.all_topics:
            raise GroupCommandError("Option(s) [reset-offsets] options are only valid with --reset-offsets")

    def _check_reset(self) -> None:
        if self.dry_run and self.execute:
            raise GroupCommandError("Option [reset-offsets] only accepts one of [execute] and [dry-run]")
        if not self.reset:
            raise GroupCommandError("Option '[reset-offsets]' requires one of the following scenarios: "
                                    f"{', '.join(f'[{s.value}]' for s in ResetSpec)}")
        if len(self.reset) > 1:
            raise GroupCommandError(f'Option "[{self.reset[0][0].value}]" can\'t be used with option '
                                    f'"[{self.reset[1][0].value}]"')
        if self.reset[0][0] is not ResetSpec.FROM_FILE and not self.all_topics and not self.topics:
            raise GroupCommandError("One of the reset scopes should be defined: --all-topics, --topic.")
        spec, value = self.reset[0]
        if spec in (ResetSpec.TO_OFFSET, ResetSpec.SHIFT_BY):
            try:
                int(value or "")
            except ValueError:
                raise GroupCommandError(f"Cannot parse argument '{value}' of option {spec.value}") from None


def list_states(text: str | None) -> tuple[str, ...]:
    """``--state`` of ``--list``: states by Kafka's names (case matters, as in 2.8)."""
    if not text:
        return ()
    states = tuple(s.strip() for s in text.split(","))
    if any(s not in STATES for s in states):
        raise GroupCommandError(f"Invalid state list '{text}'. Valid states are: {', '.join(STATES)}")
    return states


def _topic_partition_hash(tp: TopicPartition) -> int:
    """TopicPartition.hashCode."""
    return (31 * (31 + tp[1]) + java_string_hash(tp[0])) & 0xFFFFFFFF


def _hash_ordered(partitions: Iterable[TopicPartition], capacity: int | None = None) -> list[TopicPartition]:
    items = list(partitions)
    return hash_map_order(items, [_topic_partition_hash(tp) for tp in items], capacity)


async def run_group_command(service: GroupService, opts: GroupCommandOptions, out: Output, err: Output) -> None:
    """Carry out ``opts`` (checked) against ``service``."""
    action = opts.action
    if action is GroupAction.LIST:
        await _list(service, opts, out)
        return
    if action is GroupAction.DELETE_OFFSETS:
        await _delete_offsets(service, opts.groups[0], opts.topics, out)
        return
    groups = list(dict.fromkeys(opts.groups))
    if opts.all_groups:
        groups = [g for g, protocol, _ in await service.list_groups() if protocol in ("consumer", "")]
    try:
        if action is GroupAction.DESCRIBE:
            await _describe(service, opts, sorted(set(groups)), out, err)
        elif action is GroupAction.DELETE:
            await _delete(service, groups, out)
        else:
            if not opts.dry_run and not opts.execute:
                err(EXECUTE_WARNING)
            await _reset(service, opts, groups, out, err)
    except CommandFailed as e:
        out("")
        out(f"Error: Executing consumer group command failed due to {e}")
    except KafkaError as e:  # a refusal the admin client raises (authorization, say)
        out("")
        out(f"Error: Executing consumer group command failed due to {java_exception(e.code)}")


# --- list ------------------------------------------------------------------------------------------

async def _list(service: GroupService, opts: GroupCommandOptions, out: Output) -> None:
    by_group = {g: state for g, protocol, state in await service.list_groups(list_states(opts.state))
                if protocol in ("consumer", "")}
    # Kafka's admin client gathers the listings in a HashMap keyed by group id.
    listed = hash_map_order(list(by_group.items()), [java_string_hash(g) for g in by_group])
    if opts.state is None:
        for group, _ in listed:
            out(group)
        return
    width = max([15, *(len(g) for g, _ in listed)])
    out(f"{'GROUP':<{width}} STATE")
    for group, state in listed:
        out(f"{group:<{width}} {state}")


# --- describe --------------------------------------------------------------------------------------

def _print_state_note(group: str, state: str, out: Output, err: Output) -> bool:
    """ConsumerGroupCommand.shouldPrintMemberState's notes; False for a group that does not exist."""
    if state == "Dead":
        out("")
        out(f"Error: Consumer group '{group}' does not exist.")
        return False
    if state == "Empty":
        err("")
        err(f"Consumer group '{group}' has no active members.")
    elif state in ("PreparingRebalance", "CompletingRebalance"):
        err("")
        err(f"Warning: Consumer group '{group}' is rebalancing.")
    return True


async def _describe(service: GroupService, opts: GroupCommandOptions, groups: list[str], out: Output,
                    err: Output) -> None:
    for group in groups:
        description = await service.describe_group(group)
        if opts.members:
            rows = len(description.members)
            if _print_state_note(group, description.state, out, err) and rows:
                _print_members(description, opts.verbose, out)
        elif opts.state is not None:
            if _print_state_note(group, description.state, out, err):
                _print_state(description, out)
        else:
            offset_rows = await _offset_rows(service, description)
            if _print_state_note(group, description.state, out, err) and offset_rows:
                _print_offsets(offset_rows, out)


async def _offset_rows(service: GroupService, description: GroupDescription) -> list[tuple[str, ...]]:
    """ConsumerGroupCommand.collectGroupsOffsets: members' partitions (members with the most
    first, each one's by partition number), then committed partitions no member has."""
    group = description.group_id
    committed = await service.committed_offsets(group)
    assigned: list[tuple[TopicPartition, tuple[str, str, str]]] = []
    members = sorted((m for m in description.members if m.assignment), key=lambda m: -len(m.assignment))
    for member in members:
        capacity = max(int(len(member.assignment) / 0.75) + 1, 16)  # new HashSet<>(collection)
        for tp in sorted(_hash_ordered(member.assignment, capacity), key=lambda tp: tp[1]):
            assigned.append((tp, (member.member_id, member.host, member.client_id)))
    taken = {tp for tp, _ in assigned}
    unassigned = [tp for tp in _hash_ordered(committed) if tp not in taken]
    # Partitions no member has come in the committed-offsets map's order (Kafka 2.8 does not
    # sort them; checked side by side with its tool for a few partitions).
    rows_of = assigned + [(tp, (MISSING, MISSING, MISSING)) for tp in unassigned]
    ends = await service.list_offsets([tp for tp, _ in rows_of], LATEST) if rows_of else {}
    rows = []
    for tp, member_columns in rows_of:
        end = ends.get(tp)
        current = committed.get(tp)
        known_end = end if isinstance(end, int) and not isinstance(end, ErrorCode) and end >= 0 else None
        lag = known_end - current if known_end is not None and current is not None else None
        rows.append((group, tp[0], str(tp[1]), _or_missing(current), _or_missing(known_end), _or_missing(lag),
                     *member_columns))
    return rows


def _or_missing(value: int | None) -> str:
    return MISSING if value is None else str(value)


def _print_offsets(rows: list[tuple[str, ...]], out: Output) -> None:
    group_w = max([15, *(len(r[0]) for r in rows)])
    topic_w = max([15, *(len(r[1]) for r in rows)])
    member_w = max([15, *(len(r[6]) for r in rows)])
    host_w = max([15, *(len(r[7]) for r in rows)])

    def line(*columns: str) -> str:
        g, t, p, current, end, lag, member, host, client = columns
        return (f"{g:<{group_w}} {t:<{topic_w}} {p:<10} {current:<15} {end:<15} {lag:<15} {member:<{member_w}} "
                f"{host:<{host_w}} {client}")

    out("")
    out(line("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
             "CLIENT-ID"))
    for row in rows:
        out(line(*row))


def _print_members(description: GroupDescription, verbose: bool, out: Output) -> None:
    group, members = description.group_id, description.members
    group_w = max(15, len(group))
    member_w = max([15, *(len(m.member_id) for m in members)])
    host_w = max([15, *(len(m.host) for m in members)])
    client_w = max([15, *(len(m.client_id) for m in members)])

    def line(*columns: str) -> str:
        text = (f"{columns[0]:<{group_w}} {columns[1]:<{member_w}} {columns[2]:<{host_w}} {columns[3]:<{client_w}} "
                f"{columns[4]:<15} ")
        return text + columns[5] if verbose else text

    out("")
    out(line("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"))
    for m in members:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in m.assignment:
            by_topic.setdefault(topic, []).append(partition)
        assignment = ",".join(sorted(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in by_topic.items()))
        out(line(group, m.member_id, m.host, m.client_id, str(len(m.assignment)), assignment or MISSING))


def _print_state(description: GroupDescription, out: Output) -> None:
    node_id, host, port = description.coordinator
    coordinator = f"{host}:{port} ({node_id})"
    width = max(25, len(coordinator))  # Kafka sizes the first (group) column by the coordinator's

    def line(*c: str) -> str:
        return f"{c[0]:<{width}} {c[1]:<25} {c[2]:<20} {c[3]:<15} {c[4]}"

    out("")
    out(line("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"))
    out(line(description.group_id, coordinator, description.assignment_strategy, description.state,
             str(len(description.members))))


# --- reset offsets ---------------------------------------------------------------------------------

_PARTITIONS_SPEC = re.compile(r"([^:]+):([0-9]+(?:,[0-9]+)*)")


def parse_topic_partitions(topic_arg: str) -> tuple[str, list[int] | None]:
    """``topic`` or ``topic:0,1,2`` (--topic of --reset-offsets and --delete-offsets)."""
    match = _PARTITIONS_SPEC.fullmatch(topic_arg)
    if match is None:
        return topic_arg, None
    return match[1], [int(p) for p in match[2].split(",")]


def parse_datetime(text: str) -> int:
    """Kafka's Utils.getDateTime: ``yyyy-MM-ddTHH:mm:ss.SSS`` with an optional zone (``Z``,
    ``+hh:mm``), else the local time zone; milliseconds since the epoch."""
    if "T" not in text:
        raise CommandFailed("Error parsing timestamp. It does not contain a 'T' according to ISO8601 format")
    value = text[:-1] + "+00:00" if text.endswith("Z") else text
    try:
        parsed = datetime.datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%f%z")
    except ValueError:
        try:
            parsed = datetime.datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%f").astimezone()
        except ValueError:
            raise CommandFailed(f"Unparseable date: \"{text}\"") from None
    return int(parsed.timestamp() * 1000)


_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?(?:T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?"
                       r"(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?", re.IGNORECASE)


def parse_duration_ms(text: str) -> int:
    """java.time.Duration.parse (``PnDTnHnMn.nS``), in milliseconds."""
    match = _DURATION.fullmatch(text)
    if match is None or match.group(0).upper().rstrip("T").endswith("P") or text.upper().endswith("T"):
        raise CommandFailed("Text cannot be parsed to a Duration")
    sign, days, hours, minutes, seconds, fraction = match.groups()
    total = ((int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes or 0)) * 60_000 + int(seconds or 0) * 1000
    if fraction:
        total += int(fraction.ljust(9, "0")[:3]) * (-1 if (seconds or "").startswith("-") else 1)
    return -total if sign == "-" else total


def _read_reset_plan(path: str, group_ids: Sequence[str]) -> dict[str, dict[TopicPartition, int]]:
    """--from-file: ``topic,partition,offset`` (one group) or ``group,topic,partition,offset`` lines."""
    try:
        with open(path, newline="") as f:
            rows = [row for row in csv.reader(f) if row]
    except OSError as e:
        raise GroupCommandError(f"Cannot read {path}: {e.strerror or e}") from None
    plan: dict[str, dict[TopicPartition, int]] = {}
    for row in rows:
        try:
            if len(row) == 3:
                if len(group_ids) != 1:
                    raise GroupCommandError("Invalid CSV: a row without a group for several groups")
                group, (topic, partition, offset) = group_ids[0], row
            else:
                group, topic, partition, offset = row
            plan.setdefault(group, {})[(topic, int(partition))] = int(offset)
        except ValueError:
            raise GroupCommandError(f"Invalid CSV line: {','.join(row)}") from None
    return plan


async def _partitions_to_reset(service: GroupService, opts: GroupCommandOptions, group: str
                               ) -> list[TopicPartition]:
    if opts.all_topics:
        return _hash_ordered(await service.committed_offsets(group))
    explicit: list[TopicPartition] = []
    whole: list[str] = []
    for arg in opts.topics:
        topic, partitions = parse_topic_partitions(arg)
        if partitions is None:
            whole.append(topic)
        else:
            explicit += [(topic, p) for p in partitions]
    if whole:
        found = await service.partitions(whole)
        if isinstance(found, KafkaError):
            raise _failed(found.code)
        ordered = hash_map_order(list(found.items()), [java_string_hash(t) for t in found])
        explicit += [(topic, p) for topic, ps in ordered for p in ps]
    return explicit


async def _offsets_to_reset(service: GroupService, opts: GroupCommandOptions, group: str,
                            partitions: list[TopicPartition], err: Output) -> dict[TopicPartition, int]:
    spec, value = opts.reset[0]
    if spec in (ResetSpec.TO_EARLIEST, ResetSpec.TO_LATEST):
        return await _known(service, partitions, EARLIEST if spec is ResetSpec.TO_EARLIEST else LATEST)
    if spec in (ResetSpec.TO_DATETIME, ResetSpec.BY_DURATION):
        timestamp = parse_datetime(value or "") if spec is ResetSpec.TO_DATETIME else \
            now_ms() - parse_duration_ms(value or "")
        found = await service.list_offsets(partitions, timestamp)
        missing = [tp for tp in partitions if not isinstance(found.get(tp), int) or found[tp] < 0]
        latest = await _known(service, missing, LATEST) if missing else {}
        return {tp: latest[tp] if tp in latest else int(found[tp]) for tp in partitions}
    committed = await service.committed_offsets(group)
    if spec is ResetSpec.TO_CURRENT:
        latest = await _known(service, [tp for tp in partitions if tp not in committed], LATEST)
        return {tp: committed[tp] if tp in committed else latest[tp] for tp in partitions}
    requested: dict[TopicPartition, int] = {}
    for tp in partitions:
        if spec is ResetSpec.TO_OFFSET:
            requested[tp] = int(value or 0)
        elif tp not in committed:
            raise GroupCommandError(f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there is no current "
                                    "committed offset")
        else:
            requested[tp] = committed[tp] + int(value or 0)
    return await _in_range(service, requested, err)


async def _known(service: GroupService, partitions: list[TopicPartition], timestamp: int
                 ) -> dict[TopicPartition, int]:
    """Each partition's offset for ``timestamp``; the first failure raised as Kafka's tool reports it."""
    found = await service.list_offsets(partitions, timestamp) if partitions else {}
    for tp in partitions:
        offset = found.get(tp, ErrorCode.unknown_topic_or_partition)
        if isinstance(offset, ErrorCode):
            raise _failed(offset)
    return {tp: int(found[tp]) for tp in partitions}


async def _in_range(service: GroupService, requested: dict[TopicPartition, int], err: Output
                    ) -> dict[TopicPartition, int]:
    """ConsumerGroupCommand.checkOffsetsRange: offsets outside the log move to its ends (warned)."""
    earliest = await _known(service, list(requested), EARLIEST)
    latest = await _known(service, list(requested), LATEST)
    checked = {}
    for (topic, partition), offset in requested.items():
        low, high = earliest[(topic, partition)], latest[(topic, partition)]
        if offset > high:
            err(f"WARN New offset ({offset}) is higher than latest offset for topic partition {topic}-{partition}. "
                f"Value will be set to {high}")
            offset = high
        elif offset < low:
            err(f"WARN New offset ({offset}) is lower than earliest offset for topic partition {topic}-{partition}. "
                f"Value will be set to {low}")
            offset = low
        checked[(topic, partition)] = offset
    return checked


async def _reset(service: GroupService, opts: GroupCommandOptions, groups: list[str], out: Output,
                 err: Output) -> None:
    plan_from_file = None
    if opts.reset[0][0] is ResetSpec.FROM_FILE:
        plan_from_file = _read_reset_plan(opts.reset[0][1] or "", groups)
    results: dict[str, dict[TopicPartition, int]] = {}
    for group in groups:
        state = (await service.describe_group(group)).state
        if state not in _INACTIVE:
            out("")
            out(f"Error: Assignments can only be reset if the group '{group}' is inactive, but the current state is "
                f"{state}.")
            results[group] = {}
            continue
        if plan_from_file is not None:
            offsets = plan_from_file.get(group, {})
        else:
            offsets = await _offsets_to_reset(service, opts, group, await _partitions_to_reset(service, opts, group),
                                              err)
        if opts.execute:
            failed = [code for code in (await service.commit_offsets(group, offsets)).values() if code != ErrorCode.none]
            if failed:
                raise _failed(failed[0])
        results[group] = offsets
    if opts.export:
        out(_csv(results, single_group=len(opts.groups) == 1))
        return
    if results:
        out("")
        out(f"{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} {'NEW-OFFSET':<15}")
    for group, offsets in results.items():
        for (topic, partition), offset in offsets.items():
            out(f"{group:<30} {topic:<30} {partition!s:<10} {offset!s:<15}")


def _csv_field(value: str) -> str:
    """Jackson's CSV quoting, as Kafka's export writes: values longer than 24 characters, or
    holding a separator, quote or line break, in double quotes."""
    if len(value) > 24 or any(c in value for c in ',"\r\n'):
        return '"' + value.replace('"', '""') + '"'
    return value


def _csv(results: Mapping[str, Mapping[TopicPartition, int]], *, single_group: bool) -> str:
    lines = io.StringIO()
    for group, offsets in results.items():
        for (topic, partition), offset in offsets.items():
            fields = [topic, str(partition), str(offset)] if single_group else [group, topic, str(partition),
                                                                                 str(offset)]
            lines.write(",".join(_csv_field(f) for f in fields) + "\n")
    return lines.getvalue()


# --- delete ----------------------------------------------------------------------------------------

async def _delete(service: GroupService, groups: list[str], out: Output) -> None:
    results = {group: await service.delete_group(group) for group in groups}
    ordered = hash_map_order(list(results), [java_string_hash(g) for g in results], len(results))
    deleted = [g for g in ordered if results[g] == ErrorCode.none]
    failed = [g for g in ordered if results[g] != ErrorCode.none]
    if not failed:
        out(f"Deletion of requested consumer groups ({', '.join(f'{g!r}' for g in deleted)}) was successful.")
        return
    out("")
    out("Error: Deletion of some consumer groups failed:")
    for group in failed:
        out(f"* Group '{group}' could not be deleted due to: java.util.concurrent.ExecutionException: "
            f"{java_exception(results[group])}")
    if deleted:
        out("")
        out(f"These consumer groups were deleted successfully: {', '.join(f'{g!r}' for g in deleted)}")


_DELETE_OFFSETS_TOP: Final = {
    ErrorCode.invalid_group_id: "'{group}' is not valid.",
    ErrorCode.group_id_not_found: "'{group}' does not exist.",
    ErrorCode.group_authorization_failed: "Access to '{group}' is not authorized.",
    ErrorCode.non_empty_group: "Deleting offsets of a consumer group '{group}' is forbidden if the group is not empty.",
    ErrorCode.group_subscribed_to_topic: "Encounter some partition level error, see the follow-up details:",
    ErrorCode.topic_authorization_failed: "Encounter some partition level error, see the follow-up details:",
    ErrorCode.unknown_topic_or_partition: "Encounter some partition level error, see the follow-up details:",
}


async def _delete_offsets(service: GroupService, group: str, topics: Sequence[str], out: Output) -> None:
    """ConsumerGroupCommand.deleteOffsets (KIP-496)."""
    outcome: dict[TopicPartition, ErrorCode] = {}
    partitions: list[TopicPartition] = []
    whole: list[str] = []
    for arg in topics:
        topic, listed = parse_topic_partitions(arg)
        if listed is None:
            whole.append(topic)
        else:
            partitions += [(topic, p) for p in listed]
    for topic in whole:
        found = await service.partitions([topic])
        if isinstance(found, KafkaError):
            outcome[(topic, -1)] = found.code
        else:
            partitions += [(topic, p) for p in found[topic]]
    top_level, by_partition = await service.delete_offsets(group, list(dict.fromkeys(partitions)))
    for tp in partitions:
        outcome[tp] = by_partition.get(tp, top_level)
    if top_level == ErrorCode.none and any(code != ErrorCode.none for code in by_partition.values()):
        top_level = next(code for code in by_partition.values() if code != ErrorCode.none)
    if top_level == ErrorCode.none:
        out(f"Request succeed for deleting offsets with topic {', '.join(topics)} group {group}")
    else:
        out("")
        template = _DELETE_OFFSETS_TOP.get(top_level)
        out("Error: " + (template.format(group=group) if template else
                         f"Encounter some unknown error: {top_level.name.upper()}"))
    out("")
    out(f"{'TOPIC':<30} {'PARTITION':<15} {'STATUS':<15}")
    for (topic, partition), code in sorted(outcome.items(), key=lambda item: item[0][0] + str(item[0][1])):
        status = "Successful" if code == ErrorCode.none else f"Error: {java_exception(code)}"
        out(f"{topic:<30} {partition if partition >= 0 else 'Not Provided'!s:<15} {status:<15}")
