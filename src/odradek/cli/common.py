"""What the ``odradek`` subcommands share: one-line errors, ``--override`` parsing and
waiting for a signal."""

from __future__ import annotations

import signal
import sys
from typing import NoReturn

import click

__all__ = ["fail", "parse_overrides", "wait_for_signal"]


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


def wait_for_signal() -> None:
    """Block until SIGTERM or SIGINT (Ctrl-C)."""
    stop = {"flag": False}

    def handler(signum: int, _frame: object) -> None:
        stop["flag"] = True

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    while not stop["flag"]:
        signal.pause()
