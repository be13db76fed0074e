"""``odradek broker``: one broker process (Kafka's kafka-server-start.sh)."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import click

from odradek.cli.common import OneLineCommand, fail, parse_overrides
from odradek.config import ConfigError, KafkaConfig, load_properties

__all__ = ["broker"]

log = logging.getLogger("odradek.broker")


class KafkaFormatter(logging.Formatter):
    """Kafka's log line shape: ``[2024-01-01 12:00:00,000] INFO message (logger)``."""

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        line = f"[{self.formatTime(record)}] {record.levelname} {record.message} ({record.name})"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _setup_logging(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(KafkaFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("kazoo").setLevel(logging.WARNING)


@click.command(cls=OneLineCommand)
@click.option("--config", "config_path", type=click.Path(dir_okay=False), required=True,
              help="server.properties (Kafka's keys).")
@click.option("--override", multiple=True, metavar="KEY=VALUE", help="Override a config value.")
@click.option("--logs-dir", type=click.Path(file_okay=False), default=None,
              help="Where state-change.log and log-cleaner.log go (default: $LOG_DIR, else the config file's directory).")
def broker(config_path: str, override: tuple[str, ...], logs_dir: str | None) -> None:
    """Run one broker."""
    try:
        props = load_properties(config_path)
        props.update(parse_overrides(override))
        config = KafkaConfig.from_props(props)
    except ConfigError as e:
        fail(str(e))
    _setup_logging()
    for warning in config.warnings:
        log.warning(warning)
    from odradek import state_change_log
    from odradek.local.cluster import update_cluster_json_pid

    logs = Path(logs_dir or os.environ.get("LOG_DIR") or Path(config_path).resolve().parent)
    state_change_log.configure(logs / "state-change.log")
    _log_cleaner_file(logs / "log-cleaner.log")
    # The broker keeps few long-lived objects and allocates many short-lived ones per request:
    # move what start-up created out of the collector's way and collect the young generation
    # less often, so full collections (pauses of tens of ms) are rare.
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 50, 1000)
    _raise_open_file_limit()
    # A broker of a local cluster (``odradek up``), restarted by hand, records its new pid in
    # the cluster's cluster.json once it is registered.
    code = _run(_run_broker(config, on_started=lambda: update_cluster_json_pid(config_path, os.getpid())))
    sys.exit(code)


def _log_cleaner_file(path: Path) -> None:
    """The cleaner's per-cleaning summaries go to ``log-cleaner.log`` only, as Kafka's
    log4j.properties sends them (additivity=false)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(KafkaFormatter())
    summary = logging.getLogger("odradek.log_cleaner")
    summary.addHandler(handler)
    summary.setLevel(logging.INFO)
    summary.propagate = False


def _raise_open_file_limit() -> None:
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


def _run(coro: Coroutine[Any, Any, int]) -> int:
    try:
        import uvloop

        return uvloop.run(coro)
    except ImportError:
        return asyncio.run(coro)


async def _run_broker(config: KafkaConfig, on_started: Callable[[], object]) -> int:
    from odradek.broker.clock_skew import start_from_environment
    from odradek.broker.server import BrokerStartupError, KafkaServer
    from odradek.zk.client import ZkConnectionError

    start_from_environment()  # the nemesis's clock faults (a lab sets ODRADEK_TEST_CLOCK)
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
    on_started()
    await server.shutdown_requested.wait()
    await server.shutdown()
    return 0


def _log_task_stacks() -> None:
    """SIGUSR1: log where every asyncio task of the broker is waiting (as jstack for a JVM)."""
    import io

    tasks = asyncio.all_tasks()
    out = io.StringIO()
    for task in sorted(tasks, key=lambda t: t.get_name()):
        out.write(f"--- {task.get_name()}\n")
        task.print_stack(limit=30, file=out)
    log.warning("SIGUSR1: %d asyncio tasks\n%s", len(tasks), out.getvalue())
