"""The cleaner process and the broker's handle on it.

``python -m odradek.log.cleaner.worker`` reads length-prefixed pickled
:class:`~odradek.log.cleaner.job.CleanJob` objects from stdin, cleans each with
:func:`odradek.log.cleaner.cleaner.clean` and writes a length-prefixed pickled reply to
stdout: ``("ok", CleanResult)`` or ``("error", message)``. It runs at a lower scheduling
priority than the broker, so cleaning takes mostly the CPU time the broker leaves.

Cleaning is CPU-heavy pure Python; in the broker's process it would stall the event loop
(and threads would fight over the GIL). A process of its own reads and writes segment files
while the broker keeps serving; the broker only applies the finished swap.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import struct
import sys
import traceback
from typing import BinaryIO

from odradek.log.cleaner.job import CleanJob, CleanResult

__all__ = ["CleanerError", "CleanerProcess", "main"]

_LENGTH = struct.Struct(">I")
NICENESS = 10


class CleanerError(Exception):
    """A cleaning failed in the cleaner process (the message carries its traceback's last line)."""


def _read_frame(stream: BinaryIO) -> bytes | None:
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (size,) = _LENGTH.unpack(head)
    return stream.read(size)


def main() -> None:
    from odradek.log.cleaner.cleaner import clean

    _lower_priority()
    _die_with_parent()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while (frame := _read_frame(stdin)) is not None:
        job: CleanJob = pickle.loads(frame)
        try:
            reply: tuple[str, object] = ("ok", clean(job))
        except Exception as e:  # reported to the broker, which logs it and carries on
            reply = ("error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
        data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        stdout.write(_LENGTH.pack(len(data)) + data)
        stdout.flush()


def _lower_priority() -> None:
    """A lower scheduling priority than the broker (nice 10): a broker woken by a request
    gets the CPU first, and on an idle core the cleaner still runs flat out. Not SCHED_IDLE:
    on a host whose every core runs a busy broker, an idle-class cleaner would never run
    and compacted logs would grow without bound; at nice 10 it keeps about a tenth of a core."""
    try:
        os.nice(NICENESS)
    except OSError:
        pass


def _die_with_parent() -> None:
    """Linux: be killed when the broker dies (PR_SET_PDEATHSIG), so a SIGKILLed broker leaves
    no cleaner writing into the log directories its successor is loading."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:  # the broker died before prctl took effect
        sys.exit(1)


class CleanerProcess:
    """One cleaner process (Kafka's CleanerThread), started on first use, one job at a time."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._proc: asyncio.subprocess.Process | None = None

    async def clean(self, job: CleanJob) -> CleanResult:
        """Run ``job`` in the process; raises CleanerError if it failed there."""
        proc = self._proc
        if proc is None or proc.returncode is not None:
            proc = self._proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "odradek.log.cleaner.worker",
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        assert proc.stdin is not None and proc.stdout is not None
        data = pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            proc.stdin.write(_LENGTH.pack(len(data)) + data)
            await proc.stdin.drain()
            (size,) = _LENGTH.unpack(await proc.stdout.readexactly(_LENGTH.size))
            status, value = pickle.loads(await proc.stdout.readexactly(size))
        except (asyncio.IncompleteReadError, ConnectionError) as e:
            raise CleanerError(f"{self.name} exited (status {proc.returncode}): {e}") from None
        except asyncio.CancelledError:
            await self.stop()  # a half-read reply would desynchronise the pipe
            raise
        if status != "ok":
            raise CleanerError(str(value))
        assert isinstance(value, CleanResult)
        return value

    async def stop(self) -> None:
        """Kill the process (a cleaning in progress leaves only ``.cleaned`` files behind,
        which the next load removes)."""
        proc, self._proc = self._proc, None
        if proc is None or proc.returncode is not None:
            return
        proc.kill()
        await proc.wait()


if __name__ == "__main__":
    main()
