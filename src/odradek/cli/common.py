"""What the ``odradek`` subcommands share: one-line errors, ``--override`` parsing,
``--command-config`` (Kafka client properties for the admin connection) and waiting for a
signal."""

from __future__ import annotations

import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import NoReturn, TypeVar

import click

from odradek.security.client import ClientSecurity

__all__ = ["StopSignals", "client_security", "command_config_option", "fail", "parse_overrides",
           "read_properties"]

F = TypeVar("F", bound=Callable[..., object])


def fail(message: str, code: int = 1) -> NoReturn:
    """One clear line on stderr and a non-zero exit."""
    click.echo(f"Error: {message}", err=True)
    sys.exit(code)


def parse_overrides(overrides: tuple[str, ...]) -> dict[str, str]:
    """``("k=v", ...)`` from repeated ``--override`` options as a dict; a malformed item fails."""
    result = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            fail(f"--override expects key=value, got {item!r}")
        result[key.strip()] = value.strip()
    return result


def read_properties(path: str, what: str = "--command-config") -> dict[str, str]:
    """A Java ``.properties`` file (``key=value`` or ``key: value`` lines, ``#``/``!``
    comments, trailing-backslash continuations) as a dict; fail() with one line if unreadable."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        fail(f"{what} {path}: cannot read it ({getattr(e, 'strerror', None) or e})")
    props: dict[str, str] = {}
    logical = ""
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.lstrip() if not logical else raw.strip()
        if not logical and (not line or line.startswith(("#", "!"))):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        line, logical = logical + line, ""
        key, value = _split_property(line)
        if not key:
            fail(f"{what} {path}: line {number} has no key: {raw.strip()!r}")
        props[key] = value
    return props


def _split_property(line: str) -> tuple[str, str]:
    for i, char in enumerate(line):
        if char in "=:" or char.isspace():
            rest = line[i + 1:].lstrip() if char in "=:" else line[i:].lstrip().removeprefix("=").removeprefix(":")
            return line[:i].strip(), rest.lstrip()
    return line.strip(), ""


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
    props = read_properties(command_config)
    try:
        return ClientSecurity.from_properties(props)
    except ValueError as e:
        fail(f"--command-config {command_config}: {e}")


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
