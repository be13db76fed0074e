"""Embedded ZooKeeper: ZooKeeper's own server (standalone, or one member of an ensemble) run
with the machine's Java.

The jars come from the ``pyspark`` wheel (which ships ZooKeeper and what it needs), then
``$ZOOKEEPER_HOME``, then Debian's ``zookeeper`` package.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from odradek.config import parse_properties
from odradek.local.child_process import ChildProcess

__all__ = ["EmbeddedZooKeeper", "QuorumServer", "ZooKeeperError", "find_java", "find_zookeeper_classpath",
           "four_letter", "free_port", "read_client_address", "server_mode"]

# What ZooKeeper 3.9's server needs beyond its own two jars (NIO connection factory; netty
# is there because ZooKeeper links against it, snappy for snapshot names, metrics-core for
# its metrics provider, log4j to write a log).
_SUPPORT_JAR_PREFIXES = (
    "slf4j-api-", "audience-annotations-", "metrics-core-", "snappy-java-",
    "log4j-slf4j2-impl-", "log4j-api-", "log4j-core-", "commons-io-", "commons-cli-",
)
_NETTY_PREFIXES = (
    "netty-handler-", "netty-common-", "netty-transport-", "netty-buffer-", "netty-codec-",
    "netty-resolver-",
)


class ZooKeeperError(RuntimeError):
    """The embedded ZooKeeper could not be started."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def find_java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise ZooKeeperError(
            "java not found: the embedded ZooKeeper needs a Java runtime (17 or newer) on PATH "
            "or in JAVA_HOME"
        )
    return java


def _pyspark_jars() -> Path | None:
    try:
        import importlib.util

        spec = importlib.util.find_spec("pyspark")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    jars = Path(next(iter(spec.submodule_search_locations))) / "jars"
    return jars if jars.is_dir() else None


def _pick(jar_dir: Path) -> list[Path] | None:
    jars = sorted(jar_dir.glob("*.jar"))
    core = [j for j in jars if j.name.startswith("zookeeper-") and "test" not in j.name]
    if not any(j.name.startswith("zookeeper-jute") for j in core):
        return None
    support = [j for j in jars if j.name.startswith(_SUPPORT_JAR_PREFIXES)]
    netty = [
        j for j in jars
        if j.name.startswith(_NETTY_PREFIXES)
        and not any(tag in j.name for tag in ("osx", "windows", "aarch", "riscv", "http", "dns", "socks"))
    ]
    return core + support + netty


def find_zookeeper_classpath() -> list[Path]:
    """The jars to run ZooKeeper's server with."""
    candidates: list[Path] = []
    jars = _pyspark_jars()
    if jars is not None:
        candidates.append(jars)
    zk_home = os.environ.get("ZOOKEEPER_HOME")
    if zk_home:
        candidates += [Path(zk_home) / "lib", Path(zk_home)]
    candidates += [Path("/usr/share/zookeeper/lib"), Path("/usr/share/java")]
    for directory in candidates:
        if directory.is_dir():
            picked = _pick(directory)
            if picked:
                return picked
    raise ZooKeeperError(
        "ZooKeeper's jars not found: install pyspark (pip install pyspark), set ZOOKEEPER_HOME, "
        "or install Debian's zookeeper package"
    )


_LOG4J2 = """\
status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c{{1}})%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
"""

# What srvr answers with "Mode: ..." once the member serves clients; a quorum member that has
# not joined a quorum answers "This ZooKeeper instance is not currently serving requests".
SERVING_MODES = ("standalone", "leader", "follower", "observer")


@dataclass(frozen=True, slots=True)
class QuorumServer:
    """One ``server.N`` line of an ensemble: where member N talks to its peers."""

    host: str
    peer_port: int
    election_port: int

    @classmethod
    def parse(cls, text: str) -> QuorumServer:
        """``host:peerPort:electionPort``; ValueError naming the entry otherwise."""
        parts = text.strip().split(":")
        if len(parts) != 3 or not parts[0]:
            raise ValueError(f"ensemble member {text!r} is not host:peerPort:electionPort")
        try:
            peer, election = int(parts[1]), int(parts[2])
        except ValueError:
            raise ValueError(f"ensemble member {text!r}: the ports must be integers") from None
        if not (0 < peer < 65536 and 0 < election < 65536):
            raise ValueError(f"ensemble member {text!r}: ports must be in 1..65535")
        return cls(parts[0], peer, election)

    def __str__(self) -> str:
        return f"{self.host}:{self.peer_port}:{self.election_port}"


def read_client_address(config: Path) -> tuple[str, int]:
    """The (clientPortAddress, clientPort) a zoo.cfg serves clients on (host defaults to
    127.0.0.1 when the file leaves it to every interface); ValueError if it names no clientPort."""
    props = parse_properties(config.read_text(encoding="utf-8"))  # zoo.cfg is a Java properties file
    if "clientPort" not in props:
        raise ValueError(f"{config} sets no clientPort")
    try:
        port = int(props["clientPort"])
    except ValueError:
        raise ValueError(f"{config}: clientPort {props['clientPort']!r} is not an integer") from None
    host = props.get("clientPortAddress") or "127.0.0.1"
    return ("127.0.0.1" if host in ("0.0.0.0", "::") else host), port


def four_letter(host: str, port: int, command: str) -> str | None:
    """A ZooKeeper server's answer to a four-letter command (``srvr``, ``cons``...), None if unreachable."""
    try:
        with socket.create_connection((host, port), timeout=1) as s:
            s.sendall(command.encode())
            reply = b""
            while chunk := s.recv(4096):
                reply += chunk
    except OSError:
        return None
    return reply.decode(errors="replace")


def server_mode(host: str, port: int) -> str | None:
    """What ``srvr`` says the server is (standalone, leader, follower, observer), None when it
    does not serve (down, or a member outside a quorum)."""
    for line in (four_letter(host, port, "srvr") or "").splitlines():
        if line.startswith("Mode:"):
            mode = line.partition(":")[2].strip()
            return mode if mode in SERVING_MODES else None
    return None


class EmbeddedZooKeeper(ChildProcess):
    """ZooKeeper's own server in a child JVM, serving ``host:port`` from ``data_dir``.

    Standalone by default. With ``server_id`` and ``servers`` (``host:peerPort:electionPort``
    for members 1..N, in id order) it is member ``server_id`` of an ensemble: zoo.cfg gets the
    ``server.N`` lines, ``data/myid`` the id, and it serves only once a majority has formed a
    quorum. With ``config`` it runs that zoo.cfg as it is (and serves where it says).
    ``command_prefix`` is put before the JVM's argv (e.g. ``ip netns exec NS``); readiness is
    still probed from this process."""

    def __init__(self, data_dir: str | os.PathLike[str], port: int = 0, host: str = "127.0.0.1",
                 *, server_id: int | None = None, servers: Sequence[str] = (),
                 config: str | os.PathLike[str] | None = None, command_prefix: Sequence[str] = (),
                 tick_time_ms: int = 500, init_limit: int = 10, sync_limit: int = 5,
                 min_session_timeout_ms: int = 1000, max_session_timeout_ms: int = 60000,
                 heap_mb: int | None = None) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.servers = [QuorumServer.parse(s) for s in servers]
        if server_id is not None and not 1 <= server_id <= len(self.servers):
            raise ValueError(f"server id {server_id} is not in 1..{len(self.servers)} "
                             f"(the ensemble lists {len(self.servers)} members)")
        if self.servers and server_id is None:
            raise ValueError("an ensemble member needs its server id")
        self.server_id = server_id
        self.config = Path(config).resolve() if config is not None else None
        if self.config is not None:
            if self.servers:
                raise ValueError("a given zoo.cfg already lists the ensemble: give it or the servers, not both")
            self.host, self.port = read_client_address(self.config)
        else:
            self.host = host
            self.port = port or free_port(host)
        self.command_prefix = list(command_prefix)
        self.tick_time_ms = tick_time_ms
        self.init_limit = init_limit
        self.sync_limit = sync_limit
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        # Members of a local ensemble share one machine: a smaller heap each.
        self.heap_mb = heap_mb if heap_mb is not None else (256 if self.quorum else 512)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def quorum(self) -> bool:
        """A member of an ensemble (or a given zoo.cfg, which may describe one)."""
        return bool(self.servers) or self.config is not None

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def config_path(self) -> Path:
        return self.config if self.config is not None else self.data_dir / "zoo.cfg"

    def command(self) -> list[str]:
        """The JVM's argv (without ``command_prefix``)."""
        java = find_java()
        classpath = os.pathsep.join(str(j) for j in find_zookeeper_classpath())
        main = ("org.apache.zookeeper.server.quorum.QuorumPeerMain" if self.quorum
                else "org.apache.zookeeper.server.ZooKeeperServerMain")
        return [
            java, f"-Xmx{self.heap_mb}m", "-Xss1m", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
            "-Dzookeeper.admin.enableServer=false",
            "-Dzookeeper.4lw.commands.whitelist=*",
            "-cp", classpath,
            main, str(self.config_path),
        ]

    def config_text(self) -> str:
        """The zoo.cfg this server writes (standalone or ensemble member)."""
        lines = [
            f"tickTime={self.tick_time_ms}",
            f"dataDir={self.data_dir / 'data'}",
            f"clientPort={self.port}",
            f"clientPortAddress={self.host}",
            f"minSessionTimeout={self.min_session_timeout_ms}",
            f"maxSessionTimeout={self.max_session_timeout_ms}",
            "maxClientCnxns=0",
            "autopurge.snapRetainCount=3",
            "autopurge.purgeInterval=1",
        ]
        if self.servers:
            lines += [f"initLimit={self.init_limit}", f"syncLimit={self.sync_limit}"]
            lines += [f"server.{n}={s}" for n, s in enumerate(self.servers, 1)]
        return "".join(line + "\n" for line in lines)

    def write_config(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.config is None:
            data = self.data_dir / "data"
            data.mkdir(parents=True, exist_ok=True)
            (self.data_dir / "zoo.cfg").write_text(self.config_text())
            if self.server_id is not None:
                (data / "myid").write_text(f"{self.server_id}\n")
        (self.data_dir / "log4j2.properties").write_text(
            _LOG4J2.format(log=self.data_dir / "zookeeper.log"))

    def start(self, timeout_s: float = 60.0, *, wait_for_quorum: bool = True) -> None:
        """Start the JVM; with ``wait_for_quorum`` wait until it serves clients (an ensemble
        member serves only once a majority of the members is up, so start them all first)."""
        if self.alive:
            raise ZooKeeperError(f"ZooKeeper {self.connect_string} is already running (pid {self.pid})")
        self.write_config()
        out = open(self.data_dir / "zookeeper.out", "ab")  # noqa: SIM115 - owned by the child
        try:
            self.process = subprocess.Popen(
                [*self.command_prefix, *self.command()], stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )
        finally:
            out.close()
        if wait_for_quorum:
            self.wait_serving(timeout_s)

    def wait_serving(self, timeout_s: float = 60.0) -> None:
        """Wait until the server serves clients; ZooKeeperError if it exits or times out (the
        JVM is stopped then)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.check_alive()
            if self.serving():
                return
            time.sleep(0.1)
        self.stop()
        what = "join a quorum" if self.quorum else "start serving"
        raise ZooKeeperError(f"ZooKeeper did not {what} on {self.connect_string} in {timeout_s:.0f}s "
                             f"(logs in {self.data_dir})")

    def check_alive(self) -> None:
        """ZooKeeperError with the last line of its output if the JVM has exited."""
        if self.process is not None and self.process.poll() is not None:
            out = self.data_dir / "zookeeper.out"
            tail = out.read_text(errors="replace")[-2000:].strip() if out.exists() else ""
            raise ZooKeeperError(
                f"ZooKeeper exited with code {self.process.returncode} "
                f"(logs in {self.data_dir}): {tail.splitlines()[-1] if tail else ''}"
            )

    def mode(self) -> str | None:
        """What ``srvr`` says this server is; None when it does not serve."""
        return server_mode(self.host, self.port)

    def session_ids(self) -> set[int]:
        """The sessions connected to this server now (``cons``)."""
        return {int(sid, 16) for sid in re.findall(r"sid=0x([0-9a-fA-F]+)",
                                               four_letter(self.host, self.port, "cons") or "")}

    def serving(self) -> bool:
        """True when the server accepts sessions: standalone, or a member of a quorum."""
        return self.mode() is not None

    def kill(self) -> None:
        """SIGKILL, as a crash: no clean shutdown."""
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def stop(self, timeout_s: float = 10.0) -> None:
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def __enter__(self) -> EmbeddedZooKeeper:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
