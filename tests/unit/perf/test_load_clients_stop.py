"""run_clients stopped by SIGTERM (unwind_on_sigterm) stops its client processes with it,
instead of leaving the program's exit to wait for them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from support import wait_until

PROGRAM = """
import sys
from odradek.perf.harness import unwind_on_sigterm
from odradek.perf.load import run_clients
unwind_on_sigterm()
print("ready", flush=True)
# Nothing listens on port 1: the producers keep trying for the whole phase.
run_clients("127.0.0.1:1", {"brokers": []}, "t", 2, 300.0, producer={"linger.ms": 0})
"""


def _clients(pid: int) -> set[int]:
    """The processes ``pid`` started with multiprocessing's spawn (not its resource tracker)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                command = (entry / "cmdline").read_bytes()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if parent == pid and b"spawn_main" in command:
                found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _threads(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except FileNotFoundError:
        return 0


def _two_or_none(pids: set[int]) -> set[int] | None:
    return pids if len(pids) == 2 else None


def test_sigterm_during_a_phase_stops_the_clients_and_the_program_promptly() -> None:
    program = subprocess.Popen([sys.executable, "-c", PROGRAM], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    clients: set[int] = set()
    try:
        assert program.stdout is not None and program.stdout.readline().strip() == "ready"
        clients = wait_until(lambda: _two_or_none(_clients(program.pid)), timeout=60,
                             message="the two producer processes to start")
        # Producing: librdkafka's threads are up in each.
        wait_until(lambda: all(_threads(pid) > 1 for pid in clients), timeout=60,
                   message="the producers to start producing")
        program.send_signal(signal.SIGTERM)
        assert program.wait(timeout=30) == 128 + signal.SIGTERM
        wait_until(lambda: not any(_alive(pid) for pid in clients), timeout=30, message=f"clients {clients} gone")
    finally:
        if program.poll() is None:
            program.kill()
            program.wait()
        for pid in clients:  # a failed run leaves none behind either
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
