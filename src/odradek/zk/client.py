"""KafkaZkClient: asyncio access to ZooKeeper with Kafka's operations and fencing.

kazoo does the wire work on its own threads.  Every call here returns to the asyncio loop
(``call_soon_threadsafe``), and every watch callback is handed to the loop the same way, so
the rest of odradek never sees a kazoo thread.  Watches are one-shot, as in ZooKeeper: the
code that handles a watch event re-reads the znode with a new watch.

Controller writes are fenced: each is a ZooKeeper multi whose first operation checks the
version of ``/controller_epoch``.  A controller that lost its seat fails with
:class:`ControllerMovedError` instead of changing anything.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
)
from kazoo.protocol.states import WatchedEvent, ZnodeStat
from kazoo.retry import KazooRetry

from odradek.common import TopicPartition
from odradek.histogram import Histogram
from odradek.zk.zk_data import (
    PERSISTENT_PATHS,
    BrokerIdsZNode,
    BrokerIdZNode,
    BrokerInfo,
    ClusterIdZNode,
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityZNode,
    ControllerEpochZNode,
    ControllerZNode,
    DeleteTopicsTopicZNode,
    DeleteTopicsZNode,
    LeaderAndIsr,
    LogDirEventNotificationSequenceZNode,
    LogDirEventNotificationZNode,
    ProducerIdBlockZNode,
    TopicAssignment,
    TopicConfigZNode,
    TopicPartitionStateZNode,
    TopicPartitionsZNode,
    TopicPartitionZNode,
    TopicsZNode,
    TopicZNode,
)

log = logging.getLogger(__name__)

__all__ = [
    "BadVersionError",
    "ControllerMovedError",
    "KafkaZkClient",
    "NoNodeError",
    "NodeExistsError",
    "TopicPartition",
    "ZkConnectionError",
    "split_chroot",
]


# ZooKeeper refuses requests above jute.maxbuffer (1 MiB by default); keep multis well below.
_MULTI_MAX_OPS = 1000


class ControllerMovedError(Exception):
    """A fenced write failed: ``/controller_epoch`` moved on, so this broker is no longer
    the controller."""


class ZkConnectionError(Exception):
    """ZooKeeper could not be reached."""


@dataclass(frozen=True, slots=True)
class ControllerRegistration:
    epoch: int
    epoch_zk_version: int


def _connected_server(zk: KazooClient | None) -> str | None:
    """``host:port`` of the server kazoo is connected to (kazoo keeps it only in its
    connection's socket, a private attribute: None if that ever changes)."""
    try:
        host, port = zk._connection._socket.getpeername()[:2]  # type: ignore[union-attr]
    except (AttributeError, OSError, TypeError, ValueError):
        return None
    return f"{host}:{port}"


def split_chroot(connect: str) -> tuple[str, str]:
    """``"h1:2181,h2:2181/kafka"`` -> ``("h1:2181,h2:2181", "/kafka")``."""
    hosts, slash, chroot = connect.partition("/")
    return hosts, ("/" + chroot.rstrip("/")) if slash and chroot.strip("/") else ""


class KafkaZkClient:
    """One ZooKeeper session, used from one asyncio loop."""

    def __init__(self, connect: str, session_timeout_ms: int = 18000,
                 connection_timeout_ms: int | None = None) -> None:
        self.connect_string = connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self._loop: asyncio.AbstractEventLoop | None = None
        self._zk: KazooClient | None = None
        self._state_listeners: list[Callable[[str], None]] = []
        # The member the session is connected to (host:port), None before the first
        # connection or when the socket cannot say.
        self.server: str | None = None
        self._watch_wrappers: dict[Callable[[WatchedEvent], None], Callable[[WatchedEvent], None]] = {}
        # Kafka's ZooKeeperRequestLatencyMs: each request's round trip, in milliseconds.
        self.request_latency = Histogram()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Connect (creating the chroot if needed); raises :class:`ZkConnectionError`."""
        self._loop = asyncio.get_running_loop()
        hosts, chroot = split_chroot(self.connect_string)
        timeout_s = self.connection_timeout_ms / 1000
        if chroot:
            await self._loop.run_in_executor(None, ensure_chroot, hosts, chroot, timeout_s)
        self._zk = KazooClient(
            hosts=hosts + chroot,
            timeout=self.session_timeout_ms / 1000,
            connection_retry=KazooRetry(max_tries=-1, max_delay=1.0),
            command_retry=None,
        )
        self._zk.add_listener(self._on_kazoo_state)
        try:
            await self._loop.run_in_executor(None, self._zk.start, timeout_s)
        except Exception as e:
            await self.close()
            raise ZkConnectionError(
                f"could not connect to ZooKeeper at {self.connect_string} within "
                f"{self.connection_timeout_ms} ms"
            ) from e

    async def close(self) -> None:
        zk, self._zk = self._zk, None
        if zk is not None:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, _stop_quietly, zk)

    @property
    def session_id(self) -> int:
        assert self._zk is not None
        return self._zk.client_id[0] if self._zk.client_id else 0

    @property
    def closed(self) -> bool:
        """close() was called (kazoo then reports LOST, which is no expiry)."""
        return self._zk is None

    @property
    def connected(self) -> bool:
        return self._zk is not None and self._zk.connected

    def add_state_listener(self, listener: Callable[[str], None]) -> None:
        """``listener(state)`` runs on the loop with "CONNECTED", "SUSPENDED" or "LOST"
        (LOST: the session expired; a new session follows as "CONNECTED")."""
        self._state_listeners.append(listener)

    def _on_kazoo_state(self, state: str) -> None:  # kazoo thread
        if state == "CONNECTED":
            # Read here, on kazoo's thread, while the socket just handshaken is current.
            self.server = _connected_server(self._zk)
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._dispatch_state, state)

    def _dispatch_state(self, state: str) -> None:
        for listener in list(self._state_listeners):
            try:
                listener(state)
            except Exception:
                log.exception("ZooKeeper state listener failed")

    # ------------------------------------------------------------------ primitives

    def _watch(self, callback: Callable[[WatchedEvent], None] | None) -> Callable[[WatchedEvent], None] | None:
        """The kazoo-side watcher for ``callback``.  kazoo keeps a set of watchers per path,
        so the same callback must map to the same wrapper or watches would pile up."""
        if callback is None:
            return None
        wrapper = self._watch_wrappers.get(callback)
        if wrapper is None:
            loop = self._loop
            assert loop is not None

            def wrapper(event: WatchedEvent) -> None:  # kazoo thread
                if not loop.is_closed():
                    loop.call_soon_threadsafe(callback, event)

            self._watch_wrappers[callback] = wrapper
        return wrapper

    def _future(self, async_result: Any) -> asyncio.Future[Any]:
        loop = self._loop
        assert loop is not None
        fut: asyncio.Future[Any] = loop.create_future()
        started_ns = time.monotonic_ns()

        def transfer(ar: Any) -> None:
            self.request_latency.update((time.monotonic_ns() - started_ns) / 1e6)
            if fut.done():
                return
            if ar.successful():
                fut.set_result(ar.value)
            else:
                fut.set_exception(ar.exception)

        async_result.rawlink(lambda ar: loop.is_closed() or loop.call_soon_threadsafe(transfer, ar))
        return fut

    @property
    def zk(self) -> KazooClient:
        if self._zk is None:
            raise ZkConnectionError("not connected to ZooKeeper")
        return self._zk

    async def get(self, path: str, watch: Callable[[WatchedEvent], None] | None = None
                  ) -> tuple[bytes, ZnodeStat] | None:
        """Data and stat, or None if the znode doesn't exist (a watch is then not set)."""
        try:
            return await self._future(self.zk.get_async(path, watch=self._watch(watch)))
        except NoNodeError:
            return None

    async def get_many(self, paths: list[str]) -> list[tuple[bytes, ZnodeStat] | None]:
        """Data and stat of many znodes (None where one doesn't exist), all requests in
        flight at once and one wake-up of the event loop when the last answer is in (a
        future per znode costs more than ZooKeeper does for 10,000 partition states)."""
        if not paths:
            return []
        loop = self._loop
        assert loop is not None
        done: asyncio.Future[None] = loop.create_future()
        remaining = [len(paths)]
        lock = threading.Lock()

        def finished(_: Any) -> None:
            with lock:
                remaining[0] -= 1
                last = remaining[0] == 0
            if last and not loop.is_closed():
                loop.call_soon_threadsafe(lambda: done.done() or done.set_result(None))

        zk = self.zk
        results = [zk.get_async(path) for path in paths]
        for ar in results:
            ar.rawlink(finished)
        await done
        out: list[tuple[bytes, ZnodeStat] | None] = []
        for ar in results:
            if ar.successful():
                out.append(ar.value)
            elif isinstance(ar.exception, NoNodeError):
                out.append(None)
            else:
                raise ar.exception
        return out

    async def exists(self, path: str, watch: Callable[[WatchedEvent], None] | None = None
                     ) -> ZnodeStat | None:
        """The stat, or None; a watch is set either way (so creation is seen too)."""
        return await self._future(self.zk.exists_async(path, watch=self._watch(watch)))

    async def get_children(self, path: str, watch: Callable[[WatchedEvent], None] | None = None
                           ) -> list[str] | None:
        try:
            return await self._future(self.zk.get_children_async(path, watch=self._watch(watch)))
        except NoNodeError:
            return None

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
                     sequence: bool = False, makepath: bool = False) -> str:
        return await self._future(self.zk.create_async(
            path, data, ephemeral=ephemeral, sequence=sequence, makepath=makepath))

    async def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        return await self._future(self.zk.set_async(path, data, version))

    async def delete(self, path: str, version: int = -1) -> None:
        await self._future(self.zk.delete_async(path, version))

    async def delete_recursive(self, path: str) -> None:
        """Delete a znode and all its descendants (missing nodes are fine)."""
        children = await self.get_children(path)
        if children is None:
            return
        await asyncio.gather(*(self.delete_recursive(f"{path}/{c}") for c in children))
        try:
            await self.delete(path)
        except NoNodeError:
            pass
        except NotEmptyError:  # a child appeared meanwhile
            await self.delete_recursive(path)

    async def ensure_path(self, path: str) -> None:
        try:
            await self.create(path, b"", makepath=True)
        except NodeExistsError:
            pass

    async def multi(self, build: Callable[[Any], None]) -> list[Any]:
        """Run a transaction; ``build(tx)`` adds operations.  Returns kazoo's results
        (exception instances mark the failing operation)."""
        tx = self.zk.transaction()
        build(tx)
        return await self._future(tx.commit_async())

    # ------------------------------------------------------------------ broker start-up

    async def create_top_level_paths(self) -> None:
        await asyncio.gather(*(self.ensure_path(p) for p in PERSISTENT_PATHS))

    async def get_or_create_cluster_id(self) -> str:
        got = await self.get(ClusterIdZNode.path)
        if got is not None:
            return ClusterIdZNode.decode(got[0])
        proposed = ClusterIdZNode.new_cluster_id()
        try:
            await self.create(ClusterIdZNode.path, ClusterIdZNode.encode(proposed), makepath=True)
            return proposed
        except NodeExistsError:
            got = await self.get(ClusterIdZNode.path)
            assert got is not None
            return ClusterIdZNode.decode(got[0])

    async def register_broker(self, info: BrokerInfo) -> int:
        """Create the ephemeral ``/brokers/ids/<id>``; returns its czxid (the broker epoch).

        Raises NodeExistsError when another live session holds the id.  A node left by our
        own session (a retried create after a connection blip) counts as ours.
        """
        path = BrokerIdZNode.path(info.id)
        try:
            await self.create(path, BrokerIdZNode.encode(info), ephemeral=True)
        except NodeExistsError:
            stat = await self.exists(path)
            if stat is None or stat.ephemeralOwner != self.session_id:
                raise
        stat = await self.exists(path)
        assert stat is not None
        return stat.czxid

    async def get_all_broker_ids(self, watch: Callable[[WatchedEvent], None] | None = None) -> list[int]:
        children = await self.get_children(BrokerIdsZNode.path, watch) or []
        return sorted(int(c) for c in children if c.isdigit())

    async def get_brokers(self, ids: Iterable[int]) -> dict[int, tuple[BrokerInfo, int]]:
        """``{id: (info, czxid)}`` for the given ids that are registered."""
        ids = list(ids)
        got = await asyncio.gather(*(self.get(BrokerIdZNode.path(i)) for i in ids))
        return {
            i: (BrokerIdZNode.decode(i, g[0]), g[1].czxid)
            for i, g in zip(ids, got, strict=True) if g is not None
        }

    async def get_all_brokers(self) -> dict[int, BrokerInfo]:
        brokers = await self.get_brokers(await self.get_all_broker_ids())
        return {i: info for i, (info, _) in brokers.items()}

    # ------------------------------------------------------------------ controller seat

    async def get_controller_id(self, watch: Callable[[WatchedEvent], None] | None = None) -> int | None:
        """The active controller's broker id, or None; ``watch`` fires on any change."""
        stat = await self.exists(ControllerZNode.path, watch)
        if stat is None:
            return None
        got = await self.get(ControllerZNode.path)
        return None if got is None else ControllerZNode.decode(got[0])

    async def get_controller_epoch(self) -> tuple[int, int] | None:
        """``(epoch, zk_version)`` of ``/controller_epoch``, or None before the first election."""
        got = await self.get(ControllerEpochZNode.path)
        if got is None:
            return None
        return ControllerEpochZNode.decode(got[0]), got[1].version

    async def register_controller_and_increment_epoch(self, broker_id: int) -> ControllerRegistration:
        """Try to become the controller: in one transaction, create the ephemeral
        ``/controller`` and bump ``/controller_epoch`` (conditional on its version).

        Raises NodeExistsError if another broker holds the seat.
        """
        while True:
            current = await self.get_controller_epoch()
            if current is None:
                try:
                    await self.create(ControllerEpochZNode.path, ControllerEpochZNode.encode(0))
                except NodeExistsError:
                    pass
                continue
            epoch, version = current
            new_epoch = epoch + 1
            results = await self.multi(lambda tx, e=new_epoch, v=version: (
                tx.create(ControllerZNode.path, ControllerZNode.encode(broker_id), ephemeral=True),
                tx.set_data(ControllerEpochZNode.path, ControllerEpochZNode.encode(e), v),
            ))
            create_result, set_result = results
            if isinstance(create_result, NodeExistsError):
                # Maybe our own session won on an earlier, interrupted attempt.
                stat = await self.exists(ControllerZNode.path)
                got = await self.get(ControllerZNode.path)
                if (stat is not None and got is not None and stat.ephemeralOwner == self.session_id
                        and ControllerZNode.decode(got[0]) == broker_id):
                    now = await self.get_controller_epoch()
                    assert now is not None
                    return ControllerRegistration(now[0], now[1])
                raise NodeExistsError()
            if isinstance(set_result, BadVersionError):
                continue  # the epoch moved under us; read it again
            if isinstance(create_result, Exception):
                raise create_result
            if isinstance(set_result, Exception):
                raise set_result
            return ControllerRegistration(new_epoch, set_result.version)

    async def fenced_multi(self, epoch_zk_version: int, build: Callable[[Any], None]) -> list[Any]:
        """A transaction guarded by ``/controller_epoch``'s version.  Raises
        :class:`ControllerMovedError` if the guard fails; otherwise returns the results of
        ``build``'s operations (exception instances where they failed)."""
        results = await self.multi(lambda tx: (
            tx.check(ControllerEpochZNode.path, epoch_zk_version), build(tx)))
        guard, rest = results[0], results[1:]
        if isinstance(guard, (BadVersionError, NoNodeError)):
            raise ControllerMovedError(
                f"controller epoch zk version {epoch_zk_version} is stale; the controller moved")
        return rest

    # ------------------------------------------------------------------ topics

    async def get_all_topics(self, watch: Callable[[WatchedEvent], None] | None = None) -> set[str]:
        return set(await self.get_children(TopicsZNode.path, watch) or [])

    async def get_topic_assignment(self, topic: str, watch: Callable[[WatchedEvent], None] | None = None
                                   ) -> tuple[TopicAssignment, int] | None:
        """The assignment and its znode version, or None."""
        got = await self.get(TopicZNode.path(topic), watch)
        if got is None:
            return None
        return TopicZNode.decode(got[0]), got[1].version

    async def get_partition_states(self, partitions: Iterable[TopicPartition]
                                   ) -> dict[TopicPartition, LeaderAndIsr]:
        partitions = list(partitions)
        got = await self.get_many([TopicPartitionStateZNode.path(t, p) for t, p in partitions])
        return {
            tp: TopicPartitionStateZNode.decode(g[0], g[1].version)
            for tp, g in zip(partitions, got, strict=True) if g is not None
        }

    async def create_topic(self, topic: str, assignment: TopicAssignment, config: Mapping[str, str]) -> None:
        """Kafka's order: ``/config/topics/<t>`` first, then ``/brokers/topics/<t>`` (which
        the controller watches).  Raises NodeExistsError if the topic exists."""
        if await self.exists(TopicZNode.path(topic)) is not None:
            raise NodeExistsError()
        config_path = TopicConfigZNode.path(topic)
        try:
            await self.create(config_path, TopicConfigZNode.encode(config), makepath=True)
        except NodeExistsError:
            await self.set(config_path, TopicConfigZNode.encode(config))
        await self.create(TopicZNode.path(topic), TopicZNode.encode(assignment), makepath=True)

    async def set_topic_assignment(self, topic: str, assignment: TopicAssignment, expected_version: int) -> None:
        await self.set(TopicZNode.path(topic), TopicZNode.encode(assignment), expected_version)

    async def create_partition_states(
        self, states: Mapping[TopicPartition, LeaderAndIsr], epoch_zk_version: int,
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        """Create ``.../partitions/<p>/state`` for new partitions, fenced by the controller
        epoch.  Batched into large transactions; a batch that fails (a znode already exists)
        is retried partition by partition so one bad partition doesn't hold up the rest.
        Returns each partition's written state (zk_version 0) or the error."""
        results: dict[TopicPartition, LeaderAndIsr | Exception] = {}
        items = sorted(states.items())
        for topic in {t for (t, _), _ in items}:
            # Not recursive: if the topic's znode is gone, the creates below fail as they should.
            try:
                await self.create(TopicPartitionsZNode.path(topic), b"")
            except (NodeExistsError, NoNodeError):
                pass
        batch_size = _MULTI_MAX_OPS // 2
        for start in range(0, len(items), batch_size):
            batch = items[start:start + batch_size]
            out = await self.fenced_multi(epoch_zk_version, lambda tx, b=batch: [
                (tx.create(TopicPartitionZNode.path(t, p), b""),
                 tx.create(TopicPartitionStateZNode.path(t, p), TopicPartitionStateZNode.encode(s)))
                for (t, p), s in b])
            if not any(isinstance(r, Exception) for r in out):
                for tp, s in batch:
                    results[tp] = _with_version(s, 0)
                continue
            for tp, s in batch:
                results[tp] = await self._create_one_partition_state(tp, s, epoch_zk_version)
        return results

    async def _create_one_partition_state(self, tp: TopicPartition, state: LeaderAndIsr,
                                          epoch_zk_version: int) -> LeaderAndIsr | Exception:
        t, p = tp
        try:
            await self.create(TopicPartitionZNode.path(t, p), b"")
        except NodeExistsError:
            pass
        except NoNodeError as e:
            return e
        out = await self.fenced_multi(epoch_zk_version, lambda tx: tx.create(
            TopicPartitionStateZNode.path(t, p), TopicPartitionStateZNode.encode(state)))
        if isinstance(out[0], Exception):
            return out[0]
        return _with_version(state, 0)

    async def update_partition_states(
        self, states: Mapping[TopicPartition, LeaderAndIsr], epoch_zk_version: int,
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        """Write new leader/ISR states, each conditional on the ``zk_version`` it carries
        (the version it was read at) and all fenced by the controller epoch.  Returns the
        state with its new zk_version, or the error (BadVersionError: someone else wrote)."""
        results: dict[TopicPartition, LeaderAndIsr | Exception] = {}
        items = sorted(states.items())
        for start in range(0, len(items), _MULTI_MAX_OPS):
            batch = items[start:start + _MULTI_MAX_OPS]
            out = await self.fenced_multi(epoch_zk_version, lambda tx, b=batch: [
                tx.set_data(TopicPartitionStateZNode.path(t, p), TopicPartitionStateZNode.encode(s),
                            s.zk_version) for (t, p), s in b])
            if not any(isinstance(r, Exception) for r in out):
                for (tp, s), stat in zip(batch, out, strict=True):
                    results[tp] = _with_version(s, stat.version)
                continue
            for tp, s in batch:
                one = await self.fenced_multi(epoch_zk_version, lambda tx, tp=tp, s=s: tx.set_data(
                    TopicPartitionStateZNode.path(*tp), TopicPartitionStateZNode.encode(s), s.zk_version))
                results[tp] = one[0] if isinstance(one[0], Exception) else _with_version(s, one[0].version)
        return results

    async def delete_topic_znodes(self, topic: str, epoch_zk_version: int) -> None:
        """Remove a deleted topic's znodes (assignment, states, config, deletion marker)."""
        paths = await self._subtree(TopicZNode.path(topic))
        paths += [TopicConfigZNode.path(topic), DeleteTopicsTopicZNode.path(topic)]
        existing = [p for p in paths if await self.exists(p) is not None]
        # Children before parents.
        existing.sort(key=lambda p: p.count("/"), reverse=True)
        for start in range(0, len(existing), _MULTI_MAX_OPS):
            batch = existing[start:start + _MULTI_MAX_OPS]
            out = await self.fenced_multi(epoch_zk_version, lambda tx, b=batch: [tx.delete(p) for p in b])
            for r in out:
                if isinstance(r, Exception) and not isinstance(r, (NoNodeError, RolledBackError)):
                    raise r

    async def _subtree(self, path: str) -> list[str]:
        children = await self.get_children(path)
        if children is None:
            return []
        nested = await asyncio.gather(*(self._subtree(f"{path}/{c}") for c in children))
        return [path] + [p for sub in nested for p in sub]

    # ------------------------------------------------------------------ config entities (topics, brokers, users)

    async def get_entity_config(self, entity_type: str, entity: str) -> dict[str, str] | None:
        """``/config/<entity_type>/<entity>`` (e.g. ``users``/``alice``: SCRAM credentials);
        None when there is no such node."""
        got = await self.get(ConfigEntityZNode.path(entity_type, entity))
        return None if got is None else ConfigEntityZNode.decode(got[0])

    async def set_entity_config(self, entity_type: str, entity: str, config: Mapping[str, str]) -> None:
        """Replace an entity's config (creating its znode) and notify brokers through
        ``/config/changes`` (``{"version":2,"entity_path":"<entity_type>/<entity>"}``): Kafka's
        ``setOrCreateEntityConfigs`` and ``createConfigChangeNotification``."""
        path = ConfigEntityZNode.path(entity_type, entity)
        try:
            await self.set(path, ConfigEntityZNode.encode(config))
        except NoNodeError:
            await self.create(path, ConfigEntityZNode.encode(config), makepath=True)
        await self.create(ConfigEntityChangeNotificationSequenceZNode.path_prefix(),
                          ConfigEntityChangeNotificationSequenceZNode.encode(entity_type, entity),
                          sequence=True, makepath=True)

    async def get_topic_config(self, topic: str) -> dict[str, str]:
        """A topic's config overrides; empty when none is stored."""
        return await self.get_entity_config("topics", topic) or {}

    async def get_topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        topics = list(topics)
        got = await asyncio.gather(*(self.get_topic_config(t) for t in topics))
        return dict(zip(topics, got, strict=True))

    async def set_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        """Replace a topic's config and notify brokers through ``/config/changes``."""
        await self.set_entity_config("topics", topic, config)

    async def get_broker_config(self, entity: str) -> dict[str, str]:
        """The dynamic config of a broker (its id as a string) or of every broker
        (``ConfigEntityZNode.DEFAULT``); empty when none is stored."""
        return await self.get_entity_config("brokers", entity) or {}

    async def set_broker_config(self, entity: str, config: Mapping[str, str]) -> None:
        """Replace a dynamic broker config and notify brokers through ``/config/changes``
        (Kafka's AdminZkClient.changeBrokerConfig)."""
        await self.set_entity_config("brokers", entity, config)

    # ------------------------------------------------------------------ deletion

    async def get_topic_deletions(self, watch: Callable[[WatchedEvent], None] | None = None) -> set[str]:
        return set(await self.get_children(DeleteTopicsZNode.path, watch) or [])

    async def is_marked_for_deletion(self, topic: str) -> bool:
        return await self.exists(DeleteTopicsTopicZNode.path(topic)) is not None

    async def create_delete_topic_marker(self, topic: str) -> None:
        await self.create(DeleteTopicsTopicZNode.path(topic), b"", makepath=True)

    async def delete_topic_deletion_markers(self, topics: Iterable[str], epoch_zk_version: int) -> None:
        topics = list(topics)
        if topics:
            await self.fenced_multi(epoch_zk_version, lambda tx: [
                tx.delete(DeleteTopicsTopicZNode.path(t)) for t in topics])

    # ------------------------------------------------------------------ log dir events

    async def propagate_log_dir_event(self, broker_id: int) -> None:
        """A log directory of ``broker_id`` failed: tell the controller (Kafka's
        propagateLogDirEvent)."""
        await self.create(LogDirEventNotificationSequenceZNode.path_prefix(),
                          LogDirEventNotificationSequenceZNode.encode(broker_id), sequence=True, makepath=True)

    async def get_log_dir_event_notifications(self, watch: Callable[[WatchedEvent], None] | None = None
                                              ) -> list[str]:
        """The pending notifications' names, oldest first (a watch sees new ones)."""
        return sorted(await self.get_children(LogDirEventNotificationZNode.path, watch) or [])

    async def get_broker_ids_from_log_dir_events(self, names: Iterable[str]) -> list[int]:
        """The brokers those notifications name (one that vanished meanwhile is skipped)."""
        paths = [LogDirEventNotificationSequenceZNode.path(n) for n in names]
        found = await self.get_many(paths)
        ids = [LogDirEventNotificationSequenceZNode.decode(got[0]) for got in found if got is not None]
        return [b for b in ids if b is not None]

    async def delete_log_dir_event_notifications(self, names: Iterable[str], epoch_zk_version: int) -> None:
        """Delete processed notifications (fenced: a deposed controller deletes nothing)."""
        paths = [LogDirEventNotificationSequenceZNode.path(n) for n in names]
        if paths:
            await self.fenced_multi(epoch_zk_version, lambda tx: [tx.delete(p) for p in paths])

    # ------------------------------------------------------------------ producer ids

    async def allocate_producer_id_block(self, broker_id: int) -> tuple[int, int]:
        """Claim the next block of producer ids (Kafka's ``/latest_producer_id_block``)."""
        while True:
            got = await self.get(ProducerIdBlockZNode.path)
            if got is None:
                await self.ensure_path(ProducerIdBlockZNode.path)
                continue
            data, stat = got
            current = ProducerIdBlockZNode.decode(data)
            start = 0 if current is None else current[2] + 1
            end = start + ProducerIdBlockZNode.BLOCK_SIZE - 1
            try:
                await self.set(ProducerIdBlockZNode.path,
                               ProducerIdBlockZNode.encode(broker_id, start, end), stat.version)
                return start, end
            except BadVersionError:
                continue


def _with_version(state: LeaderAndIsr, zk_version: int) -> LeaderAndIsr:
    return LeaderAndIsr(state.leader, state.leader_epoch, state.isr, state.controller_epoch, zk_version)


def ensure_chroot(hosts: str, chroot: str, timeout_s: float) -> None:
    """Create the chroot of a connect string (Kafka brokers do this at start-up)."""
    zk = KazooClient(hosts=hosts, timeout=timeout_s)
    try:
        zk.start(timeout=timeout_s)
        zk.ensure_path(chroot)
    finally:
        _stop_quietly(zk)


def _stop_quietly(zk: KazooClient) -> None:
    try:
        zk.stop()
        zk.close()
    except Exception:
        log.debug("error closing ZooKeeper client", exc_info=True)


__all__ += ["ControllerRegistration"]
