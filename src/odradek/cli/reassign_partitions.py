"""``odradek reassign-partitions``: kafka-reassign-partitions.sh's --execute and --verify
over ZooKeeper (``/admin/reassign_partitions``); the work is odradek.admin.reassign_partitions'."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click

from odradek.admin.reassign_partitions import (
    ReassignmentError,
    execute_reassignment,
    parse_reassignment_json,
    verify_reassignment,
)
from odradek.cli.common import OneLineCommand, fail
from odradek.zk.client import KafkaZkClient, ZkConnectionError

__all__ = ["reassign_partitions"]

SESSION_TIMEOUT_MS = 30_000
CONNECTION_TIMEOUT_MS = 10_000
EXIT_NOT_COMPLETE = 2  # --verify: some reassignment is still running or failed


@click.command("reassign-partitions", cls=OneLineCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--zookeeper", required=True, metavar="HOST:PORT[/CHROOT]")
@click.option("--reassignment-json-file", "json_file", required=True, type=click.Path(dir_okay=False))
@click.option("--execute", is_flag=True, help="Start the reassignment.")
@click.option("--verify", is_flag=True, help="Report whether the reassignment completed.")
def reassign_partitions(zookeeper: str, json_file: str, execute: bool, verify: bool) -> None:
    """Move partition replicas between brokers (kafka-reassign-partitions.sh)."""
    if execute == verify:
        fail("exactly one of --execute or --verify is required")
    try:
        wanted = parse_reassignment_json(Path(json_file).read_text())
    except OSError as e:
        fail(f"cannot read {json_file}: {e.strerror}")
    except ReassignmentError as e:
        fail(str(e))

    async def run() -> int:
        zk = KafkaZkClient(zookeeper, SESSION_TIMEOUT_MS, CONNECTION_TIMEOUT_MS)
        try:
            await zk.start()
        except ZkConnectionError as e:
            click.echo(f"Error: {e}", err=True)
            return 1
        try:
            if execute:
                await execute_reassignment(zk, wanted, click.echo)
                return 0
            return 0 if await verify_reassignment(zk, wanted, click.echo) else EXIT_NOT_COMPLETE
        except ReassignmentError as e:
            click.echo(f"Error: {e}", err=True)
            return 1
        finally:
            await zk.close()

    sys.exit(asyncio.run(run()))
