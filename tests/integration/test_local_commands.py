"""`odradek zookeeper` and `odradek up` as a user runs them."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from odradek.local.cluster import LocalCluster, metadata_probe
from odradek.local.zookeeper import free_port
from support import run_odradek, wait_until


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "odradek", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _stop(proc: subprocess.Popen[str]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait()


def test_zookeeper_command_serves_and_stops(tmp_path: Path) -> None:
    port = free_port()
    proc = _spawn("zookeeper", "--port", str(port), "--dir", str(tmp_path / "zk"))
    try:
        line = proc.stdout.readline()
        assert f"ZooKeeper serving on 127.0.0.1:{port}" in line
        zk = KazooClient(f"127.0.0.1:{port}")
        zk.start(timeout=10)
        zk.create("/hello", b"world")
        assert zk.get("/hello")[0] == b"world"
        zk.stop()
        zk.close()
    finally:
        assert _stop(proc) == 0
    assert (tmp_path / "zk" / "zoo.cfg").exists()


def test_zookeeper_command_without_java_is_one_clear_line(tmp_path: Path) -> None:
    bare_path = tmp_path / "bin"
    bare_path.mkdir()
    python_dir = os.path.dirname(sys.executable)
    env = {"PATH": f"{bare_path}:{python_dir}", "JAVA_HOME": ""}
    assert shutil.which("java", path=env["PATH"]) is None
    result = run_odradek("zookeeper", "--port", "0", "--dir", str(tmp_path / "zk"), env=env, timeout=60)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [
        "Error: java not found: the embedded ZooKeeper needs a Java runtime (17 or newer) on PATH or in JAVA_HOME"]


def test_up_writes_configs_and_cluster_json_and_stops_everything(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    proc = _spawn("up", "-n", "3", "--racks", "r1,r2,r3", "--dir", str(directory))
    try:
        wait_until(lambda: (directory / "cluster.json").exists() and proc.poll() is None, timeout=60,
                   message="cluster.json")
        out_lines = []
        while not any("Press Ctrl-C" in line for line in out_lines):
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            out_lines.append(line)
        data = json.loads((directory / "cluster.json").read_text())
        assert [b["id"] for b in data["brokers"]] == [0, 1, 2]
        assert data["bootstrap_servers"] == ",".join(f"127.0.0.1:{b['port']}" for b in data["brokers"])
        pids = [b["pid"] for b in data["brokers"]]
        for b, rack in zip(data["brokers"], ("r1", "r2", "r3"), strict=True):
            props = Path(b["config"]).read_text()
            assert f"broker.id={b['id']}\n" in props
            assert f"broker.rack={rack}\n" in props
            assert f"zookeeper.connect={data['zookeeper']}\n" in props
            assert Path(b["config"]) == directory / f"broker-{b['id']}" / "server.properties"
        zk = KazooClient(data["zookeeper"])
        zk.start(timeout=10)
        registered = sorted(zk.get_children("/brokers/ids"))
        racks = {json.loads(zk.get(f"/brokers/ids/{i}")[0])["rack"] for i in registered}
        zk.stop()
        zk.close()
        assert registered == ["0", "1", "2"]
        assert racks == {"r1", "r2", "r3"}
        # The web console serves the cluster at the address up printed.
        (console_url,) = [line.split()[2] for line in out_lines if line.startswith("Web console: ")]
        with urllib.request.urlopen(console_url + "placement?fragment=1", timeout=30) as response:
            placement = response.read().decode()
        assert all(f'data-broker="{b}">broker {b}' in placement for b in range(3)) and "rack r2" in placement
    finally:
        assert _stop(proc) == 0
    for pid in pids:
        assert not _alive(pid)
    with pytest.raises(OSError):
        urllib.request.urlopen(console_url, timeout=5)


def test_up_writes_cluster_json_only_once_the_cluster_is_usable(tmp_path: Path) -> None:
    """A script that waits for cluster.json may use the cluster at once: every broker is
    registered in ZooKeeper and answers Metadata listing every broker and a controller."""
    directory = tmp_path / "cluster"
    cluster_json = directory / "cluster.json"
    proc = _spawn("up", "-n", "3", "--dir", str(directory))
    try:
        wait_until(lambda: cluster_json.exists() or proc.poll() is not None, timeout=90, interval=0.01,
                   message="cluster.json")
        assert proc.poll() is None, proc.stderr.read()
        data = json.loads(cluster_json.read_text())
        zk = KazooClient(data["zookeeper"])
        zk.start(timeout=10)
        try:
            registered = sorted(zk.get_children("/brokers/ids"))
            registrations = {b["id"]: json.loads(zk.get(f"/brokers/ids/{b['id']}")[0]) for b in data["brokers"]}
        finally:
            zk.stop()
            zk.close()
        answers = {b["id"]: metadata_probe("127.0.0.1", b["port"], timeout_s=5) for b in data["brokers"]}
    finally:
        assert _stop(proc) == 0
    assert registered == ["0", "1", "2"]
    assert {i: r["port"] for i, r in registrations.items()} == {b["id"]: b["port"] for b in data["brokers"]}
    for broker_id, (brokers, controller) in answers.items():
        assert brokers == {0, 1, 2}, f"broker {broker_id} knows brokers {brokers}"
        assert controller in brokers


def test_cluster_json_follows_a_broker_restarted_by_hand(tmp_path: Path) -> None:
    """A broker of an ``odradek up`` cluster, killed and restarted by hand from its
    server.properties, records its new pid in cluster.json once it is registered again."""
    directory = tmp_path / "cluster"
    cluster_json = directory / "cluster.json"
    proc = _spawn("up", "-n", "2", "--dir", str(directory))
    try:
        wait_until(lambda: cluster_json.exists() or proc.poll() is not None, timeout=90, message="cluster.json")
        assert proc.poll() is None, proc.stderr.read()
        data = json.loads(cluster_json.read_text())
        victim = data["brokers"][1]
        os.kill(victim["pid"], signal.SIGKILL)
        restarted_at_ms = int(time.time() * 1000)
        with open(tmp_path / "restarted.log", "wb") as out:
            restarted = subprocess.Popen([sys.executable, "-m", "odradek", "broker", "--config", victim["config"]],
                                         stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_until(lambda: _pid_in(cluster_json, victim["id"]) == restarted.pid, timeout=90,
                       message="the restarted broker's pid in cluster.json")
            zk = KazooClient(data["zookeeper"])
            zk.start(timeout=10)
            try:
                registration = json.loads(zk.get(f"/brokers/ids/{victim['id']}")[0])
            finally:
                zk.stop()
                zk.close()
        finally:
            assert _stop(restarted) == 0
    finally:
        assert _stop(proc) == 0
    assert int(registration["timestamp"]) >= restarted_at_ms
    assert [b["pid"] for b in json.loads(cluster_json.read_text())["brokers"]] == [data["brokers"][0]["pid"],
                                                                                    restarted.pid]


def _pid_in(cluster_json: Path, broker_id: int) -> int | None:
    brokers = json.loads(cluster_json.read_text())["brokers"]
    return next(b["pid"] for b in brokers if b["id"] == broker_id)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) is not alive either.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_up_rejects_bad_arguments_with_one_line(tmp_path: Path) -> None:
    result = run_odradek("up", "-n", "2", "--racks", "r1", "--dir", str(tmp_path / "x"))
    assert result.returncode != 0
    assert result.stderr.strip() == "Error: --racks names 1 racks for 2 brokers"
    assert not (tmp_path / "x").exists()
    result = run_odradek("up", "-n", "1", "--override", "num.partitions=many", "--dir", str(tmp_path / "y"))
    assert result.returncode != 0
    assert result.stderr.strip() == "Error: Invalid value many for configuration num.partitions: expected a value of type int"
    assert not (tmp_path / "y").exists()


def test_a_picked_port_taken_before_the_broker_binds_it_is_picked_again(tmp_path: Path) -> None:
    """A free port is free only until someone binds it (on a busy machine another test's
    server, or a client's outgoing connection). The cluster picks its brokers' ports, so it
    picks again and starts the broker once more instead of failing."""
    cluster = LocalCluster(tmp_path / "c", num_brokers=1)
    taken = cluster.brokers[0].port
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", taken))
    squatter.listen()
    try:
        cluster.start()
        port = cluster.brokers[0].port
        assert port != taken
        assert "address already in use" in cluster.brokers[0].log_path.read_text().lower()
        assert metadata_probe("127.0.0.1", port)[0] == {0}
        listed = json.loads((tmp_path / "c" / "cluster.json").read_text())["bootstrap_servers"]
        assert listed == f"127.0.0.1:{port}"
    finally:
        cluster.stop()  # also what a failed start left running
        squatter.close()
