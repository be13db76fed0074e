"""Control-plane scale benchmark.

1. Create one topic of 10,000 partitions, RF 3, on 3 brokers: seconds from the topic znode
   write until every partition has its state znode (leader and ISR written by the controller).
2. SIGKILL a broker leading about a third of them: seconds from the loss of its ZooKeeper
   session (its /brokers/ids znode vanishing) until every partition has a live leader again.
   Run once with a non-controller victim and once with the controller as the victim. Each
   kill waits first until the cluster has settled (every broker has applied the controller's
   requests, every ISR is full), so it measures failover, not the tail of the creation.

With ``--profile`` the creation (topic written until every broker serves every partition)
runs with py-spy on every broker (20 samples a second), and each broker's top functions are
printed.

    .venv/bin/python bench/controller_scale.py [--partitions 10000] [--profile]
"""

from __future__ import annotations

import argparse
import re
import tempfile
from contextlib import ExitStack
from pathlib import Path

from odradek.local.cluster import LocalCluster
from odradek.perf.controller_scale import (
    controller_id,
    create_topic,
    failover,
    read_states,
    wait_partition_states,
    wait_settled,
)
from odradek.perf.harness import pyspy_record, summarize_speedscope, unwind_on_sigterm

# py-spy pauses a broker for every sample; at its usual 200 Hz a 10,000-partition creation
# slows past the 10 s replica lag and never settles, so this profile samples sparsely.
PROFILE_HZ = 20


def phase_times(log_path: Path) -> list[str]:
    """The controller's own timing lines for the events it processed."""
    return [line.strip() for line in log_path.read_text().splitlines()
            if re.search(r"Processed controller event|became controller|Broker failure callback|Controller failover", line)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=10000)
    parser.add_argument("--profile", action="store_true", help="py-spy on every broker while the topic is created")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="odradek-bench-") as tmp:
        cluster = LocalCluster(tmp, 3)
        cluster.start()
        try:
            zk = cluster.zk_client()
            topic = "scale"
            recorded: dict[int, Path] = {}
            try:
                with ExitStack() as profiling:
                    recorded = {b.broker_id: profiling.enter_context(
                        pyspy_record(b.pid, Path(tmp) / f"py-spy-{b.broker_id}", rate=PROFILE_HZ))
                                for b in cluster.brokers.values() if args.profile and b.pid is not None}
                    start = create_topic(cluster.zookeeper_connect, topic, args.partitions)
                    online_at = wait_partition_states(zk, topic, args.partitions)
                    states = read_states(zk, topic, args.partitions)
                    assert all(s["leader"] >= 0 for s in states.values())
                    print(f"create {args.partitions} partitions RF 3: every partition online with a leader in "
                          f"ZooKeeper after {online_at - start:.2f} s")
                    settled = wait_settled(cluster, zk, topic, args.partitions)
                    print(f"  (every broker had applied the LeaderAndIsr and UpdateMetadata "
                          f"{online_at - start + settled:.2f} s after the topic was written)", flush=True)
            finally:  # a creation that does not settle is the one whose profile is wanted
                for broker_id, path in recorded.items():
                    print(summarize_speedscope(path, 25).format(f"broker {broker_id}, creating the topic"),
                          flush=True)
            ctrl = controller_id(zk)
            victim = next(b for b in range(3) if b != ctrl)
            result = failover(cluster, zk, topic, args.partitions, victim)
            print(f"kill broker {victim} (not the controller), leading {result['led_partitions']} partitions: "
                  f"session expired {result['session_expiry_s']:.1f} s after SIGKILL; every partition had a live "
                  f"leader {result['failover_s']:.2f} s after the session loss")
            cluster.start_broker(victim)
            settled = wait_settled(cluster, zk, topic, args.partitions)
            print(f"  (broker {victim} restarted and back in every ISR after {settled:.1f} s more)")
            ctrl = controller_id(zk)
            result = failover(cluster, zk, topic, args.partitions, ctrl)
            print(f"kill broker {ctrl} (the controller), leading {result['led_partitions']} partitions: "
                  f"every partition had a live leader {result['failover_s']:.2f} s after the session loss "
                  f"(includes the new controller's election and loading {args.partitions} partition states)")
            for b in cluster.brokers.values():
                for line in phase_times(b.config_path.parent / "server.log"):
                    print(f"  broker {b.broker_id}: {line}")
        finally:
            cluster.stop()


if __name__ == "__main__":
    unwind_on_sigterm()
    main()
