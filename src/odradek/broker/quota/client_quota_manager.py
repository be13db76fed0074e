"""Kafka's ClientQuotaManager (2.8): one kind of client quota (produce bytes, fetch bytes or
request time) enforced per user and client id; sans-IO, the clock is passed in.

Quotas are set on entities (:class:`~odradek.zk.zk_data.ClientQuotaEntity`, as ZooKeeper names
them).  For a request of user U (the connection's principal name) with client id C, the quota
is that of the first of these eight entities that has one (Kafka's DefaultQuotaCallback)::

    users/U/clients/C   users/U/clients/<default>   users/U
    users/<default>/clients/C   users/<default>/clients/<default>   users/<default>
    clients/C   clients/<default>

The kind of entity found also decides who shares one measured rate: a user-and-client entity
measures (U, C) alone, a user entity all of U's client ids together, a client entity all users
of C together.  A client with no quota at all is not measured.

A rate is a :class:`~odradek.broker.quota.rate.SampledRate` over ``quota.window.num`` samples
of ``quota.window.size.seconds``.  When a recorded value takes it over the quota, the throttle
time is how long the client must stay silent for the rate to come back down to the quota:
(rate - quota) / quota x the span the rate is measured over.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from odradek.broker.quota.rate import SampledRate
from odradek.zk.zk_data import ClientQuotaEntity, ConfigEntityZNode, sanitize_entity_name

__all__ = ["MAX_THROTTLE_MS", "ClientQuotaManager"]

_DEFAULT: Final = ConfigEntityZNode.DEFAULT
_UNMEASURED: Final = None
# Forget a rate nobody recorded to for an hour (Kafka's InactiveSensorExpirationTimeSeconds),
# looked for at most once a minute; the (user, client id) lookup cache is dropped when it grows.
_INACTIVE_MS: Final = 3600 * 1000
_EXPIRY_CHECK_MS: Final = 60 * 1000
_MAX_CACHED_CLIENTS: Final = 10_000
MAX_THROTTLE_MS: Final = 2**31 - 1  # the most a response's throttle_time_ms (int32) can say

SensorKey = tuple[str, str]  # (sanitized user or "", sanitized client id or ""): who shares the rate


@dataclass(slots=True)
class _QuotaSensor:
    rate: SampledRate
    bound: float
    last_ms: int


class ClientQuotaManager:
    """One kind of quota (see the module docstring); ``now_ms`` is a monotonic clock."""

    def __init__(self, samples: int, window_ms: int, now_ms: Callable[[], int]) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self.now_ms = now_ms
        self.quotas: dict[ClientQuotaEntity, float] = {}
        self.enabled = False  # whether any entity has this kind of quota (an attribute: asked per fetch)
        self._sensors: dict[SensorKey, _QuotaSensor] = {}
        # (principal name, client id) -> its sensor, or _UNMEASURED: no quota applies.
        self._clients: dict[tuple[str, str], _QuotaSensor | None] = {}
        self._next_expiry_ms = 0

    def update_quota(self, entity: ClientQuotaEntity, bound: float | None) -> None:
        """Set (or, with None, remove) ``entity``'s quota; measured rates keep their history
        and take their new bound."""
        if bound is None:
            self.quotas.pop(entity, None)
        else:
            self.quotas[entity] = bound
        self.enabled = bool(self.quotas)
        self._clients.clear()
        for key, sensor in list(self._sensors.items()):
            found = self._quota_of_key(key)
            if found is None:
                del self._sensors[key]
            else:
                sensor.bound = found

    def record(self, user: str, client_id: str | None, value: float) -> int:
        """Record ``value`` for the client and return its throttle time in ms (0: within quota)."""
        sensor = self._sensor(user, client_id)
        if sensor is None:
            return 0
        now = self.now_ms()
        sensor.last_ms = now
        rate = sensor.rate
        rate.record(value, now)
        measured = rate.measure(now)
        bound = sensor.bound
        if measured <= bound:
            return 0
        if bound <= 0:  # nothing is allowed: silence for the whole window
            return self.samples * self.window_ms
        # A tiny quota can ask for years; a response's throttle_time_ms is an int32.
        return min(round((measured - bound) / bound * rate.span_ms(now)), MAX_THROTTLE_MS)

    def unrecord(self, user: str, client_id: str | None, value: float) -> None:
        """Take back a recorded value (a fetch answered empty because it was throttled)."""
        sensor = self._sensor(user, client_id)
        if sensor is not None:
            sensor.rate.record(-value, self.now_ms())

    def max_value_in_quota_window(self, user: str, client_id: str | None) -> float | None:
        """The most a client may take in one quota window (a consumer's fetch size is capped
        to it, so one response cannot earn a throttle longer than the window); None: no quota."""
        sensor = self._sensor(user, client_id)
        if sensor is None:
            return None
        return sensor.bound * (self.samples - 1) * self.window_ms / 1000

    # -- which quota applies

    def _sensor(self, user: str, client_id: str | None) -> _QuotaSensor | None:
        key = (user, client_id or "")
        try:
            return self._clients[key]
        except KeyError:
            pass
        if len(self._clients) >= _MAX_CACHED_CLIENTS:
            self._clients.clear()
        found = self._applicable(sanitize_entity_name(user), sanitize_entity_name(client_id or ""))
        sensor: _QuotaSensor | None = _UNMEASURED
        if found is not None:
            sensor_key, bound = found
            sensor = self._sensors.get(sensor_key)
            if sensor is None:
                now = self.now_ms()
                self._expire_inactive(now)
                sensor = self._sensors[sensor_key] = _QuotaSensor(SampledRate(self.samples, self.window_ms, now),
                                                                  bound, now)
        self._clients[key] = sensor
        return sensor

    def _applicable(self, user: str, client: str) -> tuple[SensorKey, float] | None:
        """The eight entities in Kafka's order; the first with a quota gives it and who shares it."""
        quotas = self.quotas
        for entity_user, entity_client in ((user, client), (user, _DEFAULT), (user, None), (_DEFAULT, client),
                                           (_DEFAULT, _DEFAULT), (_DEFAULT, None), (None, client), (None, _DEFAULT)):
            bound = quotas.get(ClientQuotaEntity(entity_user, entity_client))
            if bound is not None:
                if entity_user is None:
                    return ("", client), bound
                if entity_client is None:
                    return (user, ""), bound
                return (user, client), bound
        return None

    def _quota_of_key(self, key: SensorKey) -> float | None:
        """The quota of the rate ``key`` names, after a change (None: none applies any more)."""
        user, client = key
        if user and client:
            candidates = ((user, client), (user, _DEFAULT), (_DEFAULT, client), (_DEFAULT, _DEFAULT))
        elif user:
            candidates = ((user, None), (_DEFAULT, None))
        else:
            candidates = ((None, client), (None, _DEFAULT))
        for entity_user, entity_client in candidates:
            bound = self.quotas.get(ClientQuotaEntity(entity_user, entity_client))
            if bound is not None:
                return bound
        return None

    def _expire_inactive(self, now: int) -> None:
        if now < self._next_expiry_ms:
            return
        self._next_expiry_ms = now + _EXPIRY_CHECK_MS
        idle = [key for key, sensor in self._sensors.items() if now - sensor.last_ms >= _INACTIVE_MS]
        if idle:
            for key in idle:
                del self._sensors[key]
            self._clients.clear()
