"""The exactly-once sink's sans-IO parts (no Spark, no broker): transactional ids, the state
records' codec and partition, a task's identity from its local properties, the injected
faults, and the sink options that go with exactlyOnce."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from odradek.spark.options import OptionError, parse_sink_options
from odradek.spark.sink_faults import NO_FAULTS, SinkFaults, release_path, sink_faults
from odradek.spark.sink_state import (
    DEFAULT_STATE_TOPIC,
    SinkStateError,
    SinkStateRecord,
    TaskIdentity,
    batch_transactional_id,
    state_key,
    state_partition,
    streaming_transactional_id,
    task_identity,
)
from support import wait_until

QUERY = "4d4e37c7-6092-46a8-8bd8-8e01cd5075e0"
BOOTSTRAP = {"kafka.bootstrap.servers": "h1:9092"}


def test_transactional_ids_name_the_query_or_write_and_the_partition():
    assert streaming_transactional_id(QUERY, 3) == f"odradek-spark-{QUERY}-3"
    assert batch_transactional_id("ab12", 0) == "odradek-spark-write-ab12-0"
    # every partition of a query has its own, so tasks of one batch never fence each other
    ids = {streaming_transactional_id(QUERY, p) for p in range(100)}
    assert len(ids) == 100
    assert streaming_transactional_id(QUERY, 1) != batch_transactional_id(QUERY, 1)


def test_state_record_round_trips_and_keys_by_query_and_partition():
    record = SinkStateRecord(QUERY, 7, batch_id=12, records=500)
    assert record.key == f"{QUERY}:7".encode() == state_key(QUERY, 7)
    assert record.value == b'{"version":1,"batch":12,"records":500}'
    assert SinkStateRecord.decode(record.key, record.value) == record
    # a later batch of the same partition compacts the earlier one away: same key
    assert SinkStateRecord(QUERY, 7, 13).key == record.key


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        (b"no-partition", b'{"version":1,"batch":1,"records":0}', "not 'query id:partition'"),
        (f"{QUERY}:1".encode(), b'{"version":2,"batch":1,"records":0}', "version 2"),
        (f"{QUERY}:1".encode(), b'{"version":1,"records":0}', "'batch'"),
        (f"{QUERY}:1".encode(), b"not json", "Expecting value"),
    ],
)
def test_unreadable_state_records_are_refused(key, value, problem):
    with pytest.raises(SinkStateError, match="unreadable sink state record") as caught:
        SinkStateRecord.decode(key, value)
    assert problem in str(caught.value)


def test_a_record_covers_its_batch_and_earlier_ones_only():
    record = SinkStateRecord(QUERY, 0, batch_id=5)
    assert record.covers(5)
    assert record.covers(4)
    assert not record.covers(6)


def test_state_partition_is_stable_and_spreads_keys():
    key = state_key(QUERY, 0)
    assert state_partition(key, 8) == state_partition(key, 8)
    assert 0 <= state_partition(key, 8) < 8
    used = {state_partition(state_key(QUERY, p), 8) for p in range(64)}
    assert len(used) >= 6


def test_task_identity_reads_the_streaming_local_properties():
    props = {"sql.streaming.queryId": QUERY, "streaming.sql.batchId": "41", "other": "x"}
    assert task_identity(2, 1, props) == TaskIdentity(2, 1, QUERY, 41)
    assert task_identity(0, 0, {}) == TaskIdentity(0, 0, None, None)  # a batch write's task


def test_injected_task_failures_hit_first_attempts_of_chosen_partitions():
    props = {"odradek.test.sinkFailTasks": "0,3@500"}
    assert sink_faults(0, 0, props) == SinkFaults(fail_after=500)
    assert sink_faults(3, 0, props) == SinkFaults(fail_after=500)
    assert sink_faults(3, 1, props) is NO_FAULTS  # the retry succeeds
    assert sink_faults(1, 0, props) is NO_FAULTS
    assert sink_faults(0, 0, {}) is NO_FAULTS


def test_injected_commit_failure_and_malformed_hooks():
    assert sink_faults(5, 2, {"odradek.test.sinkFailCommit": "true"}) == SinkFaults(fail_commit=True)
    # Every attempt's message carries the commit's pause to the driver (which pauses once).
    assert sink_faults(5, 2, {"odradek.test.sinkPauseCommit": "/tmp/m"}) == SinkFaults(pause_commit="/tmp/m")
    assert SinkFaults(pause_commit="/tmp/m").commit_faults == {"fail_commit": False, "pause_commit": "/tmp/m"}
    with pytest.raises(ValueError, match=r"odradek\.test\.sinkFailTasks: expected partition ids"):
        sink_faults(0, 0, {"odradek.test.sinkFailTasks": "0,1"})
    with pytest.raises(ValueError, match=r"odradek\.test\.sinkPauseTasks: expected a marker file"):
        sink_faults(0, 0, {"odradek.test.sinkPauseTasks": "0@10"})
    with pytest.raises(ValueError, match=r"odradek\.test\.sinkPauseTasks: expected partition ids"):
        sink_faults(0, 0, {"odradek.test.sinkPauseTasks": "0@x:/tmp/m"})


def test_injected_pauses_hit_first_attempts_of_chosen_partitions():
    props = {"odradek.test.sinkPauseTasks": "1,2@200:/tmp/run/pause"}
    assert sink_faults(2, 0, props) == SinkFaults(pause_after=200, pause_marker="/tmp/run/pause")
    assert sink_faults(2, 1, props) is NO_FAULTS
    assert sink_faults(0, 0, props) is NO_FAULTS


def test_only_the_first_task_to_reach_its_rows_pauses_until_released(tmp_path: Path):
    marker = tmp_path / "pause"
    faults = SinkFaults(pause_after=5, pause_marker=str(marker))
    faults.at_row(4)  # not there yet
    assert not marker.exists()
    paused = threading.Thread(target=faults.at_row, args=(5,))
    paused.start()
    wait_until(marker.exists, message="the pause's marker")
    assert marker.read_text() == str(os.getpid())
    faults.at_row(5)  # a second task finds the marker taken and goes on at once
    assert paused.is_alive()
    release_path(marker).touch()
    paused.join(10)
    assert not paused.is_alive()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pause", "pause.release"]


def test_tasks_of_one_process_racing_for_a_taken_marker_all_go_on(tmp_path: Path):
    """Threads of one process (tasks of one Python worker) reaching a marker another task
    took: each goes on at once, none trips over another's file written aside."""
    marker = tmp_path / "pause"
    marker.write_text("taken")
    errors: list[BaseException] = []

    def reach() -> None:
        try:
            for _ in range(200):
                SinkFaults(pause_after=1, pause_marker=str(marker)).at_row(1)
        except BaseException as e:  # reported by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=reach) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pause"]  # nothing left aside


def test_exactly_once_sink_options():
    plain = parse_sink_options({**BOOTSTRAP, "topic": "out"})
    assert (plain.exactly_once, plain.state_topic) == (False, DEFAULT_STATE_TOPIC)
    on = parse_sink_options(
        {**BOOTSTRAP, "exactlyonce": "TRUE", "exactlyonce.statetopic": " my-state "}
    )
    assert (on.exactly_once, on.state_topic) == (True, "my-state")


@pytest.mark.parametrize(
    ("options", "option", "problem"),
    [
        ({"exactlyOnce": "yes"}, "exactlyOnce", "must be 'true' or 'false'"),
        ({"exactlyOnce.stateTopic": " "}, "exactlyOnce.stateTopic", "must not be empty"),
        (
            {"exactlyOnce": "true", "kafka.transactional.id": "mine"},
            "kafka.transactional.id",
            "the sink derives one per task",
        ),
        ({"exactlyOnce": "true", "kafka.acks": "1"}, "kafka.acks", "must be 'all'"),
        (
            {"exactlyOnce": "true", "kafka.enable.idempotence": "false"},
            "kafka.enable.idempotence",
            "cannot be false",
        ),
    ],
)
def test_exactly_once_option_errors(options, option, problem):
    lowered = {k.lower(): v for k, v in {**BOOTSTRAP, **options}.items()}
    with pytest.raises(OptionError) as caught:
        parse_sink_options(lowered)
    assert caught.value.option == option
    assert problem in caught.value.problem
