"""A lab: ZooKeeper nodes, brokers and a client, each on a "host" of its own, a network
namespace with its own address on a private bridge (local/lab_network.py), so that network
faults can be injected between them: partitions, isolation, packet loss. Linux, as root.

Hosts: ``zk1..zkN`` (ZooKeeper), ``broker0..brokerN-1`` (broker.id = N, broker.rack = the host
name) and ``client``. On the default 10.213.77.0/24: the management leg ``.1`` (root
namespace), ``client`` ``.10``, ``zkN`` ``.10+N``, ``brokerN`` ``.21+N``. The management leg is
how the machine running the lab (tests, the nemesis runner's control thread, readiness probes)
reaches every host; faults never cut it. Clients under test run on ``client``
(``lab.popen("client", argv)``), and faults cut them where the fault says so.

Each broker has two log directories: ``DIR/<host>/data`` and ``DIR/<host>/disk``, a tmpfs of
``disk_mb`` MiB mounted by ``up()`` (0: none), the "small disk" a disk fault fills
(``fill_disk``: its next write fails with ENOSPC and the broker takes the directory offline,
as Kafka's LogDirFailureChannel does; ``heal`` frees it, and a restart brings it back).

State lives in ``DIR/lab.json`` (hosts, addresses, pids, current faults), so separate
``odradek lab`` invocations work on one lab; the brokers' ``DIR/cluster.json`` is the usual
local-cluster description (bootstrap servers = the brokers' own addresses). Processes run
detached (their own session): a lab outlives the command that started it, until ``down()``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from odradek.broker.clock_skew import ENVIRONMENT_VARIABLE as CLOCK_VARIABLE
from odradek.local.cluster import CLUSTER_JSON, BrokerProcess, LocalCluster
from odradek.local.lab_network import (
    LabNetwork,
    LabUnavailable,
    check_lab_available,
    check_nft_available,
    pid_in_namespace,
)
from odradek.local.zookeeper import EmbeddedZooKeeper
from odradek.log.checkpoints import write_atomically

__all__ = ["LAB_DEFAULTS", "LAB_JSON", "Lab", "LabCluster", "LabError", "LabHost", "LabUnavailable"]

LAB_JSON = "lab.json"
BROKER_PORT = 9092
METRICS_PORT = 9404  # each host's /metrics (the port Prometheus's JMX exporter is usually given)
ZOOKEEPER_PORT = 2181
DISK_MB = 512  # each broker's second log directory, a tmpfs (only what is written takes memory)
FILLER = "filler"  # the file a disk fault fills a broker's tmpfs with
# Faster failure detection than Kafka's defaults, so that a fault shows within seconds: a
# broker cut from ZooKeeper loses its session after 6 s, a follower cut from its leader leaves
# the ISR after 6 s. Overridable with ``overrides``.
LAB_DEFAULTS = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "6000",
}
_NAME = re.compile(r"^[a-z][a-z0-9]{0,7}$")


class LabError(ValueError):
    """Bad input for a lab (unknown host, bad percent, ...) or no lab where one was expected."""


@dataclass(frozen=True)
class LabHost:
    name: str
    namespace: str
    address: str
    role: str  # "zookeeper" | "broker" | "client"


class _PidProcess:
    """The part of subprocess.Popen that LocalCluster uses, for a process that another
    ``odradek lab`` invocation started (known by pid, checked to be in its namespace)."""

    def __init__(self, pid: int, namespace: str) -> None:
        self.pid = pid
        self.namespace = namespace
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and not pid_in_namespace(self.pid, self.namespace):
            self.returncode = -1
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0)
            time.sleep(0.05)
        return -1

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class LabCluster(LocalCluster):
    """The lab's brokers as a LocalCluster: each listens on (and advertises) its host's
    address, port 9092, and runs in its host's namespace; configs and logs in DIR/<host>/."""

    def __init__(self, lab: Lab) -> None:
        hosts = [h for h in lab.hosts.values() if h.role == "broker"]
        super().__init__(lab.dir, len(hosts), racks=[h.name for h in hosts],
                         zookeeper_connect=lab.zookeeper_connect, ports=[BROKER_PORT] * len(hosts),
                         overrides={**LAB_DEFAULTS, **lab.overrides}, metrics=True)
        self.hosts: dict[int, LabHost] = {}
        self.disk_mb = lab.disk_mb
        for broker, host in zip(self.brokers.values(), hosts, strict=True):
            broker.config_path = lab.dir / host.name / "server.properties"
            broker.metrics_port = METRICS_PORT
            self.hosts[broker.broker_id] = host

    def broker_address(self, broker: BrokerProcess) -> str:
        return self.hosts[broker.broker_id].address

    def broker_properties(self, broker: BrokerProcess) -> dict[str, str]:
        """Two log directories when the lab has small disks: ``data`` and the tmpfs ``disk``."""
        props = super().broker_properties(broker)
        if self.disk_mb:
            home = broker.config_path.parent
            props["log.dirs"] = f"{home / 'data'},{disk_dir(home)}"
        return props

    def broker_command_prefix(self, broker: BrokerProcess) -> list[str]:
        """In its host's namespace, its wall clock skewed by ``<host dir>/clock.json`` (the
        clock faults: ``Lab.clock``, broker/clock_skew.py)."""
        return ["ip", "netns", "exec", self.hosts[broker.broker_id].namespace,
                "env", f"{CLOCK_VARIABLE}={clock_file(broker.config_path.parent)}"]


def clock_file(host_dir: Path) -> Path:
    """Where a lab broker reads its clock's skew."""
    return host_dir / "clock.json"


def disk_dir(host_dir: Path) -> Path:
    """A lab broker's second log directory, on a tmpfs of its own."""
    return host_dir / "disk"


class Lab:
    """One lab in ``directory``; see the module docstring. Make one with ``create`` (then
    ``up()``) or attach to a running one with ``load``."""

    def __init__(self, directory: Path, name: str, subnet: str, hosts: Mapping[str, LabHost],
                 overrides: Mapping[str, str], pids: Mapping[str, int] | None = None,
                 faults: Sequence[Mapping[str, Any]] = (), disk_mb: int = 0) -> None:
        self.dir = directory
        self.name = name
        self.subnet = subnet
        self.hosts: dict[str, LabHost] = dict(hosts)
        self.overrides = dict(overrides)
        self.faults: list[dict[str, Any]] = [dict(f) for f in faults]
        self.disk_mb = disk_mb
        self.network = LabNetwork(name, subnet)
        self._pids: dict[str, int] = dict(pids or {})
        self._processes: dict[str, Any] = {}  # host -> Popen (or _PidProcess) of its ZooKeeper
        self.cluster = LabCluster(self)
        for host, pid in self._pids.items():
            self._attach(host, pid)

    # ------------------------------------------------------------------ making and loading

    @classmethod
    def create(cls, directory: str | os.PathLike[str], brokers: int = 3, zookeepers: int = 3,
               subnet: str = "10.213.77.0/24", name: str = "odr",
               overrides: Mapping[str, str] | None = None, disk_mb: int = DISK_MB) -> Lab:
        """Describe a new lab (nothing is started until ``up()``); LabError on bad input."""
        if not _NAME.match(name):
            raise LabError(f"lab name {name!r}: 1 to 8 lowercase letters and digits, starting with a letter")
        if not 1 <= brokers <= 50:
            raise LabError(f"a lab has 1 to 50 brokers, not {brokers}")
        if not 1 <= zookeepers <= 9:
            raise LabError(f"a lab has 1 to 9 ZooKeeper nodes, not {zookeepers}")
        if not 0 <= disk_mb <= 65536:
            raise LabError(f"a broker's small disk has 0 (none) to 65536 MiB, not {disk_mb}")
        try:
            network = ipaddress.IPv4Network(subnet)
        except ValueError as e:
            raise LabError(f"subnet {subnet!r}: {e}") from None
        if network.prefixlen != 24:
            raise LabError(f"subnet {subnet}: the lab needs a /24")
        base = network.network_address
        hosts = {"client": LabHost("client", f"{name}-client", str(base + 10), "client")}
        for i in range(1, zookeepers + 1):
            hosts[f"zk{i}"] = LabHost(f"zk{i}", f"{name}-zk{i}", str(base + 10 + i), "zookeeper")
        for i in range(brokers):
            hosts[f"broker{i}"] = LabHost(f"broker{i}", f"{name}-broker{i}", str(base + 21 + i), "broker")
        return cls(Path(directory).resolve(), name, str(network), hosts, overrides or {}, disk_mb=disk_mb)

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> Lab:
        """The lab described by ``directory/lab.json``; LabError if there is none."""
        path = Path(directory).resolve() / LAB_JSON
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise LabError(f"no lab in {path.parent} (no {LAB_JSON}); start one with `odradek lab up`") from None
        except (OSError, ValueError) as e:
            raise LabError(f"{path}: cannot read it ({e})") from None
        hosts = {n: LabHost(n, h["namespace"], h["address"], h["role"]) for n, h in data["hosts"].items()}
        pids = {n: h["pid"] for n, h in data["hosts"].items() if h.get("pid")}
        return cls(path.parent, data["name"], data["subnet"], hosts, data.get("overrides", {}), pids,
                   data.get("faults", []), data.get("disk_mb", 0))

    # ------------------------------------------------------------------ properties

    @property
    def management_address(self) -> str:
        return self.network.management_address

    @property
    def zookeeper_connect(self) -> str:
        return ",".join(f"{h.address}:{ZOOKEEPER_PORT}" for h in self.hosts.values() if h.role == "zookeeper")

    @property
    def bootstrap_servers(self) -> str:
        return self.cluster.bootstrap_servers

    def host(self, name: str) -> LabHost:
        try:
            return self.hosts[name]
        except KeyError:
            raise LabError(f"unknown host {name!r} (hosts: {', '.join(self.hosts)})") from None

    def broker_id(self, host: str) -> int:
        for broker_id, h in self.cluster.hosts.items():
            if h.name == host:
                return broker_id
        raise LabError(f"{host} is not a broker host")

    def host_of_broker(self, broker_id: int) -> LabHost:
        return self.cluster.hosts[broker_id]

    # ------------------------------------------------------------------ lifecycle

    def up(self, timeout_s: float = 90.0) -> None:
        """Make the network, start ZooKeeper and the brokers, and return once cluster.json is
        written. On failure everything made so far is removed again."""
        check_lab_available()
        if (self.dir / LAB_JSON).exists() and _running(self.dir):
            raise LabError(f"a lab is already up in {self.dir}; `odradek lab down --dir {self.dir}` first")
        conflict = self.network.conflicts()
        if conflict:
            raise LabError(f"{conflict}; take it down (`odradek lab down`) or choose another --name/--subnet")
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / CLUSTER_JSON).unlink(missing_ok=True)
        self.faults = []
        self._save()  # first, so that `lab down` can clean up after a partial up
        try:
            self.network.create({h.name: h.address for h in self.hosts.values()})
            self._mount_disks()
            for host in self._zookeeper_hosts():
                self._start_zookeeper(host)
            deadline = time.monotonic() + timeout_s
            for host in self._zookeeper_hosts():
                self._wait_zookeeper(host, deadline - time.monotonic())
            self.cluster.start(timeout_s=max(1.0, deadline - time.monotonic()))
        except BaseException:
            self.down()
            raise
        self._save()

    def down(self) -> None:
        """Stop every process (brokers first, SIGTERM then SIGKILL), remove the namespaces,
        veths, bridge and management leg. Idempotent; also after a partial ``up``."""
        if os.geteuid() == 0 and self.network.own_namespaces():
            self.heal()  # so that the brokers' controlled shutdown can reach the controller
        self.cluster.stop()
        for host in self._zookeeper_hosts():
            proc = self._processes.get(host)
            if proc is not None:
                proc.terminate()
        for host in self._zookeeper_hosts():
            proc = self._processes.pop(host, None)
            if proc is not None:
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
        if os.geteuid() == 0:
            self.network.destroy()
            self._unmount_disks()
        self.faults = []
        self._pids = {}
        if (self.dir / LAB_JSON).exists():
            self._save()

    # ------------------------------------------------------------------ processes

    def popen(self, host: str, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Run ``argv`` on ``host`` (in its namespace)."""
        return subprocess.Popen(self.exec_argv(host, argv), **kwargs)

    def run(self, host: str, argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[Any]:
        return subprocess.run(self.exec_argv(host, argv), **kwargs)

    def exec_argv(self, host: str, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.host(host).namespace, *argv]

    def pid(self, host: str) -> int | None:
        """The pid of the host's ZooKeeper or broker while it runs (None for the client)."""
        h = self.host(host)
        proc = self._process(h)
        if proc is None or proc.poll() is not None:
            return None
        return int(proc.pid)

    def signal(self, host: str, sig: int) -> None:
        proc = self._process(self._server_host(host))
        if proc is not None and proc.poll() is None:
            proc.send_signal(sig)

    def kill(self, host: str) -> None:
        """SIGKILL the host's process (no shutdown of any kind) and wait until it is gone."""
        h = self._server_host(host)
        proc = self._process(h)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            proc.wait(10)
        self._save()

    def restart(self, host: str, timeout_s: float = 60.0) -> None:
        """Stop the host's process (SIGTERM, SIGKILL after 30 s) if it runs, start it again and
        wait until it serves (a broker: registered and knowing the cluster)."""
        h = self._server_host(host)
        if h.role == "broker":
            broker_id = self.broker_id(h.name)
            self.cluster.stop_broker(broker_id)
            self.cluster.start_broker(broker_id, wait=True, timeout_s=timeout_s)
        else:
            proc = self._processes.get(h.name)
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
            self._start_zookeeper(h)
            self._wait_zookeeper(h, timeout_s)
        self._save()

    # ------------------------------------------------------------------ faults

    def partition(self, side_a: Iterable[str], side_b: Iterable[str]) -> None:
        """Cut every link between a host of ``side_a`` and a host of ``side_b`` (both ways)."""
        a, b = self._hosts(side_a, "side A"), self._hosts(side_b, "side B")
        both = sorted(set(a) & set(b))
        if both:
            raise LabError(f"{', '.join(both)} on both sides of the partition")
        for x in a:
            for y in b:
                self._cut(x, y)
        self.faults.append({"type": "partition", "a": a, "b": b})
        self._save()

    def isolate(self, host: str, keep: Iterable[str] = ()) -> None:
        """Cut ``host`` from every other lab host but those in ``keep``."""
        h = self.host(host).name
        kept = self._hosts(keep, "--keep", allow_empty=True)
        if h in kept:
            raise LabError(f"{h} cannot be isolated from itself and kept")
        for other in self.hosts:
            if other != h and other not in kept:
                self._cut(h, other)
        self.faults.append({"type": "isolate", "host": h, "keep": kept})
        self._save()

    def loss(self, host: str, percent: int) -> None:
        """Drop ``percent``% of the packets ``host`` sends (0 removes the loss)."""
        h = self.host(host).name
        if not 0 <= percent <= 100:
            raise LabError(f"loss percent must be between 0 and 100, not {percent}")
        if percent:
            check_nft_available()
        self.network.set_loss(h, percent)
        self.faults = [f for f in self.faults if not (f["type"] == "loss" and f["host"] == h)]
        if percent:
            self.faults.append({"type": "loss", "host": h, "percent": percent})
        self._save()

    def clock(self, host: str, offset_ms: int, rate: float = 1.0) -> None:
        """Step broker ``host``'s wall clock ``offset_ms`` away from the system's and run it
        ``rate`` times as fast from now (0 and 1.0 put it back); the broker applies it within
        100 ms."""
        h = self.host(host)
        if h.role != "broker":
            raise LabError(f"{h.name} is not a broker: only a broker's clock can be skewed")
        if rate <= 0:
            raise LabError(f"a clock's rate must be positive, not {rate}")
        write_atomically(clock_file(self.dir / h.name), json.dumps({"offset_ms": offset_ms, "rate": rate}).encode())
        self.faults = [f for f in self.faults if not (f["type"] == "clock" and f["host"] == h.name)]
        if offset_ms or rate != 1.0:
            self.faults.append({"type": "clock", "host": h.name, "offset_ms": offset_ms, "rate": rate})
        self._save()

    def fill_disk(self, host: str) -> int:
        """Fill broker ``host``'s small disk (its second log directory): its next write there
        fails with ENOSPC. Returns the bytes written."""
        h = self.host(host)
        if h.role != "broker":
            raise LabError(f"{h.name} is not a broker: only a broker has a small disk")
        disk = disk_dir(self.dir / h.name)
        if not self.disk_mb or not os.path.ismount(disk):
            raise LabError(f"{h.name} has no small disk (the lab was made with disk_mb=0, or is not up)")
        written = 0
        chunk = b"\0" * (1 << 20)
        with open(disk / FILLER, "ab", buffering=0) as f:
            try:
                while True:
                    written += f.write(chunk)
            except OSError:  # ENOSPC: full (a last partial write may have gone in)
                written = f.tell()
        self.faults = [f for f in self.faults if not (f["type"] == "disk" and f["host"] == h.name)]
        self.faults.append({"type": "disk", "host": h.name})
        self._save()
        return written

    def heal(self) -> None:
        """Remove every blackhole route and every loss table, set every skewed clock right and
        free every filled disk (a broker took the directory offline: restart it to bring it back)."""
        for host in self.hosts:
            self.network.clear_blackholes(host)
            self.network.clear_loss(host)
        for fault in self.faults:
            if fault["type"] == "clock":
                write_atomically(clock_file(self.dir / fault["host"]), b'{"offset_ms": 0, "rate": 1.0}')
            elif fault["type"] == "disk":
                (disk_dir(self.dir / fault["host"]) / FILLER).unlink(missing_ok=True)
        self.faults = []
        self._save()

    def _cut(self, x: str, y: str) -> None:
        self.network.blackhole(x, self.hosts[y].address)
        self.network.blackhole(y, self.hosts[x].address)

    def _hosts(self, names: Iterable[str], what: str, allow_empty: bool = False) -> list[str]:
        result = [self.host(n.strip()).name for n in names if n.strip()]
        if not result and not allow_empty:
            raise LabError(f"{what} names no host")
        return list(dict.fromkeys(result))

    # ------------------------------------------------------------------ internals

    def _disks(self) -> list[Path]:
        return [disk_dir(self.dir / h.name) for h in self.hosts.values() if h.role == "broker"]

    def _mount_disks(self) -> None:
        """A tmpfs of ``disk_mb`` MiB for each broker's second log directory."""
        if not self.disk_mb:
            return
        for disk in self._disks():
            disk.mkdir(parents=True, exist_ok=True)
            if os.path.ismount(disk):  # left by a lab that was not taken down
                continue
            done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.disk_mb}m", "odradek-lab", str(disk)],
                                  capture_output=True, text=True, timeout=60)
            if done.returncode != 0:
                raise LabError(f"cannot mount a tmpfs on {disk}: {done.stderr.strip()}")

    def _unmount_disks(self) -> None:
        """Unmount the small disks (lazily if something still holds one); their data goes."""
        for disk in self._disks():
            if os.path.ismount(disk):
                if subprocess.run(["umount", str(disk)], capture_output=True, timeout=60).returncode != 0:
                    subprocess.run(["umount", "-l", str(disk)], capture_output=True, timeout=60)

    def _zookeeper_hosts(self) -> list[LabHost]:
        return [h for h in self.hosts.values() if h.role == "zookeeper"]

    def _server_host(self, host: str) -> LabHost:
        h = self.host(host)
        if h.role == "client":
            raise LabError("the client host runs no server process")
        return h

    def _process(self, h: LabHost) -> Any:
        if h.role == "broker":
            return self.cluster.brokers[self.broker_id(h.name)].process
        return self._processes.get(h.name)

    def _attach(self, host: str, pid: int) -> None:
        h = self.hosts.get(host)
        if h is None:
            return
        proc = _PidProcess(pid, h.namespace)
        if h.role == "broker":
            self.cluster.brokers[self.broker_id(host)].process = proc
        elif h.role == "zookeeper":
            self._processes[host] = proc

    def _zookeeper(self, h: LabHost) -> EmbeddedZooKeeper:
        """The host's ZooKeeper: standalone when it is the only one, else member N of zk1..zkN."""
        zookeepers = self._zookeeper_hosts()
        ensemble: dict[str, Any] = {}
        if len(zookeepers) > 1:
            ensemble = {"server_id": zookeepers.index(h) + 1,
                        "servers": [f"{z.address}:2888:3888" for z in zookeepers]}
        return EmbeddedZooKeeper(self.dir / h.name, port=ZOOKEEPER_PORT, host=h.address,
                                 command_prefix=["ip", "netns", "exec", h.namespace], **ensemble)

    def _start_zookeeper(self, h: LabHost) -> None:
        """Start it without waiting: an ensemble member serves only once a majority runs."""
        zk = self._zookeeper(h)
        zk.data_dir.mkdir(parents=True, exist_ok=True)
        zk.start(wait_for_quorum=False)
        self._processes[h.name] = zk.process

    def _wait_zookeeper(self, h: LabHost, timeout_s: float) -> None:
        zk = self._zookeeper(h)
        deadline = time.monotonic() + max(1.0, timeout_s)
        proc = self._processes[h.name]
        while not zk.serving():
            if proc.poll() is not None:
                tail = (zk.data_dir / "zookeeper.out").read_text(errors="replace").strip().splitlines()[-1:]
                raise RuntimeError(f"ZooKeeper on {h.name} exited ({''.join(tail)}); logs in {zk.data_dir}")
            if time.monotonic() >= deadline:
                raise TimeoutError(f"ZooKeeper on {h.name} ({h.address}:{ZOOKEEPER_PORT}) did not serve "
                                   f"within {timeout_s:.0f}s")
            time.sleep(0.1)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "subnet": self.subnet,
            "management_address": self.management_address,
            "zookeeper_connect": self.zookeeper_connect,
            "bootstrap_servers": self.bootstrap_servers,
            "overrides": self.overrides,
            "disk_mb": self.disk_mb,
            "hosts": {h.name: {"namespace": h.namespace, "address": h.address, "role": h.role,
                               "pid": self.pid(h.name)} for h in self.hosts.values()},
            "faults": self.faults,
        }

    def _save(self) -> None:
        write_atomically(self.dir / LAB_JSON, (json.dumps(self.to_json(), indent=2) + "\n").encode())


def _running(directory: Path) -> bool:
    """True if the lab recorded in ``directory`` has a process still running."""
    try:
        lab = Lab.load(directory)
    except (LabError, KeyError):
        return False
    return any(lab.pid(h) for h in lab.hosts)
