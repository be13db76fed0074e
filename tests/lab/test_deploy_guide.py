"""docs/DEPLOY.md, run as written: every ``sh`` block on the hosts its ``<!-- run on: ... -->``
comment names, in the order of the page, on a lab's hosts (network namespaces on a private
bridge, local/lab_network.py) with nothing started in them beforehand.

What is changed on the way, and only that:
- the page's example addresses become the lab's (zk1 10.0.1.11 -> the lab's zk1, ...);
- ``/etc/odradek``, ``/var/lib/odradek``, ``/var/log/odradek``, ``/data1`` and ``/data2`` move
  under a directory of the host's own, and ``/opt/odradek/venv`` is this virtualenv;
- ``systemctl`` is a stand-in (there is no systemd here): ``enable --now``/``start`` run the
  page's unit's ``ExecStart`` with its ``Environment``, detached; ``stop``/``restart`` send its
  ``KillSignal`` and wait up to ``TimeoutStopSec`` (then SIGKILL), as systemd does.
Each host gets ``ZK_ID``/``BROKER_ID``, ``HOST_ADDR`` and ``HOST_NAME``, as the page asks.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from odradek.local.lab import Lab

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "DEPLOY.md"
PAGE_ADDRESSES = {"zk1": "10.0.1.11", "zk2": "10.0.1.12", "zk3": "10.0.1.13", "broker0": "10.0.1.20",
                  "broker1": "10.0.1.21", "broker2": "10.0.1.22", "client": "10.0.1.100"}
MOVED_PATHS = ("/etc/odradek", "/var/lib/odradek", "/var/log/odradek", "/data1", "/data2")
VENV = "/opt/odradek/venv"


@dataclass(frozen=True)
class Block:
    hosts: tuple[str, ...]
    script: str
    line: int


@dataclass(frozen=True)
class Unit:
    name: str
    exec_start: str
    environment: dict[str, str]
    kill_signal: str
    timeout_stop_s: float


def parse_guide(text: str) -> tuple[list[Block], dict[str, Unit]]:
    """The page's runnable blocks (in order) and its unit files, by unit name."""
    blocks: list[Block] = []
    units: dict[str, Unit] = {}
    lines = text.splitlines()
    i = 0
    hosts: tuple[str, ...] | None = None
    while i < len(lines):
        stripped = lines[i].strip()
        marker = re.fullmatch(r"<!-- run on: ([\w ]+) -->", stripped)
        if marker:
            hosts = tuple(marker.group(1).split())
        elif stripped.startswith("```") and stripped != "```":
            indent = len(lines[i]) - len(lines[i].lstrip())
            kind, start = stripped[3:], i + 1
            i += 1
            while lines[i].strip() != "```":
                i += 1
            body = "\n".join(line[indent:] for line in lines[start:i])
            if kind == "sh":
                assert hosts is not None, f"DEPLOY.md line {start}: an sh block without <!-- run on: ... -->"
                blocks.append(Block(hosts, body, start))
            elif kind == "ini":
                unit = _unit(body)
                units[unit.name] = unit
            hosts = None
        i += 1
    return blocks, units


def _unit(body: str) -> Unit:
    name = re.search(r"^# /etc/systemd/system/([\w-]+)\.service$", body, re.M)
    assert name, f"a unit file block must start with its path:\n{body}"
    values: dict[str, list[str]] = {}
    for line in body.splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.startswith(("#", "[")):
            values.setdefault(key.strip(), []).append(value.strip())
    environment = dict(item.split("=", 1) for item in values.get("Environment", []))
    return Unit(name.group(1), values["ExecStart"][0], environment, values.get("KillSignal", ["SIGTERM"])[0],
                float(values.get("TimeoutStopSec", ["90"])[0]))


# The stand-in for systemctl, run on a host: it keeps ROOT/run/<unit>.pid and <unit>.log.
SYSTEMCTL = '''\
import json, os, signal, subprocess, sys, time
units = json.load(open(os.environ["DEPLOY_UNITS"]))
run = os.path.join(os.environ["DEPLOY_ROOT"], "run")
os.makedirs(run, exist_ok=True)
args = [a for a in sys.argv[1:] if a != "--now"]
verb, name = args[0], args[-1].removesuffix(".service")
unit = units[name]
pid_file = os.path.join(run, name + ".pid")

def alive(pid):
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] not in "ZX"
    except (OSError, IndexError):
        return False

def stop():
    if not os.path.exists(pid_file):
        return
    pid = int(open(pid_file).read())
    if alive(pid):
        os.kill(pid, getattr(signal, unit["kill_signal"]))
        deadline = time.monotonic() + unit["timeout_stop_s"]
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
    os.unlink(pid_file)
    print(f"{name}: stopped pid {pid}")

def start():
    log = open(os.path.join(run, name + ".log"), "ab")
    proc = subprocess.Popen(unit["argv"], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True, env={**os.environ, **unit["environment"]})
    open(pid_file, "w").write(str(proc.pid))
    print(f"{name}: started pid {proc.pid}")

if verb in ("stop", "restart"):
    stop()
if verb in ("start", "enable", "restart"):
    start()
'''


@dataclass
class Guide:
    lab: Lab
    root: Path
    outputs: list[tuple[Block, str, str]]  # (block, host, stdout), in the order run
    translate: Callable[[str, str], str]
    env: Callable[[str], dict[str, str]]


@pytest.fixture(scope="module")
def guide(tmp_path_factory: pytest.TempPathFactory, lab_identity: Callable[[], tuple[str, str]]) -> Iterator[Guide]:
    name, subnet = lab_identity()
    root = tmp_path_factory.mktemp("deploy")
    lab = Lab.create(root / "lab", brokers=3, zookeepers=3, subnet=subnet, name=name)
    venv = str(Path(sys.executable).parent.parent)

    def translate(host: str, text: str) -> str:
        for page_host, address in PAGE_ADDRESSES.items():
            text = re.sub(rf"\b{re.escape(address)}\b", lab.hosts[page_host].address, text)
        for path in MOVED_PATHS:
            text = text.replace(path, f"{root / host}{path}")
        return text.replace(VENV, venv)

    bin_dir = root / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(f"#!{sys.executable}\n{SYSTEMCTL}")
    (bin_dir / "systemctl").chmod(0o755)
    blocks, units = parse_guide(GUIDE.read_text())

    def env(host: str) -> dict[str, str]:
        h = lab.hosts[host]
        units_file = root / host / "units.json"
        units_file.parent.mkdir(parents=True, exist_ok=True)
        units_file.write_text(json.dumps({
            u.name: {"argv": shlex.split(translate(host, u.exec_start)),
                     "environment": {k: translate(host, v) for k, v in u.environment.items()},
                     "kill_signal": u.kill_signal, "timeout_stop_s": u.timeout_stop_s}
            for u in units.values()}))
        ids = {"ZK_ID": host[2:]} if h.role == "zookeeper" else \
            {"BROKER_ID": host.removeprefix("broker")} if h.role == "broker" else {}
        return {**os.environ, "PATH": f"{bin_dir}:{venv}/bin:{os.environ['PATH']}", "HOST_ADDR": h.address,
                "HOST_NAME": host, "DEPLOY_ROOT": str(root / host), "DEPLOY_UNITS": str(units_file), **ids}

    lab.network.create({h.name: h.address for h in lab.hosts.values()})
    outputs: list[tuple[Block, str, str]] = []
    try:
        for block in blocks:
            for host in block.hosts:
                done = lab.run(host, ["bash", "-euo", "pipefail", "-c", translate(host, block.script)],
                               env=env(host), capture_output=True, text=True, timeout=240)
                assert done.returncode == 0, (
                    f"DEPLOY.md line {block.line} failed on {host} (exit {done.returncode}):\n"
                    f"{block.script}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}")
                outputs.append((block, host, done.stdout))
        yield Guide(lab, root, outputs, translate, env)
    finally:
        lab.network.destroy(grace_s=1.0)  # SIGTERM to every process on the hosts, SIGKILL after 1 s


def _output(guide: Guide, needle: str, host: str = "client") -> str:
    for block, on, out in guide.outputs:
        if on == host and needle in block.script:
            return out
    raise AssertionError(f"no block containing {needle!r} ran on {host}")


def test_the_ensemble_has_one_leader_and_two_followers(guide: Guide) -> None:
    modes = sorted(re.findall(r"Mode: (\w+)", _output(guide, "echo srvr")))
    assert modes == ["follower", "follower", "leader"]
    mntr = _output(guide, "echo mntr")
    assert sorted(re.findall(r"zk_server_state\t(\w+)", mntr)) == ["follower", "follower", "leader"]
    assert re.findall(r"zk_synced_followers\t(\d+)", mntr) == ["2"]


def test_brokers_advertise_their_hosts_and_replicas_span_the_racks(guide: Guide) -> None:
    listed = _output(guide, "kcat -L")
    addresses = {guide.lab.hosts[f"broker{i}"].address for i in range(3)}
    assert set(re.findall(r" at ([\d.]+):9092", listed)) == addresses
    describe = _output(guide, "--describe --topic orders")
    replicas = re.findall(r"Replicas: ([\d,]+)", describe)
    assert len(replicas) == 6 and all(len(set(r.split(","))) == 3 for r in replicas)
    assert "orders" in _output(guide, "/odradek --list").split()  # the chroot holds the cluster
    for i in range(3):
        props = (guide.root / f"broker{i}" / "etc/odradek/server.properties").read_text()
        assert f"broker.rack=broker{i}" in props and f"broker.id={i}" in props


def test_the_rolling_restart_is_a_controlled_shutdown(guide: Guide) -> None:
    restart = _output(guide, "systemctl restart odradek-broker", host="broker1")
    old, new = re.findall(r"(?:stopped|started) pid (\d+)", restart)
    assert old != new
    log = (guide.root / "broker1" / "run" / "odradek-broker.log").read_text()
    assert "Controlled shutdown succeeded" in log
    assert int(_output(guide, "--under-replicated-partitions | wc -l").strip()) == 0
    # "and again from the top for the next broker": the wait comes out clean once broker1 is back.
    wait = next(b for b, _, _ in guide.outputs if "--under-replicated-partitions | wc -l" in b.script)
    again = guide.lab.run("client", ["bash", "-euo", "pipefail", "-c", guide.translate("client", wait.script)],
                          env=guide.env("client"), capture_output=True, text=True, timeout=240)
    assert again.returncode == 0 and again.stdout.strip() == "0"


def test_every_block_and_unit_of_the_page_ran(guide: Guide) -> None:
    blocks, units = parse_guide(GUIDE.read_text())
    ran = [(b.line, h) for b, h, _ in guide.outputs]
    assert ran == [(b.line, h) for b in blocks for h in b.hosts]
    assert set(units) == {"odradek-zookeeper", "odradek-broker"}
    for host, unit in (("zk1", "odradek-zookeeper"), ("broker0", "odradek-broker")):
        pid = int((guide.root / host / "run" / f"{unit}.pid").read_text())
        assert guide.lab.network.namespace(host) in _namespace_of(pid, guide)


def _namespace_of(pid: int, guide: Guide) -> list[str]:
    """The lab namespaces whose processes include ``pid``."""
    from odradek.local.lab_network import pid_in_namespace

    return [guide.lab.network.namespace(h) for h in guide.lab.hosts
            if pid_in_namespace(pid, guide.lab.network.namespace(h))]

