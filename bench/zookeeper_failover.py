"""ZooKeeper ensemble failover: how long a broker takes to move its session to another member.

A local cluster (3 ZooKeeper members, 3 brokers). Each round SIGKILLs one member: a follower
that brokers are connected to, then the ensemble's leader (whose death drops every session
while the others elect a new leader), and restarts it. For each broker whose connection
dropped it prints the time from the kill to the state-change log's "ZooKeeper session ...
resumed" line; the session id is checked to be the same before and after.

    .venv/bin/python bench/zookeeper_failover.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile

from odradek.local.cluster import LocalCluster
from odradek.local.zookeeper_failover import broker_sessions, kill_busiest_member
from odradek.perf.harness import unwind_on_sigterm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="Rounds of (follower kill, leader kill).")
    args = parser.parse_args()
    # kazoo logs every dropped connection of this runner's own ZooKeeper client: the faults cause them.
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    times: dict[str, list[float]] = {"follower": [], "leader": []}
    with tempfile.TemporaryDirectory(prefix="odradek-zk-failover-") as directory, \
            LocalCluster(directory, 3, zookeepers=3) as cluster:
        for round_no in range(1, args.rounds + 1):
            for kind in ("follower", "leader"):
                failover = kill_busiest_member(cluster, mode=kind)
                assert broker_sessions(cluster) == failover.sessions, "a broker lost its session"
                for broker_id, seconds in sorted(failover.moved.items()):
                    times[kind].append(seconds)
                    print(f"round {round_no} {kind:8s} member {failover.member_id} killed: broker {broker_id} "
                          f"resumed session 0x{failover.sessions[broker_id]:x} after {seconds * 1000:.0f} ms",
                          flush=True)
                cluster.start_zookeeper(failover.member_id)
    for kind, values in times.items():
        if values:
            print(f"{kind} killed: {len(values)} moves, median {statistics.median(values) * 1000:.0f} ms, "
                  f"max {max(values) * 1000:.0f} ms")


if __name__ == "__main__":
    unwind_on_sigterm()
    main()
