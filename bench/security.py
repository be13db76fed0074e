"""What security costs, side by side in one run: produce and consume on PLAINTEXT,
SASL_PLAINTEXT (SCRAM-SHA-512) and SASL_SSL, 3 brokers, RF 3, acks=all, 100-byte records,
confluent-kafka clients.

Three local clusters run at once (``odradek up`` style, one per protocol, inter-broker traffic
on the same protocol as the clients: replication over TLS is part of the TLS cost), and the
phases are interleaved round by round (PLAINTEXT, SASL_PLAINTEXT, SASL_SSL, then again), so
the machine's drift hits every protocol alike. Each round writes a fresh topic of 6 partitions
and reads it back from the start (assign, to the end of every partition). Reported: median
records/s, brokers' CPU seconds per GB of record payload (all three brokers, replication
included), and the ratios to PLAINTEXT.

Then where the TLS cost comes from, measured in this process on the broker's own code path
(net/kafka_channel.py: a fetch on a TLS listener is read from the segment file into memory, then
encrypted through ``ssl.SSLObject`` over memory BIOs): CPU per GB of

* ``pread``: the copy out of the page cache that replaces ``sendfile``;
* ``SSLObject.write``: Python's ssl module and OpenSSL's TLS 1.3 record layer (framing,
  AES-GCM), read out of the memory BIO;
* ``AES-GCM alone``: the cipher on 16 KiB records (the ``cryptography`` package, OpenSSL too),
  so that what the ssl module and the record layer add shows as the difference;
* ``SSLObject.read``: the produce direction, decrypting what a client sent.

With ``--profile``, one more produce phase on PLAINTEXT and on SASL_SSL runs under Linux
``perf`` (broker 0, which leads a third of the partitions and follows the rest), and the native
profiles say how the CPU divides between the interpreter, OpenSSL (libssl: the record layer;
libcrypto: AES-GCM), the kernel and the rest.

    .venv/bin/python bench/security.py [--records 300000] [--rounds 3] [--profile] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import ssl
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from odradek.local.cluster import LocalCluster
from odradek.perf.harness import (
    brokers_cpu_seconds,
    code_version,
    create_topic_zk,
    perf_record,
    read_partitions_to_end,
    summarize_perf,
    unwind_on_sigterm,
    wait_full_isr,
)
from odradek.security.certs import CertificateAuthority
from odradek.security.tls import client_context, server_context

RESULTS = Path(__file__).resolve().parent / "results"
PARTITIONS = 6
RF = 3
RECORD_SIZE = 100
PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL")
PRODUCER = {"acks": "all", "enable.idempotence": True, "linger.ms": 5, "batch.size": 1_000_000,
            "batch.num.messages": 10_000, "compression.type": "none", "log_level": 0}


def produce(cluster: LocalCluster, topic: str, records: int) -> dict[str, float]:
    failed = 0

    def on_delivery(err: object, _msg: object) -> None:
        nonlocal failed
        if err is not None:
            failed += 1

    producer = Producer({**cluster.client_properties(), "on_delivery": on_delivery, **PRODUCER})
    value = b"x" * RECORD_SIZE
    cpu0 = brokers_cpu_seconds(cluster)
    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10_000 == 0:
            producer.poll(0)
    remaining = producer.flush(300)
    elapsed = time.perf_counter() - start
    cpu = brokers_cpu_seconds(cluster) - cpu0
    if remaining or failed:
        raise SystemExit(f"{topic}: {remaining} records unsent, {failed} failed")
    return {"records": records, "seconds": elapsed, "records_per_sec": records / elapsed,
            "brokers_cpu_s": cpu, "cpu_s_per_gb": cpu / (records * RECORD_SIZE / 1e9)}


def consume(cluster: LocalCluster, topic: str, records: int) -> dict[str, float]:
    cpu0 = brokers_cpu_seconds(cluster)
    count, elapsed = read_partitions_to_end({**cluster.client_properties(), "group.id": f"bench-{topic}"},
                                            topic, PARTITIONS)
    cpu = brokers_cpu_seconds(cluster) - cpu0
    if count != records:
        raise SystemExit(f"{topic}: read {count} of {records} records")
    return {"records": count, "seconds": elapsed, "records_per_sec": count / elapsed,
            "brokers_cpu_s": cpu, "cpu_s_per_gb": cpu / (count * RECORD_SIZE / 1e9)}


# ------------------------------------------------------------------------------ TLS cost breakdown

def _tls_pair(directory: Path) -> tuple[ssl.SSLObject, ssl.MemoryBIO, ssl.MemoryBIO, ssl.SSLObject,
                                        ssl.MemoryBIO, ssl.MemoryBIO]:
    """A server and a client SSLObject over memory BIOs, handshaken (the broker's TLS setup)."""
    ca = CertificateAuthority.create()
    keystore = ca.issue("localhost").write_keystore_pem(directory / "broker.pem")
    server_ctx = server_context({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore)})
    client_ctx = client_context({"ssl.ca.location": str(ca.write_truststore_pem(directory / "ca.pem"))})
    s_in, s_out, c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname="localhost")
    for _ in range(10):
        for side in (client, server):
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
    client.write(b"x")
    s_in.write(c_out.read())
    server.read(1)
    return server, s_in, s_out, client, c_in, c_out


def _cpu_per_gb(fn, total_bytes: int) -> float:  # type: ignore[no-untyped-def]
    start = time.process_time()
    fn()
    return (time.process_time() - start) / (total_bytes / 1e9)


def tls_breakdown(directory: Path, megabytes: int = 512) -> dict[str, float]:
    chunk = 1 << 20  # a fetch response's file region (replica.fetch.max.bytes / max.partition.fetch.bytes)
    total = megabytes * chunk
    path = directory / "segment.log"
    path.write_bytes(os.urandom(chunk) * 16)  # 16 MiB, read round and round from the page cache
    fd = os.open(path, os.O_RDONLY)
    data = os.pread(fd, chunk, 0)
    server, _s_in, s_out, _client, _c_in, _c_out = _tls_pair(directory)

    def pread() -> None:
        for i in range(megabytes):
            os.pread(fd, chunk, (i % 16) * chunk)

    def tls_write() -> None:
        for _ in range(megabytes):
            server.write(data)
            s_out.read()

    def aead() -> None:
        key = AESGCM(AESGCM.generate_key(bit_length=256))
        nonce = os.urandom(12)
        record = 16 * 1024
        view = memoryview(data)
        for _ in range(megabytes):
            for off in range(0, chunk, record):
                key.encrypt(nonce, view[off:off + record], None)

    results = {
        "pread_cpu_s_per_gb": _cpu_per_gb(pread, total),
        "ssl_write_cpu_s_per_gb": _cpu_per_gb(tls_write, total),
        "aes_gcm_cpu_s_per_gb": _cpu_per_gb(aead, total),
    }
    # Decryption: a fresh pair per MiB would time handshakes; a client writes the stream in
    # advance (its cost is not counted) and the server reads it all.
    server2, s2_in, _s2_out, client2, _c2_in, c2_out = _tls_pair(directory)
    read_megabytes = min(megabytes, 256)
    encrypted = []
    for _ in range(read_megabytes):
        client2.write(data)
        encrypted.append(c2_out.read())
    buf = bytearray(chunk)

    def ssl_read() -> None:
        for piece in encrypted:
            s2_in.write(piece)
            got = 0
            while got < chunk:
                got += server2.read(chunk - got, memoryview(buf)[got:])

    results["ssl_read_cpu_s_per_gb"] = _cpu_per_gb(ssl_read, read_megabytes * chunk)
    os.close(fd)
    return results


# ------------------------------------------------------------------------------ main

def report(results: dict[str, list[dict[str, float]]], breakdown: dict[str, float]) -> str:
    def med(protocol: str, phase: str, key: str) -> float:
        return statistics.median(r[key] for r in results[f"{protocol} {phase}"])

    rows = [("", "records/s", "vs PLAINTEXT", "broker CPU s/GB", "vs PLAINTEXT")]
    for phase in ("produce", "consume"):
        base_rate = med("PLAINTEXT", phase, "records_per_sec")
        base_cpu = med("PLAINTEXT", phase, "cpu_s_per_gb")
        for protocol in PROTOCOLS:
            rate, cpu = med(protocol, phase, "records_per_sec"), med(protocol, phase, "cpu_s_per_gb")
            rows.append((f"{phase} {protocol}", f"{rate:,.0f}", f"{rate / base_rate:.2f}", f"{cpu:,.1f}",
                         f"{cpu / base_cpu:.2f}"))
    w = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["  ".join(f"{c:>{w[i]}}" if i else f"{c:{w[0]}}" for i, c in enumerate(r)) for r in rows]
    lines += ["", "TLS path, CPU seconds per GB in one process:"]
    for key, label in (("pread_cpu_s_per_gb", "pread (the copy replacing sendfile)"),
                       ("ssl_write_cpu_s_per_gb", "SSLObject.write + BIO read (encrypt)"),
                       ("aes_gcm_cpu_s_per_gb", "AES-256-GCM alone, 16 KiB records"),
                       ("ssl_read_cpu_s_per_gb", "SSLObject.read (decrypt, produce path)")):
        lines.append(f"  {label:40} {breakdown[key]:6.2f}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=300_000, help="records per phase")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="perf profiles of a broker producing on "
                    "PLAINTEXT and SASL_SSL")
    ap.add_argument("--dir", help="working directory (default: a temporary one, removed afterwards)")
    args = ap.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path(args.dir or tempfile.mkdtemp(prefix="odradek-security-bench-"))
    code = code_version()
    print(f"3 brokers per protocol, {PARTITIONS} partitions, RF {RF}, acks=all, {RECORD_SIZE}-byte records, "
          f"{args.records:,} records per phase, {args.rounds} rounds; load average {os.getloadavg()[0]:.2f}; "
          f"code {code['commit']}", flush=True)
    results: dict[str, list[dict[str, float]]] = {}
    profiles: dict[str, str] = {}
    clusters: dict[str, LocalCluster] = {}
    try:
        for protocol in PROTOCOLS:
            security = None if protocol == "PLAINTEXT" else protocol.lower()
            clusters[protocol] = LocalCluster(base / protocol.lower(), 3, security=security)
            clusters[protocol].start()
        for round_ in range(args.rounds):
            for protocol, cluster in clusters.items():
                topic = f"bench-{round_}"
                create_topic_zk(cluster.zookeeper_connect, topic, PARTITIONS, RF)
                wait_full_isr(cluster, topic, PARTITIONS, RF)
                p = produce(cluster, topic, args.records)
                c = consume(cluster, topic, args.records)
                results.setdefault(f"{protocol} produce", []).append(p)
                results.setdefault(f"{protocol} consume", []).append(c)
                print(f"  round {round_ + 1} {protocol:15} produce {p['records_per_sec']:9,.0f} rec/s "
                      f"{p['cpu_s_per_gb']:6.1f} CPU s/GB   consume {c['records_per_sec']:9,.0f} rec/s "
                      f"{c['cpu_s_per_gb']:6.1f} CPU s/GB", flush=True)
        if args.profile:
            for protocol in ("PLAINTEXT", "SASL_SSL"):
                cluster = clusters[protocol]
                create_topic_zk(cluster.zookeeper_connect, "bench-profile", PARTITIONS, RF)
                wait_full_isr(cluster, "bench-profile", PARTITIONS, RF)
                pid = cluster.brokers[0].pid
                assert pid is not None
                with perf_record(pid, base / f"perf-{protocol}.data") as recorded:
                    produce(cluster, "bench-profile", args.records)
                if recorded is None:
                    print("perf is not available: no profiles", flush=True)
                    break
                profiles[protocol] = summarize_perf(recorded).format(f"broker 0 producing on {protocol}")
    finally:
        for cluster in clusters.values():
            cluster.stop()
    breakdown = tls_breakdown(base)
    if not args.dir:
        shutil.rmtree(base, ignore_errors=True)
    print()
    text = report(results, breakdown)
    print(text)
    for profile in profiles.values():
        print()
        print(profile)
    out = RESULTS / f"security-{stamp}.json"
    out.write_text(json.dumps({"started": stamp, "code": code, "records": args.records, "rounds": args.rounds,
                               "producer": PRODUCER, "partitions": PARTITIONS, "replication_factor": RF,
                               "record_size": RECORD_SIZE, "cpu_count": os.cpu_count(),
                               "python": sys.version.split()[0], "openssl": ssl.OPENSSL_VERSION,
                               "results": results, "tls_breakdown": breakdown, "profiles": profiles}, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    unwind_on_sigterm()
    main()
