"""odradek beside Apache Kafka, in one invocation (issue 26): the performance yardstick.

Every section starts an odradek cluster and a Kafka cluster (Kafka 3.9 in ZooKeeper mode,
perf/kafka_ref.py, with kafka-server-start.sh's JVM settings) of the same size, with the same
broker settings (odradek's local defaults: zookeeper.session.timeout.ms 6000, ...) and the same
topics, written to ZooKeeper the same way; both stay up while the section runs, and its rounds
take turns between them (odradek first, then Kafka first, ...).  Each figure is the median over
--rounds rounds (at least 3 for a result worth quoting), and the table gives odradek ÷ Kafka
and the issue's target.  The clients are the same confluent-kafka ones for both.

1. batched: 3 brokers, 6 partitions, 100-byte records; --clients producer processes as fast as
   they go (linger.ms=5, batch.size=1000000) at RF 1 and RF 3, acks=1 and acks=all, then
   consumers reading each RF's topic to its end: records/s, records per broker CPU-second.
2. latency: 3 brokers, RF 3, acks=all, linger.ms=0, one producer at each rate: produce and
   end-to-end latency percentiles, and the highest rate with an end-to-end p99 within 50 ms.
3. one-record: 1 broker, producers with batch.num.messages=1 (bench/broker_bound.py's phase):
   requests per broker CPU-second.
4. transactions: 3 brokers, RF 3: an idempotent producer, transactions of 1,000 and of 100
   records, then read_committed consumers: transactional ÷ idempotent throughput.
5. scale: a fresh 3-broker cluster per round: partitions created (RF 3) and online, resident
   memory at 0 and two partition counts, a non-controller SIGKILLed, the controller SIGKILLed,
   a controlled shutdown, each timed from ZooKeeper (perf/controller_scale.py).
6. compaction: 1 broker, a compacted partition filled with keyed records while the cleaner is
   held back, then let loose: the cleaner's throughput, produce p99 while it runs and idle.
7. failover: 3 brokers, RF 3: an idempotent acks=all producer's longest gap between acks when
   a leader is SIGKILLed.

Each section also reports the brokers' CPU-seconds and peak resident memory, and where the
machine's CPU went in every measured phase (brokers, ZooKeeper, the idle other cluster, the
clients, everyone else, steal, load: perf/sysstat.py).  The results go to
bench/results/vs-kafka-<time>.json.

    .venv/bin/python bench/vs_kafka.py [--sections 1,2,3,4,5,6,7] [--quick] [--rounds 3] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import confluent_kafka

import odradek
from odradek.local.cluster import LOCAL_DEFAULTS, LocalCluster
from odradek.perf.baseline import in_turn
from odradek.perf.compaction import (
    CLEANER_MB,
    fill,
    latencies,
    latency_stats,
    log_size,
    set_topic_config,
    wait_cleaned,
)
from odradek.perf.controller_scale import (
    controlled_shutdown,
    controller_id,
    create_topic,
    failover,
    leaders,
    wait_partition_states,
    wait_settled,
)
from odradek.perf.failover import producer_gap
from odradek.perf.harness import code_version, create_topic_zk, unwind_on_sigterm, wait_full_isr
from odradek.perf.kafka_ref import VERSIONS, KafkaRefCluster, jvm_classpath, jvm_settings
from odradek.perf.latency import paced_phase
from odradek.perf.load import run_clients
from odradek.perf.side_by_side import (
    BROKERS,
    Figure,
    Section,
    Target,
    medians,
    per_partition_bytes,
    sustained_rate,
)
from odradek.perf.sysstat import (
    UsageWindow,
    cluster_groups,
    format_usage,
    measured_groups,
    tree_memory,
)
from odradek.perf.transactions import consume, produce

RESULTS = Path(__file__).resolve().parent / "results"
PARTITIONS = 6
MB = 1e6
BATCHED = {"linger.ms": 5, "batch.size": 1_000_000, "batch.num.messages": 10_000}
ONE_RECORD = {"linger.ms": 0, "acks": "1", "batch.num.messages": 1}
CONSUMER = {"fetch.queue.backoff.ms": 1}
AT_LEAST_KAFKA, AT_MOST_KAFKA = Target(1.0), Target(1.0, at_most=True)

# Each section's scale: the full one and --quick's.
SCALES: dict[int, dict[str, dict[str, Any]]] = {
    1: {"full": {"clients": 3, "seconds": 10}, "quick": {"clients": 2, "seconds": 3}},
    2: {"full": {"rates": [1000, 5000, 10000, 20000], "duration": 15, "warmup": 2},
        "quick": {"rates": [1000, 5000], "duration": 3, "warmup": 1}},
    3: {"full": {"clients": 3, "seconds": 10}, "quick": {"clients": 2, "seconds": 3}},
    4: {"full": {"records": 200_000}, "quick": {"records": 20_000}},
    5: {"full": {"partitions": [1000, 10000]}, "quick": {"partitions": [100, 300]}},
    6: {"full": {"gb": 1.0, "keys": 100_000, "segment_bytes": 64 << 20, "phase_s": 20, "rate": 1000},
        "quick": {"gb": 0.1, "keys": 10_000, "segment_bytes": 16 << 20, "phase_s": 3, "rate": 1000}},
    7: {"full": {"rate": 1000}, "quick": {"rate": 500}},
}


def log(line: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)


def new_cluster(name: str, directory: Path, brokers: int, overrides: Mapping[str, str], version: str) -> LocalCluster:
    if name == "odradek":
        return LocalCluster(directory, brokers, overrides=overrides)
    return KafkaRefCluster(directory, brokers, overrides=overrides, version=version)


class Pair:
    """An odradek and a Kafka cluster of ``brokers`` brokers each, both up while the block runs."""

    def __init__(self, work: Path, brokers: int, version: str, overrides: Mapping[str, str] | None = None) -> None:
        self.work, self.brokers, self.version, self.overrides = work, brokers, version, dict(overrides or {})
        self.clusters: dict[str, LocalCluster] = {}
        self._stack = ExitStack()

    def __enter__(self) -> Pair:
        with self._stack as stack:
            for name in BROKERS:
                cluster = new_cluster(name, self.work / name, self.brokers, self.overrides, self.version)
                self.clusters[name] = stack.enter_context(cluster)
            self._stack = stack.pop_all()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def groups(self, name: str) -> dict[str, list[int]]:
        """``name``'s brokers and ZooKeeper, and the other cluster as "other servers"."""
        return measured_groups({n: cluster_groups(c) for n, c in self.clusters.items()}, name)

    def memory_figures(self) -> list[Figure]:
        peaks = {n: tree_memory(cluster_groups(c)["brokers"]).peak / MB for n, c in self.clusters.items()}
        return [Figure("brokers' peak RSS, all together (MB)", peaks["odradek"], peaks["kafka"])]


def create(cluster: LocalCluster, topic: str, partitions: int, rf: int, config: dict[str, str] | None = None) -> None:
    create_topic_zk(cluster.zookeeper_connect, topic, partitions, rf, config=config)
    wait_full_isr(cluster, topic, partitions, rf)


def alternate(rounds: int, phases: list[str], run: Callable[[str, str, str], dict[str, Any]],
              short: Callable[[dict[str, Any]], str], warm_up: bool = False) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Every phase on both brokers per round, in turns: ``run(broker, phase, tag)``, where the
    tag (the round's number) tells the round's topics apart; ``{broker: {phase: [result per
    round]}}``.  With ``warm_up``, the first phase runs once on each broker first, not counted:
    the JVM compiles Kafka's hot paths in its first seconds of load."""
    if warm_up:
        for name in BROKERS:
            log(f"  warm-up {name} {phases[0]}: {short(run(name, phases[0], 'warmup'))}")
    per_round: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for r in range(rounds):
        for phase in phases:
            for name in in_turn(BROKERS, r):
                result = run(name, phase, str(r))
                per_round.setdefault(name, {}).setdefault(phase, []).append(result)
                usage = f"; {format_usage(result['usage'])}" if "usage" in result else ""
                log(f"  round {r + 1} {name} {phase}: {short(result)}{usage}")
    return per_round


def usage_rows(results: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[tuple[str, str, Mapping[str, float]]]:
    return [(phase, name, results[name][phase]["usage"]) for phase in results[BROKERS[0]] for name in BROKERS
            if "usage" in results[name][phase]]


def loaded_cpu(result: Mapping[str, Any]) -> float:
    """The brokers' CPU-seconds per second of the clients' work (the phase's CPU is over the
    clients' start-up too, when the brokers idle)."""
    return result["broker_cpu_s"] / result["active_s"] if result["active_s"] else float("nan")


def figure(results: Mapping[str, Mapping[str, Mapping[str, Any]]], phase: str, key: str, name: str,
           fmt: str = "{:,.0f}", target: Target | None = None, scale: float = 1.0) -> Figure:
    return Figure(name, results["odradek"][phase][key] * scale, results["kafka"][phase][key] * scale, fmt, target)


# ----------------------------------------------------------------------------- sections


def batched(work: Path, s: dict[str, Any], rounds: int, version: str) -> Section:
    phases = [f"produce RF {rf} acks={acks}" for rf in (1, 3) for acks in ("1", "all")] + ["consume RF 1", "consume RF 3"]
    with Pair(work, 3, version) as pair:
        def run(name: str, phase: str, r: str) -> dict[str, Any]:
            cluster = pair.clusters[name]
            rf = int(phase.split()[2])
            if phase.startswith("produce"):
                acks = phase.split("acks=")[1]
                topic = f"batched-rf{rf}-acks{acks}-{r}"
                create(cluster, topic, PARTITIONS, rf)
                return run_clients(cluster.bootstrap_servers, pair.groups(name), topic, s["clients"], s["seconds"],
                                   producer={**BATCHED, "acks": acks})
            return run_clients(cluster.bootstrap_servers, pair.groups(name), f"batched-rf{rf}-acks1-{r}", s["clients"],
                               s["seconds"] * 10, consumer=CONSUMER, partitions=PARTITIONS)

        def short(x: dict[str, Any]) -> str:
            return f"{x['records_per_active_s']:,.0f} records/s, {x['records_per_cpu_s']:,.0f} per broker CPU-s"

        per_round = alternate(rounds, phases, run, short, warm_up=True)
        results = medians(per_round)
        section = Section("1. Batched produce and consume (3 brokers, 6 partitions, 100-byte records)")
        for phase in phases:
            section.figures += [
                figure(results, phase, "records_per_active_s", f"{phase}: records/s"),
                figure(results, phase, "records_per_cpu_s", f"{phase}: records per broker CPU-s", target=AT_LEAST_KAFKA),
                Figure(f"{phase}: brokers' CPU-s per second of load", *(loaded_cpu(results[n][phase]) for n in BROKERS),
                       "{:.2f}")]
        section.figures += pair.memory_figures()
    section.usage, section.raw = usage_rows(results), per_round
    section.notes.append(f"{s['clients']} client processes per phase, producers for {s['seconds']} s "
                         f"({', '.join(f'{k}={v}' for k, v in BATCHED.items())}); consumers read each RF's acks=1 "
                         "topic to its end, the partitions shared out.")
    if not all(results[n][p]["read_to_end"] for n in BROKERS for p in phases if p.startswith("consume")):
        section.notes.append("**A consumer did not reach the end of its partitions in time.**")
    return section


def latency(work: Path, s: dict[str, Any], rounds: int, version: str) -> Section:
    phases = [f"{rate:,}/s" for rate in s["rates"]]
    with Pair(work, 3, version) as pair:
        def run(name: str, phase: str, r: str) -> dict[str, Any]:
            cluster = pair.clusters[name]
            rate = float(phase.removesuffix("/s").replace(",", ""))
            topic = f"latency-{int(rate)}-{r}"
            create(cluster, topic, PARTITIONS, 3)
            return paced_phase(cluster, topic, rate, s["duration"], s["warmup"], pair.groups(name))

        def short(x: dict[str, Any]) -> str:
            return f"achieved {x['achieved_rate']:,.0f}/s, e2e p50/p99 {x['e2e_p50_ms']:.1f}/{x['e2e_p99_ms']:.1f} ms"

        per_round = alternate(rounds, phases, run, short, warm_up=True)
        results = medians(per_round)
        section = Section("2. Unbatched RF 3, acks=all, linger.ms=0 (3 brokers, 6 partitions)")
        for phase, rate in zip(phases, s["rates"], strict=True):
            p99_target = AT_MOST_KAFKA if rate in (5000, 10000) else None
            section.figures += [figure(results, phase, "achieved_rate", f"{phase}: achieved records/s")]
            section.figures += [figure(results, phase, key, f"{phase}: {label} (ms)", "{:.1f}",
                                       p99_target if key == "e2e_p99_ms" else None)
                                for key, label in (("produce_p50_ms", "produce p50"), ("produce_p99_ms", "produce p99"),
                                                   ("produce_p999_ms", "produce p99.9"), ("e2e_p50_ms", "e2e p50"),
                                                   ("e2e_p99_ms", "e2e p99"), ("e2e_p999_ms", "e2e p99.9"))]
            section.figures += [figure(results, phase, "brokers_cpu_per_s", f"{phase}: brokers' CPU s/s", "{:.2f}"),
                                figure(results, phase, "missing", f"{phase}: records not seen end to end")]
        sustained = {n: sustained_rate({rate: results[n][phase] for phase, rate in zip(phases, s["rates"], strict=True)},
                                       50.0) for n in BROKERS}
        section.figures.append(Figure("highest rate with e2e p99 ≤ 50 ms (of those run)", sustained["odradek"],
                                      sustained["kafka"]))
        section.figures += pair.memory_figures()
    section.usage, section.raw = usage_rows(results), per_round
    section.notes.append(f"{s['duration']} s measured per rate after {s['warmup']} s of warm-up; one producer in the "
                         "benchmark's process, the end-to-end consumer in another.")
    return section


def one_record(work: Path, s: dict[str, Any], rounds: int, version: str) -> Section:
    phase = "one-record produce"
    with Pair(work, 1, version) as pair:
        def run(name: str, _phase: str, r: str) -> dict[str, Any]:
            cluster = pair.clusters[name]
            topic = f"one-record-{r}"
            create(cluster, topic, PARTITIONS, 1)
            return run_clients(cluster.bootstrap_servers, pair.groups(name), topic, s["clients"], s["seconds"],
                               producer=ONE_RECORD)

        per_round = alternate(rounds, [phase], run, lambda x: f"{x['requests_per_cpu_s']:,.0f} requests per broker CPU-s",
                              warm_up=True)
        results = medians(per_round)
        section = Section("3. One-record requests (1 broker, 6 partitions, batch.num.messages=1, acks=1)")
        section.figures += [figure(results, phase, "requests_per_active_s", "requests/s"),
                            figure(results, phase, "requests_per_cpu_s", "requests per broker CPU-s",
                                   target=AT_LEAST_KAFKA),
                            figure(results, phase, "records_per_cpu_s", "records per broker CPU-s", target=AT_LEAST_KAFKA),
                            figure(results, phase, "cpu_us_per_request", "broker CPU µs per request"),
                            figure(results, phase, "retries", "requests the producers retried"),
                            Figure("broker CPU-s per second of load", *(loaded_cpu(results[n][phase]) for n in BROKERS),
                                   "{:.2f}")]
        section.figures += pair.memory_figures()
    section.usage, section.raw = usage_rows(results), per_round
    section.notes.append(f"{s['clients']} producer processes for {s['seconds']} s; requests counted by the clients "
                         "(librdkafka's statistics).")
    return section


def transactions(work: Path, s: dict[str, Any], rounds: int, version: str) -> Section:
    kinds = {"idempotent": None, "txn-1000": 1000, "txn-100": 100}
    phases = [*kinds, "read_committed txn-1000", "read_committed txn-100"]
    with Pair(work, 3, version) as pair:
        for name, cluster in pair.clusters.items():
            create(cluster, "txn-warmup", PARTITIONS, 3)
            produce(cluster, "txn-warmup", 2_000, 1_000, groups=pair.groups(name))  # __transaction_state, coordinator
        idempotent: dict[tuple[str, str], float] = {}

        def run(name: str, phase: str, r: str) -> dict[str, Any]:
            cluster = pair.clusters[name]
            if phase.startswith("read_committed"):
                window = UsageWindow(pair.groups(name))
                read = consume(cluster, f"{phase.split()[1]}-{r}", "read_committed")
                result = {**read, "usage": window.stop().as_dict()}
                if result["records"] != s["records"]:
                    raise SystemExit(f"{name}: read_committed read {result['records']} of {s['records']} records")
                return result
            topic = f"{phase}-{r}"
            create(cluster, topic, PARTITIONS, 3)
            result = produce(cluster, topic, s["records"], kinds[phase], groups=pair.groups(name))
            if phase == "idempotent":
                idempotent[name, r] = result["records_per_sec"]
            result["vs_idempotent"] = result["records_per_sec"] / idempotent[name, r]
            return result

        per_round = alternate(rounds, phases, run, lambda x: f"{x['records_per_sec']:,.0f} records/s", warm_up=True)
        results = medians(per_round)
        section = Section("4. Transactions (3 brokers, RF 3, 6 partitions, acks=all, batched)")
        for phase in phases:
            section.figures.append(figure(results, phase, "records_per_sec", f"{phase}: records/s"))
            if phase.startswith("txn"):
                section.figures.append(figure(results, phase, "vs_idempotent", f"{phase} ÷ idempotent", "{:.2f}",
                                              Target(0.8, on_odradek=True) if phase == "txn-1000" else None))
                section.figures.append(figure(results, phase, "ms_per_transaction", f"{phase}: ms per transaction",
                                              "{:.1f}"))
        section.figures += pair.memory_figures()
    section.usage, section.raw = usage_rows(results), per_round
    section.notes.append(f"{s['records']:,} records per producer phase; ÷ idempotent is each round's own ratio, "
                         "median over the rounds; the 0.8 target is odradek's own ratio at 1,000 records per "
                         "transaction.")
    return section


def scale_round(cluster: LocalCluster, counts: list[int]) -> dict[str, Any]:
    """One fresh cluster through section 5's steps."""
    zk = cluster.zk_client()
    memory = {0: tree_memory(cluster_groups(cluster)["brokers"]).rss}
    out: dict[str, Any] = {}
    created = 0
    for i, total in enumerate(counts):
        topic = f"scale-{i}"
        start = create_topic(cluster.zookeeper_connect, topic, total - created)
        out[f"states_{total}_s"] = wait_partition_states(zk, topic, total - created) - start
        out[f"settled_{total}_s"] = out[f"states_{total}_s"] + wait_settled(cluster, zk, topic, total - created,
                                                                               timeout=900)
        created = total
        memory[total] = tree_memory(cluster_groups(cluster)["brokers"]).rss
    out.update({f"rss_{n}_mb": rss / MB for n, rss in memory.items()})
    out["bytes_per_partition"] = per_partition_bytes(memory)
    big, size = f"scale-{len(counts) - 1}", counts[-1] - (counts[-2] if len(counts) > 1 else 0)

    def settle(broker: int) -> None:
        cluster.start_broker(broker, timeout_s=900)
        for i in range(len(counts)):
            wait_settled(cluster, zk, f"scale-{i}", counts[i] - (counts[i - 1] if i else 0), timeout=900)

    def busiest(exclude: int) -> int:
        led = leaders(zk, big, size)
        return max((b for b in cluster.brokers if b != exclude), key=lambda b: sum(1 for x in led.values() if x == b))

    victim = busiest(controller_id(zk))
    out.update({f"kill_{k}": v for k, v in failover(cluster, zk, big, size, victim, timeout_s=900).items()})
    settle(victim)
    victim = controller_id(zk)
    out.update({f"controller_{k}": v for k, v in failover(cluster, zk, big, size, victim, timeout_s=900).items()})
    settle(victim)
    victim = busiest(controller_id(zk))
    out.update({f"shutdown_{k}": v for k, v in controlled_shutdown(cluster, zk, big, size, victim, 900).items()})
    settle(victim)
    return out


def scale(work: Path, s: dict[str, Any], rounds: int, version: str) -> Section:
    counts = s["partitions"]
    per_round: dict[str, dict[str, list[dict[str, Any]]]] = {}
    peaks: dict[str, float] = dict.fromkeys(BROKERS, 0.0)
    for r in range(rounds):
        for name in in_turn(BROKERS, r):
            with new_cluster(name, work / f"{name}-{r}", 3, {}, version) as cluster:
                result = scale_round(cluster, counts)
                peaks[name] = max(peaks[name], tree_memory(cluster_groups(cluster)["brokers"]).peak / MB)
            per_round.setdefault(name, {}).setdefault("scale", []).append(result)
            log(f"  round {r + 1} {name}: " + ", ".join(f"{k} {v:.2f}" for k, v in result.items()))
    results = medians(per_round)
    section = Section(f"5. Scale ({counts[-1]:,} partitions, RF 3, 3 brokers, a fresh cluster per round)")
    previous = 0
    for n in counts:
        what = f"create {n - previous:,} partitions" + (f" ({n:,} in all)" if previous else "")
        section.figures += [figure(results, "scale", f"states_{n}_s", f"{what}: every leader in ZooKeeper (s)", "{:.2f}",
                                   AT_MOST_KAFKA),
                            figure(results, "scale", f"settled_{n}_s", f"{what}: every broker serving, ISRs full (s)",
                                   "{:.2f}", AT_MOST_KAFKA)]
        previous = n
    section.figures += [
        figure(results, "scale", "kill_led_partitions", "SIGKILL a non-controller: partitions it led"),
        figure(results, "scale", "kill_session_expiry_s", "  its session lost after (s)", "{:.2f}"),
        figure(results, "scale", "kill_failover_s", "  then its partitions online again after (s)", "{:.2f}", AT_MOST_KAFKA),
        figure(results, "scale", "controller_led_partitions", "SIGKILL the controller: partitions it led"),
        figure(results, "scale", "controller_failover_s", "  its partitions online again after its session loss (s)",
               "{:.2f}", AT_MOST_KAFKA),
        figure(results, "scale", "shutdown_led_partitions", "controlled shutdown: partitions it led"),
        figure(results, "scale", "shutdown_leaders_moved_s", "  leaders moved after SIGTERM (s)", "{:.2f}", AT_MOST_KAFKA),
        figure(results, "scale", "shutdown_exit_s", "  process exited after SIGTERM (s)", "{:.2f}", AT_MOST_KAFKA)]
    section.figures += [figure(results, "scale", f"rss_{n}_mb", f"brokers' RSS at {n:,} partitions (MB)")
                        for n in [0, *counts]]
    section.figures += [figure(results, "scale", "bytes_per_partition", "memory per partition (KiB, 3 replicas)",
                               "{:,.1f}", AT_MOST_KAFKA, 1 / 1024),
                        Figure("brokers' peak RSS, all together (MB, highest round)", peaks["odradek"], peaks["kafka"])]
    section.raw = per_round
    section.notes.append("Topics written to ZooKeeper; times from ZooKeeper's znodes (perf/controller_scale.py); "
                         "the kills and the shutdown are timed on the partitions of the second (larger) topic; the "
                         "broker is restarted and every ISR full again before the next step.  RSS of all three brokers together; a JVM's RSS includes the heap it has touched, "
                         "which G1 keeps.")
    return section


def compaction(work: Path, s: dict[str, Any], rounds: int, version: str) -> Section:
    ctx = mp.get_context("spawn")
    overrides = {"log.cleaner.backoff.ms": "1000", "offsets.topic.replication.factor": "1"}
    with Pair(work, 1, version, overrides) as pair:
        def run(name: str, _phase: str, r: str) -> dict[str, Any]:
            cluster = pair.clusters[name]
            topic, latency_topic = f"compacted-{r}", f"latency-{r}"
            config = {"cleanup.policy": "compact", "segment.bytes": str(s["segment_bytes"])}
            create(cluster, topic, 1, 1, {**config, "min.cleanable.dirty.ratio": "1"})
            create(cluster, latency_topic, 1, 1)
            records = int(s["gb"] * 1e9 / 121)  # ~21 bytes of key and record framing per 100-byte value
            fillers = [ctx.Process(target=fill, args=(cluster.bootstrap_servers, topic, records // 2, s["keys"], seed))
                       for seed in (1, 2)]
            for f in fillers:
                f.start()
            for f in fillers:
                f.join()
            broker = next(iter(cluster.brokers.values()))
            before = log_size(broker.config_path.parent / "data" / f"{topic}-0")
            out, stop = ctx.Queue(), ctx.Event()
            idle = ctx.Process(target=latencies, args=(cluster.bootstrap_servers, latency_topic, s["rate"],
                                                       s["phase_s"], stop, out))
            idle.start()
            idle_samples = out.get(timeout=s["phase_s"] + 120)["samples"]
            idle.join()
            busy = ctx.Process(target=latencies, args=(cluster.bootstrap_servers, latency_topic, s["rate"], 900.0,
                                                       stop, out))
            busy.start()
            time.sleep(3)  # the producer connects and warms up before the cleaning starts
            window = UsageWindow(pair.groups(name))
            t_alter = time.monotonic_ns()
            set_topic_config(cluster, topic, {**config, "min.cleanable.dirty.ratio": "0.5"})
            summary = wait_cleaned(broker.config_path.parent / "log-cleaner.log", f"{topic}-0")
            t_done = time.monotonic_ns()
            usage = window.stop()
            stop.set()
            during = [x for x in out.get(timeout=120)["samples"] if t_alter <= x[0] <= t_done]
            busy.join()
            idle_p99, busy_p99 = latency_stats(idle_samples)["p99_ms"], latency_stats(during)["p99_ms"]
            # The cleaner stops at the active segment, whose size depends on where the segments
            # rolled: its throughput is of what it read, as its summary counts it.
            cleaned = summary.mb * CLEANER_MB[name] / MB
            return {"log_mb": before / MB, "after_mb": log_size(broker.config_path.parent / "data" / f"{topic}-0") / MB,
                    "cleaned_mb": cleaned, "cleaner_s": summary.seconds, "cleaner_mb_per_s": cleaned / summary.seconds,
                    "wall_mb_per_s": cleaned / ((t_done - t_alter) / 1e9), "cleaning_cpu_s": usage.cpu_s["brokers"],
                    "idle_p99_ms": idle_p99, "cleaning_p99_ms": busy_p99, "p99_ratio": busy_p99 / idle_p99,
                    "summary": summary.line, "usage": usage.as_dict()}

        def short(x: dict[str, Any]) -> str:
            return (f"{x['cleaner_mb_per_s']:.1f} MB/s, p99 {x['idle_p99_ms']:.1f} idle -> {x['cleaning_p99_ms']:.1f} ms "
                    "while cleaning")

        per_round = alternate(rounds, ["cleaning"], run, short)
        results = medians(per_round)
        section = Section(f"6. Compaction ({s['gb']:g} GB of keyed records, {s['keys']:,} keys, 1 broker)")
        section.figures += [
            figure(results, "cleaning", "log_mb", "log before cleaning (MB)", "{:,.1f}"),
            figure(results, "cleaning", "after_mb", "log after cleaning (MB)", "{:,.1f}"),
            figure(results, "cleaning", "cleaned_mb", "log read by the cleaner (MB, up to the active segment)", "{:,.1f}"),
            figure(results, "cleaning", "cleaner_mb_per_s", "cleaner throughput (MB/s read, its own seconds)",
                   "{:,.1f}", AT_LEAST_KAFKA),
            figure(results, "cleaning", "wall_mb_per_s", "config change to cleaned (MB/s)", "{:,.1f}"),
            figure(results, "cleaning", "cleaning_cpu_s", "broker CPU-s while cleaning", "{:.2f}"),
            figure(results, "cleaning", "idle_p99_ms", "produce p99 idle (ms)", "{:.2f}"),
            figure(results, "cleaning", "cleaning_p99_ms", "produce p99 while cleaning (ms)", "{:.2f}"),
            figure(results, "cleaning", "p99_ratio", "produce p99 cleaning ÷ idle", "{:.2f}")]
        section.figures += pair.memory_figures()
    section.usage, section.raw = usage_rows(results), per_round
    section.notes += [f"Both brokers: the cleaner's defaults (1 thread, 128 MiB dedupe buffer, unthrottled), "
                      f"log.cleaner.backoff.ms=1000, segment.bytes={s['segment_bytes']}, the cleaning held back with "
                      "min.cleanable.dirty.ratio=1 and let loose with 0.5; a producer at "
                      f"{s['rate']:,} records/s (acks=1, linger.ms=0) for {s['phase_s']} s idle, then while cleaning.",
                      "Round 1's summaries: " + "; ".join(f"{n}: {results[n]['cleaning']['summary']}" for n in BROKERS)]
    return section


def failover_gap(work: Path, s: dict[str, Any], rounds: int, version: str) -> Section:
    with Pair(work, 3, version) as pair:
        def run(name: str, _phase: str, r: str) -> dict[str, Any]:
            cluster = pair.clusters[name]
            topic = f"failover-{r}"
            create(cluster, topic, PARTITIONS, 3)
            zk = cluster.zk_client()
            controller, led = controller_id(zk), leaders(zk, topic, PARTITIONS)
            victim = max((b for b in cluster.brokers if b != controller),
                         key=lambda b: sum(1 for x in led.values() if x == b))
            result = producer_gap(cluster, topic, PARTITIONS, victim, rate=s["rate"])
            cluster.start_broker(victim, timeout_s=300)
            wait_full_isr(cluster, topic, PARTITIONS, 3, timeout_s=300)
            return result

        def short(x: dict[str, Any]) -> str:
            return f"longest gap {x['longest_gap_s']:.2f} s ({x['led_partitions']} partitions led by broker {x['victim']})"

        per_round = alternate(rounds, ["failover"], run, short, warm_up=True)
        results = medians(per_round)
        section = Section("7. Failover (3 brokers, RF 3, 6 partitions, idempotent acks=all producer)")
        section.figures += [
            figure(results, "failover", "led_partitions", "partitions the SIGKILLed broker led"),
            figure(results, "failover", "longest_gap_led_s", "longest gap between acks, its partitions (s)", "{:.2f}",
                   AT_MOST_KAFKA),
            figure(results, "failover", "longest_gap_s", "longest gap between acks, any partition (s)", "{:.2f}",
                   AT_MOST_KAFKA),
            figure(results, "failover", "longest_wait_s", "longest a record waited for its ack (s)", "{:.2f}"),
            figure(results, "failover", "failed", "failed deliveries")]
        section.figures += pair.memory_figures()
    section.raw = per_round
    section.notes.append(f"zookeeper.session.timeout.ms={LOCAL_DEFAULTS['zookeeper.session.timeout.ms']} and "
                         f"replica.lag.time.max.ms={LOCAL_DEFAULTS['replica.lag.time.max.ms']} on both; "
                         f"{s['rate']:,} records/s round robin; the victim is a non-controller leading partitions.  "
                         "No CPU table: a broker killed and reaped within a window would count as a client "
                         "(perf/sysstat.py).")
    return section


SECTIONS: dict[int, Callable[[Path, dict[str, Any], int, str], Section]] = {
    1: batched, 2: latency, 3: one_record, 4: transactions, 5: scale, 6: compaction, 7: failover_gap}


def kafka_jar_version(line: str) -> str:
    """The full version of Kafka ``line``'s broker jar (e.g. 3.9.2)."""
    core = next(j.name for j in jvm_classpath(VERSIONS[line]) if j.name.startswith("kafka_2.13-"))
    return core.removeprefix("kafka_2.13-").removesuffix(".jar")


@contextmanager
def working_directory(given: str | None) -> Iterator[Path]:
    base = Path(given) if given else Path(tempfile.mkdtemp(prefix="odradek-vs-kafka-"))
    base.mkdir(parents=True, exist_ok=True)
    try:
        yield base
    finally:
        if not given:
            shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sections", default=",".join(map(str, SECTIONS)), help="comma-separated section numbers")
    ap.add_argument("--quick", action="store_true", help="each section at its small scale (a smoke test)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per figure, alternating the brokers (default 3)")
    ap.add_argument("--kafka-version", default="3.9", choices=["3.9", "2.8"])
    ap.add_argument("--dir", help="working directory (default: a temporary one, removed afterwards)")
    args = ap.parse_args()
    chosen = [int(x) for x in args.sections.split(",") if x.strip()]
    if unknown := sorted(set(chosen) - set(SECTIONS)):
        ap.error(f"no section {unknown} (sections: {', '.join(map(str, SECTIONS))})")
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    code = code_version()
    versions = {"odradek": odradek.__version__, "commit": code["commit"], "dirty": code["dirty"],
                "kafka": kafka_jar_version(args.kafka_version), "jvm": jvm_settings(), "python": sys.version.split()[0],
                "confluent_kafka": confluent_kafka.__version__, "librdkafka": confluent_kafka.libversion()[0]}
    header = (f"odradek {versions['odradek']} (commit {code['commit']}"
              f"{', uncommitted: ' + ', '.join(code['dirty']) if code['dirty'] else ''}) ÷ Apache Kafka "
              f"{versions['kafka']} (ZooKeeper mode); Kafka JVM: {versions['jvm']}; Python {versions['python']}; "
              f"confluent-kafka {versions['confluent_kafka']} (librdkafka {versions['librdkafka']}); "
              f"{os.cpu_count()} CPUs; {args.rounds} rounds per figure{', --quick' if args.quick else ''}; "
              f"load average {os.getloadavg()[0]:.2f}")
    log(header)
    sections: dict[int, Section] = {}
    timings: dict[int, float] = {}
    with working_directory(args.dir) as work:
        for number in chosen:
            scale_ = SCALES[number]["quick" if args.quick else "full"]
            log(f"section {number}: {SECTIONS[number].__name__} {scale_}")
            started = time.monotonic()
            sections[number] = SECTIONS[number](work / f"section-{number}", scale_, args.rounds, args.kafka_version)
            timings[number] = time.monotonic() - started
            log(f"section {number} took {timings[number]:.0f} s")
    print()
    print(f"## odradek ÷ Apache Kafka\n\n{header}\n")
    for section in sections.values():
        print(section.markdown())
        print()
    missed = [f"{n}: {name}" for n, section in sections.items() for name in section.missed()]
    print("Targets missed: " + ("; ".join(missed) if missed else "none"))
    out = RESULTS / f"vs-kafka-{stamp}.json"
    out.write_text(json.dumps({"started": stamp, "versions": versions, "quick": args.quick, "rounds": args.rounds,
                               "cpu_count": os.cpu_count(),
                               "scales": {n: SCALES[n]["quick" if args.quick else "full"] for n in chosen},
                               "seconds": timings, "sections": {n: s.as_dict() for n, s in sections.items()}},
                              indent=2, default=str) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    unwind_on_sigterm()
    main()
