"""Embedded ZooKeeper: ZooKeeper's own server (standalone mode) run with the machine's Java.

The jars come from the ``pyspark`` wheel (which ships ZooKeeper and what it needs), then
``$ZOOKEEPER_HOME``, then Debian's ``zookeeper`` package.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

__all__ = ["EmbeddedZooKeeper", "ZooKeeperError", "find_java", "find_zookeeper_classpath", "free_port"]

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


class EmbeddedZooKeeper:
    """A standalone ZooKeeper server in a child JVM, serving ``host:port`` from ``data_dir``."""

    def __init__(self, data_dir: str | os.PathLike[str], port: int = 0, host: str = "127.0.0.1",
                 *, tick_time_ms: int = 500, min_session_timeout_ms: int = 1000,
                 max_session_timeout_ms: int = 60000, heap_mb: int = 512) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.host = host
        self.port = port or free_port(host)
        self.tick_time_ms = tick_time_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.heap_mb = heap_mb
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        java = find_java()
        classpath = os.pathsep.join(str(j) for j in find_zookeeper_classpath())
        return [
            java, f"-Xmx{self.heap_mb}m", "-Xss1m", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
            "-Dzookeeper.admin.enableServer=false",
            "-Dzookeeper.4lw.commands.whitelist=*",
            "-cp", classpath,
            "org.apache.zookeeper.server.ZooKeeperServerMain", str(self.data_dir / "zoo.cfg"),
        ]

    def write_config(self) -> None:
        data = self.data_dir / "data"
        data.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "zoo.cfg").write_text(
            f"tickTime={self.tick_time_ms}\n"
            f"dataDir={data}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={self.host}\n"
            f"minSessionTimeout={self.min_session_timeout_ms}\n"
            f"maxSessionTimeout={self.max_session_timeout_ms}\n"
            "maxClientCnxns=0\n"
            "autopurge.snapRetainCount=3\n"
            "autopurge.purgeInterval=1\n"
        )
        (self.data_dir / "log4j2.properties").write_text(
            _LOG4J2.format(log=self.data_dir / "zookeeper.log"))

    def start(self, timeout_s: float = 60.0) -> None:
        """Start the JVM and wait until ZooKeeper answers ``ruok``."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.write_config()
        out = open(self.data_dir / "zookeeper.out", "ab")  # noqa: SIM115 - owned by the child
        try:
            self.process = subprocess.Popen(
                self.command(), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            out.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = (self.data_dir / "zookeeper.out").read_text(errors="replace")[-2000:]
                raise ZooKeeperError(
                    f"ZooKeeper exited with code {self.process.returncode} while starting "
                    f"(logs in {self.data_dir}): {tail.strip().splitlines()[-1] if tail.strip() else ''}"
                )
            if self.serving():
                return
            time.sleep(0.1)
        self.stop()
        raise ZooKeeperError(f"ZooKeeper did not start serving on {self.connect_string} in {timeout_s:.0f}s")

    def serving(self) -> bool:
        """True when the server answers ``ruok`` with ``imok`` and accepts sessions."""
        try:
            with socket.create_connection((self.host, self.port), timeout=1) as s:
                s.sendall(b"srvr")
                reply = s.recv(4096)
            return b"Mode:" in reply
        except OSError:
            return False

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
