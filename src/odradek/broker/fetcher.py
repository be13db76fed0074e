"""Follower fetchers: replicate partitions from their leaders (Kafka's ReplicaFetcherThread).

Each (leader, fetcher id) pair has one task; a partition goes to fetcher
``hash(topic, partition) % num.replica.fetchers`` of its leader.  A partition that has just
become a follower first truncates its log by leader epoch (OffsetForLeaderEpoch, KIP-101 and
KIP-279: never blindly to the high watermark, never keeping a tail that diverged from the
leader), then fetches from its log end offset with its replica id, appends what it gets,
and follows the leader's high watermark and log start offset.

Fetching is this broker's steadiest traffic, so its Fetch v12 requests and responses go
through the hand-written codec of :mod:`odradek.protocol.replica_fetch` (tested against
kio's), with the fetched records appended straight from the response frame.  Each fetcher
keeps a fetch session with its leader (KIP-227,
:class:`~odradek.protocol.fetch_session_client.FollowerFetchSession`): once the leader has
made one, a request lists only the partitions whose fetch position changed and a response
only the partitions with something new; a partition a response leaves out had nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kio.schema.list_offsets.v7 import request as lo_req
from kio.schema.list_offsets.v7 import response as lo_resp
from kio.schema.offset_for_leader_epoch.v3 import request as epoch_req
from kio.schema.offset_for_leader_epoch.v3 import response as epoch_resp

from odradek import tasks
from odradek.broker.metrics.topic_stats import BrokerTopicStats
from odradek.broker.partition import Partition
from odradek.common import TopicPartition
from odradek.log.log import UnexpectedAppendOffsetError
from odradek.net.client import BrokerConnection, ConnectionClosed
from odradek.protocol.errors import ErrorCode, KafkaError, KafkaStorageError
from odradek.protocol.fetch_session_client import FollowerFetchSession
from odradek.protocol.framing import MalformedResponseError
from odradek.protocol.replica_fetch import (
    FetchPartitionSpec,
    FollowerFetchPartition,
    encode_follower_fetch,
    parse_follower_fetch_response,
)
from odradek.security.client import ClientSecurity

if TYPE_CHECKING:
    from odradek.broker.metadata_cache import MetadataCache
    from odradek.broker.replication_quota import ReplicationQuotaManager
    from odradek.config import KafkaConfig

log = logging.getLogger(__name__)

__all__ = ["ReplicaFetcherManager"]

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


def _error_code(code: int) -> ErrorCode:
    """A leader's error code; one this Kafka version does not know counts as
    UNKNOWN_SERVER_ERROR, as in Kafka's Errors.forCode."""
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.unknown_server_error


@dataclass
class _Fetching:
    partition: Partition
    leader_epoch: int  # the epoch this fetcher was started for
    backoff_until: float = 0.0
    # KIP-279: the epoch to ask about in the next OffsetForLeaderEpoch round (None: latest).
    ask_epoch: int | None = None
    # The leader's high watermark minus our log end offset at the last fetch (Kafka's
    # FetcherLagMetrics, read by the MaxLag gauge).
    lag: int = 0


class ReplicaFetcher:
    """Fetches a set of partitions from one leader."""

    def __init__(self, manager: ReplicaFetcherManager, leader_id: int, fetcher_id: int) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.fetcher_id = fetcher_id
        self.partitions: dict[TopicPartition, _Fetching] = {}
        self._changed = asyncio.Event()
        self._conn: BrokerConnection | None = None
        # The fetch session with the leader and the connection its last request went on.
        self.session = FollowerFetchSession()
        self._session_conn: BrokerConnection | None = None
        self._task = tasks.start(self._run(), f"replica-fetcher-{manager.broker_id}-from-{leader_id}-{fetcher_id}")

    def add(self, partition: Partition) -> None:
        self.partitions[TopicPartition(partition.topic, partition.partition)] = _Fetching(
            partition, partition.leader_epoch)
        self._changed.set()

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    async def close(self) -> None:
        await tasks.cancel_and_wait(self._task)
        if self._conn is not None:
            await self._conn.close()

    async def _connection(self) -> BrokerConnection:
        if self._conn is not None and self._conn.connected:
            return self._conn
        endpoint = self.manager.metadata_cache.endpoint(self.leader_id, self.manager.listener)
        if endpoint is None:
            raise ConnectionError(f"leader {self.leader_id} is not a live broker")
        conn = BrokerConnection(endpoint[0], endpoint[1], f"replica-fetcher-{self.manager.broker_id}",
                                security=self.manager.security)
        await conn.connect(timeout_s=self.manager.socket_timeout_s)
        self._conn = conn
        return conn

    async def _run(self) -> None:
        backoff_s = self.manager.config["replica.fetch.backoff.ms"] / 1000
        while True:
            if not self.partitions:
                self._changed.clear()
                await self._changed.wait()
                continue
            try:
                now = time.monotonic()
                # A partition that failed (here or in truncation) waits out replica.fetch.backoff.ms.
                ready = [f for f in self.partitions.values() if f.backoff_until <= now]
                if not ready:
                    await asyncio.sleep(min(f.backoff_until for f in self.partitions.values()) - now)
                    continue
                conn = await self._connection()
                truncating = [f for f in ready if f.partition.needs_truncation]
                if truncating:
                    await self._truncate(conn, truncating)
                    continue
                await self._fetch(conn, ready)
            except asyncio.CancelledError:
                raise
            except (TimeoutError, ConnectionError, OSError) as e:
                log.info("Fetcher %d from broker %d: %r; backing off", self.fetcher_id, self.leader_id, e)
                if self._conn is not None:
                    await self._conn.close()
                    self._conn = None
                await asyncio.sleep(backoff_s)
            except Exception:
                log.exception("Fetcher %d from broker %d failed; backing off", self.fetcher_id, self.leader_id)
                await asyncio.sleep(backoff_s)

    # ------------------------------------------------------------------ truncation

    async def _truncate(self, conn: BrokerConnection, items: list[_Fetching]) -> None:
        """One round of OffsetForLeaderEpoch for the partitions that need truncation."""
        asks: dict[TopicPartition, tuple[_Fetching, int]] = {}
        for item in items:
            p = item.partition
            assert p.log is not None
            epoch = item.ask_epoch
            if epoch is None:
                epoch = p.log.latest_epoch
            if epoch is None:
                # No epochs known (an empty log): nothing can have diverged.
                self._finish_truncation(item, p.log.log_end_offset)
                continue
            asks[TopicPartition(p.topic, p.partition)] = (item, epoch)
        if not asks:
            return
        by_topic: dict[str, list[epoch_req.OffsetForLeaderPartition]] = {}
        for tp, (item, epoch) in asks.items():
            by_topic.setdefault(tp.topic, []).append(epoch_req.OffsetForLeaderPartition(
                partition=tp.partition, current_leader_epoch=item.leader_epoch, leader_epoch=epoch))
        request = epoch_req.OffsetForLeaderEpochRequest(
            replica_id=self.manager.broker_id,
            topics=tuple(epoch_req.OffsetForLeaderTopic(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()))
        response = await conn.send(request, epoch_resp.OffsetForLeaderEpochResponse, self.manager.socket_timeout_s)
        for topic in response.topics:
            for pr in topic.partitions:
                tp = TopicPartition(topic.topic, pr.partition)
                if tp not in asks or self.partitions.get(tp) is not asks[tp][0]:
                    continue
                item = asks[tp][0]
                if pr.error_code != ErrorCode.none:
                    log.info("OffsetForLeaderEpoch for %s failed: %s", tp, ErrorCode(pr.error_code).name)
                    item.backoff_until = time.monotonic() + self.manager.config["replica.fetch.backoff.ms"] / 1000
                    continue
                self._apply_epoch_answer(item, pr.leader_epoch, pr.end_offset)

    def _apply_epoch_answer(self, item: _Fetching, leader_epoch: int, leader_end: int) -> None:
        p = item.partition
        assert p.log is not None
        lg = p.log
        if leader_end == UNDEFINED_EPOCH_OFFSET:
            # The leader knows no such epoch (e.g. its log was emptied): only the high
            # watermark is known to be safe.
            self._finish_truncation(item, min(lg.high_watermark, lg.log_end_offset))
            return
        if leader_epoch == UNDEFINED_EPOCH:
            self._finish_truncation(item, min(leader_end, lg.log_end_offset))
            return
        own_epoch, own_end = lg.end_offset_for_epoch(leader_epoch)
        if own_epoch != leader_epoch and own_epoch != UNDEFINED_EPOCH:
            # KIP-279: we don't have the leader's epoch; truncate to what both agree on and
            # ask again with our epoch below it.
            target = min(leader_end, own_end)
            lg.truncate_to(target)
            item.ask_epoch = own_epoch
            log.info("Truncated %s to %d (epoch %d unknown here); asking again for epoch %d",
                     p.name, target, leader_epoch, own_epoch)
            return
        if own_epoch == UNDEFINED_EPOCH:
            self._finish_truncation(item, min(leader_end, lg.log_end_offset))
            return
        self._finish_truncation(item, min(leader_end, own_end))

    def _finish_truncation(self, item: _Fetching, target: int) -> None:
        p = item.partition
        assert p.log is not None
        before = p.log.log_end_offset
        # Even at our log end: truncate_to drops an epoch we began as leader but wrote nothing
        # in, which the new leader never had; left as our last epoch, every fetch would name it
        # and be answered "diverging" again, and this replica would never catch up.
        if p.log.truncate_to(target):
            log.info("Truncated %s from %d to %d by leader epoch (leader %d)", p.name, before, target, self.leader_id)
            self.manager.state_change(f"Truncated partition {p.name} to offset {target} (was {before}) after "
                                      f"OffsetForLeaderEpoch from leader {self.leader_id}")
        item.ask_epoch = None
        p.needs_truncation = False

    # ------------------------------------------------------------------ fetching

    async def _fetch(self, conn: BrokerConnection, items: list[_Fetching]) -> None:
        config = self.manager.config
        partition_max_bytes = config["replica.fetch.max.bytes"]
        wait_ms = config["replica.fetch.wait.max.ms"]
        if conn is not self._session_conn:
            if self._session_conn is not None:
                # A new connection: whatever the old one left in flight is lost; as Kafka
                # does after a send error, close the session and ask for a new one.
                self.session.on_send_error()
            self._session_conn = conn
        specs: list[FetchPartitionSpec] = []
        asked: dict[TopicPartition, tuple[_Fetching, int]] = {}
        quota = self.manager.quota
        throttling = quota is not None and quota.active  # the one check an unthrottled round pays
        allowance = quota.allowance() if quota is not None and throttling else 0
        for item in items:
            p = item.partition
            lg = p.log
            assert lg is not None
            max_bytes = partition_max_bytes
            if throttling and quota is not None and quota.is_throttled(p.topic, p.partition) \
                    and self.manager.broker_id not in p.isr:
                # Kafka's shouldFollowerThrottle: left out while the rate is used up, else
                # asking for no more than it allows.
                if allowance <= 0:
                    continue
                max_bytes = min(max_bytes, allowance)
            offset = lg.log_end_offset
            latest = lg.latest_epoch
            specs.append((p.topic, p.partition, item.leader_epoch, offset, latest if latest is not None else -1,
                          lg.log_start_offset, max_bytes))
            asked[TopicPartition(p.topic, p.partition)] = (item, offset)
        if not specs and quota is not None:
            await asyncio.sleep(quota.delay_s())  # every partition is held back by the throttle
            return
        # Partitions left out of this round (backing off) leave the session as forgotten.
        session = self.session
        built = session.build(specs)
        correlation_id = conn.next_correlation_id()
        request = encode_follower_fetch(
            correlation_id, conn.client_id, self.manager.broker_id, wait_ms, config["replica.fetch.min.bytes"],
            config["replica.fetch.response.max.bytes"], built.partitions, built.session_id, built.session_epoch,
            built.forgotten)
        timeout = self.manager.socket_timeout_s + wait_ms / 1000
        try:
            frame = await conn.send_frame(request, correlation_id, timeout)
        except BaseException:
            session.on_send_error()
            raise
        try:
            throttle_ms, error_code, session_id, partitions = parse_follower_fetch_response(frame)
        except MalformedResponseError as e:
            # What the connection does with a response it cannot decode: drop the connection
            # (the caller backs off and reconnects).
            session.on_send_error()
            log.warning("closing connection to %s:%s: %r", conn.host, conn.port, e)
            raise ConnectionClosed(f"bad response from {conn.host}:{conn.port}: {e!r}") from None
        if not session.on_response(session_id, error_code, [(pd.topic, pd.partition_index) for pd in partitions],
                                   throttle_ms):
            if error_code != ErrorCode.none:
                if not built.is_full and error_code in (ErrorCode.fetch_session_id_not_found,
                                                        ErrorCode.invalid_fetch_session_epoch):
                    # The leader lost or disowned the session: the next round, at once, is full.
                    log.info("Fetch session %d (epoch %d) with broker %d ended: %s", built.session_id,
                             built.session_epoch, self.leader_id, _error_code(error_code).name)
                    return
                raise KafkaError(f"fetch from broker {self.leader_id} failed: {_error_code(error_code).name}")
            if built.is_full and not partitions and throttle_ms > 0:
                await asyncio.sleep(throttle_ms / 1000)  # KIP-219: an empty answer that only throttles
                return
            # Partitions that do not fit the session: Kafka ignores the whole response, and
            # the next round is a full fetch (after a backoff if this one was full already).
            message = (f"fetch response from broker {self.leader_id} does not fit the "
                       f"{'full' if built.is_full else 'incremental'} fetch request of session {built.session_id}")
            if built.is_full:
                raise KafkaError(message)
            log.info("%s; ignored", message)
            return
        # An incremental response leaves out the partitions with nothing new: no change.
        for pd in partitions:
            tp = TopicPartition(pd.topic, pd.partition_index)
            entry = asked.get(tp)
            if entry is None or self.partitions.get(tp) is not entry[0]:
                continue  # reassigned while the fetch was in flight
            self._handle_partition(*entry, pd)
            if throttling and quota is not None and pd.records and quota.is_throttled(tp.topic, tp.partition):
                quota.record(len(pd.records))

    def _handle_partition(self, item: _Fetching, offset: int, pd: FollowerFetchPartition) -> None:
        p = item.partition
        lg = p.log
        assert lg is not None
        if lg.log_end_offset != offset or p.needs_truncation:
            return  # truncated meanwhile
        if pd.diverged:
            # The leader says our last fetched epoch ends below our log end (a Kafka leader
            # checks it on every fetch): truncate by OffsetForLeaderEpoch, then fetch again.
            p.needs_truncation = True
            return
        error = _error_code(pd.error_code)
        if error == ErrorCode.none:
            if pd.records:
                try:
                    lg.append_as_follower(pd.records)
                    self.manager.topic_stats.topic(p.topic).replication_bytes_in += len(pd.records)
                except UnexpectedAppendOffsetError as e:
                    log.warning("%s; truncating by leader epoch again", e)
                    p.needs_truncation = True
                    return
                except KafkaStorageError:
                    # Its directory failed: the failure handler takes the partition offline.
                    item.backoff_until = time.monotonic() + self.manager.config["replica.fetch.backoff.ms"] / 1000
                    return
            on_high_watermark = self.manager.on_high_watermark
            if on_high_watermark is None:
                lg.update_high_watermark(min(pd.high_watermark, lg.log_end_offset))
            elif lg.high_watermark != lg.update_high_watermark(min(pd.high_watermark, lg.log_end_offset)):
                on_high_watermark(TopicPartition(p.topic, p.partition))
            if pd.log_start_offset > lg.log_start_offset:
                lg.maybe_increment_log_start_offset(min(pd.log_start_offset, lg.high_watermark))
            item.lag = max(0, pd.high_watermark - lg.log_end_offset)
            return
        if error == ErrorCode.offset_out_of_range:
            self.manager.spawn(self._handle_out_of_range(item))
            item.backoff_until = time.monotonic() + 60  # until the reset below completes
            return
        if error in (ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch,
                     ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition,
                     ErrorCode.leader_not_available):
            # Our view of the leadership is stale or ahead; LeaderAndIsr will sort it out.
            item.backoff_until = time.monotonic() + self.manager.config["replica.fetch.backoff.ms"] / 1000
            return
        log.warning("Fetch of %s from broker %d failed: %s", p.name, self.leader_id, error.name)
        item.backoff_until = time.monotonic() + self.manager.config["replica.fetch.backoff.ms"] / 1000

    async def _handle_out_of_range(self, item: _Fetching) -> None:
        """Kafka's handleOffsetOutOfRange: our fetch offset is past the leader's end (only
        after an unclean election: truncate to it) or before its log start (start over at
        its log start)."""
        p = item.partition
        assert p.log is not None
        try:
            conn = await self._connection()
            earliest = await self._list_offset(conn, item, -2)
            latest = await self._list_offset(conn, item, -1)
        except (TimeoutError, ConnectionError, OSError, KafkaError) as e:
            log.info("Could not resolve out-of-range fetch of %s: %r", p.name, e)
            item.backoff_until = time.monotonic() + 1
            return
        leo = p.log.log_end_offset
        if leo > latest:
            log.warning("Truncating %s from %d to the leader's log end offset %d (unclean leader election?)",
                        p.name, leo, latest)
            p.log.truncate_to(latest)
        elif leo < earliest:
            log.info("Resetting %s to the leader's log start offset %d", p.name, earliest)
            p.log.truncate_fully_and_start_at(earliest)
        item.backoff_until = 0

    async def _list_offset(self, conn: BrokerConnection, item: _Fetching, timestamp: int) -> int:
        p = item.partition
        request = lo_req.ListOffsetsRequest(
            replica_id=self.manager.broker_id, isolation_level=0,
            topics=(lo_req.ListOffsetsTopic(name=p.topic, partitions=(lo_req.ListOffsetsPartition(
                partition_index=p.partition, current_leader_epoch=item.leader_epoch, timestamp=timestamp),)),))
        response = await conn.send(request, lo_resp.ListOffsetsResponse, self.manager.socket_timeout_s)
        pr = response.topics[0].partitions[0]
        if pr.error_code != ErrorCode.none:
            raise KafkaError(ErrorCode(pr.error_code).name)
        return pr.offset


class ReplicaFetcherManager:
    def __init__(self, broker_id: int, config: KafkaConfig, metadata_cache: MetadataCache,
                 state_change: Callable[[str], None], *, security: ClientSecurity | None = None,
                 on_high_watermark: Callable[[TopicPartition], None] | None = None,
                 quota: ReplicationQuotaManager | None = None, topic_stats: BrokerTopicStats | None = None) -> None:
        self.broker_id = broker_id
        self.topic_stats = topic_stats or BrokerTopicStats()  # ReplicationBytesInPerSec
        # Told when a follower's high watermark moves (consumers may be waiting on it, KIP-392).
        self.on_high_watermark = on_high_watermark
        self.quota = quota  # the follower's replication throttle
        self.security = security
        self.config = config
        self.metadata_cache = metadata_cache
        self.listener = config.inter_broker_listener_name
        self.socket_timeout_s = config["replica.socket.timeout.ms"] / 1000
        self.state_change = state_change
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def _fetcher_id(self, tp: TopicPartition) -> int:
        # Stable across processes (Python's str hash is salted per process).
        return zlib.crc32(f"{tp.topic}-{tp.partition}".encode()) % self.config["num.replica.fetchers"]

    def add_partitions(self, partitions: Iterable[Partition]) -> None:
        for p in partitions:
            if p.leader_id is None or p.leader_id < 0 or p.leader_id == self.broker_id:
                continue
            tp = TopicPartition(p.topic, p.partition)
            key = (p.leader_id, self._fetcher_id(tp))
            fetcher = self.fetchers.get(key)
            if fetcher is None:
                fetcher = self.fetchers[key] = ReplicaFetcher(self, *key)
            fetcher.add(p)

    def is_fetching(self, tp: TopicPartition) -> bool:
        return any(tp in f.partitions for f in self.fetchers.values())

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        tps = set(tps)
        for fetcher in self.fetchers.values():
            for tp in tps:
                fetcher.remove(tp)

    def spawn(self, coro: object) -> None:
        task = asyncio.get_running_loop().create_task(coro)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def max_lag(self) -> int:
        """Kafka's ReplicaFetcherManager MaxLag: the largest lag of a partition fetched here."""
        return max((item.lag for fetcher in self.fetchers.values() for item in fetcher.partitions.values()),
                   default=0)

    async def shutdown(self) -> None:
        fetchers, self.fetchers = self.fetchers, {}
        await asyncio.gather(*(f.close() for f in fetchers.values()))
        for task in list(self._tasks):
            task.cancel()
