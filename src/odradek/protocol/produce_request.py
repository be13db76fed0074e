"""ProduceRequest (v0-v9) read by hand: record batches come back as views into the frame.

The generic decoder copies every partition's records into a new ``bytes``; a large produce
request read into its own buffer (see the socket server) is instead appended straight from
that buffer, with its offsets rewritten in place.  Every length is bounds-checked: a request
that lies about its sizes is malformed, never a crash or an over-read.  Versions 0-2 (no
transactional id) carry magic 0/1 message sets, which the handler up-converts
(``protocol.legacy_records``).
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.protocol.body_reader import BodyReader
from odradek.protocol.framing import MalformedRequestError
from odradek.protocol.records import ATTRIBUTES_OFFSET, MAGIC, MAGIC_OFFSET, TRANSACTIONAL_MASK

__all__ = ["ProduceRequestView", "has_transactional_records", "parse_produce_request"]

# The transactional flag lies in the low byte of the big-endian int16 attributes.
_ATTRIBUTES_LOW_BYTE = ATTRIBUTES_OFFSET + 1


@dataclass(slots=True)
class ProduceRequestView:
    transactional_id: str | None
    acks: int
    timeout_ms: int
    # (topic, partition, records) in request order; records None when the client sent null
    partitions: list[tuple[str, int, memoryview | None]]


def parse_produce_request(frame: bytes | bytearray | memoryview, offset: int, version: int) -> ProduceRequestView:
    """Parse the body of a Produce request that starts at ``offset`` of ``frame``."""
    if not 0 <= version <= 9:
        raise MalformedRequestError(f"produce request version {version} is not supported here")
    flexible = version >= 9
    view = memoryview(frame)
    r = BodyReader(view, offset, len(view), flexible, "produce request")
    transactional_id = r.string(nullable=True) if version >= 3 else None
    acks = r.int16()
    timeout_ms = r.int32()
    partitions: list[tuple[str, int, memoryview | None]] = []
    for _ in range(r.count()):
        topic = r.string()
        assert topic is not None
        for _ in range(r.count()):
            index = r.int32()
            partitions.append((topic, index, r.nullable_bytes()))
            if flexible:
                r.skip_tagged_fields()
        if flexible:
            r.skip_tagged_fields()
    if flexible:
        r.skip_tagged_fields()
    return ProduceRequestView(transactional_id, acks, timeout_ms, partitions)


def has_transactional_records(partitions: list[tuple[str, int, memoryview | None]]) -> bool:
    """Whether the first batch of some partition is a transactional v2 batch (Kafka's
    RequestUtils.hasTransactionalRecords; a v3+ request carries one batch per partition).
    Reads two bytes per partition: the Produce fast path can afford it."""
    for _, _, records in partitions:
        if (records is not None and len(records) > _ATTRIBUTES_LOW_BYTE and records[MAGIC_OFFSET] == MAGIC
                and records[_ATTRIBUTES_LOW_BYTE] & TRANSACTIONAL_MASK):
            return True
    return False
