"""``odradek reassign-partitions --bootstrap-server``: Kafka 2.8's ReassignPartitionsCommand in
its admin-client mode (KIP-455): ``--generate``, ``--execute`` (with ``--throttle`` and
``--replica-alter-log-dirs-throttle``), ``--verify``, ``--cancel`` and ``--list``.

Throttles, as Kafka's tool sets them: the rates on every broker that sends or receives data in
the move, ``leader.replication.throttled.replicas`` (the current replicas) and
``follower.replication.throttled.replicas`` (the added ones) on each moving topic.  ``--verify``
and ``--cancel`` remove them all once no reassignment of the file is in progress (unless
``--preserve-throttles``).  Output lines go through the ``out`` callable; what cannot be done
raises PartitionAdminError.

A replica whose ``log_dirs`` entry is an absolute path (not ``any``) is also moved to that log
directory on its broker (AlterReplicaLogDirs, KIP-113), as Kafka's tool does: ``--execute``
asks again every 100 ms until each broker has taken its moves or ``--timeout`` passed (a
replica that a reassignment adds exists only once its broker has created it), with
``--replica-alter-log-dirs-throttle`` set on those brokers; ``--verify`` reports each move
(DescribeLogDirs); ``--cancel`` moves the replicas whose move is in progress back.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping, Sequence, Set

from odradek.admin.log_dirs import LogDirsAdmin, LogDirsCommandError
from odradek.admin.log_dirs import TopicPartitionReplica as Replica
from odradek.admin.partition_admin import (
    BROKER_THROTTLES,
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    LOG_DIR_RATE,
    TOPIC_THROTTLES,
    PartitionAdmin,
    PartitionAdminError,
    exception_text,
    follower_throttles,
    leader_throttles,
    list_output,
    reassigning_brokers,
    reassignment_json,
)
from odradek.assignment import assign_replicas_to_brokers
from odradek.common import TopicPartition
from odradek.protocol.errors import ApiError, ErrorCode

__all__ = ["cancel", "execute", "generate", "list_reassignments", "parse_plan", "parse_topics_to_move", "verify"]

Output = Callable[[str], None]
Plan = Mapping[TopicPartition, Sequence[int]]
Moves = Mapping[Replica, str]  # a replica -> the log directory it moves to on its broker
ANY_LOG_DIR = "any"
_MOVE_RETRY_S = 0.1


def parse_plan(text: str) -> tuple[dict[TopicPartition, list[int]], dict[Replica, str]]:
    """A reassignment JSON file (``{"version": 1, "partitions": [{"topic", "partition",
    "replicas", "log_dirs"?}]}``) as Kafka 2.8's parsePartitionReassignmentData checks it:
    the partitions' replicas, and the replicas to move to a named log directory."""
    try:
        data = json.loads(text)
    except ValueError:
        raise PartitionAdminError("The input string is not a valid JSON") from None
    if not isinstance(data, dict) or data.get("version", 1) != 1:
        raise PartitionAdminError("Not supported version field value")
    plan: dict[TopicPartition, list[int]] = {}
    moves: dict[Replica, str] = {}
    try:
        for entry in data.get("partitions") or ():
            tp = TopicPartition(str(entry["topic"]), int(entry["partition"]))
            replicas = [int(b) for b in entry["replicas"]]
            dirs = [str(d) for d in entry.get("log_dirs", [ANY_LOG_DIR] * len(replicas))]
            if len(dirs) != len(replicas):
                raise PartitionAdminError(f"Size of replicas list {replicas} is different from size of log dirs "
                                          f"list {dirs} for partition {tp.topic}-{tp.partition}")
            moves.update({Replica(tp.topic, tp.partition, b): d for b, d in zip(replicas, dirs, strict=True)
                          if d != ANY_LOG_DIR})
            if tp in plan:
                raise PartitionAdminError(f"Partition reassignment contains duplicate topic partitions: "
                                          f"{tp.topic}-{tp.partition}")
            plan[tp] = replicas
    except (KeyError, TypeError, ValueError):
        raise PartitionAdminError("The input string is not a valid JSON") from None
    if not plan:
        raise PartitionAdminError("Partition reassignment list cannot be empty")
    for tp, replicas in plan.items():
        if not replicas:
            raise PartitionAdminError("Partition replica list cannot be empty")
        if len(set(replicas)) != len(replicas):
            raise PartitionAdminError(f"Partition replica lists may not contain duplicate entries: "
                                      f"{tp.topic}-{tp.partition} contains {','.join(map(str, replicas))}")
    return plan, moves


def parse_topics_to_move(text: str) -> list[str]:
    """``--topics-to-move-json-file``'s ``{"topics": [{"topic": "foo"}], "version": 1}``."""
    try:
        topics = [str(t["topic"]) for t in json.loads(text)["topics"]]
    except (ValueError, KeyError, TypeError):
        raise PartitionAdminError("The input string is not a valid JSON") from None
    duplicates = sorted({t for t in topics if topics.count(t) > 1})
    if duplicates:
        raise PartitionAdminError(f"List of topics to reassign contains duplicate entries: {','.join(duplicates)}")
    return topics


def _name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def _replica_order(replica: Replica) -> tuple[int, str, int]:
    """Kafka's tool lists replicas by broker, then topic and partition."""
    return replica.broker_id, replica.topic, replica.partition


def _replica_names(replicas: Sequence[Replica] | Set[Replica]) -> str:
    """Java's TopicPartitionReplica.toString of each, in Kafka's tool's order."""
    return ",".join(f"{r.topic}-{r.partition}-{r.broker_id}" for r in sorted(replicas, key=_replica_order))


async def generate(admin: PartitionAdmin, topics: Sequence[str], brokers: Sequence[int], out: Output) -> None:
    """Print the current assignment of ``topics`` and a proposal placing them on ``brokers``
    (Kafka's rack-unaware assignReplicasToBrokers, from a random start)."""
    if len(set(brokers)) != len(brokers):
        raise PartitionAdminError(f"Broker list contains duplicate entries: {','.join(map(str, brokers))}")
    view = await admin.cluster([])
    unknown = [b for b in brokers if b not in view.brokers]
    if unknown:
        raise PartitionAdminError(f"Unknown broker id {unknown[0]}")
    current = await admin.assignments(topics)
    missing = [t for t in topics if not any(tp.topic == t for tp in current)]
    if missing:
        raise PartitionAdminError(f"Topic {missing[0]} not found")
    proposed: dict[TopicPartition, list[int]] = {}
    for topic in dict.fromkeys(topics):
        parts = sorted(tp.partition for tp in current if tp.topic == topic)
        placed = assign_replicas_to_brokers(sorted(brokers), len(parts), len(current[TopicPartition(topic, 0)]))
        proposed.update({TopicPartition(topic, p): placed[p] for p in parts})
    out(f"Current partition replica assignment\n{reassignment_json(current)}\n")
    out(f"Proposed partition reassignment configuration\n{reassignment_json(proposed)}")


async def execute(admin: PartitionAdmin, plan: Plan, out: Output, *, moves: Moves | None = None,
                  additional: bool = False, throttle: int = -1, log_dir_throttle: int = -1,
                  timeout_ms: int = 10_000) -> None:
    """Start the reassignment of ``plan`` (after printing the current assignment, to roll back),
    throttled when ``throttle`` >= 0, then the ``moves`` between log directories."""
    moves = moves or {}
    ongoing = await admin.list_reassignments()
    if ongoing and not additional:
        raise PartitionAdminError(
            "Cannot execute because there is an existing partition assignment.  Use --additional to override "
            "this and create a new partition assignment in addition to the existing one. The --additional flag "
            "can also be used to change the throttle by resubmitting the current reassignment.")
    current = await admin.assignments(tp.topic for tp in plan)
    if {tp.topic for tp in plan} - {tp.topic for tp in current}:
        # Kafka's tool fails describing the topics first.
        raise PartitionAdminError(exception_text(ApiError(ErrorCode.unknown_topic_or_partition)))
    missing = sorted(tp for tp in plan if tp not in current)
    if missing:
        raise PartitionAdminError("The proposed assignment contains non-existent partitions: "
                                  + ",".join(map(_name, missing)))
    view = await admin.cluster([])
    unknown = sorted({b for replicas in plan.values() for b in replicas} - set(view.brokers))
    if unknown:
        raise PartitionAdminError("The proposed assignment contains non-existent brokerIDs: "
                                  + ",".join(map(str, unknown)))
    before = {tp: current[tp] for tp in plan}
    out(f"Current partition replica assignment\n\n{reassignment_json(before)}\n\n"
        "Save this to use as the --reassignment-json-file option during rollback")
    if throttle >= 0 or log_dir_throttle >= 0:
        out("Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
            "throttle is removed.")
    if throttle >= 0:
        leaders, followers = leader_throttles(before, plan), follower_throttles(before, plan)
        await admin.alter_topic_configs({t: {LEADER_REPLICAS: leaders.get(t), FOLLOWER_REPLICAS: followers.get(t)}
                                         for t in sorted(set(leaders) | set(followers))})
        await admin.alter_broker_configs({b: {LEADER_RATE: str(throttle), FOLLOWER_RATE: str(throttle)}
                                          for b in reassigning_brokers(before, plan)})
        out(f"The inter-broker throttle limit was set to {throttle} B/s")
    if log_dir_throttle >= 0:
        # On the brokers of the moves only (none without moves), as Kafka's tool.
        await admin.alter_broker_configs({b: {LOG_DIR_RATE: str(log_dir_throttle)}
                                          for b in sorted({r.broker_id for r in moves})})
        out(f"The replica-alter-dir throttle limit was set to {log_dir_throttle} B/s")
    errors = {tp: e for tp, e in (await admin.alter_reassignments(plan)).items() if e.error != ErrorCode.none}
    if errors:
        raise PartitionAdminError("Error reassigning partition(s):\n" + "\n".join(
            f"{_name(tp)}: {exception_text(e)}" for tp, e in sorted(errors.items())))
    out(f"Successfully started partition reassignment{'s' if len(plan) > 1 else ''} for "
        + ",".join(map(_name, sorted(plan))))
    if moves:
        await _execute_moves(admin, moves, out, timeout_ms)


async def _execute_moves(admin: PartitionAdmin, moves: Moves, out: Output, timeout_ms: int) -> None:
    """AlterReplicaLogDirs until every replica's broker took its move (REPLICA_NOT_AVAILABLE:
    not there yet, ask again) or ``timeout_ms`` passed (Kafka's executeMoves)."""
    log_dirs = LogDirsAdmin(admin.bootstrap, security=admin.security)
    pending = dict(moves)
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        answers = await log_dirs.alter_replica_log_dirs(pending)
        failed = {r: e for r, e in answers.items() if e not in (ErrorCode.none, ErrorCode.replica_not_available)}
        if failed:
            replica = min(failed, key=_replica_order)
            raise PartitionAdminError(f"Failed to alter dir for {_replica_names([replica])}: "
                                      f"{exception_text(ApiError(failed[replica]))}")
        started = [r for r, e in answers.items() if e == ErrorCode.none]
        if started:
            out(f"Successfully started log directory move{'s' if len(started) > 1 else ''} for: "
                + _replica_names(started))
        for replica in started:
            pending.pop(replica, None)
        if not pending:
            return
        if time.monotonic() >= deadline:
            raise PartitionAdminError(f"Timed out before log directory move{'s' if len(pending) > 1 else ''} "
                                      f"could be started for: {_replica_names(list(pending))}")
        await asyncio.sleep(_MOVE_RETRY_S)


async def _move_states(admin: PartitionAdmin, moves: Moves) -> dict[Replica, tuple[str | None, str | None]]:
    """Each replica's current and future log directory on its broker (None: none); a replica
    whose broker is not in the cluster is left out (Kafka's describeReplicaLogDirs)."""
    log_dirs = LogDirsAdmin(admin.bootstrap, security=admin.security)
    brokers = set((await admin.cluster([])).brokers)
    try:
        described = await log_dirs.describe_log_dirs(sorted({r.broker_id for r in moves} & brokers))
    except LogDirsCommandError as e:
        raise PartitionAdminError(str(e)) from None
    states: dict[Replica, tuple[str | None, str | None]] = {}
    for replica in moves:
        if replica.broker_id not in described:
            continue
        current = future = None
        for info in described[replica.broker_id]:
            for r in info.replicas:
                if r.topic_partition == (replica.topic, replica.partition):
                    future, current = (info.path, current) if r.is_future else (future, info.path)
        states[replica] = (current, future)
    return states


def _move_lines(moves: Moves, states: Mapping[Replica, tuple[str | None, str | None]]) -> list[str]:
    """Kafka's replicaMoveStatesToString."""
    lines = []
    for replica in sorted(moves, key=_replica_order):
        target, name = moves[replica], f"{replica.topic}-{replica.partition}"
        if replica not in states:
            lines.append(f"Partition {name} cannot be found in any live log directory on broker {replica.broker_id}.")
            continue
        current, future = states[replica]
        if current is None:
            lines.append(f"Partition {name} is not found in any live log dir on broker {replica.broker_id}. "
                         "There is likely an offline log directory on the broker.")
        elif future is None:
            lines.append(f"Reassignment of replica {_replica_names([replica])} completed successfully." if current == target
                         else f"Partition {name} on broker {replica.broker_id} is not being moved from log dir "
                              f"{current} to {target}.")
        elif future == target:
            lines.append(f"Reassignment of replica {_replica_names([replica])} is still in progress.")
        else:
            lines.append(f"Partition {name} on broker {replica.broker_id} is being moved to log dir {future} "
                         f"instead of {target}.")
    return lines


async def verify(admin: PartitionAdmin, plan: Plan, out: Output, *, moves: Moves | None = None,
                 preserve_throttles: bool = False) -> bool:
    """Print each partition's state and each move's; once none is in progress, remove the
    throttles. True if every partition has the replicas the plan gives it and every move is
    done."""
    moves = moves or {}
    ongoing = await admin.list_reassignments(plan)
    current = await admin.assignments(tp.topic for tp in plan)
    out("Status of partition reassignment:")
    done = True
    for tp, target in sorted(plan.items()):
        if tp in ongoing:
            out(f"Reassignment of partition {_name(tp)} is still in progress.")
            done = False
        elif current.get(tp) == list(target):
            out(f"Reassignment of partition {_name(tp)} is complete.")
        else:
            out(f"There is no active reassignment of partition {_name(tp)}, but replica set is "
                f"{','.join(map(str, current.get(tp, [])))} rather than {','.join(map(str, target))}.")
    states = await _move_states(admin, moves) if moves else {}
    out("\n".join(_move_lines(moves, states)))
    moved = all(states.get(r, (None, None)) == (d, None) for r, d in moves.items())
    # Kafka's tool: a move not in progress (done, or found elsewhere) does not hold the throttles.
    moving = any(None not in states.get(r, (None, None)) for r in moves)
    if done and not moving and not preserve_throttles:
        await _clear_throttles(admin, sorted({tp.topic for tp in plan}), out)
    return done and moved and all(current.get(tp) == list(target) for tp, target in plan.items())


async def cancel(admin: PartitionAdmin, plan: Plan, out: Output, *, moves: Moves | None = None,
                 preserve_throttles: bool = False, timeout_ms: int = 10_000) -> None:
    """Cancel the reassignments of ``plan`` that are in progress and move the replicas whose
    move is in progress back to their current directory, then remove the throttles."""
    moves = moves or {}
    ongoing = await admin.list_reassignments(plan)
    cancelling = sorted(tp for tp in plan if tp in ongoing)
    if cancelling:
        results = await admin.alter_reassignments(dict.fromkeys(cancelling))
        errors = {tp: e for tp, e in results.items() if e.error != ErrorCode.none}
        if errors:
            raise PartitionAdminError(f"Error cancelling partition reassignment{'s' if len(errors) > 1 else ''} "
                                      "for:\n" + "\n".join(f"{_name(tp)}: {exception_text(e)}"
                                                           for tp, e in sorted(errors.items())))
        out(f"Successfully cancelled partition reassignment{'s' if len(cancelling) > 1 else ''} for: "
            + ",".join(map(_name, cancelling)))
    else:
        out("None of the specified partition reassignments are active.")
    states = await _move_states(admin, moves) if moves else {}
    back = {r: current for r, (current, future) in states.items() if current is not None and future is not None}
    if back:
        await _execute_moves(admin, back, out, timeout_ms)
    else:
        out("None of the specified partition moves are active.")
    if not preserve_throttles:
        await _clear_throttles(admin, sorted({tp.topic for tp in plan}), out)


async def list_reassignments(admin: PartitionAdmin, out: Output) -> None:
    for line in list_output(await admin.list_reassignments()):
        out(line)


async def _clear_throttles(admin: PartitionAdmin, topics: Sequence[str], out: Output) -> None:
    """Kafka's clearAllThrottles: the rates off every broker, the replica lists off the topics."""
    brokers = sorted((await admin.cluster([])).brokers)
    out(f"Clearing broker-level throttles on broker{'s' if len(brokers) > 1 else ''} {','.join(map(str, brokers))}")
    await admin.alter_broker_configs({b: dict.fromkeys(BROKER_THROTTLES) for b in brokers})
    out(f"Clearing topic-level throttles on topic{'s' if len(topics) > 1 else ''} {','.join(topics)}")
    await admin.alter_topic_configs({t: dict.fromkeys(TOPIC_THROTTLES) for t in topics})

