"""``odradek console`` as a child process of a local cluster's command (``odradek up``, the
demo) or of a test: started on a free port against the cluster's bootstrap servers (logged in
as its admin on a secured cluster, its brokers' metrics URLs given), ready once it answers HTTP."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from odradek.local.child_process import ChildProcess
from odradek.local.cluster import ADMIN_PROPERTIES, LocalCluster
from odradek.local.zookeeper import free_port

__all__ = ["ConsoleProcess"]


class ConsoleProcess(ChildProcess):
    """One console process; ``url`` is where a browser opens it."""

    def __init__(self, bootstrap: str, *, command_config: str | Path | None = None, metrics: list[str] | None = None,
                 port: int | None = None, log_path: Path | None = None) -> None:
        self.bootstrap = bootstrap
        self.command_config = command_config
        self.metrics = metrics or []
        self.port = port or free_port()
        self.log_path = log_path
        self.process = None

    @classmethod
    def for_cluster(cls, cluster: LocalCluster, port: int | None = None) -> ConsoleProcess:
        """A console for a started LocalCluster: its admin's --command-config if secured, its
        brokers' metrics if they serve them; its log beside the cluster's."""
        metrics = [cluster.metrics_url(b) for b in cluster.brokers.values() if b.metrics_port is not None]
        config = cluster.dir / ADMIN_PROPERTIES if cluster.security is not None else None
        return cls(cluster.bootstrap_servers, command_config=config, metrics=metrics, port=port,
                   log_path=cluster.dir / "console.log")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def command(self) -> list[str]:
        argv = [sys.executable, "-m", "odradek", "console", "--bootstrap-server", self.bootstrap,
                "--port", str(self.port)]
        if self.command_config is not None:
            argv += ["--command-config", str(self.command_config)]
        if self.metrics:
            argv += ["--metrics", ",".join(self.metrics)]
        return argv

    def start(self, timeout_s: float = 30.0) -> None:
        """Start the console and wait until its first page answers."""
        out = open(self.log_path, "ab") if self.log_path is not None else subprocess.DEVNULL  # noqa: SIM115
        try:
            self.process = subprocess.Popen(self.command, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL)
        finally:
            if self.log_path is not None:
                out.close()  # type: ignore[union-attr]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.alive:
                raise RuntimeError(f"the console exited with status {self.process.returncode}"
                                   + (f" (see {self.log_path})" if self.log_path else ""))
            try:
                with urllib.request.urlopen(self.url + "cluster?fragment=1", timeout=5):
                    return
            except (urllib.error.URLError, OSError):
                time.sleep(0.2)
        self.stop()
        raise TimeoutError(f"the console did not answer on {self.url} within {timeout_s:.0f}s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
