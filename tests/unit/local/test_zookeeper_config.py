"""EmbeddedZooKeeper's zoo.cfg (standalone and ensemble member), a given zoo.cfg's client
address, and ``odradek zookeeper``'s refusal of options that do not fit: one line, exit 1,
nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from odradek.cli.zookeeper import zookeeper
from odradek.local.zookeeper import EmbeddedZooKeeper, QuorumServer, read_client_address

SERVERS = ["zk1:2888:3888", "zk2:2889:3889", "zk3:2890:3890"]


def _cfg(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def test_standalone_config_has_no_ensemble(tmp_path: Path) -> None:
    zk = EmbeddedZooKeeper(tmp_path / "zk", port=2181)
    zk.write_config()
    cfg = _cfg(tmp_path / "zk" / "zoo.cfg")
    assert cfg["clientPort"] == "2181" and cfg["clientPortAddress"] == "127.0.0.1"
    assert not any(key.startswith("server.") for key in cfg)
    assert not (tmp_path / "zk" / "data" / "myid").exists()
    assert zk.command()[-2] == "org.apache.zookeeper.server.ZooKeeperServerMain"
    assert zk.heap_mb == 512


def test_member_config_lists_the_ensemble_and_writes_myid(tmp_path: Path) -> None:
    zk = EmbeddedZooKeeper(tmp_path / "zk2", port=2182, host="10.0.0.2", server_id=2, servers=SERVERS,
                           command_prefix=["ip", "netns", "exec", "zk2"])
    zk.write_config()
    cfg = _cfg(tmp_path / "zk2" / "zoo.cfg")
    assert {k: v for k, v in cfg.items() if k.startswith("server.")} == {
        "server.1": "zk1:2888:3888", "server.2": "zk2:2889:3889", "server.3": "zk3:2890:3890"}
    assert cfg["clientPort"] == "2182" and cfg["clientPortAddress"] == "10.0.0.2"
    assert cfg["initLimit"] == "10" and cfg["syncLimit"] == "5"
    assert cfg["dataDir"] == str(tmp_path / "zk2" / "data")
    assert (tmp_path / "zk2" / "data" / "myid").read_text().strip() == "2"
    command = zk.command()
    assert command[-2:] == ["org.apache.zookeeper.server.quorum.QuorumPeerMain", str(tmp_path / "zk2" / "zoo.cfg")]
    assert "ip" not in command  # the prefix is added at Popen, command() stays the JVM's argv
    assert "-Xmx256m" in command


def test_given_config_is_run_as_it_is(tmp_path: Path) -> None:
    cfg = tmp_path / "zoo.cfg"
    cfg.write_text("# mine\ntickTime=2000\nclientPort=2199\nclientPortAddress=0.0.0.0\nserver.1=a:1:2\n")
    zk = EmbeddedZooKeeper(tmp_path / "logs", config=cfg)
    assert zk.connect_string == "127.0.0.1:2199"
    zk.write_config()
    assert cfg.read_text().startswith("# mine\n")  # untouched
    assert zk.command()[-1] == str(cfg)
    assert read_client_address(_write(tmp_path, "clientPort=5\nclientPortAddress=10.1.1.1\n")) == ("10.1.1.1", 5)
    with pytest.raises(ValueError, match="sets no clientPort"):
        read_client_address(_write(tmp_path, "tickTime=2000\n"))


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "other.cfg"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("text", "message"), [
    ("zk1:2888", "is not host:peerPort:electionPort"),
    (":2888:3888", "is not host:peerPort:electionPort"),
    ("zk1:x:3888", "the ports must be integers"),
    ("zk1:0:3888", "ports must be in 1..65535"),
])
def test_malformed_member_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        QuorumServer.parse(text)
    assert str(QuorumServer.parse("zk1:2888:3888")) == "zk1:2888:3888"


def test_member_id_must_be_in_the_ensemble(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"server id 4 is not in 1\.\.3"):
        EmbeddedZooKeeper(tmp_path, server_id=4, servers=SERVERS)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(("args", "message"), [
    (["--id", "4", "--servers", ",".join(SERVERS)], "server id 4 is not in 1..3"),
    (["--id", "0", "--servers", ",".join(SERVERS)], "server id 0 is not in 1..3"),
    (["--id", "1", "--servers", "zk1:2888:3888,zk2:2888"], "'zk2:2888' is not host:peerPort:electionPort"),
    (["--id", "1"], "needs both --id and --servers"),
    (["--servers", ",".join(SERVERS)], "needs both --id and --servers"),
    (["--config", "CFG", "--servers", ",".join(SERVERS)], "give --config or --id/--servers, not both"),
    (["--config", "MISSING"], "no such file"),
    (["--config", "NOPORT"], "sets no clientPort"),
])
def test_cli_refuses_bad_input_in_one_line_and_writes_nothing(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "zoo.cfg").write_text("clientPort=2181\n")
    (tmp_path / "noport.cfg").write_text("tickTime=2000\n")
    subs = {"CFG": str(tmp_path / "zoo.cfg"), "MISSING": str(tmp_path / "missing.cfg"),
            "NOPORT": str(tmp_path / "noport.cfg")}
    before = sorted(tmp_path.rglob("*"))
    data = tmp_path / "data"
    result = CliRunner().invoke(zookeeper, [*(subs.get(a, a) for a in args), "--dir", str(data), "--port", "0"])
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], result.output
    assert sorted(tmp_path.rglob("*")) == before
