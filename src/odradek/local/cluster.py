"""A local cluster: an embedded ZooKeeper (standalone, or an ensemble of ``zookeepers``
members on 127.0.0.1; or an external one) plus N broker processes.

Each broker gets ``<dir>/broker-<id>/server.properties`` (so it can be restarted by hand with
``odradek broker --config ...``) and logs there; ``<dir>/cluster.json`` describes the cluster
(ZooKeeper connect string, bootstrap servers, each broker's id, pid, port and config, each
embedded ZooKeeper member's id, host, port, directory and pid).

``cluster.json`` is a readiness signal: it appears only once every broker is registered in
ZooKeeper (``/brokers/ids/<id>``) and answers Metadata listing every broker of the cluster
with a controller, so a script that waits for the file can use the cluster at once. It is
always replaced whole (written to a temporary file, synced, renamed), so a reader never sees
half of it, and it is rewritten when a broker restarts.

With ``security`` ("ssl", "sasl_plaintext" or "sasl_ssl", see local/security.py) each broker
has a CLIENT listener (its ``port``) and a BROKER listener (``broker_port``) of that protocol,
the ACL authorizer is on, and cluster.json also holds the client settings: ``client``
(librdkafka/kcat names, the admin super-user), ``client_java`` (Kafka's names),
``client_user``/``client_user_java`` (the unprivileged ``client`` user), and the
``--command-config`` files ``client.properties`` (admin) and ``client-user.properties``.
"""

from __future__ import annotations

import asyncio
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
from kazoo.exceptions import KazooException

from odradek.common import now_ms
from odradek.local.child_process import ChildProcess
from odradek.local.cluster_state import ClusterState
from odradek.local.security import ADMIN, CLIENT_USER, LocalSecurity, properties_text
from odradek.local.zookeeper import EmbeddedZooKeeper, free_port
from odradek.log.checkpoints import write_atomically
from odradek.net.client import BrokerConnection
from odradek.security.client import ClientSecurity
from odradek.zk.client import KafkaZkClient, ensure_chroot, split_chroot

__all__ = ["BrokerProcess", "LocalCluster", "recv_exactly", "update_cluster_json_pid"]

CLUSTER_JSON = "cluster.json"
ADMIN_PROPERTIES = "client.properties"
USER_PROPERTIES = "client-user.properties"

# Faster failure detection than Kafka's 18 s default: local clusters are for trying things.
# When the whole cluster stops, the last broker's controlled shutdown has no one to hand its
# leaderships to and spends all its retries, so the backoff is short (Kafka's is 5 s).
LOCAL_DEFAULTS = {
    "zookeeper.session.timeout.ms": "6000",
    "controlled.shutdown.retry.backoff.ms": "200",
    "log.segment.delete.delay.ms": "1000",
    "file.delete.delay.ms": "1000",
    "replica.lag.time.max.ms": "10000",
    "num.partitions": "1",
}


@dataclass
class BrokerProcess(ChildProcess):
    broker_id: int
    port: int
    config_path: Path
    rack: str | None = None
    broker_port: int | None = None  # the inter-broker listener's, on a secure cluster
    metrics_port: int | None = None  # /metrics (Prometheus), when the cluster serves metrics
    process: subprocess.Popen[bytes] | None = None
    started_ms: int = 0

    @property
    def log_path(self) -> Path:
        """The broker's server.log (its stdout and stderr), beside its config."""
        return self.config_path.parent / "server.log"


# What a broker prints when a listener's port is taken (broker/server.py's bind error).
_BIND_FAILED = "address already in use"


class LocalCluster:
    def __init__(self, directory: str | os.PathLike[str], num_brokers: int = 3, *,
                 racks: Sequence[str | None] | None = None, zookeeper_connect: str | None = None,
                 zookeeper_port: int = 0, ports: Sequence[int] | None = None,
                 overrides: Mapping[str, str] | None = None, first_broker_id: int = 0,
                 security: str | None = None, zookeepers: int = 1, metrics: bool = False) -> None:
        if zookeepers < 1:
            raise ValueError(f"a cluster needs at least one ZooKeeper, not {zookeepers}")
        if zookeepers > 1 and (zookeeper_connect or zookeeper_port):
            raise ValueError("an embedded ensemble picks its own ports and cannot use an external ZooKeeper")
        if racks is not None and len(racks) != num_brokers:
            raise ValueError(f"--racks names {len(racks)} racks for {num_brokers} brokers")
        if ports is not None and len(ports) != num_brokers:
            raise ValueError(f"{len(ports)} ports given for {num_brokers} brokers")
        self.dir = Path(directory).resolve()
        # The embedded ZooKeeper (member 1 of an ensemble); ``zookeepers`` lists every member.
        self.zookeeper: EmbeddedZooKeeper | None = None
        self.zookeepers: list[EmbeddedZooKeeper] = []
        self._external_zk = zookeeper_connect
        self._zk_port = zookeeper_port
        self._zk_count = zookeepers
        # Kafka's offsets.topic.replication.factor (3) would leave a smaller cluster without a
        # group coordinator (no __consumer_offsets): cap it at the broker count.  The same for
        # the transaction coordinator's __transaction_state (and its min.insync.replicas, 2).
        self.overrides = {**LOCAL_DEFAULTS, "offsets.topic.replication.factor": str(min(3, num_brokers)),
                          "transaction.state.log.replication.factor": str(min(3, num_brokers)),
                          "transaction.state.log.min.isr": str(min(2, num_brokers)),
                          **(overrides or {})}
        self.brokers: dict[int, BrokerProcess] = {}
        self._picked_ports = ports is None  # ours to pick again if another process took one first
        self._zk: KazooClient | None = None
        for i in range(num_brokers):
            broker_id = first_broker_id + i
            port = ports[i] if ports else free_port()
            self.brokers[broker_id] = BrokerProcess(
                broker_id, port, self.dir / f"broker-{broker_id}" / "server.properties",
                racks[i] if racks else None, free_port() if security else None,
                free_port() if metrics else None)
        # Certificates and passwords are made at start(); the protocol is checked now.
        self.security_protocol = security.upper() if security else None
        if self.security_protocol is not None:
            LocalSecurity.check_protocol(self.security_protocol)
        self.security: LocalSecurity | None = None

    # ------------------------------------------------------------------ properties

    @property
    def zookeeper_connect(self) -> str:
        if self._external_zk:
            return self._external_zk
        assert self.zookeepers, "ZooKeeper is not started"
        return ",".join(zk.connect_string for zk in self.zookeepers)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{self.broker_address(b)}:{b.port}" for b in self.brokers.values())

    # How long a start waits for brokers by default (a JVM broker takes longer).
    start_timeout_s = 60.0

    def broker_address(self, broker: BrokerProcess) -> str:
        """The address a broker listens on and advertises (a lab host's own; see local/lab.py)."""
        return "127.0.0.1"

    def broker_command_prefix(self, broker: BrokerProcess) -> list[str]:
        """What the broker's command runs under (a lab runs it in its host's network namespace)."""
        return []

    def broker_command(self, broker: BrokerProcess) -> list[str]:
        """The broker's argv: ``odradek broker --config <its server.properties>`` after
        ``broker_command_prefix`` (a reference cluster of another broker overrides it)."""
        return [*self.broker_command_prefix(broker),
                sys.executable, "-m", "odradek", "broker", "--config", str(broker.config_path)]

    def metrics_url(self, broker: BrokerProcess) -> str:
        """Where the broker serves Prometheus metrics (its metrics.port on its address)."""
        return f"http://{self.broker_address(broker)}:{broker.metrics_port}/metrics"

    def client_security(self, user: str = ADMIN) -> ClientSecurity | None:
        """How odradek's own connections reach the CLIENT listener as ``user`` (None: plain)."""
        if self.security is None:
            return None
        return ClientSecurity.from_properties(self.security.java_properties(user))

    def client_properties(self, user: str = ADMIN) -> dict[str, str]:
        """librdkafka (confluent-kafka, kcat) properties for ``user``, bootstrap servers included."""
        props = {"bootstrap.servers": self.bootstrap_servers}
        if self.security is not None:
            props.update(self.security.librdkafka_properties(user))
        return props

    def broker_properties(self, broker: BrokerProcess) -> dict[str, str]:
        props = {
            "broker.id": str(broker.broker_id),
            "listeners": f"PLAINTEXT://{self.broker_address(broker)}:{broker.port}",
            "advertised.listeners": f"PLAINTEXT://{self.broker_address(broker)}:{broker.port}",
            "log.dirs": str(broker.config_path.parent / "data"),
            "zookeeper.connect": self.zookeeper_connect,
        }
        if self.security is not None:
            assert broker.broker_port is not None
            props.update(self.security.broker_properties(broker.broker_id, broker.port, broker.broker_port))
        if broker.rack is not None:
            props["broker.rack"] = broker.rack
        if broker.metrics_port is not None:
            props["metrics.port"] = str(broker.metrics_port)
        props.update(self.overrides)
        return props

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout_s: float | None = None) -> None:
        """Start ZooKeeper (unless external) and every broker, and wait (default:
        ``start_timeout_s``) until all of them serve; then write cluster.json."""
        timeout_s = timeout_s or self.start_timeout_s
        self.dir.mkdir(parents=True, exist_ok=True)
        if self._external_zk is None:
            self._start_zookeepers(timeout_s)
        if self.security_protocol is not None:
            self._set_up_security(self.security_protocol)
        for broker in self.brokers.values():
            self._write_config(broker)
        # A cluster.json left from an earlier run in this directory would announce a cluster
        # that is not up yet.
        (self.dir / CLUSTER_JSON).unlink(missing_ok=True)
        for broker_id in self.brokers:
            self.start_broker(broker_id, wait=False)
        self.wait_for_brokers(timeout_s=timeout_s, first_start=True)
        self.write_cluster_json()

    def _write_config(self, broker: BrokerProcess) -> None:
        broker.config_path.parent.mkdir(parents=True, exist_ok=True)
        broker.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.broker_properties(broker).items()))

    def _rebind(self, broker: BrokerProcess) -> bool:
        """A broker's first start failed because a port picked for it was taken meanwhile (a
        free port is only free until someone binds it: another test's server, or a client's
        outgoing connection, which takes its local port from the same range): pick its ports
        again and restart it. False if the ports were given, or it failed otherwise."""
        if not self._picked_ports or _BIND_FAILED not in broker.log_path.read_text(errors="replace")[-3000:].lower():
            return False
        broker.port = free_port()
        if broker.broker_port is not None:
            broker.broker_port = free_port()
        if broker.metrics_port is not None:
            broker.metrics_port = free_port()
        self._write_config(broker)
        self.start_broker(broker.broker_id, wait=False)
        return True

    def _start_zookeepers(self, timeout_s: float) -> None:
        """One standalone server in ``zookeeper/``, or members 1..N of an ensemble in
        ``zookeeper-<id>/``: every JVM first (a member serves only once a majority is up),
        then wait for each."""
        if self._zk_count == 1:
            self.zookeepers = [EmbeddedZooKeeper(self.dir / "zookeeper", port=self._zk_port)]
        else:
            servers = [f"127.0.0.1:{free_port()}:{free_port()}" for _ in range(self._zk_count)]
            self.zookeepers = [EmbeddedZooKeeper(self.dir / f"zookeeper-{n}", server_id=n, servers=servers)
                               for n in range(1, self._zk_count + 1)]
        self.zookeeper = self.zookeepers[0]
        for zk in self.zookeepers:
            zk.start(wait_for_quorum=False)
        for zk in self.zookeepers:
            zk.wait_serving(timeout_s)

    def _member(self, server_id: int) -> EmbeddedZooKeeper:
        if not 1 <= server_id <= len(self.zookeepers):
            raise ValueError(f"no ZooKeeper member {server_id} (members 1..{len(self.zookeepers)})")
        return self.zookeepers[server_id - 1]

    def kill_zookeeper(self, server_id: int) -> None:
        """SIGKILL ZooKeeper member ``server_id`` (1..N; 1 is the standalone server)."""
        self._member(server_id).kill()
        self._write_cluster_json_if_up()

    def start_zookeeper(self, server_id: int, *, wait: bool = True, timeout_s: float = 60.0) -> None:
        """(Re)start member ``server_id`` from its data; with ``wait``, until it serves (for an
        ensemble member: until it is back in a quorum, which needs a majority up)."""
        self._member(server_id).start(timeout_s, wait_for_quorum=wait)
        self._write_cluster_json_if_up()

    def _write_cluster_json_if_up(self) -> None:
        if (self.dir / CLUSTER_JSON).exists():
            self.write_cluster_json()

    def start_broker(self, broker_id: int, *, wait: bool = True, timeout_s: float | None = None) -> None:
        """(Re)start one broker from its server.properties. With ``wait``, wait until it is
        registered and knows the cluster, then record its new pid in cluster.json (without,
        the broker records it itself once registered)."""
        timeout_s = timeout_s or self.start_timeout_s
        broker = self.brokers[broker_id]
        if broker.alive:
            raise RuntimeError(f"broker {broker_id} is already running (pid {broker.pid})")
        broker.started_ms = now_ms()
        with open(broker.log_path, "ab") as out:
            broker.process = subprocess.Popen(
                self.broker_command(broker), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        if wait:
            self.wait_for_brokers([broker_id], timeout_s=timeout_s)
            self._write_cluster_json_if_up()

    def _set_up_security(self, protocol: str) -> None:
        """Certificates, SCRAM users in ZooKeeper (before any broker starts, so the brokers'
        own logins work at once) and the --command-config files."""
        self.security = LocalSecurity.create(protocol, self.dir / "security", list(self.brokers))
        if self.security.uses_sasl:
            asyncio.run(_write_users(self.zookeeper_connect, self.security.scram_configs()))
        for user, name in ((ADMIN, ADMIN_PROPERTIES), (CLIENT_USER, USER_PROPERTIES)):
            path = self.dir / name
            path.write_text(properties_text(self.security.java_properties(user),
                                            f"odradek local cluster: {protocol} client settings of User:{user}"))
            path.chmod(0o600)

    def wait_for_brokers(self, broker_ids: Sequence[int] | None = None, timeout_s: float = 60.0, *,
                         first_start: bool = False) -> None:
        """Wait until each of the brokers (default: all) is registered in ZooKeeper since its
        last start and answers Metadata naming a controller and every one of the brokers.
        On the cluster's ``first_start``, a broker whose picked port was taken meanwhile is
        given new ones and started again (up to three times)."""
        ids = list(broker_ids) if broker_ids is not None else list(self.brokers)
        expected = set(ids)
        deadline = time.monotonic() + timeout_s
        pending = set(ids)
        rebinds = dict.fromkeys(ids, 3 if first_start else 0)
        while pending and time.monotonic() < deadline:
            for broker_id in list(pending):
                broker = self.brokers[broker_id]
                if not broker.alive and rebinds[broker_id] > 0 and self._rebind(broker):
                    rebinds[broker_id] -= 1
                    continue
                if not broker.alive:
                    log = broker.log_path.read_text(errors="replace")[-3000:]
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

    def state(self) -> ClusterState:
        """The cluster's state in ZooKeeper (partition states, controller, brokers), read
        through ``zk_client()``."""
        return ClusterState(self.zk_client())

    def _registered_since(self, broker_id: int, since_ms: int) -> bool:
        """Registered after ``since_ms``, by ZooKeeper's clock (a local ZooKeeper's, this host's);
        not yet while ZooKeeper does not answer (an ensemble regaining its quorum)."""
        try:
            created = self.state().registered_at_ms(broker_id)
        except KazooException:
            return False
        return created is not None and created >= since_ms

    def _knows_cluster(self, broker: BrokerProcess, expected: set[int]) -> bool:
        """The broker's metadata cache (filled by the controller's UpdateMetadata) names a
        controller and every broker in ``expected``; before its first UpdateMetadata it
        answers with no brokers, and clients back off for a long while."""
        try:
            brokers, controller = metadata_probe(self.broker_address(broker), broker.port, security=self.client_security())
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
        for zk in self.zookeepers:
            zk.stop()

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
        data: dict[str, object] = {
            "zookeeper": self.zookeeper_connect,
            "bootstrap_servers": self.bootstrap_servers,
            "brokers": [
                {"id": b.broker_id, "pid": b.pid, "port": b.port, "config": str(b.config_path),
                 "rack": b.rack, **({"broker_port": b.broker_port} if b.broker_port is not None else {}),
                 **({"metrics": self.metrics_url(b)} if b.metrics_port is not None else {})}
                for b in self.brokers.values()
            ],
        }
        if self.zookeepers:
            data["zookeepers"] = [
                {"id": zk.server_id or 1, "host": zk.host, "port": zk.port, "dir": str(zk.data_dir), "pid": zk.pid}
                for zk in self.zookeepers
            ]
        if self.security is not None:
            data.update({
                "security": self.security.protocol,
                "client": self.security.librdkafka_properties(ADMIN),
                "client_java": self.security.java_properties(ADMIN),
                "client_user": self.security.librdkafka_properties(CLIENT_USER),
                "client_user_java": self.security.java_properties(CLIENT_USER),
                "command_config": str(self.dir / ADMIN_PROPERTIES),
                "command_config_user": str(self.dir / USER_PROPERTIES),
            })
        return data

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


async def _write_users(connect: str, users: Mapping[str, Mapping[str, str]]) -> None:
    zk = KafkaZkClient(connect, session_timeout_ms=10_000, connection_timeout_ms=30_000)
    await zk.start()
    try:
        for user, config in users.items():
            await zk.set_entity_config("users", user, config)
    finally:
        await zk.close()


def metadata_probe(host: str, port: int, timeout_s: float = 10.0, *,
                   security: ClientSecurity | None = None) -> tuple[set[int], int]:
    """One Metadata v1 request (no topics): (broker ids, controller id)."""
    response = broker_metadata(host, port, (), timeout_s, security=security)
    return {b.node_id for b in response.brokers}, response.controller_id


def broker_metadata(host: str, port: int, topics: Sequence[str], timeout_s: float = 10.0, *,
                    security: ClientSecurity | None = None) -> Any:
    """One broker's Metadata v1 response for ``topics`` (its metadata cache as it is right
    now, where a Kafka client would pick any broker): over a plain socket, or with
    ``security`` over odradek's client connection (TLS, SASL login)."""
    from kio.schema.metadata.v1.request import MetadataRequest, MetadataRequestTopic
    from kio.schema.metadata.v1.response import MetadataResponse

    from odradek.protocol.framing import decode_response, encode_request

    request = MetadataRequest(topics=tuple(MetadataRequestTopic(name=t) for t in topics))
    if security is not None and security.protocol != "PLAINTEXT":
        return asyncio.run(_secure_request(host, port, security, request, MetadataResponse, timeout_s))
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(encode_request(request, 1, "odradek-local-cluster"))
        size = int.from_bytes(recv_exactly(sock, 4), "big")
        _, response = decode_response(recv_exactly(sock, size), MetadataResponse)
    return response


async def _secure_request(host: str, port: int, security: ClientSecurity, request: Any, response_type: Any,
                          timeout_s: float) -> Any:
    conn = BrokerConnection(host, port, "odradek-local-cluster", security=security)
    try:
        await conn.connect(timeout_s=timeout_s)
        return await conn.send(request, response_type, timeout_s=timeout_s)
    finally:
        await conn.close()


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    """``n`` bytes from a blocking socket (OSError if it closes first)."""
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

