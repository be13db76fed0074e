"""Running Java programs as Kafka's scripts do: ``kafka-run-class.sh``'s JVM options, the
tools' log4j settings (warnings to stderr), output captured, and every run appended to the
suite's ``jvm.log`` (command, exit code, time, output) for the post-mortem."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from odradek.local.zookeeper import find_java
from odradek.perf.kafka_ref import PERFORMANCE_OPTS

__all__ = ["TOOL_HEAP", "Jvm", "JvmRun"]

# kafka-run-class.sh's KAFKA_HEAP_OPTS when a script sets none.
TOOL_HEAP = ("-Xmx256M",)

# Kafka's config/tools-log4j.properties: what a tool logs goes to stderr, from WARN up.
_TOOLS_LOG4J = """\
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.appender.stderr.Target=System.err
"""


@dataclass(frozen=True)
class JvmRun:
    """One finished (or timed-out) Java process."""

    argv: tuple[str, ...]
    returncode: int | None  # None: killed after its timeout
    stdout: str
    stderr: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def summary(self, limit: int = 400) -> str:
        """The exit status and the end of its output, for a failure's cause."""
        status = "timed out" if self.returncode is None else f"exit {self.returncode}"
        tail = " ".join(self.output.split())[-limit:]
        return f"{status}: {tail}" if tail else status


class Jvm:
    """Starts Java programs for one suite run; ``directory`` receives the log4j file and jvm.log."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.log4j = directory / "tools-log4j.properties"
        self.log4j.write_text(_TOOLS_LOG4J)
        self.log = directory / "jvm.log"

    def command(self, main: str, args: Sequence[str], classpath: Sequence[Path],
                heap: Sequence[str] = TOOL_HEAP) -> list[str]:
        """kafka-run-class.sh's java command line for ``main``."""
        return [find_java(), *heap, *PERFORMANCE_OPTS, f"-Dlog4j.configuration=file:{self.log4j}",
                "-cp", os.pathsep.join(str(j) for j in classpath), main, *args]

    def run(self, main: str, args: Sequence[str], *, classpath: Sequence[Path], heap: Sequence[str] = TOOL_HEAP,
            input: str | None = None, timeout: float = 120.0, cwd: Path | None = None) -> JvmRun:
        """Run ``main`` to its end (killed after ``timeout`` seconds) and return what it did."""
        argv = self.command(main, args, classpath, heap)
        start = time.monotonic()
        process = subprocess.Popen(argv, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   cwd=cwd or self.directory)
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
            returncode: int | None = process.returncode
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
            returncode = None
        run = JvmRun(tuple(argv), returncode, stdout, stderr, time.monotonic() - start)
        self._record(main, args, run)
        return run

    def _record(self, main: str, args: Sequence[str], run: JvmRun) -> None:
        with self.log.open("a") as log:
            log.write(f"=== {main} {' '.join(args)}\n--- {run.summary(0)} in {run.seconds:.1f} s\n")
            if run.stdout:
                log.write(f"--- stdout\n{run.stdout}\n")
            if run.stderr:
                log.write(f"--- stderr\n{run.stderr}\n")
