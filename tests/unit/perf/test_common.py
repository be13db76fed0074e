"""perf/common.py's count_records: records counted, partition ends noted, other errors
skipped (messages as a consumer's batch holds them, with librdkafka's own error objects)."""

from __future__ import annotations

from dataclasses import dataclass

import confluent_kafka as ck

from odradek.perf.common import count_records


@dataclass
class Message:
    partition_number: int
    failure: ck.KafkaError | None = None

    def error(self) -> ck.KafkaError | None:
        return self.failure

    def partition(self) -> int:
        return self.partition_number


def test_records_are_counted_and_partition_ends_noted() -> None:
    eof = ck.KafkaError(ck.KafkaError._PARTITION_EOF)
    batch = [Message(0), Message(1), Message(1, eof), Message(2, ck.KafkaError(ck.KafkaError._TRANSPORT)),
             Message(2)]
    at_end = {5}
    assert count_records(batch, at_end) == 3
    assert at_end == {1, 5}
    assert count_records([], at_end) == 0
