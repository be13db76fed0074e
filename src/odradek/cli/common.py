"""What the ``odradek`` subcommands share: one way to refuse input (one line on stderr, exit
code 1, as Kafka's tools do), the connection options (``--bootstrap-server``,
``--command-config``), ``--override`` parsing and waiting for a signal."""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

if TYPE_CHECKING:
    from odradek.security.client import ClientSecurity

__all__ = ["BOOTSTRAP_METAVAR", "OneLineCommand", "OneLineGroup", "StopSignals", "bootstrap_server_option",
           "client_security", "command_config_option", "fail", "over_bootstrap", "over_zookeeper",
           "parse_overrides", "read_properties"]

F = TypeVar("F", bound=Callable[..., object])

BOOTSTRAP_METAVAR = "HOST:PORT[,...]"


def fail(message: str) -> NoReturn:
    """Refuse or give up: one line on stderr and exit code 1 (Kafka's tools print the message
    and exit 1; no usage block follows, so a script sees exactly what went wrong)."""
    click.echo(f"Error: {message}", err=True)
    sys.exit(1)


class _OneLineUsageErrors:
    """click's own usage errors (a missing or unknown option, a bad value, no such command)
    through fail(), instead of click's usage block and exit code 2; no arguments at all still
    shows the help, on stderr with exit code 1."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)  # type: ignore[misc]
        except click.exceptions.NoArgsIsHelpError as e:
            click.echo(e.format_message(), err=True)
            sys.exit(1)
        except click.UsageError as e:
            fail(e.format_message())

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)  # type: ignore[misc]
        except click.UsageError as e:  # a group's missing or unknown command
            fail(e.format_message())


class OneLineCommand(_OneLineUsageErrors, click.Command):
    """A command whose usage errors are one line and exit code 1."""


class OneLineGroup(_OneLineUsageErrors, click.Group):
    """A group whose usage errors, and its subcommands', are one line and exit code 1."""

    command_class = OneLineCommand


def parse_overrides(overrides: tuple[str, ...]) -> dict[str, str]:
    """``("k=v", ...)`` from repeated ``--override`` options as a dict; a malformed item fails."""
    result = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            fail(f"--override expects key=value, got {item!r}")
        result[key.strip()] = value.strip()
    return result


def read_properties(path: str) -> dict[str, str]:
    """A ``--command-config`` file (Java properties, read by odradek.config's one parser) as a
    dict; fail() with one line if it cannot be read or a line has no key."""
    # Imported here, as below: every command imports this module, few read client properties.
    from odradek.config import ConfigError, load_properties

    try:
        props = load_properties(path)
    except ConfigError as e:
        fail(f"--command-config: {e}")
    if "" in props:
        fail(f"--command-config {path}: a line has no key (it starts with '=' or ':')")
    return props


def bootstrap_server_option(description: str, required: bool = False) -> Callable[[F], F]:
    """The ``--bootstrap-server`` option (Kafka's tools' flag: brokers to connect to), with the
    command's own help text."""
    return click.option("--bootstrap-server", "bootstrap_server", required=required,
                        metavar=BOOTSTRAP_METAVAR, help=description)  # type: ignore[return-value]


def command_config_option(func: F) -> F:
    """The ``--command-config FILE`` option (Kafka's tools: client properties for the admin
    connection, e.g. security.protocol, sasl.mechanism, sasl.jaas.config, ssl.*)."""
    return click.option(  # type: ignore[return-value]
        "--command-config", "command_config", default=None, metavar="FILE",
        help="Property file with client configs (security.protocol, sasl.*, ssl.*) for the connection.")(func)


def client_security(command_config: str | None) -> ClientSecurity | None:
    """The ClientSecurity a ``--command-config`` file describes (None without one); fail()
    with one line on a file that cannot be read or that a client could not use."""
    if command_config is None:
        return None
    from odradek.security.client import ClientSecurity  # the protocol schemas: a third of a second

    props = read_properties(command_config)
    try:
        return ClientSecurity.from_properties(props)
    except ValueError as e:
        fail(f"--command-config {command_config}: {e}")


async def over_zookeeper(action: Callable[[], Awaitable[object]],
                         errors: tuple[type[BaseException], ...], prefix: str = "Error: ") -> int:
    """Run a command's ``action`` over ``--zookeeper``: exit status 0, or 1 after one line on
    stderr for the command's own ``errors`` (ZkConnectionError among them)."""
    # kazoo logs every failed connection attempt; the command reports the outcome once.
    logging.getLogger("kazoo").addHandler(logging.NullHandler())
    logging.getLogger("kazoo").propagate = False
    try:
        await action()
    except errors as e:
        click.echo(f"{prefix}{e}", err=True)
        return 1
    return 0


async def over_bootstrap(bootstrap: str, action: Callable[[], Awaitable[object]],
                         errors: tuple[type[BaseException], ...], prefix: str = "Error: ") -> int:
    """Run a command's ``action`` over ``--bootstrap-server``: exit status 0, or 1 after one line
    on stderr for the command's own ``errors`` and for a lost connection."""
    try:
        await action()
    except errors as e:
        message = str(e)
    except (ConnectionError, OSError, TimeoutError) as e:
        message = f"lost the connection to the cluster ({bootstrap}): {e or type(e).__name__}"
    else:
        return 0
    click.echo(f"{prefix}{message}", err=True)
    return 1


class StopSignals:
    """Notes SIGTERM and SIGINT (Ctrl-C) from the moment it is made: ``requested`` says whether
    one came, so a command can finish what it is doing (start-up, say) and then stop cleanly."""

    def __init__(self) -> None:
        self.requested = False
        signal.signal(signal.SIGTERM, self._handler)
        signal.signal(signal.SIGINT, self._handler)

    def _handler(self, signum: int, _frame: object) -> None:
        self.requested = True

    def wait(self) -> None:
        """Block until one came."""
        while not self.requested:
            signal.pause()
