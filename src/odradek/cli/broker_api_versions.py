"""``odradek broker-api-versions``: kafka-broker-api-versions.sh's flags and output (Kafka
2.8's BrokerApiVersionsCommand); the text is odradek.admin.broker_api_versions'.  Each
broker is asked over its own connection; one that cannot be reached gets Kafka's
``-> ERROR: ...`` line and the others are still printed."""

from __future__ import annotations

import asyncio
import sys

import click

from odradek.admin.broker_api_versions import broker_block, node_text
from odradek.admin.client import AdminClientError, AdminConnection
from odradek.cli.common import (
    OneLineCommand,
    bootstrap_server_option,
    client_security,
    command_config_option,
    fail,
    over_bootstrap,
)
from odradek.protocol.errors import KafkaError

__all__ = ["broker_api_versions"]


@click.command("broker-api-versions", cls=OneLineCommand, context_settings={"help_option_names": ["-h", "--help"]})
@bootstrap_server_option("REQUIRED: The server to connect to.")
@command_config_option
def broker_api_versions(bootstrap_server: str | None, command_config: str | None) -> None:
    """Print the API versions every broker of the cluster supports
    (kafka-broker-api-versions.sh)."""
    if bootstrap_server is None or not bootstrap_server.strip():
        fail("Missing required argument \"[bootstrap-server]\"")
    security = client_security(command_config)

    async def run() -> None:
        async with AdminConnection(bootstrap_server, security=security) as admin:
            brokers = (await admin.metadata([])).brokers
        for broker_id, (host, port, rack) in sorted(brokers.items()):
            node = node_text(broker_id, host, port, rack)
            try:
                async with AdminConnection(f"{host}:{port}", security=security) as conn:
                    advertised = conn.api_versions
            except AdminClientError as e:
                click.echo(f"{node} -> ERROR: {e}")
                continue
            click.echo(broker_block(node, advertised))

    sys.exit(asyncio.run(over_bootstrap(bootstrap_server, run, (AdminClientError, KafkaError))))
