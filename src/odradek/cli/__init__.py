"""The ``odradek`` command: zookeeper, broker, up, topics, demo, perf."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import sys
import tempfile
from pathlib import Path

import click

from odradek.config import ConfigError, KafkaConfig, load_properties

__all__ = ["main"]


class _KafkaFormatter(logging.Formatter):
    """Kafka's log line shape: ``[2024-01-01 12:00:00,000] INFO message (logger)``."""

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        line = f"[{self.formatTime(record)}] {record.levelname} {record.message} ({record.name})"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _setup_logging(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(_KafkaFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("kazoo").setLevel(logging.WARNING)


def fail(message: str, code: int = 1) -> None:
    """One clear line on stderr and a non-zero exit."""
    click.echo(f"Error: {message}", err=True)
    sys.exit(code)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="odradek")
def main() -> None:
    """odradek: a Kafka-compatible, replicated, partitioned commit log."""


# ----------------------------------------------------------------------------- zookeeper


@main.command()
@click.option("--port", type=int, default=2181, show_default=True, help="Client port (0 picks a free one).")
@click.option("--dir", "directory", type=click.Path(file_okay=False), required=True, help="Data directory.")
@click.option("--host", default="127.0.0.1", show_default=True)
def zookeeper(port: int, directory: str, host: str) -> None:
    """Run ZooKeeper's own server (standalone) from the jars in the pyspark wheel."""
    from odradek.local.zookeeper import EmbeddedZooKeeper, ZooKeeperError

    zk = EmbeddedZooKeeper(directory, port=port, host=host)
    try:
        zk.start()
    except ZooKeeperError as e:
        fail(str(e))
    click.echo(f"ZooKeeper serving on {zk.connect_string} (data and logs in {zk.data_dir})", err=False)
    _wait_for_signal()
    zk.stop()
    click.echo("ZooKeeper stopped")


def _wait_for_signal() -> None:
    stop = {"flag": False}

    def handler(signum: int, _frame: object) -> None:
        stop["flag"] = True

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    while not stop["flag"]:
        signal.pause()


# ----------------------------------------------------------------------------- broker


def _parse_overrides(overrides: tuple[str, ...]) -> dict[str, str]:
    result = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            fail(f"--override expects key=value, got {item!r}")
        result[key.strip()] = value.strip()
    return result


@main.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False), required=True,
              help="server.properties (Kafka's keys).")
@click.option("--override", multiple=True, metavar="KEY=VALUE", help="Override a config value.")
@click.option("--logs-dir", type=click.Path(file_okay=False), default=None,
              help="Where state-change.log goes (default: $LOG_DIR, else the config file's directory).")
def broker(config_path: str, override: tuple[str, ...], logs_dir: str | None) -> None:
    """Run one broker."""
    try:
        props = load_properties(config_path)
        props.update(_parse_overrides(override))
        config = KafkaConfig.from_props(props)
    except ConfigError as e:
        fail(str(e))
    _setup_logging()
    log = logging.getLogger("odradek.broker")
    for warning in config.warnings:
        log.warning(warning)
    from odradek import state_change_log
    from odradek.local.cluster import update_cluster_json_pid

    logs = Path(logs_dir or os.environ.get("LOG_DIR") or Path(config_path).resolve().parent)
    state_change_log.configure(logs / "state-change.log")
    update_cluster_json_pid(config_path, os.getpid())
    # The broker keeps few long-lived objects and allocates many short-lived ones per request:
    # move what start-up created out of the collector's way and collect the young generation
    # less often, so full collections (pauses of tens of ms) are rare.
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 50, 1000)
    _raise_open_file_limit(log)
    code = _run(_run_broker(config))
    sys.exit(code)


def _raise_open_file_limit(log: logging.Logger) -> None:
    """Lift the soft limit on open files to the hard one, as the JVM does for Kafka
    (-XX:+MaxFDLimit): every segment holds its .log file open, so thousands of partitions
    need thousands of descriptors."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as e:
            log.warning("could not raise the open-file limit from %d to %d: %s", soft, hard, e)


def _run(coro: object) -> int:
    try:
        import uvloop

        return uvloop.run(coro)  # type: ignore[arg-type]
    except ImportError:
        return asyncio.run(coro)  # type: ignore[arg-type]


async def _run_broker(config: KafkaConfig) -> int:
    from odradek.broker.server import BrokerStartupError, KafkaServer
    from odradek.zk.client import ZkConnectionError

    server = KafkaServer(config)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, server.shutdown_requested.set)
    loop.add_signal_handler(signal.SIGUSR1, _log_task_stacks)
    try:
        await server.startup()
    except (BrokerStartupError, ZkConnectionError) as e:
        click.echo(f"Error: {e}", err=True)
        return 1
    await server.shutdown_requested.wait()
    await server.shutdown()
    return 0


def _log_task_stacks() -> None:
    """SIGUSR1: log where every asyncio task of the broker is waiting (as jstack for a JVM)."""
    import io

    log = logging.getLogger("odradek.broker")
    tasks = asyncio.all_tasks()
    out = io.StringIO()
    for task in sorted(tasks, key=lambda t: t.get_name()):
        out.write(f"--- {task.get_name()}\n")
        task.print_stack(limit=30, file=out)
    log.warning("SIGUSR1: %d asyncio tasks\n%s", len(tasks), out.getvalue())


# ----------------------------------------------------------------------------- up


@main.command()
@click.option("-n", "--brokers", "num_brokers", type=click.IntRange(1, 100), default=3, show_default=True)
@click.option("--racks", default=None, help="Comma-separated rack per broker, e.g. r1,r2,r3.")
@click.option("--dir", "directory", type=click.Path(file_okay=False), default=None,
              help="Cluster directory (default: a new temporary directory).")
@click.option("--zookeeper-port", type=int, default=0, help="Embedded ZooKeeper port (0 picks a free one).")
@click.option("--ports", default=None, help="Comma-separated broker ports (default: free ports).")
@click.option("--override", multiple=True, metavar="KEY=VALUE", help="Broker config for every broker.")
def up(num_brokers: int, racks: str | None, directory: str | None, zookeeper_port: int, ports: str | None,
       override: tuple[str, ...]) -> None:
    """Start an embedded ZooKeeper and N brokers; Ctrl-C stops everything."""
    from odradek.local.cluster import LocalCluster

    rack_list = [r.strip() for r in racks.split(",")] if racks else None
    if rack_list is not None and len(rack_list) != num_brokers:
        fail(f"--racks names {len(rack_list)} racks for {num_brokers} brokers")
    try:
        port_list = [int(p) for p in ports.split(",")] if ports else None
    except ValueError:
        fail(f"--ports must be comma-separated integers, got {ports!r}")
    if port_list is not None and len(port_list) != num_brokers:
        fail(f"--ports names {len(port_list)} ports for {num_brokers} brokers")
    overrides = _parse_overrides(override)
    try:
        KafkaConfig.from_props({"zookeeper.connect": "x:1", "broker.id": "0", **overrides})
    except ConfigError as e:
        fail(str(e))
    cluster_dir = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="odradek-"))
    cluster = LocalCluster(cluster_dir, num_brokers, racks=rack_list, zookeeper_port=zookeeper_port,
                           ports=port_list, overrides=overrides)
    stop = {"flag": False}

    def handler(signum: int, _frame: object) -> None:
        stop["flag"] = True

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    try:
        cluster.start()
    except Exception as e:
        cluster.stop()
        fail(f"cluster did not start: {e}")
    click.echo(f"ZooKeeper: {cluster.zookeeper_connect}")
    for b in cluster.brokers.values():
        rack = f" rack {b.rack}" if b.rack else ""
        click.echo(f"Broker {b.broker_id}: 127.0.0.1:{b.port}{rack} (pid {b.pid}, config {b.config_path})")
    click.echo(f"Bootstrap servers: {cluster.bootstrap_servers}")
    click.echo(f"Cluster description: {cluster.dir / 'cluster.json'}")
    click.echo("Press Ctrl-C to stop.")
    try:
        while not stop["flag"]:
            signal.pause()
    finally:
        click.echo("Stopping brokers and ZooKeeper...")
        cluster.stop()
        click.echo("Stopped.")


# ----------------------------------------------------------------------------- topics


def _register_more() -> None:
    from odradek.cli.reassign_partitions import reassign_partitions
    from odradek.cli.topics import topics
    from odradek.local.demo import demo
    from odradek.perf.cli import perf

    main.add_command(topics)
    main.add_command(reassign_partitions)
    main.add_command(perf)
    main.add_command(demo)


_register_more()
