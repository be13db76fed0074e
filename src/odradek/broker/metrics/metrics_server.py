"""``/metrics`` over HTTP (Prometheus's text format), with prometheus_client's own server.

The server runs in prometheus_client's thread, so a scrape never holds up the event loop
while it reads the request or writes the answer.  What it serves is read on the loop: the
one collector hands the work to the loop (``run_coroutine_threadsafe``) and waits for the
families there, so every number is read from a consistent state, with no locks on the
broker's side, and the consumer-lag view may ask partition leaders for their end offsets.
Each broker has its own ``CollectorRegistry`` (tests run several in one process).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.registry import Collector

from odradek.broker.metrics.consumer_lag import committed_offsets, end_offsets, lag_rows
from odradek.broker.metrics.kafka_metrics import (
    EventLoopLoad,
    MetricsSource,
    broker_families,
    consumer_lag_families,
)

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from prometheus_client.core import Metric

    from odradek.broker.metadata_cache import MetadataCache
    from odradek.broker.metrics.request_metrics import RequestMetrics
    from odradek.broker.peer_connections import PeerConnections

log = logging.getLogger(__name__)

__all__ = ["MetricsServer"]

SCRAPE_TIMEOUT_S: Final = 10.0


class MetricsServer:
    """One broker's ``/metrics``: :meth:`start` binds it, :meth:`stop` closes it."""

    def __init__(self, broker: MetricsSource, requests: RequestMetrics, metadata_cache: MetadataCache,
                 peers: PeerConnections) -> None:
        self.broker = broker
        self.requests = requests
        self.metadata_cache = metadata_cache
        self.peers = peers  # ListOffsets to partition leaders, for consumer lag
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_OnTheLoop(self))
        self.zk_events: Counter[str] = Counter()  # ZooKeeper session states seen (LOST, SUSPENDED, ...)
        self.port: int | None = None
        self.loop: asyncio.AbstractEventLoop | None = None  # the broker's, where scrapes read
        self._load: EventLoopLoad | None = None
        self._httpd: WSGIServer | None = None

    def zk_state_changed(self, state: str) -> None:
        """A ZooKeeper session state listener (expiries and disconnections are counted)."""
        self.zk_events[state] += 1

    async def start(self, host: str, port: int) -> int:
        """Serve ``/metrics`` on ``host:port`` (port 0: any free one); returns the port."""
        self.loop = asyncio.get_running_loop()
        self._load = EventLoopLoad()  # measured on the loop's thread, which this is
        self._httpd, _thread = start_http_server(port, host or "0.0.0.0", self.registry)
        self.port = self._httpd.server_port
        return self.port

    async def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            # shutdown() waits for the serving thread's next poll: not on the loop.
            await asyncio.get_running_loop().run_in_executor(None, httpd.shutdown)
            httpd.server_close()
        await self.peers.close()

    async def families(self) -> list[Metric]:
        """Every family, read on the loop."""
        assert self._load is not None
        families = list(broker_families(self.broker, self.requests, self._load, self.zk_events))
        offsets = committed_offsets(self.broker.group_coordinator.manager.current_groups())
        ends = await end_offsets({(o.topic, o.partition) for o in offsets}, self.broker.replica_manager,
                                 self.metadata_cache, self.peers)
        families.extend(consumer_lag_families(lag_rows(offsets, ends)))
        return families


class _OnTheLoop(Collector):
    """The registry's one collector: called on the HTTP server's thread, it waits for the
    families that :meth:`MetricsServer.families` reads on the broker's loop."""

    def __init__(self, server: MetricsServer) -> None:
        self.server = server

    def collect(self) -> Iterable[Metric]:
        loop = self.server.loop
        if loop is None or loop.is_closed():
            return []
        future = asyncio.run_coroutine_threadsafe(self.server.families(), loop)
        try:
            return future.result(SCRAPE_TIMEOUT_S)
        except TimeoutError:
            future.cancel()
            log.warning("a /metrics scrape found the event loop busy for %.0f s", SCRAPE_TIMEOUT_S)
            raise
