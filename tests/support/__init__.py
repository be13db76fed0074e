"""What the tests share: waiting on conditions, talking to a cluster over the wire, creating
topics and reading offsets.  Imported by name (``from support import wait_until``); the
fixtures built on them are in conftest.py."""

from __future__ import annotations

from support.waiting import wait_until

__all__ = ["wait_until"]
