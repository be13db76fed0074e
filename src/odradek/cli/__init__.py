"""The ``odradek`` command and its subcommands, one module each: ``zookeeper``, ``broker``,
``up``, ``lab``, ``topics``, ``configs``, ``consumer-groups``, ``acls``, ``transactions``, ``reassign-partitions``,
``log-dirs``, ``leader-election``, ``dump-log``, ``delete-records``, ``get-offsets``, ``broker-api-versions``, ``console-producer``,
``console-consumer``, ``replica-verification``, ``perf``, ``console`` (the web console) and ``demo``.

A subcommand's module is imported only when that subcommand runs (or help lists it): the
admin client and the protocol schemas alone take a third of a second to import, which every
``odradek zookeeper`` or ``odradek perf`` would otherwise pay."""

from __future__ import annotations

import importlib
import sys

import click

from odradek.cli.common import OneLineGroup

__all__ = ["main", "run"]

# command name -> (module under odradek.cli, attribute), in help order
COMMANDS = {
    "zookeeper": ("zookeeper", "zookeeper"),
    "broker": ("broker", "broker"),
    "up": ("up", "up"),
    "lab": ("lab", "lab"),
    "topics": ("topics", "topics"),
    "configs": ("configs", "configs"),
    "consumer-groups": ("consumer_groups", "consumer_groups"),
    "acls": ("acls", "acls"),
    "transactions": ("transactions", "transactions"),
    "reassign-partitions": ("reassign_partitions", "reassign_partitions"),
    "log-dirs": ("log_dirs", "log_dirs"),
    "leader-election": ("leader_election", "leader_election"),
    "dump-log": ("dump_log", "dump_log"),
    "delete-records": ("delete_records", "delete_records"),
    "get-offsets": ("get_offsets", "get_offsets"),
    "broker-api-versions": ("broker_api_versions", "broker_api_versions"),
    "console-producer": ("console_producer", "console_producer"),
    "console-consumer": ("console_consumer", "console_consumer"),
    "replica-verification": ("replica_verification", "replica_verification"),
    "perf": ("perf", "perf"),
    "console": ("console", "console"),
    "demo": ("demo", "demo"),
}


class LazyGroup(OneLineGroup):
    """A group whose subcommands are imported on first use (usage errors: one line, exit 1)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attribute = COMMANDS[cmd_name]
        command = getattr(importlib.import_module(f"odradek.cli.{module}"), attribute)
        assert isinstance(command, click.Command) and command.name == cmd_name, cmd_name
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="odradek")
def main() -> None:
    """odradek: a Kafka-compatible, replicated, partitioned commit log."""


def run() -> None:
    """The ``odradek`` program (console script and ``python -m odradek``).  kio gives its types
    Hypothesis strategies whenever Hypothesis can be imported (the test extra installs it): a
    quarter of a second of every broker's and command's start, for nothing a command uses."""
    sys.modules.setdefault("hypothesis", None)  # type: ignore[assignment]
    main()
