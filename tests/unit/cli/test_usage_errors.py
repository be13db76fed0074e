"""Every ``odradek`` command refuses a bad command line the same way, as Kafka's tools do: one
line on stderr, nothing on stdout, exit code 1 (not click's usage block and exit code 2)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from odradek.cli import COMMANDS, main
from odradek.cli.flights import flights


def _refused(result, message: str) -> None:  # type: ignore[no-untyped-def]
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert result.stderr.splitlines() == [f"Error: {message}"]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_unknown_option_is_one_line_and_exit_1(command: str) -> None:
    _refused(CliRunner().invoke(main, [command, "--no-such-flag"]), "No such option '--no-such-flag'.")


@pytest.mark.parametrize(("args", "message"), [
    (["no-such-command"], "No such command 'no-such-command'."),
    (["perf", "produce", "--topic", "t", "--num-records", "x", "--record-size", "1"],
     "Invalid value for '--num-records': 'x' is not a valid integer range."),
    (["perf", "produce", "--topic", "t", "--num-records", "1", "--record-size", "1"],
     "--bootstrap-server is required (or bootstrap.servers=... in --producer-props)"),
    (["perf", "consume", "--topic", "t", "--messages", "1", "--bootstrap-server", "127.0.0.1:1", "oops"],
     "property 'oops' is not of the form key=value"),
    (["transactions", "--bootstrap-server", "127.0.0.1:1"], "Missing command."),
    (["up", "--brokers", "0"], "Invalid value for '-n' / '--brokers': 0 is not in the range 1<=x<=100."),
    (["reassign-partitions", "--zookeeper", "127.0.0.1:1"], "Command must include exactly one action: --generate, --execute, --verify, --cancel, --list"),
])
def test_refused_command_lines(args: list[str], message: str) -> None:
    _refused(CliRunner().invoke(main, args), message)


def test_no_arguments_to_a_group_is_its_help_on_stderr_and_exit_1() -> None:
    result = CliRunner().invoke(main, ["perf"])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "Producer and consumer performance tests" in result.stderr


def test_flights_needs_bootstrap_server() -> None:
    _refused(CliRunner().invoke(flights, ["load"]), "Missing option '--bootstrap-server'.")
