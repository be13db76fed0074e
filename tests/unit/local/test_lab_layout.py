"""A lab's layout (hosts, addresses, broker configs) and its input checks, without root:
nothing here creates a namespace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from odradek.local.lab import LAB_JSON, Lab, LabError


def test_hosts_addresses_and_broker_properties(tmp_path: Path) -> None:
    lab = Lab.create(tmp_path, brokers=3, zookeepers=3, subnet="10.213.80.0/24", name="odq",
                     overrides={"min.insync.replicas": "2"})
    assert {n: (h.address, h.role, h.namespace) for n, h in lab.hosts.items()} == {
        "client": ("10.213.80.10", "client", "odq-client"),
        "zk1": ("10.213.80.11", "zookeeper", "odq-zk1"),
        "zk2": ("10.213.80.12", "zookeeper", "odq-zk2"),
        "zk3": ("10.213.80.13", "zookeeper", "odq-zk3"),
        "broker0": ("10.213.80.21", "broker", "odq-broker0"),
        "broker1": ("10.213.80.22", "broker", "odq-broker1"),
        "broker2": ("10.213.80.23", "broker", "odq-broker2"),
    }
    assert lab.management_address == "10.213.80.1"
    assert lab.zookeeper_connect == "10.213.80.11:2181,10.213.80.12:2181,10.213.80.13:2181"
    assert lab.bootstrap_servers == "10.213.80.21:9092,10.213.80.22:9092,10.213.80.23:9092"
    broker = lab.cluster.brokers[1]
    props = lab.cluster.broker_properties(broker)
    assert props["listeners"] == props["advertised.listeners"] == "PLAINTEXT://10.213.80.22:9092"
    assert props["broker.rack"] == "broker1"
    assert props["zookeeper.connect"] == lab.zookeeper_connect
    assert props["replica.lag.time.max.ms"] == "6000" and props["min.insync.replicas"] == "2"
    assert broker.config_path == tmp_path.resolve() / "broker1" / "server.properties"
    home = tmp_path.resolve() / "broker1"
    assert props["log.dirs"] == f"{home / 'data'},{home / 'disk'}"  # the second one: the small disk
    assert "," not in Lab.create(tmp_path / "x", name="odq", disk_mb=0).cluster.broker_properties(
        broker)["log.dirs"]
    clock = tmp_path.resolve() / "broker1" / "clock.json"
    assert lab.cluster.broker_command_prefix(broker) == [
        "ip", "netns", "exec", "odq-broker1", "env", f"ODRADEK_TEST_CLOCK={clock}"]
    assert lab.exec_argv("client", ["kcat", "-L"]) == ["ip", "netns", "exec", "odq-client", "kcat", "-L"]


def test_state_round_trips_through_lab_json(tmp_path: Path) -> None:
    lab = Lab.create(tmp_path, brokers=2, zookeepers=1, name="odq", disk_mb=64)
    lab.faults.append({"type": "loss", "host": "broker0", "percent": 25})
    lab._save()
    loaded = Lab.load(tmp_path)
    assert loaded.hosts == lab.hosts and loaded.faults == lab.faults and loaded.name == "odq"
    assert loaded.disk_mb == 64 and loaded.cluster.disk_mb == 64
    assert loaded.pid("broker0") is None  # nothing runs


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"name": "Odr"}, "lowercase letters and digits"),
    ({"name": "toolongname"}, "1 to 8"),
    ({"brokers": 0}, "1 to 50 brokers"),
    ({"zookeepers": 10}, "1 to 9 ZooKeeper"),
    ({"subnet": "10.213.0.0/16"}, "needs a /24"),
    ({"subnet": "nonsense"}, "subnet 'nonsense'"),
    ({"disk_mb": -1}, "0 \\(none\\) to 65536 MiB"),
])
def test_bad_layouts(tmp_path: Path, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(LabError, match=message):
        Lab.create(tmp_path, **kwargs)  # type: ignore[arg-type]
    assert not (tmp_path / LAB_JSON).exists()


def test_bad_fault_input_is_refused_before_any_command(tmp_path: Path) -> None:
    lab = Lab.create(tmp_path, brokers=3, zookeepers=1, name="odq")
    with pytest.raises(LabError, match="unknown host 'broker7'"):
        lab.partition(["broker0"], ["broker7"])
    with pytest.raises(LabError, match="broker1 on both sides"):
        lab.partition(["broker0", "broker1"], ["broker1"])
    with pytest.raises(LabError, match="side B names no host"):
        lab.partition(["broker0"], [])
    with pytest.raises(LabError, match="between 0 and 100"):
        lab.loss("broker0", -1)
    with pytest.raises(LabError, match="runs no server process"):
        lab.kill("client")
    with pytest.raises(LabError, match="zk1 is not a broker"):
        lab.clock("zk1", 1000)
    with pytest.raises(LabError, match="rate must be positive"):
        lab.clock("broker0", 0, 0.0)
    with pytest.raises(LabError, match="zk1 is not a broker: only a broker has a small disk"):
        lab.fill_disk("zk1")
    with pytest.raises(LabError, match="broker0 has no small disk"):  # not up: nothing mounted
        lab.fill_disk("broker0")
    assert lab.faults == [] and not (tmp_path / LAB_JSON).exists()


def test_a_clock_fault_is_a_file_the_broker_reads(tmp_path: Path) -> None:
    lab = Lab.create(tmp_path, brokers=2, zookeepers=1, name="odq")
    (tmp_path / "broker1").mkdir(exist_ok=True)
    lab.clock("broker1", -3_600_000)
    clock = tmp_path / "broker1" / "clock.json"
    assert json.loads(clock.read_text()) == {"offset_ms": -3_600_000, "rate": 1.0}
    lab.clock("broker1", 0, 4.0)  # replaces the step
    assert lab.faults == [{"type": "clock", "host": "broker1", "offset_ms": 0, "rate": 4.0}]
    assert Lab.load(tmp_path).faults == lab.faults
    lab.clock("broker1", 0)
    assert lab.faults == [] and json.loads(clock.read_text()) == {"offset_ms": 0, "rate": 1.0}


def test_no_lab_here(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="no lab in"):
        Lab.load(tmp_path)
