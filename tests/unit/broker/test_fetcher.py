"""The follower's replica fetcher against a fake leader on a real local socket: truncation by
leader epoch (KIP-101, KIP-279) before fetching, backoff on errors, and what a fetch answer
does to the follower's log."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from kio.schema.fetch.v12 import response as fetch_resp
from kio.schema.offset_for_leader_epoch.v3 import response as epoch_resp

from odradek.broker.fetcher import ReplicaFetcherManager
from odradek.broker.metadata_cache import MetadataCache
from odradek.broker.partition import Partition
from odradek.broker.replication_quota import ReplicationQuotaManager
from odradek.config import KafkaConfig, Listener
from odradek.log.log import Log
from odradek.log.log_manager import LogManager, LogManagerConfig
from odradek.net.server import Request, SocketServer
from odradek.protocol import control
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.framing import decode_request, encode_response
from odradek.protocol.messages import build
from odradek.protocol.records import SimpleRecord, build_batch

FOLLOWER, LEADER = 1, 0
TOPIC = "t"
UNDEFINED = -1


class FakeLeader:
    """Broker ``LEADER`` as far as the fetcher can tell: answers OffsetForLeaderEpoch from
    ``epochs`` (asked epoch -> (leader epoch, end offset), or an error code) and Fetch with
    ``fetch_error``, ``high_watermark`` and the batch ``records`` holds at the fetch offset
    (none: it waits out the fetch's max wait, as a leader does), recording every request."""

    def __init__(self) -> None:
        self.epochs: dict[int, tuple[int, int] | ErrorCode] = {}
        self.fetch_error = ErrorCode.none
        self.garbled_fetches = 0  # how many Fetch answers to cut short (a malformed response)
        self.high_watermark = 0
        # (epoch, end offset): a fetch past its end gets it as the diverging epoch (KIP-595),
        # and OffsetForLeaderEpoch answers it from then on
        self.diverging: tuple[int, int] | None = None
        self.records: dict[int, bytes] = {}
        self.asked_epochs: list[tuple[int, int]] = []  # (leader epoch asked about, current leader epoch)
        self.fetches: list[tuple[int, int]] = []  # (fetch offset, current leader epoch)
        # Fetch sessions (KIP-227), for one partition: the id a full fetch gets (0: none made),
        # a top-level error for the next fetch, every fetch's (session id, epoch, partitions
        # listed), and the session's fetch position and the high watermark last answered.
        self.session_id = 0
        self.session_error: ErrorCode | None = None
        self.session_requests: list[tuple[int, int, int]] = []
        self.session_fetch: tuple[int, int] | None = None
        self.session_high_watermark: int | None = None
        self.changed = asyncio.Event()
        self.server = SocketServer([Listener("PLAINTEXT", "127.0.0.1", 0)], self.dispatch)

    async def dispatch(self, request: Request) -> bytes:
        body = decode_request(request.frame)[1]
        correlation_id = request.header.correlation_id
        self.changed.set()
        if request.api_key == ApiKey.OFFSET_FOR_LEADER_EPOCH:
            p = body.topics[0].partitions[0]
            self.asked_epochs.append((p.leader_epoch, p.current_leader_epoch))
            answer = self.epochs.get(p.leader_epoch, ErrorCode.unknown_server_error)
            error, (epoch, end) = (answer, (UNDEFINED, UNDEFINED)) if isinstance(answer, ErrorCode) \
                else (ErrorCode.none, answer)
            return encode_response(build(epoch_resp.OffsetForLeaderEpochResponse, throttle_time=0, topics=(
                build(epoch_resp.OffsetForLeaderTopicResult, topic=TOPIC, partitions=(build(
                    epoch_resp.EpochEndOffset, error_code=error, partition=0, leader_epoch=epoch,
                    end_offset=end),)),)), correlation_id)
        assert request.api_key == ApiKey.FETCH
        listed = sum(len(t.partitions) for t in body.topics)
        self.session_requests.append((body.session_id, body.session_epoch, listed))
        full = body.session_epoch in (0, -1)
        if self.session_error is not None:
            error, self.session_error = self.session_error, None
            return encode_response(build(fetch_resp.FetchResponse, throttle_time=0, error_code=error,
                                         session_id=0, responses=()), correlation_id)
        if listed:
            p = body.topics[0].partitions[0]
            self.session_fetch = (p.fetch_offset, p.current_leader_epoch)
        elif full:
            self.session_fetch = None
        if full:
            self.session_high_watermark = None
        if self.session_fetch is None:  # an incremental fetch of nothing
            await asyncio.sleep(body.max_wait.total_seconds())
            return encode_response(build(fetch_resp.FetchResponse, throttle_time=0, error_code=ErrorCode.none,
                                         session_id=self.session_id, responses=()), correlation_id)
        fetch_offset, current_leader_epoch = self.session_fetch
        self.fetches.append((fetch_offset, current_leader_epoch))
        records = self.records.get(fetch_offset) if self.fetch_error == ErrorCode.none else None
        tagged = {}
        if self.diverging is not None and fetch_offset > self.diverging[1]:
            epoch, end = self.diverging
            self.epochs[epoch] = self.diverging
            tagged["diverging_epoch"] = build(fetch_resp.EpochEndOffset, epoch=epoch, end_offset=end)
            records = b""
        if records is None:
            await asyncio.sleep(body.max_wait.total_seconds())  # the leader's long poll (DelayedFetch)
        answer = full or records is not None or self.fetch_error != ErrorCode.none \
            or self.high_watermark != self.session_high_watermark
        self.session_high_watermark = self.high_watermark
        response = encode_response(build(fetch_resp.FetchResponse, throttle_time=0, error_code=ErrorCode.none,
                                     session_id=self.session_id, responses=(build(
                                         fetch_resp.FetchableTopicResponse, topic=TOPIC, partitions=(build(
                                         fetch_resp.PartitionData, partition_index=0, error_code=self.fetch_error,
                                         high_watermark=self.high_watermark, last_stable_offset=self.high_watermark,
                                         log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1,
                                         records=records, **tagged),)),) if answer else ()), correlation_id)
        if self.garbled_fetches:
            self.garbled_fetches -= 1
            cut = response[4:-3]
            return len(cut).to_bytes(4, "big") + cut
        return response

    async def until(self, condition: Callable[[], object], timeout_s: float = 10.0) -> None:
        """Wait until ``condition`` holds, re-checking after every request the leader gets."""
        async def loop() -> None:
            while not condition():
                self.changed.clear()
                await self.changed.wait()
        await asyncio.wait_for(loop(), timeout_s)




@pytest.fixture
def logs(tmp_path: Path) -> Iterator[LogManager]:
    config = KafkaConfig.from_props({"broker.id": str(FOLLOWER), "zookeeper.connect": "unused:2181",
                                     "log.dirs": str(tmp_path / "logs")})
    manager = LogManager(LogManagerConfig.from_kafka_config(config), config.log_config())
    manager.startup()
    yield manager
    manager.shutdown()


def follower_log(logs: LogManager, epochs: list[tuple[int, int]]) -> Log:
    """A log written at the given (leader epoch, record count) steps, one batch per record
    (so any offset can be a truncation point: a log truncates to a batch boundary)."""
    lg = logs.get_or_create_log(TOPIC, 0)
    for epoch, count in epochs:
        lg.assign_epoch_start_offset(epoch, lg.log_end_offset)
        for i in range(count):
            lg.append_as_leader(bytearray(build_batch([SimpleRecord(value=b"v%d" % i)])), epoch)
    return lg


@contextlib.asynccontextmanager
async def follow(leader: FakeLeader, lg: Log, leader_epoch: int, backoff_ms: int = 50,
                 quota: ReplicationQuotaManager | None = None, isr: tuple[int, ...] = (LEADER, FOLLOWER)
                 ) -> AsyncIterator[tuple[Partition, list[str]]]:
    """Fetch partition t-0 from the fake leader at ``leader_epoch`` (under the follower's
    replication ``quota``, if given): (the partition, the state-change lines written)."""
    port = (await leader.server.start())["PLAINTEXT"]
    config = KafkaConfig.from_props({
        "broker.id": str(FOLLOWER), "zookeeper.connect": "unused:2181", "log.dirs": "unused",
        "replica.fetch.backoff.ms": str(backoff_ms), "replica.fetch.wait.max.ms": "10"})
    cache = MetadataCache(FOLLOWER)
    cache.update(control.UpdateMetadataRequest(
        controller_id=LEADER, controller_epoch=1, broker_epoch=-1, topic_states=(), live_brokers=(
            control.UpdateMetadataBroker(id=LEADER, rack=None, endpoints=(control.UpdateMetadataEndpoint(
                port=port, host="127.0.0.1", listener="PLAINTEXT", security_protocol=0),)),)))
    state_changes: list[str] = []
    fetchers = ReplicaFetcherManager(FOLLOWER, config, cache, state_changes.append, quota=quota)
    partition = Partition(TOPIC, 0, FOLLOWER, log=lg)
    partition.make_follower(control.LeaderAndIsrPartitionState(
        partition_index=0, controller_epoch=1, leader=LEADER, leader_epoch=leader_epoch, isr=isr,
        zk_version=0, replicas=(LEADER, FOLLOWER)))
    assert partition.needs_truncation
    fetchers.add_partitions([partition])
    try:
        yield partition, state_changes
    finally:
        await fetchers.shutdown()
        await leader.server.stop()


def test_truncates_a_diverged_tail_to_the_leaders_epoch_end_then_fetches_from_there(logs: LogManager) -> None:
    async def scenario() -> None:
        lg = follower_log(logs, [(1, 3), (2, 3)])  # epoch 1: offsets 0-2, epoch 2: 3-5
        leader = FakeLeader()
        leader.epochs[2] = (2, 4)  # the leader's epoch 2 ended at offset 4
        async with follow(leader, lg, leader_epoch=3) as (partition, changes):
            await leader.until(lambda: leader.fetches)
            assert leader.asked_epochs == [(2, 3)]
            assert lg.log_end_offset == 4 and not partition.needs_truncation
            assert leader.fetches[0] == (4, 3)
            assert changes == [f"Truncated partition {TOPIC}-0 to offset 4 (was 6) after OffsetForLeaderEpoch "
                               f"from leader {LEADER}"]

    asyncio.run(scenario())


def test_a_diverging_epoch_in_a_fetch_answer_truncates_by_asking_the_leader(logs: LogManager) -> None:
    async def scenario() -> None:
        lg = follower_log(logs, [(1, 3), (2, 3)])  # epoch 1: offsets 0-2, epoch 2: 3-5
        leader = FakeLeader()
        leader.epochs[2] = (2, 6)  # first the leader agrees (the truncation on becoming follower)...
        leader.diverging = (2, 4)  # ...then its fetch answer says epoch 2 ended at 4 (a Kafka leader)
        async with follow(leader, lg, leader_epoch=3) as (partition, _):
            await leader.until(lambda: (4, 3) in leader.fetches)
            assert [offset for offset, _ in leader.fetches] == [6, 4]
            assert [asked for asked, _ in leader.asked_epochs] == [2, 2]
            assert lg.log_end_offset == 4 and not partition.needs_truncation

    asyncio.run(scenario())


def test_an_epoch_the_leader_never_had_is_resolved_by_asking_again_below_it(logs: LogManager) -> None:
    async def scenario() -> None:
        lg = follower_log(logs, [(1, 3), (3, 3)])  # epoch 1: 0-2; epoch 3 (unknown to the leader): 3-5
        leader = FakeLeader()
        leader.epochs[3] = (2, 7)  # KIP-279: the leader's largest epoch below 3 is 2, ending at 7
        leader.epochs[1] = (1, 3)
        async with follow(leader, lg, leader_epoch=4) as (partition, _):
            await leader.until(lambda: leader.fetches)
            # We have no epoch 2: truncate to where our epoch 1 ends, and ask about epoch 1.
            assert [asked for asked, _ in leader.asked_epochs] == [3, 1]
            assert lg.log_end_offset == 3 and lg.latest_epoch == 1 and not partition.needs_truncation
            assert leader.fetches[0] == (3, 4)

    asyncio.run(scenario())


def test_an_empty_epoch_begun_as_leader_is_dropped_though_the_log_end_stays(logs: LogManager) -> None:
    """A deposed leader recorded its epoch's start and wrote nothing in it. The leader's answer
    ends our epoch 1 exactly at our log end: no record goes, but the empty epoch must, or every
    fetch would name it as the last fetched epoch and be told it diverged, for ever."""
    async def scenario() -> None:
        lg = follower_log(logs, [(1, 3), (3, 0)])  # epoch 1: offsets 0-2; epoch 3 begun at 3, empty
        leader = FakeLeader()
        leader.epochs[3] = (1, 3)  # the leader never had epoch 3: its epoch 1 ends at 3
        async with follow(leader, lg, leader_epoch=4) as (partition, changes):
            await leader.until(lambda: leader.fetches)
            assert [asked for asked, _ in leader.asked_epochs] == [3]
            assert lg.log_end_offset == 3 and lg.latest_epoch == 1 and not partition.needs_truncation
            assert leader.fetches[0] == (3, 4)
            assert changes == []  # no record was removed

    asyncio.run(scenario())


def test_a_leader_without_the_epoch_leaves_only_the_high_watermark(logs: LogManager) -> None:
    async def scenario() -> None:
        lg = follower_log(logs, [(1, 5)])
        lg.update_high_watermark(2)
        leader = FakeLeader()
        leader.epochs[1] = (UNDEFINED, UNDEFINED)
        async with follow(leader, lg, leader_epoch=2) as _:
            await leader.until(lambda: leader.fetches)
            assert lg.log_end_offset == 2
            assert leader.fetches[0][0] == 2

    asyncio.run(scenario())


def test_an_empty_log_fetches_from_zero_without_asking(logs: LogManager) -> None:
    async def scenario() -> None:
        leader = FakeLeader()
        async with follow(leader, logs.get_or_create_log(TOPIC, 0), leader_epoch=1) as (partition, changes):
            await leader.until(lambda: leader.fetches)
            assert leader.asked_epochs == [] and leader.fetches[0] == (0, 1)
            assert not partition.needs_truncation and changes == []

    asyncio.run(scenario())


def test_an_error_answer_backs_off_and_truncation_is_retried(logs: LogManager) -> None:
    async def scenario() -> None:
        lg = follower_log(logs, [(1, 4)])
        leader = FakeLeader()
        leader.epochs[1] = ErrorCode.not_leader_or_follower
        async with follow(leader, lg, leader_epoch=2) as (partition, _):
            await leader.until(lambda: len(leader.asked_epochs) >= 2)
            # Nothing truncated and nothing fetched while the leader refuses.
            assert partition.needs_truncation and lg.log_end_offset == 4 and leader.fetches == []
            leader.epochs[1] = (1, 4)
            await leader.until(lambda: leader.fetches)
            assert not partition.needs_truncation and lg.log_end_offset == 4
            assert leader.fetches[0] == (4, 2)

    asyncio.run(scenario())


def test_fetched_batches_are_appended_and_the_high_watermark_follows_the_leader(logs: LogManager) -> None:
    async def scenario() -> None:
        lg = logs.get_or_create_log(TOPIC, 0)
        leader = FakeLeader()
        leader.records[0] = build_batch([SimpleRecord(value=b"a"), SimpleRecord(value=b"b")],
                                        partition_leader_epoch=1)
        leader.high_watermark = 1  # the answer carrying the batch: the leader's HW then
        async with follow(leader, lg, leader_epoch=1) as _:
            await leader.until(lambda: lg.log_end_offset == 2)
            assert lg.high_watermark == 1 and lg.latest_epoch == 1
            leader.high_watermark = 5  # never past our own log end offset
            await leader.until(lambda: lg.high_watermark == 2)
            assert [offset for offset, _ in leader.fetches[:2]] == [0, 2]

    asyncio.run(scenario())


def test_a_throttled_follower_outside_the_isr_fetches_no_more_than_its_rate(logs: LogManager) -> None:
    """follower.replication.throttled.*: once the rate is used up the partition is left out
    of the fetches until time lets more through (a frozen clock: never)."""
    class Clock:
        now = 50.0

        def __call__(self) -> float:
            return self.now

    async def scenario() -> None:
        lg = logs.get_or_create_log(TOPIC, 0)
        leader = FakeLeader()
        for offset in range(40):
            leader.records[offset] = build_batch([SimpleRecord(value=bytes(1000))], base_offset=offset,
                                                 partition_leader_epoch=1)
        leader.high_watermark = 40
        clock = Clock()
        quota = ReplicationQuotaManager(FOLLOWER, "follower.replication.throttled.replicas", clock=clock)
        quota.update_bound(3000)
        quota.update_topic(TOPIC, {"follower.replication.throttled.replicas": f"0:{FOLLOWER}"})
        async with follow(leader, lg, leader_epoch=1, quota=quota, isr=(LEADER,)):
            await leader.until(lambda: lg.log_end_offset >= 1)
            await asyncio.sleep(0.3)  # many fetch rounds' time, but no time on the quota's clock
            held = lg.log_end_offset
            assert 1 <= held <= 3 < 40  # 3000 bytes' worth (the last batch whole)
            clock.now += 2.0
            await leader.until(lambda: lg.log_end_offset > held)
            await asyncio.sleep(0.3)
            assert lg.log_end_offset <= held + 7  # two more seconds' worth, and a batch

    asyncio.run(scenario())


def test_a_fenced_answer_changes_nothing_and_is_retried_after_the_backoff(logs: LogManager) -> None:
    async def scenario() -> None:
        lg = follower_log(logs, [(1, 2)])
        leader = FakeLeader()
        leader.epochs[1] = (1, 2)
        leader.fetch_error = ErrorCode.fenced_leader_epoch
        leader.high_watermark = 5
        leader.records[2] = build_batch([SimpleRecord(value=b"x")], partition_leader_epoch=1)
        async with follow(leader, lg, leader_epoch=1) as _:
            await leader.until(lambda: len(leader.fetches) >= 2)
            assert {offset for offset, _ in leader.fetches} == {2}
            assert lg.log_end_offset == 2 and lg.high_watermark == 0

    asyncio.run(scenario())


def test_a_malformed_answer_drops_the_connection_and_fetching_resumes(
        logs: LogManager, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        lg = logs.get_or_create_log(TOPIC, 0)
        leader = FakeLeader()
        leader.records[0] = build_batch([SimpleRecord(value=b"a")], partition_leader_epoch=1)
        leader.high_watermark = 1
        leader.garbled_fetches = 1
        async with follow(leader, lg, leader_epoch=1) as _:
            await leader.until(lambda: lg.log_end_offset == 1)
            assert [offset for offset, _ in leader.fetches[:2]] == [0, 0]
            assert lg.high_watermark == 1

    with caplog.at_level("INFO", logger="odradek.broker.fetcher"):
        asyncio.run(scenario())
    assert any("bad response" in r.getMessage() and "backing off" in r.getMessage() for r in caplog.records)


def test_with_a_fetch_session_idle_rounds_list_nothing_and_a_missing_partition_is_unchanged(
        logs: LogManager) -> None:
    async def scenario() -> None:
        lg = logs.get_or_create_log(TOPIC, 0)
        leader = FakeLeader()
        leader.session_id = 9
        leader.records[0] = build_batch([SimpleRecord(value=b"a"), SimpleRecord(value=b"b")],
                                        partition_leader_epoch=1)
        leader.high_watermark = 1
        async with follow(leader, lg, leader_epoch=1) as _:
            await leader.until(lambda: len(leader.session_requests) >= 4)
            # Full (asks for a session), then the new fetch offset, then nothing to list.
            assert leader.session_requests[:4] == [(0, 0, 1), (9, 1, 1), (9, 2, 0), (9, 3, 0)]
            assert lg.log_end_offset == 2 and lg.high_watermark == 1  # not reset by the empty answers
            leader.high_watermark = 2  # a change: the partition is in the answer again
            await leader.until(lambda: lg.high_watermark == 2)
            leader.session_error = ErrorCode.invalid_fetch_session_epoch
            seen = len(leader.session_requests)
            await leader.until(lambda: len(leader.session_requests) >= seen + 3)
            # The error, then a full fetch closing session 9 and asking for a new one.
            assert leader.session_requests[seen][0] == 9
            assert leader.session_requests[seen + 1] == (9, 0, 1)
            assert leader.session_requests[seen + 2][:2] == (9, 1)
            leader.session_error = ErrorCode.fetch_session_id_not_found
            seen = len(leader.session_requests)
            await leader.until(lambda: len(leader.session_requests) >= seen + 2)
            assert leader.session_requests[seen + 1] == (0, 0, 1)
            assert lg.log_end_offset == 2 and lg.high_watermark == 2

    asyncio.run(scenario())


def test_a_leader_without_sessions_gets_full_fetches(logs: LogManager) -> None:
    async def scenario() -> None:
        leader = FakeLeader()
        async with follow(leader, logs.get_or_create_log(TOPIC, 0), leader_epoch=1) as _:
            await leader.until(lambda: len(leader.session_requests) >= 3)
            assert set(leader.session_requests) == {(0, 0, 1)}

    asyncio.run(scenario())
