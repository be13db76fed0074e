"""``odradek transactions`` input refused before anything is sent: one line on stderr, nothing
on stdout, exit code 1."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from odradek.cli import main
from odradek.cli.transactions import transactions

# Nothing listens on port 1: a command that got past its checks would fail to connect instead.
BOOT = ["--bootstrap-server", "127.0.0.1:1"]


@pytest.mark.parametrize(("args", "message"), [
    (["list"], "argument --bootstrap-server is required"),
    ([*BOOT], "Missing command"),
    ([*BOOT, "commit"], "No such command 'commit'"),
    ([*BOOT, "describe"], "argument --transactional-id is required"),
    ([*BOOT, "describe", "--transactional-id", ""], "argument --transactional-id is required"),
    ([*BOOT, "describe-producers", "--partition", "0"], "argument --topic is required"),
    ([*BOOT, "describe-producers", "--topic", "t"], "argument --partition is required"),
    ([*BOOT, "describe-producers", "--topic", "t", "--partition", "zero"], "--partition expects an integer, got 'zero'"),
    ([*BOOT, "describe-producers", "--topic", "t", "--partition", "-1"], "--partition must be between 0 and"),
    ([*BOOT, "describe-producers", "--topic", "t", "--partition", "0", "--broker-id", "x"],
     "--broker-id expects an integer"),
    ([*BOOT, "abort", "--topic", "t", "--partition", "0"],
     "The transaction to abort must be identified either with --start-offset or with --producer-id"),
    ([*BOOT, "abort", "--topic", "t", "--partition", "0", "--start-offset", "-5"], "--start-offset must be between 0"),
    ([*BOOT, "abort", "--topic", "t", "--partition", "0", "--producer-id", "7"],
     "Missing required argument --producer-epoch"),
    ([*BOOT, "abort", "--topic", "t", "--partition", "0", "--producer-id", "7", "--producer-epoch", "1"],
     "Missing required argument --coordinator-epoch"),
    ([*BOOT, "abort", "--topic", "t", "--partition", "0", "--producer-id", "7", "--producer-epoch", "40000",
      "--coordinator-epoch", "0"], "--producer-epoch must be between 0 and 32767, got 40000"),
    ([*BOOT, "abort", "--topic", "t", "--partition", "0", "--start-offset", "3", "--producer-id", "7"],
     "--start-offset cannot be combined with --producer-id"),
    ([*BOOT, "abort", "--topic", "t", "--partition", "0", "--start-offset", "3", "--unknown"],
     "No such option '--unknown'"),
    (["--bootstrap-server", "no-port", "list"], "Invalid --bootstrap-server 'no-port'"),
    ([*BOOT, "list"], "could not connect to any broker of --bootstrap-server 127.0.0.1:1"),
    ([*BOOT, "abort", "--topic", "t", "--partition", "0", "--start-offset", "3"],
     "could not connect to any broker of --bootstrap-server 127.0.0.1:1"),
])
def test_refused_input_is_one_line_and_exit_1(args: list[str], message: str) -> None:
    result = CliRunner().invoke(transactions, args)
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert message in lines[0]


def test_registered_in_the_main_group() -> None:
    result = CliRunner().invoke(main, ["transactions", "--help"])
    assert result.exit_code == 0
    for command in ("list", "describe", "describe-producers", "abort"):
        assert command in result.stdout
