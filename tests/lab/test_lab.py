"""`odradek lab` as a user runs it: one lab (3 ZooKeeper nodes, 3 brokers, a client) for the module,
faults checked link by link, and a clean `lab down`.

The whole module runs under a hostile host firewall: a forward-hook nftables table in the root
namespace drops everything from the lab's subnet, as Docker's FORWARD policy would with
br_netfilter's bridge-nf-call-iptables=1. A bridge in the root namespace would be cut by it;
the lab keeps its bridge in a namespace of its own."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from odradek.local.lab import Lab
from odradek.local.zookeeper import server_mode
from support import run_odradek
from support.metrics import scrape


@dataclass
class Running:
    lab: Lab
    dir: Path
    root_before: str  # the root namespace's addresses and routes before the lab


def _root_network() -> str:
    """The root namespace's addresses and routes, minus those of labs' management legs (this
    lab's, and those of other labs that tests may run on this machine at the same time)."""
    out = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True, check=True).stdout
    out += subprocess.run(["ip", "route", "show", "table", "all"], capture_output=True, text=True, check=True).stdout
    lines = [re.sub(r"valid_lft \S+ preferred_lft \S+", "", line) for line in out.splitlines()]
    return "\n".join(sorted(line for line in lines if not re.search(r"\S-mgmt\b", line)))


def _hostile_firewall(name: str, subnet: str, on: bool) -> None:
    """A root-namespace table (``<name>fwd``) dropping forwarded packets from ``subnet``."""
    if shutil.which("nft") is None:
        return
    if on:
        rules = (f"table inet {name}fwd {{\n chain forward {{\n  type filter hook forward priority 0;\n"
                 f"  ip saddr {subnet} drop\n }}\n}}\n")
        subprocess.run(["nft", "-f", "-"], input=rules, text=True, check=True)
    else:
        subprocess.run(["nft", "delete", "table", "inet", f"{name}fwd"], capture_output=True)


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory, lab_identity: Callable[[], tuple[str, str]]) -> Iterator[Running]:
    name, subnet = lab_identity()
    directory = tmp_path_factory.mktemp("lab")
    root_before = _root_network()
    _hostile_firewall(name, subnet, True)
    try:
        up = run_odradek("lab", "up", "-n", "3", "--zookeepers", "3", "--dir", str(directory), "--name", name,
                         "--subnet", subnet, timeout=120)
        assert up.returncode == 0, up.stderr
        assert "Bootstrap servers: " in up.stdout
        yield Running(Lab.load(directory), directory, root_before)
    finally:
        Lab.load(directory).down()
        _hostile_firewall(name, subnet, False)


def _lab(running: Running, *args: str) -> subprocess.CompletedProcess[str]:
    return run_odradek("lab", args[0], "--dir", str(running.dir), *args[1:])


def _zookeeper_mode(address: str) -> str:
    """What ZooKeeper's ``srvr`` says the member at ``address`` is (over the management leg)."""
    return server_mode(address, 2181) or ""


def _namespaces() -> list[str]:
    return os.listdir("/run/netns") if os.path.isdir("/run/netns") else []


def _tcp(running: Running, source: str, target: str, port: int) -> bool:
    """Can ``source`` open a TCP connection to ``target``:port (1 s)?"""
    address = running.lab.hosts[target].address
    code = f"import socket; socket.create_connection(({address!r}, {port}), timeout=1).close()"
    return running.lab.run(source, [sys.executable, "-c", code], capture_output=True).returncode == 0


def _ping(running: Running, source: str, target: str) -> bool:
    address = running.lab.hosts[target].address
    argv = ["ping", "-c1", "-W1", address]
    return running.lab.run(source, argv, capture_output=True).returncode == 0


def _from_management(running: Running, target: str) -> bool:
    argv = ["ping", "-c1", "-W1", running.lab.hosts[target].address]
    return subprocess.run(argv, capture_output=True).returncode == 0


def test_brokers_on_their_own_hosts(running: Running) -> None:
    lab = running.lab
    cluster = json.loads((running.dir / "cluster.json").read_text())
    addresses = [lab.hosts[f"broker{i}"].address for i in range(3)]
    assert cluster["bootstrap_servers"] == ",".join(f"{a}:9092" for a in addresses)
    assert cluster["zookeeper"] == ",".join(f"{lab.hosts[f'zk{n}'].address}:2181" for n in (1, 2, 3))
    modes = sorted(_zookeeper_mode(lab.hosts[f"zk{n}"].address) for n in (1, 2, 3))
    assert modes == ["follower", "follower", "leader"]
    props = (running.dir / "broker1" / "server.properties").read_text()
    assert f"advertised.listeners=PLAINTEXT://{addresses[1]}:9092" in props
    assert "broker.rack=broker1" in props
    # Each broker serves /metrics on its host's address; one of them is the active controller.
    assert [b["metrics"] for b in cluster["brokers"]] == [f"http://{a}:9404/metrics" for a in addresses]
    assert sum(scrape(b["metrics"]).value("kafka_controller_kafkacontroller_activecontrollercount")
               for b in cluster["brokers"]) == 1
    # Each broker process runs in its own host's namespace.
    for i in range(3):
        pid = lab.pid(f"broker{i}")
        assert pid is not None
        assert os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat(f"/run/netns/{lab.hosts[f'broker{i}'].namespace}").st_ino
    # The root namespace only gained the management leg.
    assert _root_network() == running.root_before


def test_client_produces_and_consumes_across_hosts(running: Running) -> None:
    lab = running.lab
    b0, b2 = (f"{lab.hosts[h].address}:9092" for h in ("broker0", "broker2"))
    metadata = _lab(running, "exec", "client", "--", "kcat", "-L", "-b", b0)
    assert metadata.returncode == 0, metadata.stderr
    assert metadata.stdout.count(":9092") >= 3 and "3 brokers" in metadata.stdout
    created = _lab(running, "exec", "client", "--", sys.executable, "-m", "odradek", "topics", "--bootstrap-server",
                   b0, "--create", "--topic", "lab", "--partitions", "3", "--replication-factor", "3")
    assert created.returncode == 0, created.stderr
    produced = run_odradek("lab", "exec", "--dir", str(running.dir), "client", "--", "kcat", "-P", "-b", b0,
                           "-t", "lab", "-X", "acks=all", input="one\ntwo\nthree\n")
    assert produced.returncode == 0, produced.stderr
    consumed = _lab(running, "exec", "client", "--", "kcat", "-C", "-b", b2, "-t", "lab", "-o", "beginning",
                    "-e", "-q")
    assert sorted(consumed.stdout.split()) == ["one", "three", "two"]
    # The exit code of the command is passed through.
    assert _lab(running, "exec", "client", "--", "sh", "-c", "exit 7").returncode == 7


def test_partition_cuts_exactly_the_named_links(running: Running) -> None:
    result = _lab(running, "partition", "broker0", "broker1,zk1")
    assert result.returncode == 0, result.stderr
    assert not _tcp(running, "broker0", "broker1", 9092)
    assert not _tcp(running, "broker1", "broker0", 9092)
    assert not _ping(running, "zk1", "broker0")
    assert _tcp(running, "broker0", "broker2", 9092)
    assert _tcp(running, "broker1", "broker2", 9092)
    assert _tcp(running, "client", "broker0", 9092)
    assert _from_management(running, "broker0")
    assert "partition broker0 | broker1,zk1" in _lab(running, "status").stdout
    assert _lab(running, "heal").returncode == 0
    assert _tcp(running, "broker0", "broker1", 9092)
    assert _ping(running, "zk1", "broker0")
    assert "Faults: none" in _lab(running, "status").stdout


def test_isolate_keeps_the_client(running: Running) -> None:
    assert _lab(running, "isolate", "broker1", "--keep", "client").returncode == 0
    assert _tcp(running, "client", "broker1", 9092)
    assert not _tcp(running, "broker0", "broker1", 9092)
    assert not _tcp(running, "broker1", "zk1", 2181)
    assert not _ping(running, "broker2", "broker1")
    assert _tcp(running, "broker0", "broker2", 9092)
    assert _from_management(running, "broker1")
    assert _lab(running, "heal").returncode == 0
    assert _tcp(running, "broker0", "broker1", 9092)
    assert _tcp(running, "broker1", "zk1", 2181)


def test_loss(running: Running) -> None:
    assert _lab(running, "loss", "broker0", "100").returncode == 0
    assert not _ping(running, "broker0", "broker1")
    assert not _ping(running, "broker1", "broker0")  # the replies are dropped
    assert _from_management(running, "broker0")
    assert _ping(running, "broker1", "broker2")
    assert "loss broker0 100%" in _lab(running, "status").stdout
    running.lab.clock("broker2", -3_600_000)  # the nemesis's clock fault, as `lab status` shows it
    assert "clock broker2 -3600000 ms, rate 1.0" in _lab(running, "status").stdout
    assert _lab(running, "loss", "broker0", "0").returncode == 0
    assert _ping(running, "broker0", "broker1")
    assert _lab(running, "loss", "broker2", "100").returncode == 0
    assert _lab(running, "heal").returncode == 0
    assert _ping(running, "broker2", "broker1")
    assert json.loads((running.dir / "broker2" / "clock.json").read_text()) == {"offset_ms": 0, "rate": 1.0}
    assert "Faults: none" in _lab(running, "status").stdout


def test_kill_and_restart(running: Running) -> None:
    old = running.lab.pid("broker2")
    assert _lab(running, "kill", "broker2").returncode == 0
    assert Lab.load(running.dir).pid("broker2") is None
    assert not Path(f"/proc/{old}").exists() or "Z" in Path(f"/proc/{old}/stat").read_text().split()[2]
    restarted = _lab(running, "restart", "broker2")
    assert restarted.returncode == 0, restarted.stderr
    new = Lab.load(running.dir).pid("broker2")
    assert new is not None and new != old
    assert json.loads((running.dir / "cluster.json").read_text())["brokers"][2]["pid"] == new
    # A ZooKeeper member too: it rejoins the ensemble.
    old_zk = Lab.load(running.dir).pid("zk2")
    assert _lab(running, "kill", "zk2").returncode == 0
    assert Lab.load(running.dir).pid("zk2") is None
    assert _lab(running, "restart", "zk2").returncode == 0
    assert Lab.load(running.dir).pid("zk2") not in (None, old_zk)
    assert _zookeeper_mode(running.lab.hosts["zk2"].address) in ("follower", "leader")


def _log_dirs(running: Running, broker: int) -> dict[str, dict]:
    """``odradek log-dirs --describe`` of one broker, from the management leg: each directory's entry."""
    done = run_odradek("log-dirs", "--bootstrap-server", running.lab.bootstrap_servers, "--describe",
                       "--broker-list", str(broker))
    assert done.returncode == 0, done.stderr
    (entry,) = json.loads(done.stdout.splitlines()[2])["brokers"]
    return {d["logDir"]: d for d in entry["logDirs"]}


def test_a_filled_disk_goes_offline_and_a_restart_brings_it_back(running: Running) -> None:
    lab = running.lab
    b0 = f"{lab.hosts['broker0'].address}:9092"
    disk = str(lab.dir / "broker1" / "disk")
    created = _lab(running, "exec", "client", "--", sys.executable, "-m", "odradek", "topics", "--bootstrap-server",
                   b0, "--create", "--topic", "disk", "--partitions", "6", "--replication-factor", "3")
    assert created.returncode == 0, created.stderr
    assert _log_dirs(running, 1)[disk]["error"] is None
    filled = _lab(running, "fill-disk", "broker1")
    assert filled.returncode == 0, filled.stderr
    assert re.fullmatch(r"broker1: small disk filled \(\d+ MiB written\)\n", filled.stdout)
    assert "disk broker1 full" in _lab(running, "status").stdout
    # Records to every partition: broker1's next write on the full disk fails, and it takes the
    # directory offline; the other replicas take over its partitions there.
    produced = run_odradek("lab", "exec", "--dir", str(running.dir), "client", "--", "kcat", "-P", "-b", b0,
                           "-t", "disk", "-X", "acks=all", "-K:", input="".join(f"{i}:v{i}\n" for i in range(60)))
    assert produced.returncode == 0, produced.stderr
    dirs = _log_dirs(running, 1)
    assert dirs[disk]["error"] == "org.apache.kafka.common.errors.KafkaStorageException"
    assert dirs[disk]["partitions"] == [] and dirs[str(lab.dir / "broker1" / "data")]["error"] is None
    assert _lab(running, "heal").returncode == 0
    assert not (lab.dir / "broker1" / "disk" / "filler").exists()
    assert _lab(running, "restart", "broker1").returncode == 0
    dirs = _log_dirs(running, 1)
    assert dirs[disk]["error"] is None and any(p["partition"].startswith("disk-") for p in dirs[disk]["partitions"])
    consumed = _lab(running, "exec", "client", "--", "kcat", "-C", "-b", b0, "-t", "disk", "-o", "beginning",
                    "-e", "-q")
    assert sorted(consumed.stdout.split()) == sorted(f"v{i}" for i in range(60))


@pytest.mark.parametrize(("args", "message"), [
    (("partition", "broker0", "nohost"), "unknown host 'nohost'"),
    (("fill-disk", "zk1"), "zk1 is not a broker"),
    (("partition", "broker0,broker1", "broker1"), "broker1 on both sides"),
    (("loss", "broker0", "101"), "between 0 and 100"),
    (("isolate", "broker0", "--keep", "broker0"), "cannot be isolated from itself"),
    (("kill", "client"), "runs no server process"),
])
def test_bad_input_changes_nothing(running: Running, args: tuple[str, ...], message: str) -> None:
    before = (running.dir / "lab.json").read_text()
    result = _lab(running, *args)
    assert result.returncode != 0
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert (running.dir / "lab.json").read_text() == before


def test_no_lab_in_dir(tmp_path: Path) -> None:
    result = run_odradek("lab", "status", "--dir", str(tmp_path / "none"))
    assert result.returncode != 0
    assert result.stderr.strip() == f"Error: no lab in {tmp_path / 'none'} (no lab.json); start one with `odradek lab up`"


def test_without_root_one_line_and_nothing_made(tmp_path: Path) -> None:
    target = Path("/tmp") / f"odradek-lab-nonroot-{os.getpid()}"
    argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-m", "odradek",
            "lab", "up", "-n", "1", "--dir", str(target), "--name", "nonroot"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [
        "Error: odradek lab needs root (network namespaces): run it as root, or use `odradek up`"]
    assert not target.exists()
    assert not any(ns.startswith("nonroot-") for ns in _namespaces())


def test_down_leaves_nothing(running: Running) -> None:
    """Last in the module: `lab down` removes every namespace, link and process, and twice is fine."""
    lab = Lab.load(running.dir)
    pids = [p for p in (lab.pid(h) for h in lab.hosts) if p]
    assert len(pids) == 6
    assert _lab(running, "down").returncode == 0
    assert not [ns for ns in _namespaces() if ns.startswith(f"{lab.name}-")]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    assert f"{lab.name}-" not in links and f"{lab.name}v" not in links
    assert not [p for p in pids if Path(f"/proc/{p}").exists()
                and Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
    assert _root_network() == running.root_before
    assert not [h for h in ("broker0", "broker1", "broker2") if os.path.ismount(running.dir / h / "disk")]
    again = _lab(running, "down")
    assert again.returncode == 0, again.stderr
