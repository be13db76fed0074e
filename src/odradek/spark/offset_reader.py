"""Driver-side lookups: the partitions of a subscription and their offsets.

One confluent-kafka AdminClient per process and client config, shared by every reader in
that process: Spark keeps a streaming source's driver-side Python process alive for the
whole query and asks for the latest offsets many times a second when idle. Readers are
pickled, so they hold only options and plain cached data, never a client.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicCollection
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from odradek.spark.offsets import TopicPartition
from odradek.spark.options import (
    Assign,
    Bound,
    GlobalTimestamp,
    OptionError,
    PartitionTimestamps,
    Position,
    SourceOptions,
    SpecificOffsets,
    Subscribe,
    SubscribePattern,
)

log = logging.getLogger("odradek.spark")

LOOKUP_TIMEOUT_S = 30.0
LATEST_MAX_AGE_S = 0.5
# Kafka's internal topics, which a pattern subscription never matches (as in the Java client).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
# Consumer settings an AdminClient would only warn about.
_CONSUMER_ONLY = frozenset({"group.id", "isolation.level"})

_admins: dict[tuple[tuple[str, str], ...], AdminClient] = {}
_admins_lock = threading.Lock()

T = TypeVar("T")


def admin_client(kafka_params: Mapping[str, str]) -> AdminClient:
    """The process's AdminClient for this client config, created on first use."""
    conf = {k: v for k, v in kafka_params.items() if k not in _CONSUMER_ONLY}
    key = tuple(sorted(conf.items()))
    with _admins_lock:
        client = _admins.get(key)
        if client is None:
            try:
                client = AdminClient(conf)
            except KafkaException as e:
                raise OptionError("kafka.*", f"rejected by the Kafka client: {e}") from e
            _admins[key] = client
        return client


def drop_admin_clients() -> None:
    """Forget this process's AdminClients (each is destroyed, its connections closed, once
    nothing else holds it): for a driver that outlives the cluster it was reading."""
    with _admins_lock:
        _admins.clear()


class KafkaOffsetReader:
    """Partitions and offsets of one source's subscription."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._latest: tuple[float, dict[TopicPartition, int]] | None = None

    def __getstate__(self) -> dict:
        return {"options": self.options, "_latest": None}

    @property
    def _admin(self) -> AdminClient:
        return admin_client(self.options.kafka_params)

    def partitions(self) -> list[TopicPartition]:
        """The topic-partitions the subscription names now, sorted."""
        subscription = self.options.subscription
        if isinstance(subscription, Assign):
            return list(subscription.partitions)
        if isinstance(subscription, Subscribe):
            return self._partitions_of(subscription.topics)
        assert isinstance(subscription, SubscribePattern)
        metadata = self._retry(
            "list topics", lambda: self._admin.list_topics(timeout=LOOKUP_TIMEOUT_S)
        )
        return sorted(
            TopicPartition(t.topic, p)
            for t in metadata.topics.values()
            if t.topic not in INTERNAL_TOPICS and subscription.matches(t.topic)
            for p in t.partitions
        )

    def _partitions_of(self, topics: Iterable[str]) -> list[TopicPartition]:
        """The partitions of the named topics (none for a topic that does not exist).

        Asks for these topics only: cheaper than all of a big cluster's metadata, and a
        describe never auto-creates a topic, as a metadata request naming it may.
        """

        def describe() -> list[TopicPartition]:
            futures = self._admin.describe_topics(
                TopicCollection(list(topics)), request_timeout=LOOKUP_TIMEOUT_S
            )
            found: list[TopicPartition] = []
            for name, future in futures.items():
                try:
                    description = future.result()
                except KafkaException as e:
                    if e.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                        continue
                    raise
                found.extend(TopicPartition(name, p.id) for p in description.partitions)
            return sorted(found)

        return self._retry("describe topics", describe)

    def earliest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list_offsets(dict.fromkeys(partitions, OffsetSpec.earliest()))

    def latest(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list_offsets(dict.fromkeys(partitions, OffsetSpec.latest()))

    def latest_now(self, max_age_s: float = LATEST_MAX_AGE_S) -> dict[TopicPartition, int]:
        """Latest offsets of every partition of the subscription, reusing a lookup that is
        younger than ``max_age_s``."""
        now = time.monotonic()
        if self._latest is not None and now - self._latest[0] < max_age_s:
            return dict(self._latest[1])
        latest = self.latest(self.partitions())
        self._latest = (now, latest)
        return dict(latest)

    def by_timestamp(
        self, stamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | None]:
        """The first offset whose timestamp is >= the given one, None where there is none."""
        found = self._list_offsets({tp: OffsetSpec.for_timestamp(ts) for tp, ts in stamps.items()})
        return {tp: (offset if offset >= 0 else None) for tp, offset in found.items()}

    def resolve(
        self, spec: Position, partitions: list[TopicPartition], *, starting: bool
    ) -> dict[TopicPartition, int]:
        """Concrete offsets for startingOffsets/endingOffsets (or their timestamp forms)."""
        if spec is Bound.EARLIEST:
            return self.earliest(partitions)
        if spec is Bound.LATEST:
            return self.latest(partitions)
        if isinstance(spec, GlobalTimestamp):
            return self._resolve_timestamps(
                dict.fromkeys(partitions, spec.timestamp), spec.option, starting
            )
        named = spec.offsets if isinstance(spec, SpecificOffsets) else spec.timestamps
        if set(named) != set(partitions):
            raise OptionError(
                spec.option,
                "must name every partition of the subscription, and only those "
                f"(subscribed: {_fmt(partitions)}; given: {_fmt(named)}); "
                "use -2 for earliest and -1 for latest",
            )
        if isinstance(spec, PartitionTimestamps):
            return self._resolve_timestamps(dict(spec.timestamps), spec.option, starting)
        offsets = dict(spec.offsets)
        wants_earliest = [tp for tp, off in offsets.items() if off == -2]
        wants_latest = [tp for tp, off in offsets.items() if off == -1]
        offsets.update(self.earliest(wants_earliest) if wants_earliest else {})
        offsets.update(self.latest(wants_latest) if wants_latest else {})
        return offsets

    def _resolve_timestamps(
        self, stamps: dict[TopicPartition, int], option: str, starting: bool
    ) -> dict[TopicPartition, int]:
        found = self.by_timestamp(stamps)
        missing = [tp for tp, offset in found.items() if offset is None]
        if missing and starting and not self.options.timestamp_strategy_latest:
            raise OptionError(
                option,
                "no record has a timestamp at or after the one given in "
                f"{_fmt(missing)}; set startingOffsetsByTimestampStrategy to 'latest' "
                "to start these partitions at their latest offset",
            )
        latest = self.latest(missing) if missing else {}
        return {tp: (latest[tp] if offset is None else offset) for tp, offset in found.items()}

    def _list_offsets(
        self, specs: Mapping[TopicPartition, OffsetSpec]
    ) -> dict[TopicPartition, int]:
        if not specs:
            return {}
        isolation = (
            IsolationLevel.READ_COMMITTED
            if self.options.read_committed
            else IsolationLevel.READ_UNCOMMITTED
        )
        request = {KafkaTopicPartition(tp.topic, tp.partition): spec for tp, spec in specs.items()}

        def lookup() -> dict[TopicPartition, int]:
            futures = self._admin.list_offsets(
                request, isolation_level=isolation, request_timeout=LOOKUP_TIMEOUT_S
            )
            return {
                TopicPartition(ktp.topic, ktp.partition): future.result().offset
                for ktp, future in futures.items()
            }

        return self._retry("list offsets", lookup)

    def _retry(self, what: str, call: Callable[[], T]) -> T:
        attempts = self.options.fetch_offset_retries + 1
        for attempt in range(1, attempts + 1):
            try:
                return call()
            except KafkaException as e:
                if attempt == attempts:
                    servers = self.options.kafka_params["bootstrap.servers"]
                    raise RuntimeError(
                        f"odradek data source: cannot {what} on {servers} after "
                        f"{attempts} attempts: {e}"
                    ) from e
                log.warning("%s failed (attempt %d of %d): %s", what, attempt, attempts, e)
                self._refresh_metadata()
                time.sleep(self.options.fetch_offset_retry_interval_ms / 1000)
        raise AssertionError("unreachable")

    def _refresh_metadata(self) -> None:
        """librdkafka sends DescribeTopics to the controller it last heard of, and if that
        broker died it waits for it to come back until the request times out: a metadata
        request, which any broker answers, names the new controller."""
        try:
            self._admin.list_topics(timeout=LOOKUP_TIMEOUT_S)
        except KafkaException:
            pass  # the next attempt fails too, and says why


def _fmt(partitions: Iterable[TopicPartition]) -> str:
    return ", ".join(str(tp) for tp in sorted(partitions)) or "none"
