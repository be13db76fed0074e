"""kafka_exporter's consumer-group view (``kafka_consumergroup_current_offset`` and
``kafka_consumergroup_lag``), served by each group's coordinator: the broker that holds the
group's committed offsets in memory.  Lag is the partition's high watermark (what ListOffsets
``latest`` answers a consumer, the offset kafka_exporter subtracts from) minus the committed
offset; the high watermark is read here for partitions this broker leads, and asked of the
leader with one ListOffsets per leader otherwise.

:func:`committed_offsets` and :func:`lag_rows` are sans-IO; :func:`end_offsets` does the asking.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from kio.schema.list_offsets.v7 import request as lo_req
from kio.schema.list_offsets.v7 import response as lo_resp

from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.group.group import GroupMetadata
    from odradek.broker.metadata_cache import MetadataCache
    from odradek.broker.peer_connections import PeerConnections
    from odradek.broker.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

__all__ = ["GroupOffset", "LagRow", "committed_offsets", "end_offsets", "lag_rows"]

_LATEST: Final = -1  # ListOffsets' timestamp for the end of the log
ASK_TIMEOUT_S: Final = 3.0


@dataclass(frozen=True, slots=True)
class GroupOffset:
    group: str
    topic: str
    partition: int
    committed: int


@dataclass(frozen=True, slots=True)
class LagRow:
    group: str
    topic: str
    partition: int
    committed: int
    end_offset: int

    @property
    def lag(self) -> int:
        return max(0, self.end_offset - self.committed)


def committed_offsets(groups: Iterable[GroupMetadata]) -> list[GroupOffset]:
    """Every committed offset of the given groups (pending transactional ones are not commits yet)."""
    return [GroupOffset(group.group_id, topic, partition, committed.offset)
            for group in groups
            for (topic, partition), committed in group.offsets.items()]


def lag_rows(offsets: Iterable[GroupOffset], ends: Mapping[tuple[str, int], int]) -> list[LagRow]:
    """One row per committed offset whose partition's end offset is known."""
    return [LagRow(o.group, o.topic, o.partition, o.committed, ends[(o.topic, o.partition)])
            for o in offsets if (o.topic, o.partition) in ends]


async def end_offsets(partitions: Iterable[tuple[str, int]], replica_manager: ReplicaManager,
                      metadata_cache: MetadataCache, peers: PeerConnections) -> dict[tuple[str, int], int]:
    """The high watermark of each partition: read here when this broker leads it, else asked
    of its leader (partitions whose leader cannot answer are left out)."""
    ends: dict[tuple[str, int], int] = {}
    by_leader: dict[int, list[tuple[str, int]]] = {}
    for topic, partition in set(partitions):
        local = replica_manager.get_partition(topic, partition)
        if local is not None and local.is_leader and local.log is not None:
            ends[(topic, partition)] = local.log.high_watermark
            continue
        meta = metadata_cache.partition(topic, partition)
        if meta is not None and meta.leader >= 0:
            by_leader.setdefault(meta.leader, []).append((topic, partition))
    answers = await asyncio.gather(*(_ask(peers, leader, tps) for leader, tps in by_leader.items()))
    for answer in answers:
        ends.update(answer)
    return ends


async def _ask(peers: PeerConnections, leader: int, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    by_topic: dict[str, list[lo_req.ListOffsetsPartition]] = {}
    for topic, partition in tps:
        by_topic.setdefault(topic, []).append(
            lo_req.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1, timestamp=_LATEST))
    request = lo_req.ListOffsetsRequest(
        replica_id=-1, isolation_level=0,
        topics=tuple(lo_req.ListOffsetsTopic(name=topic, partitions=tuple(parts)) for topic, parts in by_topic.items()))
    try:
        conn = await peers.get(leader)
        response = await conn.send(request, lo_resp.ListOffsetsResponse, ASK_TIMEOUT_S)
    except (OSError, TimeoutError, LookupError, ConnectionError) as e:
        log.info("consumer lag: could not ask broker %d for end offsets: %s", leader, e)
        await peers.drop(leader)
        return {}
    return {(topic.name, p.partition_index): p.offset
            for topic in response.topics for p in topic.partitions if p.error_code == ErrorCode.none}
