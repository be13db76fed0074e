"""A local cluster: an embedded ZooKeeper (or an external one) plus N broker processes.

Each broker gets ``<dir>/broker-<id>/server.properties`` (so it can be restarted by hand with
``odradek broker --config ...``) and logs there; ``<dir>/cluster.json`` describes the cluster
(ZooKeeper connect string, bootstrap servers, each broker's id, pid, port and config).

``cluster.json`` is a readiness signal: it appears only once every broker is registered in
ZooKeeper (``/brokers/ids/<id>``) and answers Metadata listing every broker of the cluster
with a controller, so a script that waits for the file can use the cluster at once. It is
always replaced whole (written to a temporary file, synced, renamed), so a reader never sees
half of it, and it is rewritten when a broker restarts.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from odradek.local.zookeeper import EmbeddedZooKeeper, free_port
from odradek.log.checkpoints import write_atomically
from odradek.zk.client import ensure_chroot, split_chroot
from odradek.zk.zk_data import BrokerIdZNode

__all__ = ["BrokerProcess", "LocalCluster", "update_cluster_json_pid"]

CLUSTER_JSON = "cluster.json"

# Faster failure detection than Kafka's 18 s default: local clusters are for trying things.
LOCAL_DEFAULTS = {
    "zookeeper.session.timeout.ms": "6000",
    "controlled.shutdown.retry.backoff.ms": "500",
    "log.segment.delete.delay.ms": "1000",
    "file.delete.delay.ms": "1000",
    "replica.lag.time.max.ms": "10000",
    "num.partitions": "1",
}


@dataclass
class BrokerProcess:
    broker_id: int
    port: int
    config_path: Path
    rack: str | None = None
    process: subprocess.Popen[bytes] | None = None
    started_ms: int = 0

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


class LocalCluster:
    def __init__(self, directory: str | os.PathLike[str], num_brokers: int = 3, *,
                 racks: Sequence[str | None] | None = None, zookeeper_connect: str | None = None,
                 zookeeper_port: int = 0, ports: Sequence[int] | None = None,
                 overrides: Mapping[str, str] | None = None, first_broker_id: int = 0) -> None:
        if racks is not None and len(racks) != num_brokers:
            raise ValueError(f"--racks names {len(racks)} racks for {num_brokers} brokers")
        if ports is not None and len(ports) != num_brokers:
            raise ValueError(f"{len(ports)} ports given for {num_brokers} brokers")
        self.dir = Path(directory).resolve()
        self.zookeeper: EmbeddedZooKeeper | None = None
        self._external_zk = zookeeper_connect
        self._zk_port = zookeeper_port
        # Kafka's offsets.topic.replication.factor (3) would leave a smaller cluster without a
        # group coordinator (no __consumer_offsets): cap it at the broker count.  The same for
        # the transaction coordinator's __transaction_state (and its min.insync.replicas, 2).
        self.overrides = {**LOCAL_DEFAULTS, "offsets.topic.replication.factor": str(min(3, num_brokers)),
                          "transaction.state.log.replication.factor": str(min(3, num_brokers)),
                          "transaction.state.log.min.isr": str(min(2, num_brokers)),
                          **(overrides or {})}
        self.brokers: dict[int, BrokerProcess] = {}
        self._zk: KazooClient | None = None
        for i in range(num_brokers):
            broker_id = first_broker_id + i
            port = ports[i] if ports else free_port()
            self.brokers[broker_id] = BrokerProcess(
                broker_id, port, self.dir / f"broker-{broker_id}" / "server.properties",
                racks[i] if racks else None)

    # ------------------------------------------------------------------ properties

    @property
    def zookeeper_connect(self) -> str:
        if self._external_zk:
            return self._external_zk
        assert self.zookeeper is not None, "ZooKeeper is not started"
        return self.zookeeper.connect_string

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{b.port}" for b in self.brokers.values())

    def broker_properties(self, broker: BrokerProcess) -> dict[str, str]:
        props = {
            "broker.id": str(broker.broker_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{broker.port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{broker.port}",
            "log.dirs": str(broker.config_path.parent / "data"),
            "zookeeper.connect": self.zookeeper_connect,
        }
        if broker.rack is not None:
            props["broker.rack"] = broker.rack
        props.update(self.overrides)
        return props

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout_s: float = 60.0) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        if self._external_zk is None:
            self.zookeeper = EmbeddedZooKeeper(self.dir / "zookeeper", port=self._zk_port)
            self.zookeeper.start()
        for broker in self.brokers.values():
            broker.config_path.parent.mkdir(parents=True, exist_ok=True)
            broker.config_path.write_text(
                "".join(f"{k}={v}\n" for k, v in self.broker_properties(broker).items()))
        # A cluster.json left from an earlier run in this directory would announce a cluster
        # that is not up yet.
        (self.dir / CLUSTER_JSON).unlink(missing_ok=True)
        for broker_id in self.brokers:
            self.start_broker(broker_id, wait=False)
        self.wait_for_brokers(timeout_s=timeout_s)
        self.write_cluster_json()

    def start_broker(self, broker_id: int, *, wait: bool = True, timeout_s: float = 60.0) -> None:
        """(Re)start one broker from its server.properties. With ``wait``, wait until it is
        registered and knows the cluster, then record its new pid in cluster.json (without,
        the broker records it itself once registered)."""
        broker = self.brokers[broker_id]
        if broker.alive:
            raise RuntimeError(f"broker {broker_id} is already running (pid {broker.pid})")
        log_path = broker.config_path.parent / "server.log"
        broker.started_ms = int(time.time() * 1000)
        with open(log_path, "ab") as out:
            broker.process = subprocess.Popen(
                [sys.executable, "-m", "odradek", "broker", "--config", str(broker.config_path)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        if wait:
            self.wait_for_brokers([broker_id], timeout_s=timeout_s)
            if (self.dir / CLUSTER_JSON).exists():
                self.write_cluster_json()

    def wait_for_brokers(self, broker_ids: Sequence[int] | None = None, timeout_s: float = 60.0) -> None:
        """Wait until each of the brokers (default: all) is registered in ZooKeeper since its
        last start and answers Metadata naming a controller and every one of the brokers."""
        ids = list(broker_ids) if broker_ids is not None else list(self.brokers)
        expected = set(ids)
        deadline = time.monotonic() + timeout_s
        pending = set(ids)
        while pending and time.monotonic() < deadline:
            for broker_id in list(pending):
                broker = self.brokers[broker_id]
                if not broker.alive:
                    log = (broker.config_path.parent / "server.log").read_text(errors="replace")[-3000:]
                    raise RuntimeError(f"broker {broker_id} exited with code "
                                       f"{broker.process.returncode if broker.process else '?'}:\n{log}")
                if self._registered_since(broker_id, broker.started_ms) and self._knows_cluster(broker, expected):
                    pending.discard(broker_id)
            if pending:
                time.sleep(0.05)
        if pending:
            raise TimeoutError(f"brokers {sorted(pending)} did not start within {timeout_s:.0f}s")

    def zk_client(self) -> KazooClient:
        """A plain (synchronous) ZooKeeper client for checks from tests and tools."""
        if self._zk is None:
            hosts, chroot = split_chroot(self.zookeeper_connect)
            if chroot:
                ensure_chroot(hosts, chroot, 30)
            self._zk = KazooClient(hosts=self.zookeeper_connect, timeout=10)
            self._zk.start(timeout=30)
        return self._zk

    def _registered_since(self, broker_id: int, since_ms: int) -> bool:
        try:
            data, _ = self.zk_client().get(BrokerIdZNode.path(broker_id))
        except NoNodeError:
            return False
        return BrokerIdZNode.decode(broker_id, data).timestamp_ms >= since_ms

    def _knows_cluster(self, broker: BrokerProcess, expected: set[int]) -> bool:
        """The broker's metadata cache (filled by the controller's UpdateMetadata) names a
        controller and every broker in ``expected``; before its first UpdateMetadata it
        answers with no brokers, and clients back off for a long while."""
        try:
            brokers, controller = metadata_probe("127.0.0.1", broker.port)
        except (OSError, ValueError):
            return False
        return controller >= 0 and expected | {broker.broker_id} <= brokers

    def signal_broker(self, broker_id: int, sig: int) -> None:
        broker = self.brokers[broker_id]
        if broker.process is not None and broker.process.poll() is None:
            broker.process.send_signal(sig)

    def kill_broker(self, broker_id: int) -> None:
        """SIGKILL: no controlled shutdown, no flush."""
        broker = self.brokers[broker_id]
        if broker.process is not None and broker.process.poll() is None:
            broker.process.kill()
            broker.process.wait()

    def stop_broker(self, broker_id: int, timeout_s: float = 30.0) -> None:
        """SIGTERM and wait (controlled shutdown); SIGKILL if it does not stop in time."""
        broker = self.brokers[broker_id]
        if broker.process is None or broker.process.poll() is not None:
            return
        broker.process.send_signal(signal.SIGCONT)
        broker.process.terminate()
        try:
            broker.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            broker.process.kill()
            broker.process.wait()

    def stop(self) -> None:
        for broker_id in self.brokers:
            self.signal_broker(broker_id, signal.SIGCONT)
        for broker_id in self.brokers:
            self.signal_broker(broker_id, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for broker in self.brokers.values():
            if broker.process is None:
                continue
            try:
                broker.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                broker.process.kill()
                broker.process.wait()
        if self._zk is not None:
            with contextlib.suppress(Exception):
                self._zk.stop()
                self._zk.close()
            self._zk = None
        if self.zookeeper is not None:
            self.zookeeper.stop()

    def __enter__(self) -> LocalCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ cluster.json

    def cluster_json(self) -> dict[str, object]:
        return {
            "zookeeper": self.zookeeper_connect,
            "bootstrap_servers": self.bootstrap_servers,
            "brokers": [
                {"id": b.broker_id, "pid": b.pid, "port": b.port, "config": str(b.config_path),
                 "rack": b.rack}
                for b in self.brokers.values()
            ],
        }

    def write_cluster_json(self) -> None:
        """Replace cluster.json with this cluster's description (atomically)."""
        path = self.dir / CLUSTER_JSON
        with _locked(path):
            _replace_json(path, self.cluster_json())


def _replace_json(path: Path, data: object) -> None:
    """Replace ``path`` with ``data`` as JSON: readers see the old file or the whole new one."""
    write_atomically(path, (json.dumps(data, indent=2) + "\n").encode())


@contextlib.contextmanager
def _locked(path: Path):  # type: ignore[no-untyped-def]
    lock = path.with_suffix(".lock")
    with open(lock, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def metadata_probe(host: str, port: int, timeout_s: float = 10.0) -> tuple[set[int], int]:
    """One Metadata v1 request (no topics) over a plain socket: (broker ids, controller id)."""
    response = broker_metadata(host, port, (), timeout_s)
    return {b.node_id for b in response.brokers}, response.controller_id


def broker_metadata(host: str, port: int, topics: Sequence[str], timeout_s: float = 10.0) -> Any:
    """One broker's Metadata v1 response for ``topics``, over a plain socket (its metadata
    cache as it is right now, where a Kafka client would pick any broker)."""
    from kio.schema.metadata.v1.request import MetadataRequest, MetadataRequestTopic
    from kio.schema.metadata.v1.response import MetadataResponse

    from odradek.protocol.framing import decode_response, encode_request

    request = MetadataRequest(topics=tuple(MetadataRequestTopic(name=t) for t in topics))
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(encode_request(request, 1, "odradek-local-cluster"))
        size = int.from_bytes(_recv_exactly(sock, 4), "big")
        _, response = decode_response(_recv_exactly(sock, size), MetadataResponse)
    return response


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return bytes(buf)


def update_cluster_json_pid(config_path: str | os.PathLike[str], pid: int) -> bool:
    """If ``config_path`` belongs to a local cluster (``../cluster.json`` lists it), record
    the broker's new pid there; a broker restarted by hand keeps the file current this way.
    Before the cluster's first start has finished there is no cluster.json, and nothing to do."""
    config_path = Path(config_path).resolve()
    cluster = config_path.parent.parent / CLUSTER_JSON
    if not cluster.exists():
        return False
    with _locked(cluster):
        try:
            data = json.loads(cluster.read_text())
        except (OSError, ValueError):
            return False
        changed = False
        for broker in data.get("brokers", []):
            if Path(broker.get("config", "")).resolve() == config_path:
                broker["pid"] = pid
                changed = True
        if changed:
            _replace_json(cluster, data)
        return changed

