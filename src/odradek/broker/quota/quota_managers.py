"""Kafka's QuotaFactory.QuotaManagers: the produce, fetch and request quota managers of one
broker, kept current from the client quota configs in ZooKeeper (``users/...`` and
``clients/...`` entities, through the dynamic config manager)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from odradek.broker.quota.client_quota_manager import ClientQuotaManager
from odradek.broker.quota.quota_config import QuotaType, quota_bounds
from odradek.common import monotonic_ms
from odradek.zk.zk_data import ClientQuotaEntity

__all__ = ["QuotaManagers"]


class QuotaManagers:
    """``produce`` (bytes produced), ``fetch`` (bytes fetched by consumers), ``request``
    (handler time, percent of one thread); ``enabled`` says whether any quota is set at all,
    the one check a request pays when none is."""

    def __init__(self, samples: int = 11, window_ms: int = 1000, now_ms: Callable[[], int] = monotonic_ms) -> None:
        self.produce = ClientQuotaManager(samples, window_ms, now_ms)
        self.fetch = ClientQuotaManager(samples, window_ms, now_ms)
        self.request = ClientQuotaManager(samples, window_ms, now_ms)
        self._by_type = {QuotaType.PRODUCE: self.produce, QuotaType.FETCH: self.fetch,
                         QuotaType.REQUEST: self.request}
        self.enabled = False

    @classmethod
    def from_kafka_config(cls, config: Any) -> QuotaManagers:
        """``quota.window.num`` samples of ``quota.window.size.seconds`` each."""
        return cls(config["quota.window.num"], config["quota.window.size.seconds"] * 1000)

    def update(self, entity: ClientQuotaEntity, config: Mapping[str, str]) -> None:
        """An entity's stored config changed (or was read at start-up): its quotas are now
        those ``config`` holds, the others removed."""
        bounds = quota_bounds(config)
        for quota_type, manager in self._by_type.items():
            manager.update_quota(entity, bounds.get(quota_type))
        self.enabled = any(manager.enabled for manager in self._by_type.values())
