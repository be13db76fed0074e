"""Kafka's checkpoint file formats, exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.log.checkpoints import (
    CorruptCheckpointError,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
)


def test_offset_checkpoint_text_and_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    offsets = {("orders.v2-eu", 3): 1234, ("a-b", 0): 0, ("orders.v2-eu", 10): 7}
    OffsetCheckpointFile(path).write(offsets)
    assert path.read_text() == "0\n3\na-b 0 0\norders.v2-eu 3 1234\norders.v2-eu 10 7\n"
    assert OffsetCheckpointFile(path).read() == offsets
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temp file left
    OffsetCheckpointFile(path).write({})
    assert path.read_text() == "0\n0\n"
    assert OffsetCheckpointFile(tmp_path / "missing").read() == {}


def test_reads_a_file_written_by_kafka(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    path.write_text("0\n2\n__consumer_offsets 12 0\ntest-topic 0 42\n")
    assert OffsetCheckpointFile(path).read() == {("__consumer_offsets", 12): 0,
                                                 ("test-topic", 0): 42}


def test_an_empty_file_is_an_empty_checkpoint(tmp_path: Path) -> None:
    # Kafka 3.9 creates cleaner-offset-checkpoint empty and leaves it so until it cleans a log.
    path = tmp_path / "cleaner-offset-checkpoint"
    path.write_bytes(b"")
    assert OffsetCheckpointFile(path).read() == {}


@pytest.mark.parametrize("text", [
    "1\n0\n",  # unknown version
    "0\n2\ntopic 0 5\n",  # count mismatch
    "0\n1\ntopic 0\n",  # missing field
    "0\n1\ntopic x 5\n",  # not a number
    "0\n",  # no count line
])
def test_malformed_offset_checkpoints(tmp_path: Path, text: str) -> None:
    path = tmp_path / "log-start-offset-checkpoint"
    path.write_text(text)
    with pytest.raises(CorruptCheckpointError):
        OffsetCheckpointFile(path).read()


def test_a_checkpoint_that_is_not_text_is_corrupt(tmp_path: Path) -> None:
    """Not a UnicodeDecodeError, which the log manager does not expect: the broker would not
    start (fuzz/log_recovery.py found it)."""
    path = tmp_path / "log-start-offset-checkpoint"
    path.write_bytes(b"\xc5\n1\nt 0 5\n")
    with pytest.raises(CorruptCheckpointError):
        OffsetCheckpointFile(path).read()


def test_leader_epoch_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    LeaderEpochCheckpointFile(path).write([(0, 0), (3, 120)])
    assert path.read_text() == "0\n2\n0 0\n3 120\n"
    assert LeaderEpochCheckpointFile(path).read() == [(0, 0), (3, 120)]
    path.write_text("0\n1\n3 x\n")
    with pytest.raises(CorruptCheckpointError):
        LeaderEpochCheckpointFile(path).read()
