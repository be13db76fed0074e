"""The broker's ZooKeeper session lines in the state-change log, driven by kazoo's states."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from odradek import state_change_log
from odradek.broker.zk_session_log import ZkSessionStateLog


@dataclass
class FakeSession:
    session_id: int = 0x10
    server: str | None = "127.0.0.1:1"
    closed: bool = False


def test_lines_for_a_move_an_expiry_and_a_close(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # This test's own file, put back as it was afterwards (the module keeps one per process).
    out = (tmp_path / "state-change.log").open("a")
    monkeypatch.setattr(state_change_log, "_file", out)
    zk = FakeSession()
    listener = ZkSessionStateLog(7, zk)
    listener("CONNECTED")
    listener("SUSPENDED")
    zk.server = "127.0.0.1:2"
    listener("CONNECTED")
    listener("SUSPENDED")
    listener("LOST")
    zk.session_id, zk.server = 0x20, None
    listener("CONNECTED")
    zk.closed = True
    listener("LOST")
    out.close()
    lines = [line.split("] ", 1)[1] for line in (tmp_path / "state-change.log").read_text().splitlines()]
    assert [line.split(" [Broker id=7] ")[1] for line in lines] == [
        "ZooKeeper session 0x10 established on 127.0.0.1:1",
        "ZooKeeper connection lost (was 127.0.0.1:1); reconnecting, session 0x10 is kept if it returns "
        "within the session timeout",
        lines[2].split(" [Broker id=7] ")[1],
        "ZooKeeper connection lost (was 127.0.0.1:2); reconnecting, session 0x10 is kept if it returns "
        "within the session timeout",
        "ZooKeeper session 0x10 expired; re-registering with a new session",
        "ZooKeeper session 0x20 established",
        "ZooKeeper session 0x20 closed",
    ]
    assert lines[2].startswith("INFO [Broker id=7] ZooKeeper session 0x10 resumed on 127.0.0.1:2 (another member) after ")
