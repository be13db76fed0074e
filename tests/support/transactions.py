"""Transactional producers of three clients behind one small interface, reading a topic as a
read_committed or read_uncommitted consumer, the last stable offset next to the high
watermark, and a producer process left hanging in the middle of a transaction.

The producers: confluent-kafka (librdkafka), kafka-python 3 and aiokafka; each is used from
the thread that made it (aiokafka on an event loop of its own)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from support.topics import unique_topic
from support.waiting import wait_until

__all__ = [
    "CLIENTS",
    "TXN_OVERRIDES",
    "HangingProducer",
    "TxnProducer",
    "committed_offsets",
    "lso_and_hw",
    "read_topic",
    "txn_producer",
    "values",
    "wait_lso_reaches_hw",
]

TIMEOUT_S = 30.0

# Brokers of transaction tests: the transaction log and the offsets topic small (fast to create
# on a 3-broker cluster), timed-out transactions looked for every half second, quick groups.
TXN_OVERRIDES = {
    "transaction.state.log.num.partitions": "6",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
    "offsets.topic.num.partitions": "6",
    "group.initial.rebalance.delay.ms": "200",
    "group.min.session.timeout.ms": "1000",
}

CLIENTS = ("confluent", "kafka-python", "aiokafka")


class TxnProducer:
    """begin / send / send_offsets / commit / abort / close of one client's transactional producer."""

    client = ""

    def begin(self) -> None:
        raise NotImplementedError

    def send(self, topic: str, partition: int, value: bytes, key: bytes | None = None) -> None:
        raise NotImplementedError

    def send_offsets(self, offsets: Mapping[tuple[str, int], int], group_id: str, consumer: Any = None) -> None:
        """Offsets (next offset to read) for ``group_id`` in the transaction; ``consumer`` (a
        consumer of this client in the group) gives KIP-447 group metadata where supported."""
        raise NotImplementedError

    def flush(self) -> None:
        """Wait until every record sent so far is acknowledged (an abort may otherwise drop
        records the client has not sent yet, instead of writing and aborting them)."""
        raise NotImplementedError

    def commit(self) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class _Confluent(TxnProducer):
    client = "confluent"

    def __init__(self, bootstrap: str, transactional_id: str, **config: Any) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                                  "linger.ms": 5, **config})
        self.producer.init_transactions(TIMEOUT_S)

    def begin(self) -> None:
        self.producer.begin_transaction()

    def send(self, topic: str, partition: int, value: bytes, key: bytes | None = None) -> None:
        self.producer.produce(topic, value=value, key=key, partition=partition)
        self.producer.poll(0)

    def send_offsets(self, offsets: Mapping[tuple[str, int], int], group_id: str, consumer: Any = None) -> None:
        if consumer is not None:
            metadata = consumer.consumer_group_metadata()
        else:
            helper = Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": group_id})
            metadata = helper.consumer_group_metadata()
            helper.close()
        self.producer.send_offsets_to_transaction(
            [TopicPartition(t, p, o) for (t, p), o in offsets.items()], metadata, TIMEOUT_S)

    def flush(self) -> None:
        assert self.producer.flush(TIMEOUT_S) == 0

    def commit(self) -> None:
        self.producer.commit_transaction(TIMEOUT_S)

    def abort(self) -> None:
        self.producer.abort_transaction(TIMEOUT_S)

    def close(self) -> None:
        self.producer.flush(1)


class _KafkaPython(TxnProducer):
    client = "kafka-python"

    def __init__(self, bootstrap: str, transactional_id: str, **config: Any) -> None:
        from kafka import KafkaProducer

        self.producer = KafkaProducer(bootstrap_servers=bootstrap.split(","), transactional_id=transactional_id,
                                      linger_ms=5, **config)
        self.producer.init_transactions()

    def begin(self) -> None:
        self.producer.begin_transaction()

    def send(self, topic: str, partition: int, value: bytes, key: bytes | None = None) -> None:
        self.producer.send(topic, value=value, key=key, partition=partition)

    def send_offsets(self, offsets: Mapping[tuple[str, int], int], group_id: str, consumer: Any = None) -> None:
        from kafka import TopicPartition as KTopicPartition
        from kafka.structs import OffsetAndMetadata

        metadata = consumer.group_metadata() if consumer is not None else group_id
        self.producer.send_offsets_to_transaction(
            {KTopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()}, metadata)

    def flush(self) -> None:
        self.producer.flush(timeout=TIMEOUT_S)

    def commit(self) -> None:
        self.producer.commit_transaction()

    def abort(self) -> None:
        self.producer.abort_transaction()

    def close(self) -> None:
        self.producer.close(timeout=5)


class _AioKafka(TxnProducer):
    client = "aiokafka"

    def __init__(self, bootstrap: str, transactional_id: str, **config: Any) -> None:
        from aiokafka import AIOKafkaProducer

        self.loop = asyncio.new_event_loop()

        async def start() -> Any:
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id,
                                        linger_ms=5, **config)
            await producer.start()
            return producer

        self.producer = self.loop.run_until_complete(start())
        self.pending: list[Any] = []

    def _run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coro, TIMEOUT_S))

    def begin(self) -> None:
        self._run(self.producer.begin_transaction())

    def send(self, topic: str, partition: int, value: bytes, key: bytes | None = None) -> None:
        self.pending.append(self._run(self.producer.send(topic, value=value, key=key, partition=partition)))

    def send_offsets(self, offsets: Mapping[tuple[str, int], int], group_id: str, consumer: Any = None) -> None:
        from aiokafka.structs import TopicPartition as ATopicPartition

        self._run(self.producer.send_offsets_to_transaction(
            {ATopicPartition(t, p): o for (t, p), o in offsets.items()}, group_id))

    def flush(self) -> None:
        self._run(asyncio.gather(*self.pending))

    def commit(self) -> None:
        self._run(self.producer.commit_transaction())
        self.pending.clear()

    def abort(self) -> None:
        self._run(self.producer.abort_transaction())
        self.pending.clear()

    def close(self) -> None:
        for future in self.pending:  # a fenced producer's sends fail: their errors are expected
            if future.done() and not future.cancelled():
                future.exception()
        try:
            self.loop.run_until_complete(asyncio.wait_for(self.producer.stop(), 10))
        except Exception:  # a fenced producer may fail to stop cleanly; the loop still closes
            pass
        finally:
            self.loop.close()


def txn_producer(client: str, bootstrap: str, transactional_id: str | None = None, **config: Any) -> TxnProducer:
    """A transactional producer of ``client`` (one of CLIENTS), transactions initialised."""
    txn_id = transactional_id or unique_topic(f"txn-{client}")
    cls = {"confluent": _Confluent, "kafka-python": _KafkaPython, "aiokafka": _AioKafka}[client]
    return cls(bootstrap, txn_id, **config)


def read_topic(bootstrap: str, topic: str, partitions: int, isolation: str,
               settle: bool = True) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record a consumer with ``isolation`` reads from the
    start to the end of each partition (for read_committed: to its last stable offset).

    A commit returns once the coordinator has logged it; its markers follow. With ``settle``,
    a read_committed read first waits until every partition's last stable offset reaches its
    high watermark (no transaction open or completing); without, it reads what is stable now."""
    if settle and isolation == "read_committed":
        for p in range(partitions):
            wait_lso_reaches_hw(bootstrap, topic, p)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_topic("reader"),
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "isolation.level": isolation, "log_level": 0})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    found: list[tuple[int, int, bytes]] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"{topic}: partitions {set(range(partitions)) - at_end} never ended"
            for m in consumer.consume(1000, 0.5):
                if m.error() is None:
                    found.append((m.partition(), m.offset(), m.value()))
                    at_end.discard(m.partition())
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
    finally:
        consumer.close()
    return sorted(found)


def lso_and_hw(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """(last stable offset, high watermark): ListOffsets(latest) as read_committed and as
    read_uncommitted consumers ask it."""
    ends = []
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "odradek-tests-lso",
                             "isolation.level": isolation, "log_level": 0})
        try:
            ends.append(consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=TIMEOUT_S)[1])
        finally:
            consumer.close()
    return ends[0], ends[1]


def committed_offsets(bootstrap: str, group_id: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets (OffsetFetch, require_stable as read_committed asks; -1001: none)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id, "enable.auto.commit": False,
                         "isolation.level": "read_committed", "log_level": 0})
    try:
        return {tp.partition: tp.offset for tp in consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=TIMEOUT_S)}
    finally:
        consumer.close()


_HANGING_SCRIPT = """
import sys, time
from confluent_kafka import Producer
bootstrap, txn_id, topic, partitions, count, timeout_ms = sys.argv[1:7]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 0,
              "transaction.timeout.ms": int(timeout_ms), "message.timeout.ms": min(int(timeout_ms), 30000),
              "socket.timeout.ms": min(int(timeout_ms), 30000)})
p.init_transactions(30)
p.begin_transaction()
for i in range(int(count)):
    p.produce(topic, value=f"hanging-{i}".encode(), partition=i % int(partitions))
assert p.flush(30) == 0
print("in transaction", flush=True)
time.sleep(3600)
"""


class HangingProducer:
    """A producer process that begins a transaction, writes ``count`` records over ``partitions``
    partitions of ``topic`` (acknowledged) and stops there; ``kill()`` SIGKILLs it."""

    def __init__(self, bootstrap: str, topic: str, *, partitions: int = 1, count: int = 3,
                 transaction_timeout_ms: int = 600_000, transactional_id: str | None = None) -> None:
        self.transactional_id = transactional_id or unique_topic("hanging")
        self.process = subprocess.Popen(
            [sys.executable, "-c", _HANGING_SCRIPT, bootstrap, self.transactional_id, topic, str(partitions),
             str(count), str(transaction_timeout_ms)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if line.strip() != "in transaction":
            self.kill()
            raise AssertionError(f"the hanging producer did not start its transaction: {line!r} "
                                 f"{self.process.stderr.read() if self.process.stderr else ''}")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


def values(records: Sequence[tuple[int, int, bytes]]) -> list[bytes]:
    return [v for _, _, v in records]


def wait_lso_reaches_hw(bootstrap: str, topic: str, partition: int, timeout: float = 60.0) -> int:
    """Wait until no transaction holds the partition's last stable offset below its high
    watermark; return that offset."""
    def stable() -> tuple[int] | None:
        lso, hw = lso_and_hw(bootstrap, topic, partition)
        return (hw,) if lso == hw else None

    found = wait_until(stable, timeout=timeout, interval=0.2,
                       message=f"{topic}-{partition}: last stable offset reaching the high watermark")
    return found[0]  # type: ignore[index]
