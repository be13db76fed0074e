"""unwind_on_sigterm: a benchmark stopped with SIGTERM still runs its ``finally`` blocks (the
ones that stop its clusters), which plain Python skips."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAM = """
import sys, time
from pathlib import Path
from odradek.perf.harness import unwind_on_sigterm
if sys.argv[2] == "unwind":
    unwind_on_sigterm()
try:
    print("ready", flush=True)
    time.sleep(60)
finally:
    Path(sys.argv[1]).write_text("stopped")
"""


@pytest.mark.parametrize("mode", ["unwind", "plain"])
def test_sigterm_runs_the_finally_blocks_only_when_asked(tmp_path: Path, mode: str) -> None:
    marker = tmp_path / "marker"
    child = subprocess.Popen([sys.executable, "-c", PROGRAM, str(marker), mode], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    child.send_signal(signal.SIGTERM)
    code = child.wait(timeout=30)
    if mode == "unwind":
        assert (code, marker.read_text()) == (128 + signal.SIGTERM, "stopped")
    else:
        assert (code, marker.exists()) == (-signal.SIGTERM, False)
