"""Where a benchmark's CPU went (issue 26): CPU-seconds of each group of processes (brokers,
ZooKeeper, other servers, the clients), how long their threads waited for a CPU while they
could have run, the whole machine's busy and steal time, and the load average, over one
measured window; and how much memory a server holds (``tree_memory``).  On a shared machine a latency difference between two runs
is often explained by these, not by the code under test.

Read from ``/proc``: ``<pid>/stat`` of every process (its own utime + stime, and cutime +
cstime of the children it has reaped), each process's CPU-time clock (the run time of every
thread it has had, exited ones too, in ns: a server's CPU to the nanosecond, where ``stat``
rounds down to 10-ms ticks), ``<pid>/task/<tid>/schedstat`` (each thread's time
spent runnable on a run queue, not running: the scheduler's delay, which on a machine with
more runnable threads than CPUs is where latency goes), ``stat``'s ``cpu`` line and
``loadavg``, and
``<pid>/status``'s VmRSS and VmHWM.  The parsing
and the accounting are pure functions over snapshots, tested on canned text; ``UsageWindow``
is the thin part that reads ``/proc``."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from odradek.local.cluster import LocalCluster

__all__ = [
    "CLIENTS",
    "OTHERS",
    "USAGE_HEAD",
    "CpuTimes",
    "Memory",
    "PidStat",
    "Snapshot",
    "Usage",
    "UsageWindow",
    "cluster_groups",
    "format_usage",
    "measured_groups",
    "parse_cpu_times",
    "parse_loadavg",
    "parse_pid_stat",
    "parse_schedstat",
    "parse_status_memory",
    "process_cpu_ns",
    "read_snapshot",
    "tree_memory",
    "usage_between",
    "usage_cells",
]

CLIENTS = "clients"  # the benchmark's own process and everything under it that is no server
OTHERS = "others"  # the rest of the machine: other users' work, kernel threads
_CLK_TCK = os.sysconf("SC_CLK_TCK")
_PROC = Path("/proc")


@dataclass(frozen=True, slots=True)
class PidStat:
    pid: int
    ppid: int
    ticks: int  # utime + stime + cutime + cstime: its own CPU and that of the children it reaped
    waited_ns: int = 0  # its live threads' time runnable but waiting for a CPU (schedstat)
    reaped_ticks: int = 0  # cutime + cstime alone
    own_ns: int | None = None  # its own CPU (every thread's, exited ones too) by its CPU-time clock


def parse_pid_stat(text: str) -> PidStat:
    """One ``/proc/<pid>/stat`` line (stat(5))."""
    # The command name, in parentheses, may hold spaces and parentheses: split after the last ")".
    pid = int(text[:text.index("(")])
    fields = text[text.rindex(")") + 2:].split()
    # fields[0] is stat(5)'s field 3 (state); ppid is field 4, utime..cstime fields 14-17.
    return PidStat(pid, int(fields[1]), sum(int(f) for f in fields[11:15]),
                   reaped_ticks=int(fields[13]) + int(fields[14]))


def parse_schedstat(text: str) -> int:
    """A thread's ``schedstat`` (the kernel's sched-stats.rst: ns on the CPU, ns waiting on a
    run queue, timeslices): the wait, in ns."""
    return int(text.split()[1])


def _threads_waited_ns(task_dir: Path) -> int:
    waited = 0
    try:
        tids = os.listdir(task_dir)
    except OSError:
        return 0
    for tid in tids:
        try:
            waited += parse_schedstat((task_dir / tid / "schedstat").read_text())
        except (OSError, ValueError, IndexError):
            continue  # exited while we looked, or a kernel without sched info
    return waited


def process_cpu_ns(pid: int) -> int | None:
    """The CPU time of every thread ``pid`` has had, live or exited, in ns, without the
    children it reaped (a broker's own CPU), from its CPU-time clock; None once it exited."""
    # Linux's id of another process's CPU-time clock, what glibc's clock_getcpuclockid(3)
    # returns: the pid's complement shifted past the clock's kind, CPUCLOCK_SCHED (2: run time).
    try:
        return time.clock_gettime_ns((~pid << 3) | 2)
    except OSError:
        return None


def process_cpu_seconds(pid: int) -> float:
    """:func:`process_cpu_ns` in seconds; raises ProcessLookupError once ``pid`` exited."""
    ns = process_cpu_ns(pid)
    if ns is None:
        raise ProcessLookupError(pid)
    return ns / 1e9


@dataclass(frozen=True, slots=True)
class CpuTimes:
    busy: int  # user + nice + system + irq + softirq (guest time is inside user)
    idle: int  # idle + iowait
    steal: int  # taken by the hypervisor for other guests
    cpus: int  # how many CPUs the line adds up


def parse_cpu_times(text: str) -> CpuTimes:
    """The all-CPU ``cpu`` line of ``/proc/stat``, in clock ticks (proc(5)), and the number
    of ``cpuN`` lines."""
    lines = text.splitlines()
    cpus = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    for line in lines:
        if line.startswith("cpu "):
            values = [int(v) for v in line.split()[1:]] + [0] * 8  # old kernels have fewer columns
            user, nice, system, idle, iowait, irq, softirq, steal = values[:8]
            return CpuTimes(user + nice + system + irq + softirq, idle + iowait, steal, cpus)
    raise ValueError("no cpu line in /proc/stat")


def parse_loadavg(text: str) -> float:
    """The one-minute load average from ``/proc/loadavg``."""
    return float(text.split()[0])


@dataclass(frozen=True, slots=True)
class Snapshot:
    at: float  # time.monotonic()
    processes: Mapping[int, PidStat]
    cpu: CpuTimes
    load: float


def read_snapshot(proc: Path = _PROC, waits: bool = True) -> Snapshot:
    """Every process's CPU so far (and with ``waits`` its threads' run-queue wait), the
    machine's CPU times and the load average, now."""
    processes = {}
    for entry in os.scandir(proc):
        if entry.name.isdigit():
            try:
                stat = parse_pid_stat((proc / entry.name / "stat").read_text(errors="replace"))
            except (OSError, ValueError, IndexError):
                continue  # exited while we looked
            waited = _threads_waited_ns(proc / entry.name / "task") if waits else 0
            own = process_cpu_ns(stat.pid) if proc == _PROC else None
            processes[stat.pid] = replace(stat, waited_ns=waited, own_ns=own)
    return Snapshot(time.monotonic(), processes, parse_cpu_times((proc / "stat").read_text()),
                    parse_loadavg((proc / "loadavg").read_text()))


def _subtree(processes: Mapping[int, PidStat], roots: Iterable[int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for stat in processes.values():
        children.setdefault(stat.ppid, []).append(stat.pid)
    found: set[int] = set()
    todo = [pid for pid in roots if pid in processes]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, ()))
    return found


def _members(snapshot: Snapshot, groups: Mapping[str, Iterable[int]], clients_root: int) -> dict[str, set[int]]:
    members = {name: _subtree(snapshot.processes, pids) for name, pids in groups.items()}
    servers = set().union(*members.values())
    members[CLIENTS] = _subtree(snapshot.processes, [clients_root]) - servers
    return members


@dataclass(frozen=True, slots=True)
class Usage:
    seconds: float
    cpu_s: Mapping[str, float]  # per group, then CLIENTS and OTHERS
    waited_s: Mapping[str, float]  # per group and CLIENTS: threads runnable, waiting for a CPU
    machine_busy_s: float  # every CPU together
    steal_s: float
    cpus: int
    load_before: float
    load_after: float

    def as_dict(self) -> dict[str, float]:
        """Flat figures for a results file: ``<group>_cpu_s`` per group, machine-wide busy CPUs
        (CPU-seconds per second), steal as a percentage of all CPU time, load averages."""
        return {"seconds": self.seconds, **{f"{name.replace(' ', '_')}_cpu_s": s for name, s in self.cpu_s.items()},
                **{f"{name.replace(' ', '_')}_waited_s": s for name, s in self.waited_s.items()},
                "machine_busy_cpus": self.machine_busy_s / self.seconds if self.seconds else 0.0,
                "steal_pct": self.steal_pct, "load_before": self.load_before, "load_after": self.load_after}

    @property
    def steal_pct(self) -> float:
        total = self.seconds * self.cpus
        return 100.0 * self.steal_s / total if total else 0.0


def usage_between(before: Snapshot, after: Snapshot, groups: Mapping[str, Iterable[int]],
                  clients_root: int) -> Usage:
    """CPU used between two snapshots by each group (the given pids and every process under
    them), by the clients (``clients_root`` and every process under it in no group), and by
    the rest of the machine.

    A process's ticks include the children it has reaped, so a client process that exited in
    the window still counts: once reaped, its CPU is in its parent's.  The group's root pids
    must outlive the window (a server reaped by the benchmark would count as a client).
    A group whose processes are the same at both ends, each with its CPU-time clock read,
    counts in ns (plus the ticks of any child one of them reaped): a server's CPU over a short
    window, where 10-ms ticks would weigh.

    The run-queue waits are of the processes alive at both ends (a reaped process's threads
    and a thread that exited in the window take theirs with them), so they are a lower bound."""
    groups = {name: list(pids) for name, pids in groups.items()}
    start, end = _members(before, groups, clients_root), _members(after, groups, clients_root)
    cpu_s, waited = {}, {}
    for name in start:
        cpu_s[name] = _group_cpu_s(before, after, start[name], end[name])
        both = start[name] & end[name]
        waited[name] = max(0, sum(after.processes[p].waited_ns - before.processes[p].waited_ns for p in both)) / 1e9
    busy_s = (after.cpu.busy - before.cpu.busy) / _CLK_TCK
    cpu_s[OTHERS] = max(0.0, busy_s - sum(cpu_s.values()))
    return Usage(after.at - before.at, cpu_s, waited, busy_s, (after.cpu.steal - before.cpu.steal) / _CLK_TCK,
                 after.cpu.cpus, before.load, after.load)


def _group_cpu_s(before: Snapshot, after: Snapshot, start: set[int], end: set[int]) -> float:
    was, now = before.processes, after.processes
    if start == end and all(was[p].own_ns is not None and now[p].own_ns is not None for p in start):
        own_ns = sum(now[p].own_ns - was[p].own_ns for p in start)  # type: ignore[operator]
        return own_ns / 1e9 + sum(now[p].reaped_ticks - was[p].reaped_ticks for p in start) / _CLK_TCK
    return (sum(now[p].ticks for p in end) - sum(was[p].ticks for p in start)) / _CLK_TCK


class UsageWindow:
    """A measured window: ``UsageWindow(groups)`` when it starts, ``stop()`` when it ends.

    ``groups`` names the server processes (``{"brokers": [...], "zookeeper": [...]}``); the
    clients are this process and everything under it that belongs to no group."""

    def __init__(self, groups: Mapping[str, Iterable[int]], clients_root: int | None = None) -> None:
        self.groups = {name: list(pids) for name, pids in groups.items()}
        self.clients_root = os.getpid() if clients_root is None else clients_root
        self.before = read_snapshot()

    def stop(self) -> Usage:
        return usage_between(self.before, read_snapshot(), self.groups, self.clients_root)


@dataclass(frozen=True, slots=True)
class Memory:
    rss: int  # bytes resident now
    peak: int  # bytes resident at the most, since the process started (VmHWM)

    def __add__(self, other: Memory) -> Memory:
        return Memory(self.rss + other.rss, self.peak + other.peak)


def parse_status_memory(text: str) -> Memory:
    """VmRSS and VmHWM of a ``/proc/<pid>/status`` (proc(5): in kB); zero for a zombie,
    which has neither line."""
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) * 1024
    return Memory(values.get("VmRSS", 0), values.get("VmHWM", 0))


def tree_memory(pids: Iterable[int], proc: Path = Path("/proc")) -> Memory:
    """The memory of ``pids`` and every process under them (an odradek broker's cleaner
    process is its child), added up.  The peaks are each process's own, so their sum is an
    upper bound of the tree's peak: the processes need not have peaked at once."""
    total = Memory(0, 0)
    for pid in _subtree(read_snapshot(proc, waits=False).processes, pids):
        try:
            total += parse_status_memory((proc / str(pid) / "status").read_text(errors="replace"))
        except OSError:
            continue  # exited while we looked
    return total


def cluster_groups(cluster: LocalCluster) -> dict[str, list[int]]:
    """A local cluster's broker and embedded ZooKeeper processes."""
    return {"brokers": [b.pid for b in cluster.brokers.values() if b.pid is not None],
            "zookeeper": [zk.pid for zk in cluster.zookeepers if zk.pid is not None]}


def measured_groups(servers: Mapping[str, Mapping[str, list[int]]], measured: str) -> dict[str, list[int]]:
    """The groups of server ``measured`` (of ``servers``: name -> its groups), and every other
    server's processes together as "other servers" (idle, but on the same CPUs)."""
    others = [pid for name, groups in servers.items() if name != measured for pids in groups.values() for pid in pids]
    return {**servers[measured], "other servers": others}


def format_usage(usage: Mapping[str, float]) -> str:
    """``Usage.as_dict()`` figures on one line: CPU-seconds of each group, the seconds their
    threads waited for a CPU, the machine's busy CPUs, steal, and the load average before and
    after."""
    groups = ", ".join(f"{key.removesuffix('_cpu_s').replace('_', ' ')} {s:.2f}"
                       for key, s in usage.items() if key.endswith("_cpu_s"))
    waited = ", ".join(f"{key.removesuffix('_waited_s').replace('_', ' ')} {s:.2f}"
                       for key, s in usage.items() if key.endswith("_waited_s") and not key.startswith("other_"))
    return (f"CPU-s {groups}; " + (f"waited for a CPU (s) {waited}; " if waited else "")
            + f"machine {usage['machine_busy_cpus']:.2f} CPUs busy, steal {usage['steal_pct']:.1f} %, "
            f"load {usage['load_before']:.2f} -> {usage['load_after']:.2f}")


USAGE_HEAD = ("brokers", "ZooKeeper", "other servers", "clients", "others", "machine", "steal", "load",
              "brokers waited", "clients waited")


def usage_cells(usage: Mapping[str, float]) -> tuple[str, ...]:
    """A row of ``Usage.as_dict()`` figures under ``USAGE_HEAD``: CPU-seconds per second of
    each group, of the machine, steal, the load average at the end, and the seconds per second
    the brokers' and the clients' threads waited for a CPU (blank when not measured)."""
    seconds = usage["seconds"] or 1.0
    per_s = [f"{usage.get(f'{key}_cpu_s', 0.0) / seconds:.2f}"
             for key in ("brokers", "zookeeper", "other_servers", CLIENTS, OTHERS)]
    waits = [f"{usage[f'{key}_waited_s'] / seconds:.2f}" if f"{key}_waited_s" in usage else ""
             for key in ("brokers", CLIENTS)]
    return (*per_s, f"{usage['machine_busy_cpus']:.2f}", f"{usage['steal_pct']:.1f} %", f"{usage['load_after']:.2f}",
            *waits)
