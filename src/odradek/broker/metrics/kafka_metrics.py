"""The broker's state as Prometheus metric families, named as the JMX exporter's standard
Kafka rules (its example ``kafka-2_0_0.yml``) name Kafka's MBeans, so dashboards made for
Kafka work unchanged:

- a gauge ``kafka.<domain><type=T, name=N>`` is ``kafka_<domain>_<t>_<n>`` (lower case), its
  keys (``topic``, ``partition``, ``clientId``) become labels;
- a meter ``...PerSec`` is the counter ``kafka_<domain>_<t>_<n without PerSec>_total``;
- a timer or histogram is a summary ``kafka_<domain>_<t>_<n>{quantile="0.50".."0.999"}`` with
  ``_count`` (the exporter has no ``_sum``; the summary here adds it);
- a ``...Percent`` gauge is ``kafka_<domain>_<t>_<n without Percent>_percent``.

Gauges are computed here, at scrape time, from the state the broker keeps anyway (partition
leadership and ISRs, the controller's context, groups, logs); counters are the plain ints the
request paths add to.  Everything runs on the broker's event loop (see
:mod:`odradek.broker.metrics.metrics_server`), so it reads a consistent state.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import fields
from typing import TYPE_CHECKING, Final, Protocol

from prometheus_client.core import GaugeMetricFamily, Metric

from odradek.broker.group.group import GroupState
from odradek.broker.metrics.consumer_lag import LagRow
from odradek.broker.metrics.topic_stats import TopicCounters
from odradek.common import now_ms
from odradek.controller.controller_state import IDLE, TIMERS, state_of
from odradek.histogram import Histogram
from odradek.log.log import LOG_FLUSH_STATS
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.fetch_session import FetchSessionCache
    from odradek.broker.group.coordinator import GroupCoordinator
    from odradek.broker.metrics.request_metrics import RequestMetrics
    from odradek.broker.replica_manager import ReplicaManager
    from odradek.broker.transaction.coordinator import TransactionCoordinator
    from odradek.controller.controller import KafkaController
    from odradek.log.cleaner.log_cleaner import LogCleaner
    from odradek.log.log_manager import LogManager
    from odradek.zk.client import KafkaZkClient

__all__ = ["EventLoopLoad", "MetricsSource", "broker_families", "consumer_lag_families", "controller_families",
           "replica_manager_families", "request_families"]

# BrokerTopicMetrics' meters: TopicCounters field -> the exporter's counter name.
_TOPIC_METERS: Final = {
    "bytes_in": "bytesin", "messages_in": "messagesin", "bytes_out": "bytesout",
    "bytes_rejected": "bytesrejected", "failed_produce_requests": "failedproducerequests",
    "failed_fetch_requests": "failedfetchrequests", "total_produce_requests": "totalproducerequests",
    "replication_bytes_in": "replicationbytesin", "replication_bytes_out": "replicationbytesout",
}
assert set(_TOPIC_METERS) == {f.name for f in fields(TopicCounters)}

# RequestMetrics' timers: RequestTimes attribute -> Kafka's name.
_REQUEST_TIMERS: Final = (("total", "totaltimems"), ("queue", "requestqueuetimems"), ("local", "localtimems"),
                          ("remote", "remotetimems"), ("throttle", "throttletimems"),
                          ("response_queue", "responsequeuetimems"), ("response_send", "responsesendtimems"))
_EMPTY: Final = Histogram()

_GROUP_STATES: Final = {GroupState.PREPARING_REBALANCE: "numgroupspreparingrebalance",
                        GroupState.COMPLETING_REBALANCE: "numgroupscompletingrebalance",
                        GroupState.STABLE: "numgroupsstable", GroupState.DEAD: "numgroupsdead",
                        GroupState.EMPTY: "numgroupsempty"}


class MetricsSource(Protocol):
    """What the collector reads of a broker (KafkaServer)."""

    replica_manager: ReplicaManager
    controller: KafkaController
    log_manager: LogManager
    log_cleaner: LogCleaner
    group_coordinator: GroupCoordinator
    transaction_coordinator: TransactionCoordinator
    fetch_sessions: FetchSessionCache
    zk: KafkaZkClient


class EventLoopLoad:
    """The event loop's busy fraction between two scrapes: the loop thread's CPU time over the
    wall-clock time (the loop is one thread; what it does not spend on the CPU it waits in
    ``epoll``, or for the disk).  Read on the loop's thread."""

    def __init__(self) -> None:
        self._cpu = time.thread_time()
        self._wall = time.monotonic()

    def idle_fraction(self) -> float:
        cpu, wall = time.thread_time(), time.monotonic()
        elapsed = wall - self._wall
        busy = (cpu - self._cpu) / elapsed if elapsed > 0 else 0.0
        self._cpu, self._wall = cpu, wall
        return max(0.0, 1.0 - busy)


def broker_families(broker: MetricsSource, requests: RequestMetrics, load: EventLoopLoad,
                    zk_events: Counter[str]) -> Iterator[Metric]:
    """Every family of one broker but the consumer-lag view."""
    yield from controller_families(broker.controller)
    yield from replica_manager_families(broker.replica_manager)
    yield from _topic_metrics(broker.replica_manager)
    yield from request_families(requests, load)
    yield from _log(broker.log_manager, broker.log_cleaner)
    yield from _coordinators(broker.group_coordinator, broker.transaction_coordinator, broker.fetch_sessions)
    yield from _zookeeper(broker.zk, zk_events)


def consumer_lag_families(rows: Iterable[LagRow]) -> Iterator[Metric]:
    """kafka_exporter's names for the groups this broker coordinates."""
    labels = ["consumergroup", "topic", "partition"]
    current = GaugeMetricFamily("kafka_consumergroup_current_offset",
                                "Current committed offset of a consumer group at a partition", labels=labels)
    lag = GaugeMetricFamily("kafka_consumergroup_lag",
                            "Current approximate lag of a consumer group at a partition", labels=labels)
    lag_sum = GaugeMetricFamily("kafka_consumergroup_lag_sum",
                                "Current approximate lag of a consumer group at a topic",
                                labels=["consumergroup", "topic"])
    sums: Counter[tuple[str, str]] = Counter()
    for row in rows:
        key = [row.group, row.topic, str(row.partition)]
        current.add_metric(key, row.committed)
        lag.add_metric(key, row.lag)
        sums[(row.group, row.topic)] += row.lag
    for (group, topic), total in sums.items():
        lag_sum.add_metric([group, topic], total)
    yield from (current, lag, lag_sum)


# ---------------------------------------------------------------------- families


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _counter(name: str, doc: str, samples: Iterable[tuple[dict[str, str], float]]) -> Metric:
    """A counter family whose samples may carry different label sets (per topic and total)."""
    family = Metric(name, doc, "counter")
    for labels, value in samples:
        family.add_sample(name + "_total", labels, value)
    return family


def _summary(name: str, doc: str, histograms: Iterable[tuple[dict[str, str], Histogram]]) -> Metric:
    """Histograms as the exporter shows Yammer's: quantile gauges, plus ``_count`` and ``_sum``."""
    family = Metric(name, doc, "summary")
    for labels, histogram in histograms:
        for quantile, value in histogram.quantiles():
            family.add_sample(name, {**labels, "quantile": quantile}, value)
        family.add_sample(name + "_count", labels, histogram.count)
        family.add_sample(name + "_sum", labels, histogram.sum)
    return family


def controller_families(controller: KafkaController) -> Iterator[Metric]:
    """KafkaController's gauges, ControllerStats' timers and unclean elections."""
    active = controller.is_active
    ctx = controller.ctx
    offline = imbalance = topics = partitions = 0
    if active:  # Kafka's controller gauges are zero on every broker but the active controller
        offline = controller.partition_sm.offline_partition_count()
        deleting = controller.partition_sm.topics_being_deleted
        for tp, state in ctx.leadership.items():
            replicas = ctx.partition_replica_assignment(tp)
            if replicas and state.leader != replicas[0] and tp.topic not in deleting:
                imbalance += 1
        topics = len(ctx.all_topics)
        partitions = len(ctx.all_partitions())
    prefix = "kafka_controller_kafkacontroller_"
    yield _gauge(prefix + "activecontrollercount", "1 on the active controller, else 0", int(active))
    yield _gauge(prefix + "offlinepartitionscount", "Partitions without a live leader", offline)
    yield _gauge(prefix + "preferredreplicaimbalancecount",
                 "Partitions whose leader is not their preferred replica", imbalance)
    yield _gauge(prefix + "globaltopiccount", "Topics in the cluster", topics)
    yield _gauge(prefix + "globalpartitioncount", "Partitions in the cluster", partitions)
    events = controller.event_manager
    current = events.current
    yield _gauge(prefix + "controllerstate", "Kafka's ControllerState of the event being processed (0: idle)",
                 (state_of(current) if current is not None else IDLE).value)
    yield _gauge("kafka_controller_controllereventmanager_eventqueuesize", "Controller events waiting",
                 events.queue_size)
    for timer in TIMERS:
        yield _summary(f"kafka_controller_controllerstats_{timer.lower()}",
                       f"Time to process the controller's events of this kind ({timer}), ms",
                       [({}, events.rate_and_time.get(timer, _EMPTY))])
    yield _counter("kafka_controller_controllerstats_uncleanleaderelections", "Unclean leader elections",
                   [({}, controller.partition_sm.unclean_leader_elections)])


def replica_manager_families(rm: ReplicaManager) -> Iterator[Metric]:
    """ReplicaManager's gauges (counted over the partitions hosted here) and ISR changes, fetchers' MaxLag."""
    leaders = under = under_min = at_min = 0
    for p in rm.partitions.values():
        if not p.is_leader:
            continue
        leaders += 1
        isr = len(p.isr)
        if isr < len(p.replicas):
            under += 1
        min_isr = p.min_insync_replicas()
        if isr < min_isr:
            under_min += 1
        elif isr == min_isr:
            at_min += 1
    prefix = "kafka_server_replicamanager_"
    yield _gauge(prefix + "underreplicatedpartitions", "Partitions led here whose ISR is smaller than the replicas",
                 under)
    yield _gauge(prefix + "underminisrpartitioncount", "Partitions led here with an ISR below min.insync.replicas",
                 under_min)
    yield _gauge(prefix + "atminisrpartitioncount", "Partitions led here with an ISR at min.insync.replicas",
                 at_min)
    yield _gauge(prefix + "leadercount", "Partitions led here", leaders)
    yield _gauge(prefix + "partitioncount", "Partitions hosted here", len(rm.partitions))
    yield _gauge(prefix + "offlinereplicacount", "Replicas here in a failed log directory", len(rm.offline_partitions))
    yield _counter(prefix + "isrshrinks", "ISR shrinks accepted by the controller",
                   [({}, rm.alter_partition.isr_shrinks)])
    yield _counter(prefix + "isrexpands", "ISR expansions accepted by the controller",
                   [({}, rm.alter_partition.isr_expands)])
    max_lag = GaugeMetricFamily("kafka_server_replicafetchermanager_maxlag",
                                "Largest lag (messages) of a partition this broker follows", labels=["clientId"])
    max_lag.add_metric(["Replica"], rm.fetchers.max_lag())
    yield max_lag


def _topic_metrics(rm: ReplicaManager) -> Iterator[Metric]:
    stats = rm.topic_stats
    totals = stats.totals()
    per_topic = list(stats.topics.items())
    for attr, name in _TOPIC_METERS.items():
        samples = [({"topic": topic}, getattr(counters, attr)) for topic, counters in per_topic]
        samples.append(({}, getattr(totals, attr)))
        yield _counter(f"kafka_server_brokertopicmetrics_{name}", f"BrokerTopicMetrics {name}", samples)


def request_families(requests: RequestMetrics, load: EventLoopLoad) -> Iterator[Metric]:
    """RequestMetrics by API: requests and errors answered, and the request timers as summaries."""
    by_name = sorted(requests.snapshot().items())
    yield _counter("kafka_network_requestmetrics_requests", "Requests answered, by API and version",
                   [({"request": name, "version": str(version)}, count)
                    for name, times in by_name for version, count in sorted(times.requests.items())])
    yield _counter("kafka_network_requestmetrics_errors", "Error codes in responses (NONE included), by API and error",
                   [({"request": name, "error": _error_name(code)}, count)
                    for name, times in by_name for code, count in sorted(times.error_counts().items())])
    for attr, metric in _REQUEST_TIMERS:
        yield _summary(f"kafka_network_requestmetrics_{metric}", f"RequestMetrics {metric}",
                       [({"request": name}, getattr(times, attr)) for name, times in by_name])
    yield _gauge("kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
                 "Fraction of time the event loop was idle since the last scrape", load.idle_fraction())


def _error_name(code: int) -> str:
    """Kafka's ``Errors`` name of a code (``NOT_LEADER_OR_FOLLOWER``); an unknown code is
    UNKNOWN_SERVER_ERROR, as ``Errors.forCode`` makes it."""
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return ErrorCode.unknown_server_error.name.upper()


def _log(log_manager: LogManager, cleaner: LogCleaner) -> Iterator[Metric]:
    labels = ["topic", "partition"]
    size = GaugeMetricFamily("kafka_log_log_size", "Bytes of a partition's log here", labels=labels)
    end = GaugeMetricFamily("kafka_log_log_logendoffset", "A partition's log end offset here", labels=labels)
    start = GaugeMetricFamily("kafka_log_log_logstartoffset", "A partition's log start offset here", labels=labels)
    segments = GaugeMetricFamily("kafka_log_log_numlogsegments", "Segments of a partition's log here", labels=labels)
    for lg in log_manager.all_logs():
        key = [lg.topic, str(lg.partition)]
        size.add_metric(key, lg.size)
        end.add_metric(key, lg.log_end_offset)
        start.add_metric(key, lg.log_start_offset)
        segments.add_metric(key, len(lg.segments))
    yield from (size, end, start, segments)
    yield _summary("kafka_log_logflushstats_logflushrateandtimems", "Time of a log flush (fsync), ms",
                   [({}, LOG_FLUSH_STATS)])
    yield _gauge("kafka_log_logcleanermanager_max_dirty_percent", "Dirty share of the dirtiest compacted log, percent",
                 int(100 * cleaner.manager.dirtiest_log_cleanable_ratio))
    yield _gauge("kafka_log_logcleaner_time_since_last_run_ms", "Since a cleaner thread last looked for work, ms",
                 max(0, now_ms() - cleaner.last_run_ms))
    yield _gauge("kafka_log_logmanager_offlinelogdirectorycount", "Log directories that failed",
                 log_manager.offline_log_directory_count)


def _coordinators(groups: GroupCoordinator, txns: TransactionCoordinator,
                  sessions: FetchSessionCache) -> Iterator[Metric]:
    loaded = groups.manager.current_groups()
    by_state = Counter(group.state for group in loaded)
    prefix = "kafka_coordinator_group_groupmetadatamanager_"
    yield _gauge(prefix + "numgroups", "Groups coordinated here", len(loaded))
    for state, name in _GROUP_STATES.items():
        yield _gauge(prefix + name, f"Groups coordinated here in state {state.value}", by_state[state])
    yield _gauge(prefix + "numoffsets", "Committed offsets of the groups coordinated here",
                 sum(len(group.offsets) for group in loaded))
    ongoing = sum(1 for _epoch, md in txns.manager.owned_metadata() if md.has_pending_transaction)
    yield _gauge("kafka_coordinator_transaction_transactionstatemanager_ongoingtransactions",
                 "Transactions coordinated here that are ongoing or being committed or aborted", ongoing)
    prefix = "kafka_server_fetchsessioncache_"
    yield _gauge(prefix + "numincrementalfetchsessions", "Fetch sessions cached (KIP-227)", len(sessions.sessions))
    yield _gauge(prefix + "numincrementalfetchpartitionscached", "Partitions in the cached fetch sessions",
                 sum(len(s.partitions) for s in sessions.sessions.values()))


def _zookeeper(zk: KafkaZkClient, events: Counter[str]) -> Iterator[Metric]:
    yield _summary("kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms",
                   "ZooKeeper request round trips, ms", [({}, zk.request_latency)])
    state = GaugeMetricFamily("kafka_server_sessionexpirelistener_sessionstate",
                              "The ZooKeeper session's state (1 for the current one)", labels=["state"])
    state.add_metric(["CONNECTED" if zk.connected else "CLOSED" if zk.closed else "DISCONNECTED"], 1)
    yield state
    prefix = "kafka_server_sessionexpirelistener_zookeeper"
    yield _counter(prefix + "expires", "ZooKeeper session expiries", [({}, events["LOST"])])
    yield _counter(prefix + "disconnects", "ZooKeeper disconnections", [({}, events["SUSPENDED"])])
