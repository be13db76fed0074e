"""The lab's network, made with iproute2 (``ip``) and nftables (``nft``); see local/lab.py.

Layout for a lab named ``odr`` on 10.213.77.0/24::

    root namespace                namespace odr-net                 namespace odr-<host>
    odr-mgmt 10.213.77.1/24 ----- odrvm ]
                                        [ bridge odr-br ]
                                  odrv<i> ------------------------- eth0 10.213.77.x/24

The bridge lives in a namespace of its own (``<name>-net``), not in the root namespace: with
``br_netfilter`` loaded and ``net.bridge.bridge-nf-call-iptables=1`` (the kernel's default,
and Docker's), bridged packets pass the FORWARD chain of the bridge's namespace, where a host
firewall (Docker sets FORWARD's policy to DROP) would drop the lab's traffic. The lab's own
namespace has no rules, so the lab works whatever the host's firewall says. The root namespace
only gains ``<name>-mgmt`` (the management leg, ``.1``) and its connected route; nothing else
of the machine's interfaces, routes or firewall is touched.

Faults: blackhole routes (``ip -n NS route add blackhole ADDR/32``) drop packets silently, as
a real partition does; packet loss is an nftables table in the sending host's namespace that
drops a share of its outgoing packets (``numgen random``), sparing the management leg.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence

__all__ = ["LOSS_TABLE", "LabNetwork", "LabNetworkError", "LabUnavailable", "check_lab_available",
           "check_nft_available", "namespace_pids", "namespaces", "pid_in_namespace"]

LOSS_TABLE = "odradek_loss"
NEEDS_ROOT = "odradek lab needs root (network namespaces): run it as root, or use `odradek up`"


class LabUnavailable(RuntimeError):
    """This machine cannot run a lab (not root, no ``ip``, no network namespaces, no ``nft``)."""


class LabNetworkError(RuntimeError):
    """An ``ip``/``nft`` command failed."""


def check_lab_available() -> None:
    """Raise LabUnavailable (one line) unless we are root with iproute2 and network namespaces."""
    if os.geteuid() != 0:
        raise LabUnavailable(NEEDS_ROOT)
    if shutil.which("ip") is None:
        raise LabUnavailable("odradek lab needs iproute2 (ip) for network namespaces: apt-get install iproute2")
    if not os.path.exists("/proc/self/ns/net"):
        raise LabUnavailable("odradek lab needs network namespaces, which this kernel does not offer")


def check_nft_available() -> None:
    if shutil.which("nft") is None:
        raise LabUnavailable("nftables (nft) not installed: apt-get install nftables")


def _run(argv: Sequence[str], *, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(argv), input=stdin, capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise LabNetworkError(f"{' '.join(argv)}: {result.stderr.strip() or f'exit code {result.returncode}'}")
    return result


def namespaces() -> list[str]:
    """The named network namespaces (``ip netns list``)."""
    out = _run(["ip", "netns", "list"]).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def namespace_pids(namespace: str) -> list[int]:
    out = _run(["ip", "netns", "pids", namespace], check=False).stdout
    return [int(p) for p in out.split() if p.isdigit()]


def pid_in_namespace(pid: int, namespace: str) -> bool:
    """True if process ``pid`` is alive (not a zombie) and in network namespace ``namespace``."""
    try:
        same = os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat(f"/run/netns/{namespace}").st_ino
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return same and state not in ("Z", "X")


class LabNetwork:
    """The namespaces, veths, bridge and faults of one lab named ``name`` on ``subnet``."""

    def __init__(self, name: str, subnet: str) -> None:
        self.name = name
        self.subnet = ipaddress.IPv4Network(subnet)
        self.net_namespace = f"{name}-net"
        self.bridge = f"{name}-br"
        self.management_link = f"{name}-mgmt"
        self.management_address = str(self.subnet.network_address + 1)

    def namespace(self, host: str) -> str:
        return f"{self.name}-{host}"

    def own_namespaces(self) -> list[str]:
        """Every namespace with this lab's prefix (also those of an earlier, partial lab)."""
        return [ns for ns in namespaces() if ns.startswith(f"{self.name}-")]

    def conflicts(self) -> str | None:
        """Why this lab cannot be created here (its names or its subnet are taken), or None."""
        taken = self.own_namespaces()
        if taken:
            return f"network namespaces of a lab named {self.name!r} exist already ({', '.join(sorted(taken))})"
        links = _run(["ip", "-o", "link", "show"]).stdout
        if any(line.split(":")[1].strip().split("@")[0] == self.management_link
               for line in links.splitlines() if line.count(":") >= 2):
            return f"interface {self.management_link} exists already"
        for line in _run(["ip", "-4", "route", "show", "table", "all"]).stdout.splitlines():
            dst = line.split()[0] if line.split() else ""
            if dst in ("default", "broadcast", "local", "unreachable", "blackhole", "prohibit", "multicast"):
                dst = line.split()[1] if dst != "default" and len(line.split()) > 1 else ""
            try:
                network = ipaddress.IPv4Network(dst, strict=False)
            except ValueError:
                continue
            if network.prefixlen > 0 and network.overlaps(self.subnet) and not network.is_loopback:
                return f"subnet {self.subnet} overlaps a route of this machine ({line.strip()})"
        return None

    def create(self, hosts: Mapping[str, str]) -> None:
        """Make the bridge, the management leg and one namespace per host (name -> address)."""
        prefix = self.subnet.prefixlen
        net = ["ip", "-n", self.net_namespace]
        _run(["ip", "netns", "add", self.net_namespace])
        _run([*net, "link", "set", "lo", "up"])
        _run([*net, "link", "add", self.bridge, "type", "bridge"])
        _run([*net, "link", "set", self.bridge, "up"])
        _run(["ip", "link", "add", self.management_link, "type", "veth", "peer", "name", f"{self.name}vm",
              "netns", self.net_namespace])
        _run([*net, "link", "set", f"{self.name}vm", "master", self.bridge, "up"])
        _run(["ip", "addr", "add", f"{self.management_address}/{prefix}", "dev", self.management_link])
        _run(["ip", "link", "set", self.management_link, "up"])
        for index, (host, address) in enumerate(hosts.items()):
            ns = self.namespace(host)
            _run(["ip", "netns", "add", ns])
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
            _run([*net, "link", "add", f"{self.name}v{index}", "type", "veth", "peer", "name", "eth0", "netns", ns])
            _run([*net, "link", "set", f"{self.name}v{index}", "master", self.bridge, "up"])
            _run(["ip", "-n", ns, "addr", "add", f"{address}/{prefix}", "dev", "eth0"])
            _run(["ip", "-n", ns, "link", "set", "eth0", "up"])

    def destroy(self, grace_s: float = 5.0) -> None:
        """Stop every process left in the lab's namespaces (SIGTERM, then SIGKILL after
        ``grace_s``), delete the namespaces (their veths and the bridge go with them) and the
        management leg. Idempotent."""
        own = self.own_namespaces()
        pids = {pid for ns in own for pid in namespace_pids(ns)}
        _signal_all(pids, signal.SIGCONT)
        _signal_all(pids, signal.SIGTERM)
        pids = _wait_gone(pids, grace_s)
        _signal_all(pids, signal.SIGKILL)
        _wait_gone(pids, 5.0)
        for ns in own:
            _run(["ip", "netns", "del", ns], check=False)
        _run(["ip", "link", "del", self.management_link], check=False)

    # ------------------------------------------------------------------ faults

    def blackhole(self, host: str, address: str) -> None:
        """``host`` can no longer send to ``address`` (nor answer it)."""
        if address == self.management_address:
            raise ValueError("the management leg is never cut")
        _run(["ip", "-n", self.namespace(host), "route", "replace", "blackhole", f"{address}/32"])

    def clear_blackholes(self, host: str) -> None:
        _run(["ip", "-n", self.namespace(host), "route", "flush", "type", "blackhole"], check=False)

    def set_loss(self, host: str, percent: int) -> None:
        """Drop ``percent``% of ``host``'s outgoing packets (none to the management leg); 0 removes it."""
        self.clear_loss(host)
        if percent <= 0:
            return
        check_nft_available()
        # numgen's "< 100" is out of its range: 100% is a plain drop.
        share = f"numgen random mod 100 < {percent} " if percent < 100 else ""
        rules = (f"table inet {LOSS_TABLE} {{\n"
                 f"  chain out {{\n"
                 f"    type filter hook output priority 0; policy accept;\n"
                 f"    ip daddr != {self.management_address} {share}drop\n"
                 f"  }}\n"
                 f"}}\n")
        _run(["ip", "netns", "exec", self.namespace(host), "nft", "-f", "-"], stdin=rules)

    def clear_loss(self, host: str) -> None:
        if shutil.which("nft") is None:
            return
        ns = self.namespace(host)
        tables = _run(["ip", "netns", "exec", ns, "nft", "list", "tables"], check=False).stdout
        if f"table inet {LOSS_TABLE}" in tables:
            _run(["ip", "netns", "exec", ns, "nft", "delete", "table", "inet", LOSS_TABLE])


def _signal_all(pids: set[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _wait_gone(pids: set[int], timeout_s: float) -> set[int]:
    """Wait until none of ``pids`` is alive (reaping our own children); the ones still alive."""
    deadline = time.monotonic() + timeout_s
    while True:
        for pid in pids:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
        alive = {pid for pid in pids if _alive(pid)}
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)
