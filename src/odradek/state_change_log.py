"""The state-change log: every partition/replica transition and every control request.

Kafka writes these to ``state-change.log`` through the ``state.change.logger`` logger; so do
we.  ``configure(path)`` attaches the file; lines carry who wrote them
(``[Controller id=0 epoch=3]`` or ``[Broker id=1]``).
"""

from __future__ import annotations

import logging
from pathlib import Path

__all__ = ["StateChangeLogger", "configure"]

_LOGGER = logging.getLogger("state.change.logger")


def configure(path: str | Path) -> None:
    """Send state-change lines to ``path`` (appending), once per process."""
    path = Path(path)
    for handler in _LOGGER.handlers:
        if isinstance(handler, logging.FileHandler) and Path(handler.baseFilename) == path.resolve():
            return
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("[%(asctime)s] %(levelname)s %(message)s"))
    _LOGGER.addHandler(handler)
    _LOGGER.setLevel(logging.INFO)
    _LOGGER.propagate = False


class StateChangeLogger:
    """Prefixes each line with the writer's identity (controller with epoch, or broker)."""

    def __init__(self, broker_id: int, *, controller_epoch: int | None = None) -> None:
        self.broker_id = broker_id
        self.controller_epoch = controller_epoch

    def with_controller_epoch(self, epoch: int) -> StateChangeLogger:
        return StateChangeLogger(self.broker_id, controller_epoch=epoch)

    @property
    def _prefix(self) -> str:
        if self.controller_epoch is None:
            return f"[Broker id={self.broker_id}] "
        return f"[Controller id={self.broker_id} epoch={self.controller_epoch}] "

    def info(self, msg: str) -> None:
        _LOGGER.info(self._prefix + msg)

    def warn(self, msg: str) -> None:
        _LOGGER.warning(self._prefix + msg)

    def error(self, msg: str) -> None:
        _LOGGER.error(self._prefix + msg)

    @property
    def enabled(self) -> bool:
        return _LOGGER.isEnabledFor(logging.INFO)
