"""Capture request frames from real clients, as seeds of ``request_frame`` and ``record_batch``.

    .venv/bin/python -m fuzz.capture_seeds

Starts a three-broker odradek cluster (embedded ZooKeeper) whose listeners are each advertised
at a small recording proxy, so every connection of every client (and of the controller to the
broker) passes through it; then confluent-kafka, kafka-python, aiokafka and kcat produce
(every codec each supports, idempotent and transactional), consume in a group and use the
admin API, and Kafka's Java clients run the conformance matrix's quick program
(compat/java: AdminClient, idempotent and transactional producers, consumers; built by
``python -m compat prepare java-clients``).  Each client's first frame of every (api key, version) under 4 KB becomes
``fuzz/corpus/request_frame/seed-<client>-<api>-v<version>`` (the frame with its size
prefix: the bytes of one connection), and each distinct produced record set becomes
``fuzz/corpus/record_batch/seed-<client>-<codec>``.  Run once; the files are committed.
``--clients java`` (or any of confluent, kafka-python, aiokafka, kcat) captures only those and
keeps the other seeds.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import struct
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from fuzz.runner import CORPUS

MAX_SEED_BYTES = 4095
BROKERS = 3  # the Java program's topics have three replicas
TOPIC = "fuzz-seeds"
AIOKAFKA_TOPIC = "fuzz-seeds-gzip"  # aiokafka without snappy, lz4 and zstd installed reads gzip only
_SIZE = struct.Struct(">i")


class RecordingProxy:
    """A TCP proxy on 127.0.0.1 that keeps every complete client-to-broker frame."""

    def __init__(self, upstream_port: Callable[[], int]) -> None:
        self.upstream_port = upstream_port
        self.frames: list[bytes] = []
        self.loop = asyncio.new_event_loop()
        self.port = 0
        started = threading.Event()
        threading.Thread(target=self._run, args=(started,), daemon=True).start()
        started.wait()

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._client, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        started.set()
        self.loop.run_forever()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port())
        back = asyncio.ensure_future(self._pump(up_reader, writer))
        buffered = b""
        try:
            while data := await reader.read(65536):
                up_writer.write(data)
                buffered += data
                while len(buffered) >= 4 and len(buffered) >= 4 + _SIZE.unpack_from(buffered)[0]:
                    end = 4 + _SIZE.unpack_from(buffered)[0]
                    self.frames.append(buffered[:end])
                    buffered = buffered[end:]
        finally:
            up_writer.close()
            back.cancel()
            writer.close()

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()


def run_confluent_kafka(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "confluent-kafka"})
    for future in admin.create_topics([NewTopic(TOPIC, 2, 1), NewTopic(AIOKAFKA_TOPIC, 1, 1), NewTopic("fuzz-other", 1, 1)]).values():
        future.result()
    admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, TOPIC)])[
        ConfigResource(ConfigResource.Type.TOPIC, TOPIC)].result()
    admin.list_groups(timeout=10)
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        producer = Producer({"bootstrap.servers": bootstrap, "client.id": "confluent-kafka",
                             "compression.codec": codec, "enable.idempotence": True, "linger.ms": 5})
        for i in range(5):
            producer.produce(TOPIC, b"value %d " % i * 8, b"key-%d" % i, headers={"h": b"v"})
        producer.flush(30)
    txn = Producer({"bootstrap.servers": bootstrap, "client.id": "confluent-kafka-txn",
                    "transactional.id": "fuzz-txn"})
    txn.init_transactions(30)
    for commit in (True, False):
        txn.begin_transaction()
        txn.produce(TOPIC, b"in a transaction", b"t")
        txn.commit_transaction(30) if commit else txn.abort_transaction(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": "confluent-kafka",
                         "group.id": "fuzz-group", "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    got = 0
    for _ in range(60):
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            got += 1
            if got >= 10:
                consumer.commit(message, asynchronous=False)
                break
    consumer.close()
    admin.create_partitions([NewPartitions("fuzz-other", 2)])["fuzz-other"].result()
    admin.delete_topics(["fuzz-other"])["fuzz-other"].result()


def run_kafka_python(bootstrap: str) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

    for api_version, codec in (((2, 8), "gzip"), ((2, 8), None), ((0, 10, 1), "gzip"), ((0, 10, 1), None)):
        producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="kafka-python", api_version=api_version,
                                 compression_type=codec, linger_ms=5)
        for i in range(4):
            producer.send(TOPIC, b"value %d " % i * 8, b"key-%d" % i)
        producer.flush(30)
        producer.close()
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, client_id="kafka-python",
                             group_id="fuzz-group-kp", auto_offset_reset="earliest", consumer_timeout_ms=5000)
    for i, _message in enumerate(consumer):
        if i >= 5:
            consumer.commit()
            break
    consumer.close()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kafka-python")
    admin.list_groups()
    admin.describe_groups(["fuzz-group-kp"])
    admin.list_group_offsets("fuzz-group-kp")
    admin.close()


def run_aiokafka(bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id="aiokafka", compression_type="gzip",
                                    enable_idempotence=True)
        await producer.start()
        try:
            for i in range(3):
                await producer.send_and_wait(AIOKAFKA_TOPIC, b"value %d" % i, b"key-%d" % i)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(AIOKAFKA_TOPIC, bootstrap_servers=bootstrap, client_id="aiokafka",
                                    group_id="fuzz-group-aio", auto_offset_reset="earliest")
        await consumer.start()
        try:
            await consumer.getmany(timeout_ms=5000)
            await consumer.commit()
        finally:
            await consumer.stop()

    asyncio.run(run())


def run_kcat(bootstrap: str) -> None:
    subprocess.run(["kcat", "-b", bootstrap, "-X", "client.id=kcat", "-P", "-t", TOPIC, "-z", "snappy"],
                   input=b"one\ntwo\nthree\n", check=True, timeout=60)
    subprocess.run(["kcat", "-b", bootstrap, "-X", "client.id=kcat", "-C", "-t", TOPIC, "-e", "-c", "5"],
                   capture_output=True, check=True, timeout=60)
    subprocess.run(["kcat", "-b", bootstrap, "-X", "client.id=kcat", "-L"], capture_output=True, check=True,
                   timeout=60)


def run_java_clients(bootstrap: str) -> None:
    from compat import java_build
    from compat.jvm import Jvm
    from compat.suites.java_clients import HEAP, MAIN

    with tempfile.TemporaryDirectory(prefix="odradek-capture-java-") as directory:
        Jvm(Path(directory)).run(MAIN, ["--bootstrap", bootstrap, "--quick"], classpath=java_build.classpath(),
                                 heap=HEAP, timeout=600)


RUNNERS: dict[str, Callable[[str], None]] = {
    "confluent": run_confluent_kafka, "kafka-python": run_kafka_python, "aiokafka": run_aiokafka, "kcat": run_kcat,
    "java": run_java_clients}


def save(frames: list[bytes], replace: bool = True) -> None:
    from odradek.protocol.api_keys import ApiKey
    from odradek.protocol.framing import ProtocolError, decode_request_header
    from odradek.protocol.produce_request import parse_produce_request

    frames_dir, batches_dir = CORPUS / "request_frame", CORPUS / "record_batch"
    for directory in (frames_dir, batches_dir):
        directory.mkdir(parents=True, exist_ok=True)
        for old in directory.glob("seed-client-*") if replace else ():
            old.unlink()
    seen: set[tuple[str, int, int]] = set()
    seen_records: set[tuple[str, int, int]] = set()
    for stream in frames:
        try:
            header, offset = decode_request_header(stream[4:])
        except ProtocolError:
            continue
        client = re.sub(r"[^a-z0-9-]+", "-", (header.client_id or "none").lower()).strip("-")
        client = re.sub(r"-\d+$", "", client) or "none"  # kafka-python numbers its clients
        api = ApiKey(header.api_key).name.lower().replace("_", "-")
        key = (client, header.api_key, header.api_version)
        if key not in seen and len(stream) <= MAX_SEED_BYTES:
            seen.add(key)
            (frames_dir / f"seed-client-{client}-{api}-v{header.api_version}").write_bytes(stream)
        if header.api_key != ApiKey.PRODUCE:
            continue
        body = parse_produce_request(stream[4:], offset, header.api_version)
        for _topic, _partition, records in body.partitions:
            if records is None or len(records) < 23 or len(records) + 1 > MAX_SEED_BYTES:
                continue
            magic = records[16]
            codec = (records[22] if magic == 2 else records[17]) & 7
            variant = (client, magic, codec)
            if variant not in seen_records:
                seen_records.add(variant)
                name = f"seed-client-{client}-magic{magic}-codec{codec}"
                (batches_dir / name).write_bytes(b"\x00" + bytes(records))


def main() -> None:
    import argparse

    from odradek.local.cluster import BrokerProcess, LocalCluster

    parser = argparse.ArgumentParser(prog="python -m fuzz.capture_seeds")
    parser.add_argument("--clients", default=",".join(RUNNERS), help=f"comma-separated, of {', '.join(RUNNERS)}")
    chosen = [c.strip() for c in parser.parse_args().clients.split(",") if c.strip()]
    unknown = sorted(set(chosen) - set(RUNNERS))
    if unknown or not chosen:
        parser.error(f"unknown clients {unknown} (known: {', '.join(RUNNERS)})" if unknown else "no client chosen")

    directory = Path(tempfile.mkdtemp(prefix="odradek-capture-"))
    cluster: LocalCluster | None = None
    proxies = {b: RecordingProxy(lambda b=b: cluster.brokers[b].port) for b in range(BROKERS)}  # type: ignore[union-attr]

    class ProxiedCluster(LocalCluster):
        def broker_properties(self, broker: BrokerProcess) -> dict[str, str]:
            return {**super().broker_properties(broker),
                    "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxies[broker.broker_id].port}"}

    try:
        cluster = ProxiedCluster(directory, BROKERS, overrides={
            "transaction.state.log.num.partitions": "1", "offsets.topic.num.partitions": "1"})
        cluster.start()
        bootstrap = ",".join(f"127.0.0.1:{proxy.port}" for proxy in proxies.values())
        for run in (RUNNERS[c] for c in chosen):
            try:
                run(bootstrap)
            except Exception as e:  # a client that cannot do it all still leaves its frames
                print(f"{run.__name__}: {type(e).__name__}: {e}")
    finally:
        if cluster is not None:
            cluster.stop()  # its ControlledShutdown passes the proxies too
        shutil.rmtree(directory, ignore_errors=True)
    frames = [frame for proxy in proxies.values() for frame in proxy.frames]
    save(frames, replace=set(chosen) == set(RUNNERS))
    print(f"{len(frames)} frames captured")


if __name__ == "__main__":
    main()
