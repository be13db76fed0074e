"""Files that lie (issue 30): a broker of a 3-broker cluster (RF 3, min.insync.replicas=2)
restarted on corrupted files of its own recovers as Kafka 2.8 does, rejoins every ISR and
loses no acknowledged record.

One cluster serves every case, a topic each, two partitions: partition 0 is placed with the
*victim* (a broker that is not the controller) as its preferred leader, partition 1 with
the victim as a follower. A case writes records with an idempotent producer (acks=all),
noting each acknowledged (partition, offset, value); stops the victim; corrupts its files;
restarts it; and checks that

* it rejoins the ISR of every partition it hosts (ZooKeeper);
* its log of each partition is the others', batch for batch and byte for byte, from the log
  start on (the three replicas' segment files, read once they agree);
* after a preferred leader election makes it partition 0's leader, every acknowledged record
  is read from the cluster at the offset it was acknowledged at, nothing else is there, and
  the same producer keeps writing right after them (no OutOfOrderSequence, no gap).

Which shutdown: Kafka recovers a log (re-reads every batch from the recovery point on,
checking its CRC) only after an unclean shutdown, one that left no ``.kafka_cleanshutdown``;
after a clean one it trusts the log files and checks only each index's sanity and each
producer snapshot's CRC. So a lie only recovery can find (a torn or zeroed tail, a bad CRC,
a lost recovery point) is told after a SIGKILL, and one every start checks (indexes,
snapshots) after a clean stop (SIGTERM), where nothing else would repair it.
"""

from __future__ import annotations

import os
import random
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ElectionType, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kio.schema.errors import ErrorCode

from odradek.local.cluster import LocalCluster
from odradek.log.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
)
from odradek.log.log_dirs import parse_log_dir_name
from odradek.protocol.errors import CorruptMessageError, InvalidRecordError
from odradek.protocol.records import (
    RecordBatchHeader,
    iter_batches,
    set_base_offset,
    set_partition_leader_epoch,
)
from support import (
    EARLIEST,
    LATEST,
    ClusterFactory,
    address_of,
    create_topic,
    delete_records,
    fetch_records,
    list_offset,
    partition_state,
    partitions_of,
    produce_records,
    unique_topic,
    wait_until,
)

PARTITIONS = (0, 1)  # 0: the victim is its preferred leader; 1: the victim follows
# Small segments (a case's 55 KiB per partition fill six or more) with dense indexes.
TOPIC_CONFIG = {"min.insync.replicas": "2", "segment.bytes": "8192", "index.interval.bytes": "512"}
OVERRIDES = {
    "min.insync.replicas": "2",
    # A SIGKILLed broker's registration expires sooner (the restart waits for it).
    "zookeeper.session.timeout.ms": "4000",
    # Checkpoints reach their files within a second (the checkpoint cases wait for them).
    "log.flush.offset.checkpoint.interval.ms": "1000",
    "log.flush.start.offset.checkpoint.interval.ms": "1000",
    "replica.high.watermark.checkpoint.interval.ms": "1000",
    # The consumers' FindCoordinator creates it: one partition, not fifty, for every restart to load.
    "offsets.topic.num.partitions": "1",
}
RECORDS = 300  # per partition, ten to a batch, 160-byte values


@pytest.fixture(scope="module")
def shared_cluster(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    factory = ClusterFactory(zookeeper, tmp_path_factory.mktemp("files-that-lie"))
    try:
        yield factory(3, overrides=OVERRIDES)
    finally:
        factory.stop_all()


@pytest.fixture
def cluster(shared_cluster: LocalCluster) -> LocalCluster:
    """The shared cluster with every broker running (a failed case may have left one down)."""
    for broker_id, broker in shared_cluster.brokers.items():
        if not broker.alive:
            shared_cluster.start_broker(broker_id)
    return shared_cluster


@pytest.fixture
def start_case(cluster: LocalCluster) -> Iterator[Callable[[str], Case]]:
    """Starts a case on the cluster (see Case.start); its producer is closed afterwards."""
    started: list[Case] = []

    def start(name: str) -> Case:
        started.append(Case.start(cluster, name))
        return started[-1]

    yield start
    for case in started:
        case.producer.close()


@dataclass
class Case:
    """One case's topic, its victim, the idempotent producer and what it acknowledged."""

    cluster: LocalCluster
    topic: str
    victim: int
    others: list[int]
    producer: Producer
    acked: dict[tuple[int, int], bytes] = field(default_factory=dict)
    errors: list[KafkaError] = field(default_factory=list)
    restarted_at: int = 0  # where the victim's server.log stood when it was started again

    @classmethod
    def start(cls, cluster: LocalCluster, name: str) -> Case:
        controller = cluster.state().controller()
        victim = max(b for b in cluster.brokers if b != controller)
        others = sorted(b for b in cluster.brokers if b != victim)
        topic = unique_topic(name)
        create_topic(cluster, topic, config=TOPIC_CONFIG,
                     assignment=[[victim, *others], [others[0], victim, others[1]]])
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True,
                             "acks": "all", "linger.ms": 2, "batch.num.messages": 10})
        case = cls(cluster, topic, victim, others, producer)
        case.produce(RECORDS)
        return case

    def produce(self, count: int) -> None:
        """``count`` more records to each partition; every one must be acknowledged."""
        first = len(self.acked)

        def report(error: KafkaError | None, message) -> None:
            if error is not None:
                self.errors.append(error)
            else:
                self.acked[(message.partition(), message.offset())] = message.value()

        for i in range(first, first + count * len(PARTITIONS)):
            partition = PARTITIONS[i % len(PARTITIONS)]
            value = f"{self.topic} record {i} ".encode().ljust(160, b".")
            self.producer.produce(self.topic, value=value, partition=partition, on_delivery=report)
            self.producer.poll(0)
        assert self.producer.flush(60) == 0
        assert self.errors == []
        assert len(self.acked) == first + count * len(PARTITIONS)

    def partition_dir(self, broker: int, partition: int) -> Path:
        return self.cluster.brokers[broker].config_path.parent / "data" / f"{self.topic}-{partition}"

    def victim_dirs(self) -> list[Path]:
        return [self.partition_dir(self.victim, p) for p in PARTITIONS]

    def restart_victim(self, *, kill: bool, corrupt: Callable[[Case], None]) -> None:
        """Stop the victim (SIGKILL or a clean stop), let ``corrupt`` lie in its files, start it
        again and wait until it is back in the ISR of every partition it hosts."""
        if kill:
            self.cluster.kill_broker(self.victim)
        else:
            self.cluster.stop_broker(self.victim)
        corrupt(self)
        self.restarted_at = self.cluster.brokers[self.victim].log_path.stat().st_size
        self.cluster.start_broker(self.victim)
        data = self.cluster.brokers[self.victim].config_path.parent / "data"
        hosted = [tp for d in data.iterdir() if (tp := parse_log_dir_name(d.name)) is not None]

        def missing() -> str | None:
            out = [f"{topic}-{p}" for topic, p in hosted
                   if self.victim not in ((partition_state(self.cluster, topic, p) or {}).get("isr") or ())]
            return f"not in the ISR of {out}" if out else None

        wait_for(missing, f"broker {self.victim} to rejoin every ISR", timeout=60)

    def logged_since_restart(self) -> str:
        """What the victim wrote to its server.log since it was started again."""
        with open(self.cluster.brokers[self.victim].log_path, "rb") as f:
            f.seek(self.restarted_at)
            return f.read().decode(errors="replace")

    def lead_partition_0(self) -> None:
        """A preferred leader election: the victim leads partition 0 (every broker says so) and
        its high watermark is the log end."""
        with AdminClient({"bootstrap.servers": self.cluster.bootstrap_servers}) as admin:
            answers = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(self.topic, 0)]).result(30)
        # (Not needed: the controller's automatic rebalance came first.)
        assert all(error is None or error.args[0].code() == KafkaError.ELECTION_NOT_NEEDED
                   for error in answers.values()), answers

        def told() -> bool:
            return all((info := partitions_of(address_of(self.cluster, b), self.topic)) is not None
                       and info[0].leader == self.victim for b in self.cluster.brokers)

        wait_until(told, message=f"broker {self.victim} to lead {self.topic}-0")
        # A new leader's high watermark catches up once its followers fetch.
        end = max(o for p, o in self.acked if p == 0) + 1
        wait_until(lambda: list_offset(address_of(self.cluster, self.victim), self.topic, 0, LATEST)[1] == end,
                   message=f"{self.topic}-0's high watermark on broker {self.victim} to reach {end}")

    def check_served(self, log_start: dict[int, int] | None = None) -> None:
        """Every acknowledged record at or past the log start is read from the cluster where it
        was acknowledged, and nothing else; then the producer writes on right after them."""
        starts = log_start or {}
        expected = {k: v for k, v in self.acked.items() if k[1] >= starts.get(k[0], 0)}
        ends = {p: max(o for q, o in self.acked if q == p) + 1 for p in PARTITIONS}
        assert read_all(self.cluster, self.topic, {p: (starts.get(p, 0), ends[p]) for p in PARTITIONS}) == expected
        before = set(self.acked)
        self.produce(20)
        new = sorted(set(self.acked) - before)
        assert new == sorted((p, o) for p in PARTITIONS for o in range(ends[p], ends[p] + 20))


def read_all(cluster: LocalCluster, topic: str, watermarks: dict[int, tuple[int, int]]
             ) -> dict[tuple[int, int], bytes]:
    """Every record of both partitions, once their (log start, high watermark) are
    ``watermarks`` (a new leader's high watermark catches up once its followers fetch)."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": unique_topic("lie"),
                         "enable.auto.commit": False, "enable.partition.eof": True})
    out: dict[tuple[int, int], bytes] = {}
    try:
        def stale() -> str | None:
            found = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30) for p in PARTITIONS}
            return None if found == watermarks else f"{found}, not {watermarks}"

        wait_for(stale, f"the watermarks of {topic}")
        consumer.assign([TopicPartition(topic, p, low) for p, (low, _) in watermarks.items()])
        done: set[int] = set()

        def read() -> bool:
            for m in consumer.consume(500, 0.5):
                if m.error() is None:
                    out[(m.partition(), m.offset())] = m.value()
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    done.add(m.partition())
                else:
                    raise AssertionError(m.error())
            return done == set(PARTITIONS) and all(
                (p, high - 1) in out for p, (_, high) in watermarks.items())

        wait_until(read, timeout=60, message=f"reading {topic}")
    finally:
        consumer.close()
    return out


def disk_batches(directory: Path) -> list[tuple[RecordBatchHeader, bytes]]:
    """Every batch in a partition directory's segment files, oldest first (whole files: a
    trailing fragment or zeros raise)."""
    out = []
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        out += [(h, data[pos:pos + h.size]) for pos, h in iter_batches(data)]
    return out


def assert_replicas_agree(case: Case) -> None:
    """The three replicas of each partition hold the same batches, byte for byte, from the log
    start to the log end, which is the last acknowledged offset's successor everywhere."""
    for p in PARTITIONS:
        end = max(o for q, o in case.acked if q == p) + 1

        def disagreement(p: int = p, end: int = end) -> str | None:
            error, start, _ = list_offset(address_of(case.cluster, leader(case, p)), case.topic, p, EARLIEST)
            if error != ErrorCode.none:
                return f"ListOffsets: {error.name}"
            logs = {}
            for broker in case.cluster.brokers:
                try:
                    batches = disk_batches(case.partition_dir(broker, p))
                except (CorruptMessageError, InvalidRecordError) as e:
                    return f"broker {broker}: {e}"
                if not batches or batches[-1][0].next_offset != end:
                    return f"broker {broker} ends at {batches[-1][0].next_offset if batches else 0}, not {end}"
                logs[broker] = [raw for h, raw in batches if h.last_offset >= start]
            differ = [b for b in logs if logs[b] != logs[case.others[0]]]
            return f"broker(s) {differ} hold other batches" if differ else None

        wait_for(disagreement, f"the replicas of {case.topic}-{p} to agree")


def wait_for(problem: Callable[[], str | None], what: str, timeout: float = 30) -> None:
    """Until ``problem()`` says None; a timeout fails with the last problem it said."""
    said: list[str | None] = [None]

    def fine() -> bool:
        said[0] = problem()
        return said[0] is None

    try:
        wait_until(fine, timeout=timeout, message=what)
    except pytest.fail.Exception:
        pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}: {said[0]}")


def leader(case: Case, partition: int) -> int:
    state = partition_state(case.cluster, case.topic, partition)
    assert state is not None and state["leader"] >= 0, state
    return state["leader"]


def assert_recovery_truncated(case: Case, segments: list[Path]) -> None:
    """The victim's recovery itself found each lie (a follower's truncation by leader epoch
    would not read a torn batch, nor check a CRC)."""
    logged = case.logged_since_restart()
    assert "unclean shutdown" in logged
    missed = [s for s in segments if f"{s}: truncated" not in logged]
    assert not missed, f"recovery truncated none of {missed}"


def last_batch(segment: Path) -> tuple[int, RecordBatchHeader]:
    return list(iter_batches(segment.read_bytes()))[-1]


def active_segment(directory: Path) -> Path:
    segment = sorted(directory.glob("*.log"))[-1]
    assert segment.stat().st_size > 0, f"{segment} is empty"
    return segment


def flip_bytes(path: Path, position: int, count: int = 4) -> None:
    """Garbage inside a batch: its CRC no longer matches, its framing still does."""
    with open(path, "r+b") as f:
        f.seek(position)
        data = f.read(count)
        f.seek(position)
        f.write(bytes(b ^ 0xFF for b in data))


# ---------------------------------------------------------------------------- the cases


def test_a_torn_last_batch_is_truncated_and_fetched_again(start_case: Callable[[str], Case]) -> None:
    """SIGKILL (a torn write is a crash's); each partition's active segment ends in the middle
    of its last batch. Recovery truncates it; the victim fetches it again from the leader."""
    case = start_case("torn")

    def tear(case: Case) -> None:
        for directory in case.victim_dirs():
            segment = active_segment(directory)
            position, header = last_batch(segment)
            os.truncate(segment, position + header.size // 2)

    case.restart_victim(kill=True, corrupt=tear)
    assert_recovery_truncated(case, [active_segment(d) for d in case.victim_dirs()])
    assert_replicas_agree(case)
    case.lead_partition_0()
    case.check_served()


def test_a_zeroed_tail_is_truncated(start_case: Callable[[str], Case]) -> None:
    """SIGKILL (power loss: a preallocated segment's unwritten tail reads as zeros); 64 KiB of
    zeros follow each partition's last batch. Recovery cuts the file back to its batches."""
    case = start_case("zeroed")

    def zero_tail(case: Case) -> None:
        for directory in case.victim_dirs():
            with open(active_segment(directory), "ab") as f:
                f.write(bytes(64 * 1024))

    case.restart_victim(kill=True, corrupt=zero_tail)
    assert_recovery_truncated(case, [active_segment(d) for d in case.victim_dirs()])
    assert_replicas_agree(case)  # whole files: zeros left behind would fail to parse
    case.lead_partition_0()
    case.check_served()


def test_corrupt_indexes_are_rebuilt(start_case: Callable[[str], Case]) -> None:
    """A clean stop (Kafka checks every index's sanity at each start, and after a clean
    shutdown nothing else would repair one). One index of every segment, its offset or its
    time index, lies: random bytes, a size that is no multiple of an entry's, or zeros. The
    victim rebuilds them from the log: what it serves by offset and by timestamp, as partition
    0's leader, is what it served before, and the index files on disk describe the log again.
    (Kafka's own check passes a zeroed index, whose time index dates its segment to 1970;
    odradek's goes further, see AbstractIndex._sane_tail and TimeIndex.sanity_check.)"""
    case = start_case("indexes")
    timestamps = sorted(set(record_timestamps(case)))[::7]
    before = {ts: list_offset(address_of(case.cluster, case.victim), case.topic, 0, ts) for ts in timestamps}
    assert all(error == ErrorCode.none for error, _, _ in before.values())
    rng = random.Random(30)

    def lie(path: Path, how: str, entry_size: int) -> None:
        size = path.stat().st_size if path.exists() else 0
        if how == "garbage":
            path.write_bytes(rng.randbytes(max(size // entry_size, 16) * entry_size))
        elif how == "wrong size":
            path.write_bytes(path.read_bytes()[:-3] if size >= entry_size else rng.randbytes(entry_size + 5))
        else:
            path.write_bytes(bytes(max(size // entry_size, 16) * entry_size))

    def corrupt_indexes(case: Case) -> None:
        # One lie per segment (the other index tells the truth), each lie in each partition.
        lies = [(suffix, entry_size, how) for how in ("zeroed", "garbage", "wrong size")
                for suffix, entry_size in ((".timeindex", 12), (".index", 8))]
        for directory in case.victim_dirs():
            segments = sorted(directory.glob("*.log"))
            assert len(segments) >= len(lies), segments
            for i, segment in enumerate(segments):
                suffix, entry_size, how = lies[i % len(lies)]
                lie(segment.with_suffix(suffix), how, entry_size)

    case.restart_victim(kill=False, corrupt=corrupt_indexes)
    rebuilt = case.logged_since_restart()
    for directory in case.victim_dirs():
        assert all(f"{segment}: rebuilding indexes" in rebuilt for segment in directory.glob("*.log"))
    for directory in case.victim_dirs():
        # Rebuilt at the topic's index.interval.bytes, which the broker read before it opened the log
        assert_indexes_describe_the_log(directory, int(TOPIC_CONFIG["index.interval.bytes"]))
    assert_replicas_agree(case)
    case.lead_partition_0()
    case.check_served()  # (first: it waits for the high watermark, which bounds ListOffsets)
    after = {ts: list_offset(address_of(case.cluster, case.victim), case.topic, 0, ts) for ts in timestamps}
    assert after == before  # the records written since are newer than every timestamp asked


def record_timestamps(case: Case) -> list[int]:
    """The create times of partition 0's records (for ListOffsets by timestamp)."""
    consumer = Consumer({"bootstrap.servers": case.cluster.bootstrap_servers, "group.id": unique_topic("lie"),
                         "enable.auto.commit": False})
    count = sum(1 for p, _ in case.acked if p == 0)
    out: list[int] = []
    try:
        consumer.assign([TopicPartition(case.topic, 0, 0)])

        def read() -> bool:
            out.extend(m.timestamp()[1] for m in consumer.consume(500, 0.5) if m.error() is None)
            return len(out) >= count

        wait_until(read, timeout=60, message=f"reading {case.topic}-0's timestamps")
    finally:
        consumer.close()
    return out


def assert_indexes_describe_the_log(directory: Path, index_interval_bytes: int | None = None) -> None:
    """Each offset index entry names a batch's position and last offset; each time index entry
    the largest timestamp so far and the last offset of a batch holding it. With
    ``index_interval_bytes``, the closed segments' offset index entries are exactly those of
    Kafka's rule: a batch is indexed when more than that many bytes have passed since the last
    entry (or the segment's start)."""
    segments = sorted(directory.glob("*.log"))
    for segment in segments:
        base = int(segment.stem)
        data = segment.read_bytes()
        batches = {pos: h for pos, h in iter_batches(data)}
        by_last = {h.last_offset: h for h in batches.values()}
        index = segment.with_suffix(".index").read_bytes()
        assert len(index) % 8 == 0, f"{segment}: offset index of {len(index)} bytes"
        entries = [struct.unpack_from(">ii", index, at) for at in range(0, len(index), 8)]
        for relative, position in entries:
            assert position in batches and batches[position].last_offset == base + relative, (segment, relative)
        if index_interval_bytes is not None and segment != segments[-1]:
            assert [position for _, position in entries] == indexed_positions(
                [(pos, h.size) for pos, h in batches.items()], index_interval_bytes), segment
        timeindex = segment.with_suffix(".timeindex").read_bytes()
        assert len(timeindex) % 12 == 0, f"{segment}: time index of {len(timeindex)} bytes"
        times = [struct.unpack_from(">qi", timeindex, at) for at in range(0, len(timeindex), 12)]
        assert segment == segments[-1] or (entries and times), f"{segment}: its indexes are empty"
        running = -1
        for h in batches.values():  # positions ascend
            running = max(running, h.max_timestamp)
        for timestamp, relative in times:
            header = by_last.get(base + relative)
            assert header is not None and header.max_timestamp == timestamp <= running, (segment, timestamp)


def indexed_positions(batches: list[tuple[int, int]], interval: int) -> list[int]:
    """The positions Kafka's rule indexes among ``batches`` (position, size), in order."""
    positions, since = [], 0
    for position, size in batches:
        if since > interval:
            positions.append(position)
            since = 0
        since += size
    return positions


@pytest.mark.parametrize("checkpoints", ["missing", "stale"])
def test_lost_or_stale_checkpoints_mean_recovery_from_further_back(start_case: Callable[[str], Case],
                                                                    checkpoints: str) -> None:
    """SIGKILL (Kafka reads the recovery point only to recover after an unclean shutdown).
    Before it, DeleteRecords moves partition 0's log start into the middle of a batch of its
    third segment, and the victim's recovery-point checkpoint passes its second segment. After
    it, one batch of each partition's second segment gets a bad CRC: recovery from the
    checkpointed point would never read it. *missing*: the three offset checkpoints are gone,
    so recovery starts at the log start (Kafka: a partition the checkpoint does not name
    recovers from 0); *stale*: the recovery point and the high watermark go back into the second
    segment, and the log start checkpoint is gone. Recovery finds the bad batch and truncates
    there. Partition 1 fetches the rest again; partition 0, now ending below the leader's log
    start, starts over there (in the middle of a batch, which it takes whole, as Kafka does).
    Both learn the log start from the leader; the victim serves it once it leads."""
    case = start_case(f"checkpoints-{checkpoints}")
    segments = {p: sorted(case.partition_dir(case.victim, p).glob("*.log")) for p in PARTITIONS}
    assert all(len(s) >= 4 for s in segments.values()), segments
    split = next(h for _, h in iter_batches(segments[0][2].read_bytes()) if h.records_count > 1)
    log_start = split.base_offset + split.records_count // 2
    delete_records(case.cluster.bootstrap_servers, case.topic, {0: log_start})
    data = case.cluster.brokers[case.victim].config_path.parent / "data"

    def checkpoints_unwritten() -> str | None:
        # Every replica's log start checkpoint names the new log start; the victim's recovery
        # points pass the second segments, its high watermarks are the log ends.
        ends = {p: max(o for q, o in case.acked if q == p) + 1 for p in PARTITIONS}
        wanted = {(LOG_START_OFFSET_CHECKPOINT, broker, 0): log_start for broker in case.cluster.brokers}
        wanted |= {(REPLICATION_OFFSET_CHECKPOINT, case.victim, p): ends[p] for p in PARTITIONS}
        wanted |= {(RECOVERY_POINT_CHECKPOINT, case.victim, p): int(segments[p][2].stem) for p in PARTITIONS}
        behind = {}
        for (name, broker, p), least in wanted.items():
            path = case.cluster.brokers[broker].config_path.parent / "data" / name
            found = OffsetCheckpointFile(path).read().get((case.topic, p), -1) if path.exists() else -1
            if found < least:
                behind[(name, broker, p)] = found
        return f"behind: {behind}" if behind else None

    wait_for(checkpoints_unwritten, "the checkpoints to name the partitions")
    corrupted = [segments[p][1] for p in PARTITIONS]

    def lose_checkpoints(case: Case) -> None:
        for segment in corrupted:
            position, header = list(iter_batches(segment.read_bytes()))[1]
            flip_bytes(segment, position + header.size // 2)
        if checkpoints == "missing":
            for name in (RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT):
                (data / name).unlink()
        else:
            stale = {(case.topic, p): int(segments[p][1].stem) + 1 for p in PARTITIONS}
            for name in (RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT):
                checkpoint = OffsetCheckpointFile(data / name)
                checkpoint.write({**checkpoint.read(), **stale})
        (data / LOG_START_OFFSET_CHECKPOINT).unlink(missing_ok=True)

    case.restart_victim(kill=True, corrupt=lose_checkpoints)
    assert_recovery_truncated(case, corrupted)
    assert_replicas_agree(case)
    case.lead_partition_0()
    case.check_served({0: log_start})


def test_a_truncated_producer_snapshot_is_rebuilt_from_the_log(start_case: Callable[[str], Case]) -> None:
    """A clean stop (Kafka writes a producer snapshot at the log end when it shuts down cleanly,
    and reads snapshots at every start). Each of the victim's snapshots is cut in half: its CRC
    fails, it is discarded, and the producers' state is rebuilt from the log. Once the victim
    leads partition 0, a retry of the producer's last batch from before the stop is answered as
    a duplicate, with the offsets it was first given, and the producer writes on."""
    case = start_case("snapshot")
    snapshots: list[Path] = []

    def cut_snapshots(case: Case) -> None:
        for directory in case.victim_dirs():
            found = sorted(directory.glob("*.snapshot"))
            assert found, f"no producer snapshot in {directory} after a clean shutdown"
            snapshots.extend(found)
            for snapshot in found:
                snapshot.write_bytes(snapshot.read_bytes()[:snapshot.stat().st_size // 2])

    case.restart_victim(kill=False, corrupt=cut_snapshots)
    logged = case.logged_since_restart()
    assert all(f"discarding producer snapshot {s}" in logged for s in snapshots), snapshots
    assert_replicas_agree(case)
    case.lead_partition_0()
    last = max(o for p, o in case.acked if p == 0)
    victim = address_of(case.cluster, case.victim)
    stored = bytes(fetch_records(victim, case.topic, 0, last).records)
    position, header = next((pos, h) for pos, h in iter_batches(stored, partial_tail_ok=True)
                            if h.last_offset == last)
    assert header.producer_id >= 0
    retry = bytearray(stored[position:position + header.size])
    set_base_offset(retry, 0, 0)  # as the producer sent it
    set_partition_leader_epoch(retry, 0, -1)
    answer = produce_records(victim, case.topic, 0, bytes(retry))
    assert (answer.error_code, answer.base_offset) == (ErrorCode.none, header.base_offset)
    case.check_served()  # the retry added nothing


def test_a_follower_with_a_corrupt_tail_truncates_and_fetches_it_again(start_case: Callable[[str], Case]) -> None:
    """SIGKILL (Kafka checks CRCs at start only when it recovers, after an unclean shutdown).
    Garbage lands in the middle of the last batch of the victim's last segment of each
    partition (partition 1's follower, partition 0's leader until the kill): the framing
    holds, the CRC does not. Recovery truncates to the batch before it, the victim fetches the
    rest from the leader again, and its log ends up the leader's, byte for byte."""
    case = start_case("crc")

    def garble(case: Case) -> None:
        for directory in case.victim_dirs():
            segment = active_segment(directory)
            position, header = last_batch(segment)
            flip_bytes(segment, position + header.size // 2)

    case.restart_victim(kill=True, corrupt=garble)
    assert_recovery_truncated(case, [active_segment(d) for d in case.victim_dirs()])
    assert_replicas_agree(case)
    case.lead_partition_0()
    case.check_served()
