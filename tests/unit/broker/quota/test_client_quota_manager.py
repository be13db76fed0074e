"""Kafka's ClientQuotaManager (broker/quota/client_quota_manager.py) on a hand-driven clock:
which of the eight entities' quota applies, who shares a measured rate, the throttle time."""

from __future__ import annotations

import itertools

import pytest

from odradek.broker.quota.client_quota_manager import MAX_THROTTLE_MS, ClientQuotaManager
from odradek.zk.zk_data import ClientQuotaEntity, sanitize_entity_name

D = "<default>"


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def manager(clock: Clock, samples: int = 11, window_ms: int = 1000) -> ClientQuotaManager:
    return ClientQuotaManager(samples, window_ms, clock)


# The eight entities in Kafka's order of precedence, for user "alice" with client id "app".
PRECEDENCE = [ClientQuotaEntity("alice", "app"), ClientQuotaEntity("alice", D), ClientQuotaEntity("alice", None),
              ClientQuotaEntity(D, "app"), ClientQuotaEntity(D, D), ClientQuotaEntity(D, None),
              ClientQuotaEntity(None, "app"), ClientQuotaEntity(None, D)]


@pytest.mark.parametrize("winner", range(len(PRECEDENCE)))
def test_the_first_entity_in_kafkas_order_gives_the_quota(winner: int) -> None:
    clock = Clock()
    quotas = manager(clock)
    # Every entity from the winner on has a quota; each bound names its entity.
    for i in range(winner, len(PRECEDENCE)):
        quotas.update_quota(PRECEDENCE[i], 1000.0 * (i + 1))
    window_bytes = quotas.max_value_in_quota_window("alice", "app")
    assert window_bytes == 1000.0 * (winner + 1) * 10  # bound x (samples - 1) x window


def test_without_any_quota_a_client_is_not_measured() -> None:
    clock = Clock()
    quotas = manager(clock)
    assert not quotas.enabled
    quotas.update_quota(ClientQuotaEntity("bob", None), 10.0)
    assert quotas.enabled
    assert quotas.record("alice", "app", 10**9) == 0
    assert quotas.max_value_in_quota_window("alice", "app") is None


def test_throttle_time_is_how_long_the_rate_takes_to_fall_back_to_the_quota() -> None:
    clock = Clock()
    quotas = manager(clock, samples=2)
    quotas.update_quota(ClientQuotaEntity(None, "app"), 1000.0)
    assert quotas.record("alice", "app", 1000) == 0  # 1,000 over the assumed one window: exactly the quota
    throttle_ms = quotas.record("alice", "app", 500)
    # 1,500 over 1 s is 1,500/s, half over: (1500 - 1000) / 1000 x 1 s.
    assert throttle_ms == 500
    clock.ms += throttle_ms
    assert quotas.record("alice", "app", 0) == 0  # 1,500 over 1.5 s: back at the quota
    assert quotas.record("alice", "app", 1) > 0


def test_while_the_span_is_the_assumed_minimum_waiting_does_not_lower_the_rate() -> None:
    clock = Clock()
    quotas = manager(clock)  # eleven windows: at least ten seconds
    quotas.update_quota(ClientQuotaEntity(None, "app"), 1000.0)
    assert quotas.record("alice", "app", 10_000) == 0
    assert quotas.record("alice", "app", 5_000) == 5000  # 15,000 over 10 s
    clock.ms += 5000
    assert quotas.record("alice", "app", 0) == 5000  # still 15,000 over 10 s (Kafka's as well)
    clock.ms += 5000
    assert quotas.record("alice", "app", 0) == 5000  # ten seconds on: the span only now grows
    clock.ms += 1000
    assert quotas.record("alice", "app", 0) == 0  # the burst's sample left the eleven windows


def test_user_quotas_share_a_rate_across_client_ids_and_client_quotas_across_users() -> None:
    clock = Clock()
    quotas = manager(clock)
    quotas.update_quota(ClientQuotaEntity("alice", None), 1000.0)
    quotas.update_quota(ClientQuotaEntity(None, D), 1000.0)
    assert quotas.record("alice", "one", 10_000) == 0
    assert quotas.record("alice", "two", 1) > 0  # the same user: one rate
    assert quotas.record("bob", "one", 10_000) == 0  # another user, under the client default: its own rate
    assert quotas.record("carol", "one", 1) > 0  # clients/<default> measures client id "one" for every user
    assert quotas.record("carol", "three", 10_000) == 0


def test_user_and_client_quotas_measure_each_pair_alone() -> None:
    clock = Clock()
    quotas = manager(clock)
    quotas.update_quota(ClientQuotaEntity(D, D), 1000.0)
    assert quotas.record("alice", "one", 10_000) == 0
    assert quotas.record("alice", "two", 10_000) == 0
    assert quotas.record("bob", "one", 10_000) == 0
    assert quotas.record("alice", "one", 1) > 0


def test_a_changed_quota_applies_to_the_rate_already_measured() -> None:
    clock = Clock()
    quotas = manager(clock)
    entity = ClientQuotaEntity("alice", None)
    quotas.update_quota(entity, 1000.0)
    assert quotas.record("alice", "app", 15_000) == 5000
    quotas.update_quota(entity, 2000.0)
    assert quotas.record("alice", "app", 0) == 0
    quotas.update_quota(entity, 500.0)
    assert quotas.record("alice", "app", 0) == 20_000  # 1,500/s against 500/s: (3 - 1) x 10 s
    quotas.update_quota(entity, None)
    assert not quotas.enabled
    assert quotas.record("alice", "app", 10**9) == 0


def test_unrecord_takes_back_what_a_throttled_fetch_did_not_send() -> None:
    clock = Clock()
    quotas = manager(clock)
    quotas.update_quota(ClientQuotaEntity(None, "app"), 1000.0)
    assert quotas.record("alice", "app", 9_000) == 0
    assert quotas.record("alice", "app", 5_000) > 0
    quotas.unrecord("alice", "app", 5_000)
    assert quotas.record("alice", "app", 1_000) == 0


def test_names_are_matched_as_zookeeper_stores_them() -> None:
    clock = Clock()
    quotas = manager(clock)
    user, client = "CN=alice,O=example", "app one"
    quotas.update_quota(ClientQuotaEntity(sanitize_entity_name(user), sanitize_entity_name(client)), 1000.0)
    assert quotas.max_value_in_quota_window(user, client) == 10_000
    assert quotas.max_value_in_quota_window(user, "app") is None
    # A user literally named <default> is not the default user.
    quotas.update_quota(ClientQuotaEntity(sanitize_entity_name("<default>"), None), 5.0)
    assert quotas.max_value_in_quota_window("someone", "x") is None
    assert quotas.max_value_in_quota_window("<default>", "x") == 50


def test_a_zero_quota_silences_a_client_for_a_whole_window() -> None:
    clock = Clock()
    quotas = manager(clock, samples=11, window_ms=1000)
    quotas.update_quota(ClientQuotaEntity(None, "app"), 0.0)
    assert quotas.record("alice", "app", 1) == 11_000
    assert quotas.record("bob", "other", 10**9) == 0


def test_a_tiny_quotas_throttle_time_fits_a_responses_int32() -> None:
    clock = Clock()
    quotas = manager(clock)
    quotas.update_quota(ClientQuotaEntity(None, "app"), 1e-9)
    assert quotas.record("alice", "app", 10**6) == MAX_THROTTLE_MS
    quotas.update_quota(ClientQuotaEntity(None, "app"), 1.0)
    assert 0 < quotas.record("alice", "app", 10) < MAX_THROTTLE_MS


@pytest.mark.parametrize("request_bytes", [1_000, 64_000, 1_000_000])
def test_a_client_that_waits_out_its_throttle_times_gets_its_quota(request_bytes: int) -> None:
    clock = Clock()
    quotas = manager(clock)
    quota = 100_000.0
    quotas.update_quota(ClientQuotaEntity(None, "app"), quota)
    start = clock.ms
    sent = 0
    for _ in itertools.count():
        throttle_ms = quotas.record("alice", "app", request_bytes)
        sent += request_bytes
        clock.ms += max(throttle_ms, 5)  # a request takes 5 ms; a throttled one waits
        if clock.ms - start >= 120_000:
            break
    # Over two minutes the first burst (ten windows' worth) is amortised.
    assert sent / ((clock.ms - start) / 1000) == pytest.approx(quota, rel=0.1)
