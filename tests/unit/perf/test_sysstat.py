"""The CPU accounting of perf/sysstat.py: /proc parsing on canned text, group accounting over
fake snapshots (a reaped client, a server's child, a process that started in the window), and
one real window over real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from odradek.perf.sysstat import (
    CLIENTS,
    OTHERS,
    CpuTimes,
    Memory,
    PidStat,
    Snapshot,
    UsageWindow,
    format_usage,
    measured_groups,
    parse_cpu_times,
    parse_loadavg,
    parse_pid_stat,
    parse_schedstat,
    parse_status_memory,
    process_cpu_ns,
    process_cpu_seconds,
    tree_memory,
    usage_between,
    usage_cells,
)
from support.waiting import wait_until

TICK = os.sysconf("SC_CLK_TCK")

# stat(5): pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
# utime stime cutime cstime priority ...
PID_STAT = ("4242 (odd (name) here) S 17 4242 4242 0 -1 4194560 900 3 0 0 "
            "120 30 7 2 20 0 3 0 56286 3133440 382 18446744073709551615 0 0\n")

PROC_STAT = """cpu  69202 10 11566 28290 1134 5 378 1783 40 0
cpu0 31279 5 5023 18777 159 0 87 872 20 0
cpu1 37923 5 6542 9513 974 5 291 911 20 0
intr 1234 0 0
ctxt 99999
"""


def test_pid_stat_takes_ppid_and_all_four_cpu_times_past_a_command_with_parentheses() -> None:
    assert parse_pid_stat(PID_STAT) == PidStat(4242, 17, 120 + 30 + 7 + 2, reaped_ticks=7 + 2)


def test_cpu_line_splits_busy_idle_and_steal_and_counts_cpus() -> None:
    cpu = parse_cpu_times(PROC_STAT)
    assert cpu == CpuTimes(busy=69202 + 10 + 11566 + 5 + 378, idle=28290 + 1134, steal=1783, cpus=2)


def test_cpu_line_of_an_old_kernel_without_steal_column() -> None:
    assert parse_cpu_times("cpu  10 0 5 100 1\ncpu0 10 0 5 100 1\n") == CpuTimes(15, 101, 0, 1)


def test_proc_stat_without_cpu_line_is_an_error() -> None:
    with pytest.raises(ValueError):
        parse_cpu_times("intr 1\n")


def test_loadavg_is_the_one_minute_figure() -> None:
    assert parse_loadavg("3.80 3.92 2.05 9/148 13923\n") == 3.80


def _snapshot(at: float, ticks: dict[int, tuple[int, int]], busy: int, steal: int, load: float,
              waited: dict[int, int] | None = None) -> Snapshot:
    """``ticks``: pid -> (ppid, ticks); ``waited``: pid -> run-queue wait so far (ns)."""
    waited = waited or {}
    return Snapshot(at, {pid: PidStat(pid, ppid, t, waited.get(pid, 0)) for pid, (ppid, t) in ticks.items()},
                    CpuTimes(busy, 0, steal, 2), load)


def test_groups_clients_and_others_over_a_window() -> None:
    # 100 is the benchmark (clients root): it started broker 200 (with a helper child 201),
    # ZooKeeper 300, an idle server 500, and clients 400 (with child 401) and, in the window, 450.
    before = _snapshot(10.0, {1: (0, 0), 100: (1, 50), 200: (100, 1000), 201: (200, 10), 300: (100, 400),
                              400: (100, 30), 401: (400, 5), 500: (100, 70), 900: (1, 2000)},
                       busy=10_000, steal=0, load=1.0, waited={200: 5 * 10**9, 201: 10**9, 100: 10**8, 400: 10**9})
    # Client 400 exited; 100 reaped it, so 100's ticks now hold 400's and 401's final 60 + 10.
    after = _snapshot(12.0, {1: (0, 0), 100: (1, 50 + 20 + 60 + 10), 200: (100, 1200), 201: (200, 15),
                             300: (100, 410), 450: (100, 40), 500: (100, 72), 900: (1, 2100)},
                      busy=10_000 + 500, steal=8, load=2.5,
                      waited={200: 6 * 10**9, 201: 10**9 + 5 * 10**8, 100: 2 * 10**8, 450: 7 * 10**8})
    groups = {"brokers": [200], "zookeeper": [300], "other servers": [500]}
    usage = usage_between(before, after, groups, clients_root=100)
    assert usage.seconds == 2.0
    assert usage.cpu_s["brokers"] == pytest.approx((1200 + 15 - 1000 - 10) / TICK)
    assert usage.cpu_s["zookeeper"] == pytest.approx(10 / TICK)
    assert usage.cpu_s["other servers"] == pytest.approx(2 / TICK)
    # 100 itself 20, client 400 and its child 60 - 30 + 10 - 5, the new client 450 40.
    assert usage.cpu_s[CLIENTS] == pytest.approx((20 + 35 + 40) / TICK)
    assert usage.cpu_s[OTHERS] == pytest.approx((500 - 205 - 10 - 2 - 95) / TICK)
    # Run-queue waits of the processes alive at both ends: the exited 400 and the new 450 drop out.
    assert usage.waited_s["brokers"] == pytest.approx(1.5)
    assert usage.waited_s[CLIENTS] == pytest.approx(0.1)
    assert usage.waited_s["zookeeper"] == 0
    figures = usage.as_dict()
    assert figures["brokers_waited_s"] == pytest.approx(1.5)
    assert figures["other_servers_cpu_s"] == usage.cpu_s["other servers"]
    assert figures["machine_busy_cpus"] == pytest.approx(500 / TICK / 2.0)
    assert figures["steal_pct"] == pytest.approx(100 * 8 / TICK / (2.0 * 2))
    assert (figures["load_before"], figures["load_after"]) == (1.0, 2.5)


def test_a_group_read_by_cpu_time_clocks_counts_nanoseconds_and_its_reaped_childrens_ticks() -> None:
    def stat(pid: int, ticks: int, own_ns: int | None, reaped: int = 0) -> PidStat:
        return PidStat(pid, 100, ticks, reaped_ticks=reaped, own_ns=own_ns)

    def snap(at: float, *stats: PidStat) -> Snapshot:
        return Snapshot(at, {100: PidStat(100, 1, 0), **{s.pid: s for s in stats}}, CpuTimes(10_000, 0, 0, 2), 1.0)

    # Broker 200's clock ran 123.456789 ms, though its ticks moved by 12 (120 ms); it also reaped
    # a child of 3 ticks.  ZooKeeper 300 gained a child, 301, in the window: ticks alone.
    before = snap(1.0, stat(200, 500, 5_000_000_000, reaped=4), stat(300, 80, 1_000_000_000))
    after = snap(2.0, stat(200, 512 + 3, 5_123_456_789, reaped=7), stat(300, 85, 1_050_000_000),
                 PidStat(301, 300, 2, own_ns=20_000_000))
    usage = usage_between(before, after, {"brokers": [200], "zookeeper": [300]}, clients_root=100)
    assert usage.cpu_s["brokers"] == pytest.approx(0.123456789 + 3 / TICK)
    assert usage.cpu_s["zookeeper"] == pytest.approx((85 + 2 - 80) / TICK)
    # A process whose clock could not be read (it exited as the snapshot was taken): ticks.
    gone = snap(2.0, stat(200, 515, None, reaped=7), stat(300, 85, 1_050_000_000))
    assert usage_between(before, gone, {"brokers": [200]}, clients_root=100).cpu_s["brokers"] == pytest.approx(15 / TICK)


def test_measured_groups_put_every_other_server_together() -> None:
    servers = {"current": {"brokers": [1, 2], "zookeeper": [3]}, "baseline": {"brokers": [4], "zookeeper": [5]},
               "tansu": {"brokers": [6]}}
    assert measured_groups(servers, "baseline") == {"brokers": [4], "zookeeper": [5], "other servers": [1, 2, 3, 6]}


def test_usage_figures_read_as_cpu_seconds_per_second() -> None:
    figures = {"seconds": 2.0, "brokers_cpu_s": 1.5, "other_servers_cpu_s": 0.1, "clients_cpu_s": 0.5,
               "others_cpu_s": 1.0, "machine_busy_cpus": 1.55, "steal_pct": 2.25, "load_before": 1.0,
               "load_after": 3.0}
    assert usage_cells(figures) == ("0.75", "0.00", "0.05", "0.25", "0.50", "1.55", "2.2 %", "3.00", "", "")
    line = format_usage(figures)
    assert "brokers 1.50, other servers 0.10, clients 0.50, others 1.00" in line
    assert "load 1.00 -> 3.00" in line and "waited" not in line
    waits = {**figures, "brokers_waited_s": 0.8, "other_servers_waited_s": 0.0, "clients_waited_s": 0.3}
    assert usage_cells(waits)[-2:] == ("0.40", "0.15")
    assert "; waited for a CPU (s) brokers 0.80, clients 0.30; machine" in format_usage(waits)


def test_schedstat_gives_the_run_queue_wait() -> None:
    assert parse_schedstat("830412 67832 2\n") == 67832


BURN = "import sys, time\nt0 = time.process_time()\nwhile time.process_time() - t0 < float(sys.argv[1]): pass\n"


def test_a_real_window_counts_a_server_apart_from_a_reaped_client() -> None:
    # The server says when its interpreter is up, so the window holds its burn and not its start-up
    # (which a loaded machine stretches).
    server = subprocess.Popen([sys.executable, "-c", "import sys\nprint('up', flush=True)\nsys.stdin.readline()\n"
                               + BURN + "print('burnt', flush=True)\nsys.stdin.read()", "0.3"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert server.stdin is not None and server.stdout is not None
    try:
        assert server.stdout.readline() == "up\n"
        window = UsageWindow({"brokers": [server.pid]})
        server.stdin.write("go\n")
        server.stdin.flush()
        subprocess.run([sys.executable, "-c", BURN, "0.2"], check=True)  # a client, reaped by this process
        assert server.stdout.readline() == "burnt\n"
        usage = window.stop()
    finally:
        server.communicate("")
    # The server's CPU is not a client's, though this process is its parent; the client's is
    # counted although it exited (in this process's reaped-children time).
    assert 0.29 <= usage.cpu_s["brokers"] < 0.4
    assert 0.19 <= usage.cpu_s[CLIENTS] < 0.2 + 0.3


def test_process_cpu_seconds_counts_this_process_own_cpu() -> None:
    before = process_cpu_seconds(os.getpid())
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:
        pass
    assert process_cpu_seconds(os.getpid()) - before >= 0.03


def test_a_process_cpu_clock_keeps_the_time_of_a_thread_that_exited() -> None:
    # The thread burns 0.2 s and ends; the clock, read after, still holds it (schedstat of the
    # live threads would not), to better than a 10-ms tick.
    burn = ("import threading, time\n"
            "def burn():\n    t0 = time.thread_time()\n    while time.thread_time() - t0 < 0.2: pass\n"
            "t = threading.Thread(target=burn); t.start(); t.join()\n"
            "print(time.process_time_ns(), flush=True)\ninput()\n")
    child = subprocess.Popen([sys.executable, "-c", burn], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        own = int(child.stdout.readline())  # what the process itself reads, after the thread ended
        # join() returns as the thread lets go of Python, a moment before the kernel ends it.
        wait_until(lambda: len(os.listdir(f"/proc/{child.pid}/task")) == 1, timeout=30,
                   message="the burning thread did not end")
        ns = process_cpu_ns(child.pid)
        assert ns is not None and own >= 0.2e9 and own <= ns < own + 5_000_000
    finally:
        child.communicate("\n")
    assert process_cpu_ns(child.pid) is None


STATUS = """Name:\tjava
State:\tS (sleeping)
VmPeak:\t 5000000 kB
VmHWM:\t  204800 kB
VmRSS:\t  102400 kB
Threads:\t80
"""


def test_status_gives_resident_memory_now_and_at_its_peak_in_bytes() -> None:
    assert parse_status_memory(STATUS) == Memory(102400 * 1024, 204800 * 1024)
    assert parse_status_memory("Name:\tzombie\nState:\tZ (zombie)\n") == Memory(0, 0)


def test_a_tree_s_memory_adds_up_its_children() -> None:
    # A parent holding ~64 MB, whose child holds ~64 MB more: the parent's tree counts both.
    hold = "import sys\nb = bytearray(64 << 20)\nsys.stdout.write('ready\\n'); sys.stdout.flush(); sys.stdin.readline()\n"
    parent = subprocess.Popen([sys.executable, "-c", "import subprocess, sys\n"
                               f"c = subprocess.Popen([sys.executable, '-c', {hold!r}], stdin=sys.stdin)\n" + hold],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        # Both write "ready" to the same pipe (the child inherits it) once they hold their memory.
        assert parent.stdout is not None and [parent.stdout.readline() for _ in range(2)] == ["ready\n"] * 2
        wait_until(lambda: len(_children(parent.pid)) == 1, timeout=30, message="the child is not the parent's")
        alone = parse_status_memory(Path(f"/proc/{parent.pid}/status").read_text())
        tree = tree_memory([parent.pid])
        assert tree.rss > alone.rss + (60 << 20)
        assert tree.peak >= tree.rss
    finally:
        parent.kill()
        parent.wait()


def _children(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
