"""ZooKeeper ensemble failover on a local cluster: kill the member the brokers' sessions are
connected to and measure, per broker, the time from the kill to the state-change log's
"ZooKeeper session ... resumed" line (the session moved to another member and was kept)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from kazoo.exceptions import NoNodeError

from odradek.local.cluster import LocalCluster
from odradek.zk.zk_data import BrokerIdZNode

__all__ = ["Failover", "broker_sessions", "kill_busiest_member", "session_lines"]

_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\] \w+ (.*)$")


@dataclass(frozen=True)
class Failover:
    member_id: int                 # the ZooKeeper member killed
    was_leader: bool               # it led the ensemble (everyone reconnects during the election)
    sessions: dict[int, int]       # broker id -> session id, before the kill
    moved: dict[int, float]        # broker id -> seconds from the kill to "session ... resumed"


def broker_sessions(cluster: LocalCluster) -> dict[int, int]:
    """Each registered broker's session (the ephemeral owner of /brokers/ids/<id>)."""
    sessions = {}
    for broker_id in cluster.brokers:
        try:
            _, stat = cluster.zk_client().get(BrokerIdZNode.path(broker_id))
        except NoNodeError:
            continue
        sessions[broker_id] = stat.ephemeralOwner
    return sessions


def session_lines(log_path: Path, since: float, text: str) -> list[tuple[float, str]]:
    """(time, line) of the state-change lines containing ``text`` written at or after ``since``."""
    if not log_path.exists():
        return []
    found = []
    for line in log_path.read_text(errors="replace").splitlines():
        m = _LINE.match(line)
        if m and text in m.group(3):
            at = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").timestamp() + int(m.group(2)) / 1000
            if at >= since - 0.001:
                found.append((at, m.group(3)))
    return found


def kill_busiest_member(cluster: LocalCluster, timeout_s: float = 30.0, *, mode: str | None = None) -> Failover:
    """SIGKILL the member most brokers are connected to (among those whose ``srvr`` mode is
    ``mode``, e.g. "leader" or "follower", if given) and wait until each broker connected to
    it logs its session resumed; TimeoutError naming the brokers that did not. Killing the
    ensemble's leader also drops the sessions on the other members while they elect a new
    one: those brokers are timed too."""
    sessions = broker_sessions(cluster)
    live = {n: zk for n, zk in enumerate(cluster.zookeepers, 1) if zk.alive}  # LocalCluster's member ids
    modes = {n: zk.mode() for n, zk in live.items()}
    members = {n: {b for b, s in sessions.items() if s in zk.session_ids()}
               for n, zk in live.items() if mode in (None, modes[n])}
    if not members:
        raise ValueError(f"no live ZooKeeper member is a {mode}")
    member_id = max(members, key=lambda m: len(members[m]))
    was_leader = modes[member_id] == "leader"
    connected = set(sessions) if was_leader else members[member_id]
    t0 = time.time()
    cluster.kill_zookeeper(member_id)
    moved: dict[int, float] = {}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and set(moved) != connected:
        for broker_id in connected - set(moved):
            log = cluster.brokers[broker_id].config_path.parent / "state-change.log"
            lines = session_lines(log, t0, f"ZooKeeper session 0x{sessions[broker_id]:x} resumed")
            if lines:
                moved[broker_id] = lines[0][0] - t0
        time.sleep(0.05)
    if set(moved) != connected:
        raise TimeoutError(f"brokers {sorted(connected - set(moved))} did not resume their ZooKeeper "
                           f"sessions within {timeout_s:.0f}s of member {member_id}'s death")
    return Failover(member_id, was_leader, sessions, moved)
