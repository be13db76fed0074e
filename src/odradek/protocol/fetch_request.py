"""FetchRequest (v4-v12) read by hand on the broker side, into plain records.

The generic decoder walks the body once to check it, then has kio build a frozen dataclass
per topic and partition; this reads each partition's fixed fields with one struct unpack and
returns a flat list of partitions that carry their topic's name. Every length and count is
bounds-checked: a request that lies about its sizes is malformed, never a crash or an
over-read. Unknown tagged fields are skipped, as Kafka does; the request-level tag 0 (v12's
cluster id) is read.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from odradek.protocol.body_reader import BodyReader
from odradek.protocol.framing import MalformedRequestError

__all__ = ["FetchPartitionView", "FetchRequestView", "parse_fetch_request"]

# replica id, max wait (ms), min bytes, max bytes, isolation level (v4+)
_HEAD_V4 = struct.Struct(">iiiib")
# ... then session id, session epoch (v7+)
_HEAD_V7 = struct.Struct(">iiiibii")
# The fixed part of a partition, by version:
_PARTITION_V4 = struct.Struct(">iqi")  # partition, fetch offset, partition max bytes
_PARTITION_V5 = struct.Struct(">iqqi")  # partition, fetch offset, log start offset, max bytes
_PARTITION_V9 = struct.Struct(">iiqqi")  # partition, current leader epoch, ... (as v5)
# partition, current leader epoch, fetch offset, last fetched epoch, log start offset, max bytes
_PARTITION_V12 = struct.Struct(">iiqiqi")
_CLUSTER_ID_TAG = 0


@dataclass(slots=True)
class FetchPartitionView:
    # The first five are broker.delayed_fetch.FetchPartitionRequest's fields, in its order.
    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1  # v9+
    log_start_offset: int = -1  # v5+
    last_fetched_epoch: int = -1  # v12


@dataclass(slots=True)
class FetchRequestView:
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int
    session_id: int = 0  # v7+
    session_epoch: int = -1  # v7+
    # every topic's partitions, in request order
    partitions: list[FetchPartitionView] = field(default_factory=list)
    # v7+: (topic, partitions to forget), in request order
    forgotten_topics: list[tuple[str, list[int]]] = field(default_factory=list)
    rack_id: str = ""  # v11+
    cluster_id: str | None = None  # v12+, tagged field 0


def _request_tagged_fields(r: BodyReader) -> str | None:
    """Skip the request's tagged fields; return the cluster id (tag 0), if any."""
    cluster_id = None
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        size = r.uvarint()
        start = r.need(size)
        if tag == _CLUSTER_ID_TAG:
            inner = BodyReader(r.view, start, start + size, True, r.what)
            cluster_id = inner.string(nullable=True)
            if inner.pos != inner.end:
                raise r.malformed("cluster id does not fill its tagged field")
    return cluster_id


def parse_fetch_request(frame: bytes | bytearray | memoryview, body_offset: int, version: int) -> FetchRequestView:
    """Parse the body of a Fetch request that starts at ``body_offset`` of ``frame`` (the
    frame without its size prefix; ``decode_request_header`` gives the offset).

    Bytes after the body are ignored, as ``decode_request`` ignores them.
    """
    if not 4 <= version <= 12:
        raise MalformedRequestError(f"fetch request version {version} is not supported here")
    flexible = version >= 12
    view = memoryview(frame)
    r = BodyReader(view, body_offset, len(view), flexible, "fetch request")
    if version >= 7:
        replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level, session_id, session_epoch = (
            _HEAD_V7.unpack_from(view, r.need(_HEAD_V7.size)))
        request = FetchRequestView(replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level,
                                   session_id, session_epoch)
    else:
        request = FetchRequestView(*_HEAD_V4.unpack_from(view, r.need(_HEAD_V4.size)))
    if version >= 12:
        layout = _PARTITION_V12
    elif version >= 9:
        layout = _PARTITION_V9
    elif version >= 5:
        layout = _PARTITION_V5
    else:
        layout = _PARTITION_V4
    size = layout.size
    unpack = layout.unpack_from
    partitions = request.partitions
    append = partitions.append
    for _ in range(r.count()):
        topic = r.string()
        assert topic is not None
        n = r.count(size)
        if version >= 12:
            for _ in range(n):
                partition, leader_epoch, fetch_offset, last_epoch, log_start, max_bytes = unpack(view, r.need(size))
                append(FetchPartitionView(topic, partition, fetch_offset, max_bytes, leader_epoch, log_start,
                                          last_epoch))
                r.skip_tagged_fields()
            r.skip_tagged_fields()
            continue
        start = r.need(n * size)
        if version >= 9:
            for partition, leader_epoch, fetch_offset, log_start, max_bytes in layout.iter_unpack(
                    view[start:start + n * size]):
                append(FetchPartitionView(topic, partition, fetch_offset, max_bytes, leader_epoch, log_start))
        elif version >= 5:
            for partition, fetch_offset, log_start, max_bytes in layout.iter_unpack(view[start:start + n * size]):
                append(FetchPartitionView(topic, partition, fetch_offset, max_bytes, -1, log_start))
        else:
            for partition, fetch_offset, max_bytes in layout.iter_unpack(view[start:start + n * size]):
                append(FetchPartitionView(topic, partition, fetch_offset, max_bytes))
    if version >= 7:
        forgotten = request.forgotten_topics
        for _ in range(r.count()):
            topic = r.string()
            assert topic is not None
            n = r.count(4)
            start = r.need(4 * n)
            forgotten.append((topic, list(struct.unpack_from(f">{n}i", view, start))))
            if flexible:
                r.skip_tagged_fields()
    if version >= 11:
        rack_id = r.string()
        assert rack_id is not None
        request.rack_id = rack_id
    if flexible:
        request.cluster_id = _request_tagged_fields(r)
    return request
