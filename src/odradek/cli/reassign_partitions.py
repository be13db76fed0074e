"""``odradek reassign-partitions``: kafka-reassign-partitions.sh's --execute and --verify
over ZooKeeper (``/admin/reassign_partitions``)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import click

from odradek.zk.client import KafkaZkClient, NodeExistsError, ZkConnectionError
from odradek.zk.zk_data import ReassignPartitionsZNode

__all__ = ["reassign_partitions"]


class ReassignmentError(Exception):
    pass


def _parse(text: str) -> dict[tuple[str, int], list[int]]:
    try:
        data = json.loads(text)
        entries = data["partitions"]
        result = {}
        for e in entries:
            key = (str(e["topic"]), int(e["partition"]))
            replicas = [int(b) for b in e["replicas"]]
            if key in result:
                raise ReassignmentError(f"Partition {key[0]}-{key[1]} appears more than once")
            result[key] = replicas
    except (ValueError, KeyError, TypeError) as e:
        raise ReassignmentError(f"the reassignment JSON is not valid: {e}") from None
    if not result:
        raise ReassignmentError("the reassignment JSON lists no partitions")
    return result


async def _execute(zk: KafkaZkClient, wanted: dict[tuple[str, int], list[int]]) -> None:
    if await zk.exists(ReassignPartitionsZNode.path) is not None:
        raise ReassignmentError("There is an existing assignment running.")
    brokers = set(await zk.get_all_broker_ids())
    current: dict[tuple[str, int], list[int]] = {}
    for (topic, partition), replicas in wanted.items():
        entry = await zk.get_topic_assignment(topic)
        if entry is None or partition not in entry[0].partitions:
            raise ReassignmentError(f"Partition {topic}-{partition} does not exist")
        if not replicas:
            raise ReassignmentError(f"Partition {topic}-{partition} has an empty replica list")
        if len(set(replicas)) != len(replicas):
            raise ReassignmentError(f"Partition {topic}-{partition} has duplicate replicas {replicas}")
        unknown = sorted(set(replicas) - brokers)
        if unknown:
            raise ReassignmentError(f"Partition {topic}-{partition}: unknown broker id(s) {unknown}")
        current[(topic, partition)] = list(entry[0].partitions[partition])
    click.echo("Current partition replica assignment\n")
    click.echo(ReassignPartitionsZNode.encode(current).decode())
    click.echo("\nSave this to use as the --reassignment-json-file option during rollback")
    try:
        await zk.create(ReassignPartitionsZNode.path, ReassignPartitionsZNode.encode(wanted), makepath=True)
    except NodeExistsError:
        raise ReassignmentError("There is an existing assignment running.") from None
    click.echo("Successfully started partition reassignments for "
               + ",".join(f"{t}-{p}" for t, p in sorted(wanted)))


async def _verify(zk: KafkaZkClient, wanted: dict[tuple[str, int], list[int]]) -> bool:
    got = await zk.get(ReassignPartitionsZNode.path)
    pending = ReassignPartitionsZNode.decode(got[0]) if got else {}
    click.echo("Status of partition reassignment:")
    all_done = True
    for (topic, partition), replicas in sorted(wanted.items()):
        entry = await zk.get_topic_assignment(topic)
        actual = list(entry[0].partitions.get(partition, [])) if entry else []
        reassigning = bool(entry and (entry[0].adding_replicas.get(partition) or entry[0].removing_replicas.get(partition)))
        if (topic, partition) in pending or reassigning:
            click.echo(f"Reassignment of partition {topic}-{partition} is still in progress.")
            all_done = False
        elif actual == replicas:
            click.echo(f"Reassignment of partition {topic}-{partition} is complete.")
        else:
            click.echo(f"Reassignment of partition {topic}-{partition} failed: its replicas are {actual}.")
            all_done = False
    return all_done


@click.command("reassign-partitions", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--zookeeper", required=True, metavar="HOST:PORT[/CHROOT]")
@click.option("--reassignment-json-file", "json_file", required=True, type=click.Path(dir_okay=False))
@click.option("--execute", is_flag=True, help="Start the reassignment.")
@click.option("--verify", is_flag=True, help="Report whether the reassignment completed.")
def reassign_partitions(zookeeper: str, json_file: str, execute: bool, verify: bool) -> None:
    """Move partition replicas between brokers (kafka-reassign-partitions.sh)."""
    if execute == verify:
        click.echo("Error: exactly one of --execute or --verify is required", err=True)
        sys.exit(1)
    try:
        wanted = _parse(Path(json_file).read_text())
    except OSError as e:
        click.echo(f"Error: cannot read {json_file}: {e.strerror}", err=True)
        sys.exit(1)
    except ReassignmentError as e:
        click.echo(f"Error: {e}", err=True)
        sys.exit(1)

    async def run() -> int:
        zk = KafkaZkClient(zookeeper, 30000, 10000)
        try:
            await zk.start()
        except ZkConnectionError as e:
            click.echo(f"Error: {e}", err=True)
            return 1
        try:
            if execute:
                await _execute(zk, wanted)
                return 0
            return 0 if await _verify(zk, wanted) else 2
        except ReassignmentError as e:
            click.echo(f"Error: {e}", err=True)
            return 1
        finally:
            await zk.close()

    sys.exit(asyncio.run(run()))
