"""Partition's leader bookkeeping across leader epochs (Kafka's Partition.makeLeader)."""

from __future__ import annotations

from pathlib import Path

from control_helpers import lai_state

from odradek.broker.partition import Partition
from odradek.config import LogConfig
from odradek.log.log import Log
from odradek.protocol.records import SimpleRecord, build_batch


def leading(tmp_path: Path, records: int) -> Partition:
    p = Partition("t", 0, local_broker_id=1)
    p.log = Log.open(tmp_path / "t-0", LogConfig(), topic="t", partition=0)
    p.make_leader(lai_state(0, 1, 5, (1, 2, 3), (1, 2, 3)), now_ms=1_000)
    p.log.append_as_leader(build_batch([SimpleRecord(b"v")] * records), p.leader_epoch)
    return p


def test_a_new_epoch_with_the_same_leader_forgets_the_followers_log_end_offsets(tmp_path: Path) -> None:
    p = leading(tmp_path, 10)
    p.update_follower_fetch_state(2, 10, now_ms=2_000)
    p.update_follower_fetch_state(3, 10, now_ms=2_000)
    assert p.high_watermark == 10
    p.log.append_as_leader(build_batch([SimpleRecord(b"v")] * 5), p.leader_epoch)
    p.update_follower_fetch_state(2, 15, now_ms=3_000)

    assert not p.make_leader(lai_state(0, 1, 6, (1, 2), (1, 2, 3)), now_ms=4_000)

    assert {r: s.log_end_offset for r, s in p.remote.items()} == {2: -1, 3: -1}
    # ISR members count as caught up as of the new epoch; a replica outside it does not.
    assert (p.remote[2].last_caught_up_time_ms, p.remote[3].last_caught_up_time_ms) == (4_000, 0)
    assert not p.maybe_increment_high_watermark() and p.high_watermark == 10
    # Only a fetch in the new epoch moves the high watermark.
    assert p.update_follower_fetch_state(2, 15, now_ms=4_100)
    assert p.high_watermark == 15
