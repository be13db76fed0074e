"""``odradek lab``: ZooKeeper nodes, brokers and a client on hosts of their own (network
namespaces on a private bridge), and network faults between them (see odradek.local.lab).
Linux, as root."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from odradek.cli.common import OneLineGroup, fail, parse_overrides
from odradek.config import ConfigError, KafkaConfig

if TYPE_CHECKING:
    from odradek.local.lab import Lab

__all__ = ["lab"]

DEFAULT_DIR = Path(tempfile.gettempdir()) / "odradek-lab"

_dir_option = click.option("--dir", "directory", type=click.Path(file_okay=False), default=str(DEFAULT_DIR),
                           show_default=True, help="The lab's directory (lab.json, cluster.json, logs).")


def _available() -> None:
    from odradek.local.lab_network import LabUnavailable, check_lab_available

    try:
        check_lab_available()
    except LabUnavailable as e:
        fail(str(e))


def _load(directory: str) -> Lab:
    from odradek.local.lab import Lab, LabError

    _available()
    try:
        return Lab.load(directory)
    except LabError as e:
        fail(str(e))


def _do(action: object) -> None:
    """Run a lab action; bad input or a machine that cannot do it: one line, exit 1."""
    from odradek.local.lab import LabError, LabUnavailable
    from odradek.local.lab_network import LabNetworkError

    try:
        action()  # type: ignore[operator]
    except (LabError, LabUnavailable, LabNetworkError) as e:
        fail(str(e))


def _hosts_arg(value: str) -> list[str]:
    return [h for h in value.split(",") if h.strip()]


@click.group(cls=OneLineGroup)
def lab() -> None:
    """Hosts as network namespaces, and network faults between them (Linux, root)."""


@lab.command()
@click.option("-n", "--brokers", "num_brokers", type=click.IntRange(1, 50), default=3, show_default=True)
@click.option("--zookeepers", type=click.IntRange(1, 9), default=3, show_default=True,
              help="ZooKeeper nodes (an ensemble when more than one).")
@_dir_option
@click.option("--subnet", default="10.213.77.0/24", show_default=True, help="The lab's private /24.")
@click.option("--name", default="odr", show_default=True,
              help="Prefix of the lab's namespaces and interfaces (1-8 lowercase letters/digits).")
@click.option("--override", multiple=True, metavar="KEY=VALUE", help="Broker config for every broker.")
@click.option("--disk-mb", type=click.IntRange(0, 65536), default=None,
              help="Size of each broker's second log directory, a tmpfs `lab fill-disk` can fill "
                   "(0: none).  [default: 512]")
def up(num_brokers: int, zookeepers: int, directory: str, subnet: str, name: str, override: tuple[str, ...],
       disk_mb: int | None) -> None:
    """Start a lab and return once its cluster.json is written; its processes keep running
    until `odradek lab down`."""
    from odradek.local.cluster import CLUSTER_JSON
    from odradek.local.lab import DISK_MB, Lab, LabError

    _available()
    overrides = parse_overrides(override)
    try:
        KafkaConfig.from_props({"zookeeper.connect": "x:1", "broker.id": "0", **overrides})
    except ConfigError as e:
        fail(str(e))
    try:
        the_lab = Lab.create(directory, brokers=num_brokers, zookeepers=zookeepers, subnet=subnet, name=name,
                             overrides=overrides, disk_mb=DISK_MB if disk_mb is None else disk_mb)
    except LabError as e:
        fail(str(e))
    # Ctrl-C while starting: clean up (up() removes what it made when interrupted).
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        the_lab.up()
    except LabError as e:
        fail(str(e))
    except KeyboardInterrupt:
        fail("interrupted; the lab was taken down again")
    except Exception as e:
        fail(f"lab did not start: {e}")
    _echo_hosts(the_lab)
    click.echo(f"ZooKeeper: {the_lab.zookeeper_connect}")
    click.echo(f"Bootstrap servers: {the_lab.bootstrap_servers}")
    click.echo(f"Cluster description: {the_lab.dir / CLUSTER_JSON}")
    click.echo(f"Run a client: odradek lab exec client --dir {the_lab.dir} -- kcat -L -b "
               f"{the_lab.bootstrap_servers.split(',')[0]}")
    # The root namespace reaches every host through the management leg: a console runs there.
    metrics = ",".join(the_lab.cluster.metrics_url(b) for b in the_lab.cluster.brokers.values()
                       if b.metrics_port is not None)
    click.echo(f"Web console: odradek console --bootstrap-server {the_lab.bootstrap_servers}"
               + (f" --metrics {metrics}" if metrics else "") + " --port 8080  (then open http://127.0.0.1:8080/)")


@lab.command()
@_dir_option
def status(directory: str) -> None:
    """Hosts, addresses, pids and current faults."""
    the_lab = _load(directory)
    _echo_hosts(the_lab)
    click.echo(f"Bootstrap servers: {the_lab.bootstrap_servers}")
    if not the_lab.faults:
        click.echo("Faults: none")
    for fault in the_lab.faults:
        click.echo(f"Fault: {_describe(fault)}")


@lab.command(name="exec", context_settings={"ignore_unknown_options": True})
@_dir_option
@click.argument("host")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def exec_(directory: str, host: str, command: tuple[str, ...]) -> NoReturn:
    """Run COMMAND on HOST (in its namespace), e.g. `odradek lab exec client -- kcat -L -b ...`."""
    the_lab = _load(directory)
    argv: list[str] = []
    _do(lambda: argv.extend(the_lab.exec_argv(host, command)))
    sys.stdout.flush()
    os.execvp(argv[0], argv)


@lab.command()
@_dir_option
@click.argument("side_a")
@click.argument("side_b")
def partition(directory: str, side_a: str, side_b: str) -> None:
    """Cut every link between a host of SIDE_A and one of SIDE_B (comma-separated hosts)."""
    the_lab = _load(directory)
    _do(lambda: the_lab.partition(_hosts_arg(side_a), _hosts_arg(side_b)))
    click.echo(f"Partitioned {side_a} | {side_b}")


@lab.command()
@_dir_option
@click.argument("host")
@click.option("--keep", default="", help="Comma-separated hosts HOST can still reach (e.g. client).")
def isolate(directory: str, host: str, keep: str) -> None:
    """Cut HOST from every other lab host (but the kept ones)."""
    the_lab = _load(directory)
    _do(lambda: the_lab.isolate(host, _hosts_arg(keep)))
    click.echo(f"Isolated {host}" + (f" (keeping {keep})" if keep else ""))


@lab.command()
@_dir_option
@click.argument("host")
@click.argument("percent", type=int)
def loss(directory: str, host: str, percent: int) -> None:
    """Drop PERCENT% of the packets HOST sends (0 removes the loss)."""
    the_lab = _load(directory)
    _do(lambda: the_lab.loss(host, percent))
    click.echo(f"{host}: {percent}% packet loss" if percent else f"{host}: no packet loss")


@lab.command(name="fill-disk")
@_dir_option
@click.argument("host")
def fill_disk(directory: str, host: str) -> None:
    """Fill broker HOST's second log directory (its small disk): its next write there fails
    and the broker takes the directory offline. `lab heal` frees it; restart the broker to
    bring the directory back."""
    the_lab = _load(directory)
    written: list[int] = []
    _do(lambda: written.append(the_lab.fill_disk(host)))
    click.echo(f"{host}: small disk filled ({written[0] >> 20} MiB written)")


@lab.command()
@_dir_option
def heal(directory: str) -> None:
    """Remove every partition, isolation and packet loss, set skewed clocks right and free
    filled disks."""
    the_lab = _load(directory)
    _do(the_lab.heal)
    click.echo("Healed")


@lab.command()
@_dir_option
@click.argument("host")
def kill(directory: str, host: str) -> None:
    """SIGKILL HOST's ZooKeeper or broker."""
    the_lab = _load(directory)
    _do(lambda: the_lab.kill(host))
    click.echo(f"Killed {host}")


@lab.command()
@_dir_option
@click.argument("host")
def restart(directory: str, host: str) -> None:
    """Restart HOST's ZooKeeper or broker and wait until it serves."""
    the_lab = _load(directory)
    try:
        _do(lambda: the_lab.restart(host))
    except (RuntimeError, TimeoutError) as e:
        fail(f"{host} did not restart: {e}")
    click.echo(f"Restarted {host} (pid {the_lab.pid(host)})")


@lab.command()
@_dir_option
def down(directory: str) -> None:
    """Stop every process and remove the lab's namespaces, veths and bridge (idempotent)."""
    from odradek.local.lab import LAB_JSON

    _available()
    if not (Path(directory) / LAB_JSON).exists():
        click.echo(f"No lab in {directory}")
        return
    the_lab = _load(directory)
    _do(the_lab.down)
    click.echo("Lab down")


def _echo_hosts(the_lab: Lab) -> None:
    click.echo(f"Lab {the_lab.name} in {the_lab.dir}: subnet {the_lab.subnet}, "
               f"management leg {the_lab.management_address}")
    for h in the_lab.hosts.values():
        pid = the_lab.pid(h.name) if h.role != "client" else None
        extra = ""
        if h.role == "broker":
            broker = the_lab.cluster.brokers[the_lab.broker_id(h.name)]
            extra = f" broker.id {broker.broker_id} metrics {the_lab.cluster.metrics_url(broker)}"
        click.echo(f"  {h.name:<10} {h.address:<15} {h.role}{extra}" + (f" pid {pid}" if pid else ""))


def _describe(fault: dict[str, object]) -> str:
    if fault["type"] == "partition":
        return f"partition {','.join(fault['a'])} | {','.join(fault['b'])}"  # type: ignore[arg-type]
    if fault["type"] == "isolate":
        keep = fault.get("keep") or []
        return f"isolate {fault['host']}" + (f" (keeping {','.join(keep)})" if keep else "")  # type: ignore[arg-type]
    if fault["type"] == "clock":
        return f"clock {fault['host']} {fault['offset_ms']:+} ms, rate {fault['rate']}"
    if fault["type"] == "disk":
        return f"disk {fault['host']} full"
    return f"loss {fault['host']} {fault['percent']}%"
