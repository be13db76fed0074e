"""The ``odradek`` command and its subcommands, one module each: ``zookeeper``, ``broker``,
``up``, ``lab``, ``topics``, ``configs``, ``acls``, ``transactions``, ``reassign-partitions``, ``perf`` and ``demo``."""

from __future__ import annotations

import click

from odradek.cli.acls import acls
from odradek.cli.broker import broker
from odradek.cli.configs import configs
from odradek.cli.demo import demo
from odradek.cli.lab import lab
from odradek.cli.perf import perf
from odradek.cli.reassign_partitions import reassign_partitions
from odradek.cli.topics import topics
from odradek.cli.transactions import transactions
from odradek.cli.up import up
from odradek.cli.zookeeper import zookeeper

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="odradek")
def main() -> None:
    """odradek: a Kafka-compatible, replicated, partitioned commit log."""


for _command in (zookeeper, broker, up, lab, topics, configs, acls, transactions, reassign_partitions, perf, demo):
    main.add_command(_command)
