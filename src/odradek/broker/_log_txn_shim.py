"""TEMPORARY: stands in for the log's transaction interface until that branch is merged.

Delete this module and its import in replica_manager.py after the merge. Each piece is
installed only if the log does not have it yet, so it is inert once the real one exists.
"""

from __future__ import annotations

import enum
import inspect
from typing import Any

from odradek.log import log_info, producer_state
from odradek.log.log import Log

# True when the log lacks its transaction support (tests that need it are skipped then).
ACTIVE = not hasattr(log_info, "AppendOrigin")

if not hasattr(log_info, "AppendOrigin"):
    class AppendOrigin(enum.Enum):
        CLIENT = "client"
        COORDINATOR = "coordinator"
        REPLICATION = "replication"

    log_info.AppendOrigin = AppendOrigin  # type: ignore[attr-defined]

if not hasattr(producer_state, "NO_GUARD_CHECK"):
    producer_state.NO_GUARD_CHECK = object()  # type: ignore[attr-defined]

if "origin" not in inspect.signature(Log.append_as_leader).parameters:
    _append = Log.append_as_leader

    def _append_as_leader(self: Log, records: Any, leader_epoch: int, origin: Any = None,
                          verification_guard: Any = None) -> Any:
        return _append(self, records, leader_epoch)

    Log.append_as_leader = _append_as_leader  # type: ignore[method-assign]

if not hasattr(Log, "last_stable_offset"):
    Log.last_stable_offset = property(lambda self: self.high_watermark)  # type: ignore[attr-defined]
    Log.collect_aborted_transactions = lambda self, start, upper: []  # type: ignore[attr-defined]
    Log.has_ongoing_transaction = lambda self, pid, epoch: False  # type: ignore[attr-defined]

if not hasattr(producer_state.ProducerStateManager, "create_verification_guard"):
    def _create(self: Any, producer_id: int) -> object:
        guard = object()
        self.__dict__.setdefault("_shim_guards", {})[producer_id] = guard
        return guard

    producer_state.ProducerStateManager.create_verification_guard = _create  # type: ignore[attr-defined]
    producer_state.ProducerStateManager.verification_guard_for = (  # type: ignore[attr-defined]
        lambda self, pid: self.__dict__.get("_shim_guards", {}).get(pid))
