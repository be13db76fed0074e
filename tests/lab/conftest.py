"""Lab tests (odradek lab: hosts as network namespaces) need root and network namespaces;
without them every test here is skipped, saying why."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

SKIP_REASON = "needs root and network namespaces (odradek lab)"


def lab_available() -> str | None:
    """None if this machine can run a lab, else why not."""
    if os.geteuid() != 0:
        return f"{SKIP_REASON}: not root"
    if shutil.which("ip") is None:
        return f"{SKIP_REASON}: iproute2 (ip) not installed"
    probe = f"odrprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"{SKIP_REASON}: ip netns add failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


_UNAVAILABLE = lab_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _UNAVAILABLE is None:
        return
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.skip(reason=_UNAVAILABLE))


@pytest.fixture(scope="module")
def lab_identity() -> Callable[[], tuple[str, str]]:
    """A (name, subnet) for a lab no other test run on this machine uses at the same time."""
    counter = iter(range(1000))

    def make() -> tuple[str, str]:
        n = next(counter)
        seed = (os.getpid() * 7 + n) % 150
        return f"t{os.getpid() % 10000}x{n}"[:8], f"10.214.{100 + seed}.0/24"

    return make
