"""``--command-config FILE``: Java properties files read as Kafka's tools read them, and a file
no client could use refused in one line before anything connects (exit 1, nothing on stdout)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from odradek.cli.common import client_security, read_properties
from odradek.cli.perf import perf
from odradek.cli.topics import topics
from odradek.cli.transactions import transactions
from odradek.security.client import ClientSecurity

BOOTSTRAP = ["--bootstrap-server", "127.0.0.1:1"]


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "client.properties"
    path.write_text(text)
    return str(path)


def test_properties_file_syntax(tmp_path: Path) -> None:
    path = _write(tmp_path, "# comment\n! also\n\nsecurity.protocol = SASL_PLAINTEXT\nsasl.mechanism:PLAIN\n"
                            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
                            '   username="admin" password="x=y";\nempty=\n')
    assert read_properties(path) == {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
                            'password="x=y";',
        "empty": ""}
    assert client_security(path) == ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", "admin", "x=y")
    assert client_security(None) is None


def test_an_odd_number_of_trailing_backslashes_continues_the_line(tmp_path: Path) -> None:
    # As in Java, two trailing backslashes are an escaped one (kept as written here), three are
    # that and a continuation.
    path = _write(tmp_path, "ssl.keystore.location=/a\\\\\nssl.truststore.location=/b\\\\\\\n  c\n")
    assert read_properties(path) == {"ssl.keystore.location": "/a\\\\", "ssl.truststore.location": "/b\\\\c"}


def test_a_line_without_a_key_fails_in_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "security.protocol=PLAINTEXT\n=PLAIN\n")
    result = CliRunner().invoke(topics, ["--list", *BOOTSTRAP, "--command-config", path])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [f"Error: --command-config {path}: a line has no key (it starts with '=' or ':')"]


BAD_FILES = [
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n", "Unsupported value GSSAPI for configuration sasl.mechanism"),
    ("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n", "needs a username and password"),
    ("security.protocol=BOGUS\n", "Invalid value BOGUS for configuration security.protocol"),
]


@pytest.mark.parametrize(("text", "message"), BAD_FILES)
@pytest.mark.parametrize("command", ["topics", "transactions", "perf"])
def test_unusable_file_fails_in_one_line(tmp_path: Path, command: str, text: str, message: str) -> None:
    path = _write(tmp_path, text)
    runner = CliRunner()
    if command == "topics":
        result = runner.invoke(topics, ["--list", *BOOTSTRAP, "--command-config", path])
    elif command == "transactions":
        result = runner.invoke(transactions, [*BOOTSTRAP, "--command-config", path, "list"])
    else:
        result = runner.invoke(perf, ["produce", "--topic", "t", "--num-records", "1", "--record-size", "1",
                                      *BOOTSTRAP, "--command-config", path])
    assert result.exit_code == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and path in lines[0]


def test_missing_file_fails_in_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(topics, ["--list", *BOOTSTRAP, "--command-config", str(tmp_path / "nope")])
    assert result.exit_code == 1
    assert result.stderr.strip().count("\n") == 0
    assert f"cannot read config file {tmp_path / 'nope'}: No such file or directory" in result.stderr


def test_a_file_that_is_not_utf8_fails_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_bytes(b"sasl.jaas.config=\xff\n")
    result = CliRunner().invoke(topics, ["--list", *BOOTSTRAP, "--command-config", str(path)])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [f"Error: --command-config: cannot read config file {path}: not UTF-8 (byte 17)"]


def test_command_config_needs_bootstrap_server(tmp_path: Path) -> None:
    path = _write(tmp_path, "security.protocol=PLAINTEXT\n")
    result = CliRunner().invoke(topics, ["--list", "--zookeeper", "127.0.0.1:1", "--command-config", path])
    assert result.exit_code == 1
    assert "--command-config is only valid with --bootstrap-server" in result.stderr
