"""MetadataCache: applying UpdateMetadata (Kafka's MetadataCache.updateMetadata)."""

from __future__ import annotations

import uuid

from control_helpers import OTHER_TOPIC_ID, TOPIC_ID, um_broker, um_state, update_metadata

from odradek.broker.metadata_cache import BrokerEndpoints, MetadataCache, PartitionMetadata
from odradek.zk.zk_data import uuid_to_topic_id


def _cache() -> MetadataCache:
    cache = MetadataCache(broker_id=1)
    cache.update(update_metadata(
        {"t": (TOPIC_ID, [um_state(0, 0, 3, (0, 1), (0, 1, 2), offline=(2,), zk_version=7),
                          um_state(1, 1, 1, (1, 2), (1, 2, 0))]),
         "u": (OTHER_TOPIC_ID, [um_state(0, 2, 0, (2,), (2,))])},
        [um_broker(2, "r2", [("PLAINTEXT", 0), ("SSL", 100)]), um_broker(0, "r0"), um_broker(1)],
        controller_id=0, controller_epoch=4))
    return cache


def test_update_fills_brokers_partitions_and_ids() -> None:
    cache = _cache()
    assert (cache.controller_id, cache.controller_epoch, cache.version) == (0, 4, 1)
    assert cache.alive_broker_ids() == [0, 1, 2]
    assert cache.alive_brokers[2] == BrokerEndpoints(2, "r2", {"PLAINTEXT": ("h2", 9092), "SSL": ("h2", 9192)})
    assert cache.endpoint(2, "SSL") == ("h2", 9192)
    assert cache.endpoint(1, "SSL") is None and cache.endpoint(7, "PLAINTEXT") is None
    assert list(cache.brokers_for_listener("SSL")) == [(2, "h2", 9192, "r2")]
    assert [b[0] for b in cache.brokers_for_listener("PLAINTEXT")] == [0, 1, 2]

    assert cache.topics() == ["t", "u"]
    assert cache.partition("t", 0) == PartitionMetadata("t", 0, 0, 3, (0, 1), (0, 1, 2), (2,), 7)
    assert set(cache.partitions_of("t")) == {0, 1}
    assert cache.partition("t", 9) is None and cache.partitions_of("zz") == {}
    assert cache.topic_id("t") == TOPIC_ID
    assert cache.topic_id_string("t") == uuid_to_topic_id(TOPIC_ID)
    assert cache.topic_id("zz") == uuid.UUID(int=0)


def test_live_brokers_are_replaced_and_partitions_updated_incrementally() -> None:
    cache = _cache()
    deleted = cache.update(update_metadata(
        {"t": (TOPIC_ID, [um_state(0, 1, 4, (1,), (0, 1, 2), offline=(0, 2), zk_version=8)])},
        [um_broker(1)], controller_id=1, controller_epoch=5))
    assert deleted == []
    assert cache.alive_broker_ids() == [1]
    assert (cache.controller_id, cache.controller_epoch, cache.version) == (1, 5, 2)
    assert cache.partition("t", 0) == PartitionMetadata("t", 0, 1, 4, (1,), (0, 1, 2), (0, 2), 8)
    # Partitions not named in the request stay as they were.
    assert cache.partition("t", 1) is not None and cache.partition("u", 0) is not None


def test_leader_minus_two_deletes_partitions_then_the_topic() -> None:
    cache = _cache()
    deleted = cache.update(update_metadata({"t": (TOPIC_ID, [um_state(0, -2)])}, [um_broker(0)]))
    assert deleted == [("t", 0)]
    assert cache.partition("t", 0) is None
    assert cache.contains_topic("t") and cache.topic_id("t") == TOPIC_ID

    deleted = cache.update(update_metadata({"t": (TOPIC_ID, [um_state(1, -2), um_state(5, -2)])}, [um_broker(0)]))
    assert deleted == [("t", 1)]  # partition 5 was never known
    assert not cache.contains_topic("t")
    assert cache.topics() == ["u"]
    assert cache.topic_id("t") == uuid.UUID(int=0)
    assert cache.partition("u", 0) is not None


def test_no_controller_and_no_topic_id() -> None:
    cache = MetadataCache(broker_id=0)
    cache.update(update_metadata({"t": (None, [um_state(0, 0)])}, [um_broker(0)], controller_id=-1))
    assert cache.controller_id is None
    assert cache.contains_topic("t")
    assert cache.topic_id("t") == uuid.UUID(int=0)
    assert cache.topic_id_string("t") is None
