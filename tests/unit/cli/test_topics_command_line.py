"""``odradek topics`` input the command refuses before it connects anywhere: one line on stderr,
nothing on stdout, exit code 1; and failures while it runs, with kafka-topics.sh's prefix."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from odradek.cli.topics import topics

ZK = ["--zookeeper", "127.0.0.1:1"]


@pytest.mark.parametrize(("args", "message"), [
    (["--create", "--list", *ZK], "Command must include exactly one action: --list, --describe, --create, "
                                  "--alter or --delete"),
    ([*ZK], "Command must include exactly one action"),
    (["--list"], "Exactly one of --zookeeper or --bootstrap-server is required"),
    (["--list", *ZK, "--bootstrap-server", "127.0.0.1:1"], "Exactly one of --zookeeper or --bootstrap-server"),
    (["--delete", *ZK], 'Missing required argument "[topic]" for --delete'),
    (["--create", "--topic", "t", *ZK], "Missing required argument: --partitions and --replication-factor"),
    (["--create", "--topic", "t", "--partitions", "1", "--replica-assignment", "0", *ZK],
     "Option --replica-assignment can't be used with --partitions or --replication-factor"),
    (["--alter", "--topic", "t", *ZK], "--alter needs --partitions, --config or --delete-config"),
    (["--create", "--topic", "t", "--partitions", "1", "--replication-factor", "1", "--config", "x", *ZK],
     "Invalid topic config: all configs to be added must be in the format \"key=val\", got 'x'"),
    (["--list", *ZK, "--partitions", "many"], "Invalid value for '--partitions': 'many' is not a valid integer."),
    (["--list", *ZK, "--no-such-flag"], "No such option '--no-such-flag'"),
])
def test_refused_input_is_one_line_and_exit_1(args: list[str], message: str) -> None:
    result = CliRunner().invoke(topics, args)
    assert result.exit_code == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("Error: ")
    assert message in lines[0]


@pytest.mark.parametrize(("args", "message"), [
    (["--list", "--bootstrap-server", "no-port-here"],
     "Invalid --bootstrap-server 'no-port-here': expected host:port[,host:port...]"),
    (["--list", "--bootstrap-server", "127.0.0.1:1"], "could not connect to any broker of --bootstrap-server"),
])
def test_a_failed_run_is_kafkas_one_line_and_exit_1(args: list[str], message: str) -> None:
    result = CliRunner().invoke(topics, args)
    assert result.exit_code == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("Error while executing topic command : ")
    assert message in lines[0]
