"""Kafka Connect's long-running JVM processes for the Connect and MirrorMaker 2 suites: a
distributed worker (``ConnectDistributed``, as ``bin/connect-distributed.sh`` starts it) or
MirrorMaker 2's own driver, each with its properties file, its log in the suite's scratch
directory, and (for a worker) its REST API.

Everything runs from Kafka 3.9's jars (``jvm/kafka-3.9-tools``: connect-runtime, connect-file,
connect-mirror).  A worker's log is INFO and up, kept whole for the post-mortem; a failure's
cause quotes its last ERROR line.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from compat.context import SuiteContext
from compat.kafka_tools import PROJECT
from odradek.local.zookeeper import free_port
from odradek.perf.kafka_ref import jvm_classpath

__all__ = ["CONNECT_DISTRIBUTED", "JvmService", "Worker", "await_value"]

CONNECT_DISTRIBUTED = "org.apache.kafka.connect.cli.ConnectDistributed"
# bin/connect-distributed.sh's heap (-Xms256M -Xmx2G), halved: two workers and three brokers
# share a small machine; the C1 compiler only, as a worker starts in half the time with it there.
HEAP = ("-Xms128M", "-Xmx1G", "-XX:TieredStopAtLevel=1")

# Kafka's config/connect-log4j.properties, to a file: INFO and up, the chatty client internals
# at WARN.
_LOG4J = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c:%L)%n
log4j.logger.org.apache.kafka.clients.consumer.ConsumerConfig=WARN
log4j.logger.org.apache.kafka.clients.producer.ProducerConfig=WARN
log4j.logger.org.apache.kafka.clients.admin.AdminClientConfig=WARN
log4j.logger.org.reflections=ERROR
"""

T = TypeVar("T")


def await_value(probe: Callable[[], T | None], what: str, timeout_s: float, interval_s: float = 0.5) -> T:
    """The first value of ``probe`` that is not None (an exception counts as None); an
    AssertionError naming ``what`` and the last exception when ``timeout_s`` runs out."""
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while True:
        try:
            if (value := probe()) is not None:
                return value
        except Exception as e:  # a worker still starting refuses connections
            last = e
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} after {timeout_s:.0f} s" + (f" (last: {last})" if last else ""))
        time.sleep(interval_s)


class JvmService:
    """One Java process that runs until stopped, its stdout and log4j output in ``name.log``."""

    def __init__(self, ctx: SuiteContext, name: str, main: str, args: Sequence[str],
                 heap: Sequence[str] = HEAP) -> None:
        self.ctx = ctx
        self.name = name
        self.log = ctx.path(f"{name}.log")
        log4j = ctx.path(f"{name}-log4j.properties")
        log4j.write_text(_LOG4J.format(log=self.log))
        argv = ctx.jvm.command(main, args, jvm_classpath(PROJECT), heap)
        self.argv = [f"-Dlog4j.configuration=file:{log4j}" if a.startswith("-Dlog4j.configuration=") else a
                     for a in argv]
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        assert not self.alive, f"{self.name} is running"
        self.starts += 1
        with self.log.open("ab") as out:
            out.write(f"=== start {self.starts}: {' '.join(self.argv)}\n".encode())
            out.flush()
            self.process = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out,
                                            stderr=subprocess.STDOUT, cwd=self.ctx.workdir)

    def kill(self) -> None:
        """SIGKILL: no shutdown hook runs, nothing is flushed or committed."""
        if self.alive:
            assert self.process is not None
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self, timeout_s: float = 60.0) -> None:
        """SIGTERM (the shutdown hook stops tasks and commits), SIGKILL after ``timeout_s``."""
        if not self.alive:
            return
        assert self.process is not None
        self.process.terminate()
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()

    def errors(self, limit: int = 3) -> str:
        """The last ERROR lines of its log (for a failure's cause)."""
        if not self.log.exists():
            return ""
        lines = [line for line in self.log.read_text(errors="replace").splitlines() if "] ERROR " in line]
        return " | ".join(line[:300] for line in lines[-limit:])


class Worker(JvmService):
    """A distributed Connect worker of group ``group`` on its own REST port."""

    def __init__(self, ctx: SuiteContext, name: str, properties: Mapping[str, str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {**properties, "listeners": self.url, "rest.advertised.host.name": "127.0.0.1",
                  "rest.advertised.port": str(self.port)}
        path = ctx.path(f"{name}.properties")
        path.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
        super().__init__(ctx, name, CONNECT_DISTRIBUTED, [str(path)])

    @property
    def worker_id(self) -> str:
        """How the REST API names this worker in a status."""
        return f"127.0.0.1:{self.port}"

    def rest(self, method: str, path: str, body: object = None, timeout_s: float = 30.0) -> Any:
        """One REST call; its JSON answer (None for an empty one); HTTP errors raise
        AssertionError with Connect's message."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as answer:
                text = answer.read().decode()
        except urllib.error.HTTPError as e:
            raise AssertionError(f"{method} {path} on {self.name}: HTTP {e.code} {e.read().decode()[:400]}") from e
        return json.loads(text) if text else None

    def await_ready(self, timeout_s: float = 300.0) -> None:
        """Until its REST API answers and it has joined the group (GET /connectors needs that)."""
        def ready() -> bool | None:
            if not self.alive:
                raise AssertionError(f"{self.name} exited: {self.errors()}")
            self.rest("GET", "/connectors", timeout_s=10)
            return True
        try:
            await_value(ready, f"{self.name} ready", timeout_s)
        except AssertionError as e:
            raise AssertionError(f"{e}; {self.errors()}") from None

    def status(self, connector: str) -> dict[str, Any]:
        return self.rest("GET", f"/connectors/{connector}/status")  # type: ignore[no-any-return]
