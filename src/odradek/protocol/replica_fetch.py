"""The follower's Fetch v12 written and read by hand (Kafka's ReplicaFetcherThread traffic).

A follower sends one FetchRequest per round and reads one FetchResponse; through kio's
generic codec each round built and validated a dataclass per partition, encoded them, and
decoded the answer into more dataclasses with every record set copied into a new ``bytes``.
Here the request frame is packed directly, and the response is read into small views whose
records are slices of the response frame.  Tests compare both with kio over random inputs.

Every length in a response is bounds-checked: a response that lies about its sizes raises
:class:`~odradek.protocol.framing.MalformedResponseError`, never an over-read.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from odradek.protocol.framing import MalformedResponseError
from odradek.protocol.varint import VarintError, encode_uvarint, read_uvarint

__all__ = ["FetchPartitionSpec", "FollowerFetchPartition", "encode_follower_fetch", "parse_follower_fetch_response"]

FETCH_API_KEY = 1
FETCH_VERSION = 12

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")  # request header v2: api key, api version, correlation id
# replica id, max wait ms, min bytes, max bytes, isolation level, session id, session epoch
_REQUEST_HEAD = struct.Struct(">iiiibii")
# partition, current leader epoch, fetch offset, last fetched epoch, log start offset,
# partition max bytes
_REQUEST_PARTITION = struct.Struct(">iiqiqi")
# throttle time ms, error code, session id
_RESPONSE_HEAD = struct.Struct(">ihi")
# partition index, error code, high watermark, last stable offset, log start offset
_RESPONSE_PARTITION = struct.Struct(">ihqqq")
_DIVERGING_EPOCH_TAG = 0  # FetchResponse v12's PartitionData.DivergingEpoch
_ABORTED_TXN_SIZE = 16  # producer id, first offset (then the entry's tagged fields)
_PREFERRED_READ_REPLICA_SIZE = 4

# (topic, partition, current leader epoch, fetch offset, last fetched epoch, log start
# offset, partition max bytes)
FetchPartitionSpec = tuple[str, int, int, int, int, int, int]


def encode_follower_fetch(correlation_id: int, client_id: str | None, replica_id: int, max_wait_ms: int,
                          min_bytes: int, max_bytes: int, partitions: Sequence[FetchPartitionSpec],
                          session_id: int = 0, session_epoch: int = -1,
                          forgotten: Sequence[tuple[str, int]] = ()) -> bytes:
    """The complete Fetch v12 request frame (size prefix, request header v2, body) a follower
    sends: read_uncommitted, no rack id; the partitions grouped by topic in the order the
    topics first appear, and so the forgotten (topic, partition) pairs.  Without a session
    id and epoch it is a sessionless fetch (id 0, epoch -1)."""
    by_topic: dict[str, list[bytes]] = {}
    for topic, partition, leader_epoch, fetch_offset, last_fetched_epoch, log_start, partition_max in partitions:
        packed = _REQUEST_PARTITION.pack(partition, leader_epoch, fetch_offset, last_fetched_epoch, log_start,
                                         partition_max) + b"\x00"  # no tagged fields
        group = by_topic.get(topic)
        if group is None:
            by_topic[topic] = [packed]
        else:
            group.append(packed)
    out = bytearray(4)  # the size, patched below
    out += _HEADER.pack(FETCH_API_KEY, FETCH_VERSION, correlation_id)
    # The client id keeps its int16 length in request header v2.
    if client_id is None:
        out += b"\xff\xff"
    else:
        raw = client_id.encode()
        out += _I16.pack(len(raw))
        out += raw
    out += b"\x00"  # header tagged fields
    out += _REQUEST_HEAD.pack(replica_id, max_wait_ms, min_bytes, max_bytes, 0, session_id, session_epoch)
    out += encode_uvarint(len(by_topic) + 1)
    for topic, group in by_topic.items():
        _put_compact_string(out, topic)
        out += encode_uvarint(len(group) + 1)
        for packed in group:
            out += packed
        out += b"\x00"  # topic tagged fields
    if forgotten:
        forgotten_by_topic: dict[str, list[int]] = {}
        for topic, partition in forgotten:
            indexes = forgotten_by_topic.get(topic)
            if indexes is None:
                forgotten_by_topic[topic] = [partition]
            else:
                indexes.append(partition)
        out += encode_uvarint(len(forgotten_by_topic) + 1)
        for topic, indexes in forgotten_by_topic.items():
            _put_compact_string(out, topic)
            out += encode_uvarint(len(indexes) + 1)
            out += struct.pack(f">{len(indexes)}i", *indexes)
            out += b"\x00"  # forgotten topic tagged fields
    else:
        out += b"\x01"  # no forgotten topics
    out += b"\x01\x00"  # rack id "", no tagged fields (cluster id unset)
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def _put_compact_string(out: bytearray, text: str) -> None:
    raw = text.encode()
    out += encode_uvarint(len(raw) + 1)
    out += raw


@dataclass(slots=True)
class FollowerFetchPartition:
    """One partition of a FetchResponse v12, as much of it as a follower uses.

    ``records`` is a view into the response frame (None when the leader sent null).
    Aborted transactions, the preferred read replica and the tagged fields (current
    leader, snapshot id) are skipped; of the diverging epoch (tag 0, KIP-595: the fetch's last
    fetched epoch ends below its fetch offset on the leader) only its presence is kept, since
    the follower truncates by OffsetForLeaderEpoch.
    """

    topic: str
    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: memoryview | None
    diverged: bool = False


def _malformed(what: str) -> MalformedResponseError:
    return MalformedResponseError(f"FetchResponse v12: {what}")


def _skip_tagged_fields(view: memoryview, pos: int, end: int) -> int:
    return _skip_tagged_fields_seeing(view, pos, end)[0]


def _skip_tagged_fields_seeing(view: memoryview, pos: int, end: int, wanted: int = -1) -> tuple[int, bool]:
    """Past the tagged fields at ``pos``; and whether tag ``wanted`` was among them."""
    count, pos = read_uvarint(view, pos, end)
    seen = False
    for _ in range(count):
        tag, pos = read_uvarint(view, pos, end)
        size, pos = read_uvarint(view, pos, end)
        if size > end - pos:
            raise _malformed("truncated tagged field")
        seen = seen or tag == wanted
        pos += size
    return pos, seen


def parse_follower_fetch_response(frame: bytes | bytearray | memoryview
                                  ) -> tuple[int, int, int, list[FollowerFetchPartition]]:
    """Read a FetchResponse v12 frame (without its size prefix, with its response header v1,
    as :meth:`~odradek.net.client.BrokerConnection.send_frame` returns it): the throttle
    time (ms), the top-level error code, the fetch session id and every partition in
    response order.  Matching the correlation id is the
    connection's job; bytes after the body are ignored, as Kafka's parser does."""
    view = memoryview(frame)
    end = len(view)
    partitions: list[FollowerFetchPartition] = []
    try:
        if end < 4:
            raise _malformed("truncated header")
        pos = _skip_tagged_fields(view, 4, end)  # after the correlation id
        if end - pos < _RESPONSE_HEAD.size:
            raise _malformed("truncated")
        throttle_ms, error_code, session_id = _RESPONSE_HEAD.unpack_from(view, pos)
        pos += _RESPONSE_HEAD.size
        topic_count, pos = read_uvarint(view, pos, end)
        topic_count -= 1
        # Every element takes at least one byte: a larger count is a lie.
        if topic_count < 0 or topic_count > end - pos:
            raise _malformed(f"bad topic count {topic_count}")
        for _ in range(topic_count):
            length, pos = read_uvarint(view, pos, end)
            length -= 1
            if length < 0 or length > end - pos:
                raise _malformed(f"bad topic name length {length}")
            try:
                topic = str(view[pos:pos + length], "utf-8")
            except UnicodeDecodeError:
                raise _malformed("topic name is not UTF-8") from None
            pos += length
            partition_count, pos = read_uvarint(view, pos, end)
            partition_count -= 1
            if partition_count < 0 or partition_count > end - pos:
                raise _malformed(f"bad partition count {partition_count}")
            for _ in range(partition_count):
                if end - pos < _RESPONSE_PARTITION.size:
                    raise _malformed("truncated partition")
                index, error, high_watermark, last_stable, log_start = _RESPONSE_PARTITION.unpack_from(view, pos)
                pos += _RESPONSE_PARTITION.size
                aborted, pos = read_uvarint(view, pos, end)
                aborted -= 1  # -1: null
                if aborted > (end - pos) // (_ABORTED_TXN_SIZE + 1):
                    raise _malformed(f"bad aborted transaction count {aborted}")
                for _ in range(aborted):
                    pos = _skip_tagged_fields(view, pos + _ABORTED_TXN_SIZE, end)
                if end - pos < _PREFERRED_READ_REPLICA_SIZE:
                    raise _malformed("truncated partition")
                pos += _PREFERRED_READ_REPLICA_SIZE
                size, pos = read_uvarint(view, pos, end)
                size -= 1
                records: memoryview | None
                if size < 0:
                    if size != -1:
                        raise _malformed(f"bad records length {size}")
                    records = None
                else:
                    if size > end - pos:
                        raise _malformed(f"records of {size} bytes in {end - pos}")
                    records = view[pos:pos + size]
                    pos += size
                pos, diverged = _skip_tagged_fields_seeing(view, pos, end, _DIVERGING_EPOCH_TAG)
                partitions.append(FollowerFetchPartition(topic, index, error, high_watermark, last_stable,
                                                         log_start, records, diverged))
            pos = _skip_tagged_fields(view, pos, end)  # topic
        _skip_tagged_fields(view, pos, end)  # response
    except VarintError as e:
        raise _malformed(str(e)) from None
    return throttle_ms, error_code, session_id, partitions
