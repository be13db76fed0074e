"""The console's web server: an aiohttp application whose handlers ask the ClusterReader and
render with :mod:`odradek.console.pages`.  Each live page has a fragment URL (``?fragment=1``)
that its script reloads every second.  Errors of the cluster are shown on the page, never
raised to the client: a console is most needed while brokers are failing."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from aiohttp import web

from odradek.common import TopicPartition
from odradek.console import pages
from odradek.console.cluster_reader import EARLIEST, LATEST, ClusterReader, ReadError
from odradek.console.model import ClusterSnapshot, LagHistory, MessagesInRates, placement_rows
from odradek.tasks import cancel_and_wait, start

__all__ = ["make_app"]

T = TypeVar("T")
log = logging.getLogger(__name__)
RATE_INTERVAL_S = 2.0
MAX_BROWSE = 500
READER: web.AppKey[ClusterReader] = web.AppKey("reader", ClusterReader)
HISTORY: web.AppKey[LagHistory] = web.AppKey("history", LagHistory)
RATES: web.AppKey[MessagesInRates] = web.AppKey("rates", MessagesInRates)


def _html(text: str) -> web.Response:
    return web.Response(text=text, content_type="text/html")


async def _or_error(action: Awaitable[T]) -> T | BaseException:
    try:
        return await action
    except ReadError as e:
        return e


def _respond(request: web.Request, title: str, fragment: str, header: str = "") -> web.Response:
    """The fragment alone for the page's script, else the whole page around it (``header``
    above the live part)."""
    if request.query.get("fragment"):
        return _html(fragment)
    live = request.path_qs + ("&" if request.query_string else "?") + "fragment=1"
    return _html(pages.page(title, fragment, live_src=live, header=header))


async def _snapshot_or_page(request: web.Request, title: str,
                            render: Callable[[ClusterSnapshot], Awaitable[str]],
                            header: Callable[[ClusterSnapshot], str] = lambda _: "") -> web.Response:
    try:
        snapshot = await request.app[READER].snapshot()
    except ReadError as e:
        return _respond(request, title, pages.error_block("the cluster's metadata", e))
    return _respond(request, title, await render(snapshot), header(snapshot))


async def placement(request: web.Request) -> web.Response:
    topic = request.query.get("topic") or None

    async def render(snapshot: ClusterSnapshot) -> str:
        return pages.placement_fragment(snapshot, placement_rows(snapshot, topic))

    # The picker stays outside the live part, so that a choice is not reloaded away.
    return await _snapshot_or_page(request, f"Placement: {topic or 'all topics'}", render,
                                   lambda snapshot: pages.topic_picker(snapshot, topic))


async def cluster(request: web.Request) -> web.Response:
    async def render(snapshot: ClusterSnapshot) -> str:
        live = [b.broker_id for b in snapshot.brokers.values() if b.alive]
        return pages.cluster_fragment(snapshot, await request.app[READER].log_dirs(live))

    return await _snapshot_or_page(request, "Cluster", render)


async def _leader_sizes(reader: ClusterReader, snapshot: ClusterSnapshot) -> dict[tuple[str, int], int]:
    """Each partition's size on its leader (DescribeLogDirs of the live brokers)."""
    dirs = await reader.log_dirs([b.broker_id for b in snapshot.brokers.values() if b.alive])
    on_broker = {(broker_id, tp): size for broker_id, found in dirs.items() if not isinstance(found, str)
                 for d in found for tp, size in d.sizes.items()}
    return {(p.topic, p.partition): on_broker.get((p.leader, TopicPartition(p.topic, p.partition)), 0)
            for p in snapshot.partitions}


def _rates(request: web.Request) -> dict[str, float] | None:
    return request.app[RATES].rates if request.app[READER].metrics_urls else None


async def topics(request: web.Request) -> web.Response:
    async def render(snapshot: ClusterSnapshot) -> str:
        sizes: dict[str, int] = {}
        for (topic, _), size in (await _leader_sizes(request.app[READER], snapshot)).items():
            sizes[topic] = sizes.get(topic, 0) + size
        return pages.topics_fragment(snapshot, sizes, _rates(request))

    return await _snapshot_or_page(request, "Topics", render)


async def topic(request: web.Request) -> web.Response:
    name = request.match_info["topic"]
    reader = request.app[READER]

    async def render(snapshot: ClusterSnapshot) -> str:
        tps = [TopicPartition(name, p.partition) for p in snapshot.of_topic(name)]
        if not tps:
            return f"<p>No topic {pages.esc(name)} in the cluster's metadata.</p>"
        ends = await _or_error(reader.offsets(tps, LATEST))
        starts = await _or_error(reader.offsets(tps, EARLIEST))
        return pages.topic_fragment(name, snapshot, {} if isinstance(ends, BaseException) else ends,
                                    {} if isinstance(starts, BaseException) else starts,
                                    await _leader_sizes(reader, snapshot), _rates(request),
                                    await _or_error(reader.topic_configs(name)))

    return await _snapshot_or_page(request, f"Topic {name}", render)


async def messages(request: web.Request) -> web.Response:
    name = request.match_info["topic"]
    reader = request.app[READER]
    try:
        partition = int(request.query.get("partition", "0"))
        count = min(max(int(request.query.get("count", "20")), 1), MAX_BROWSE)
    except ValueError:
        raise web.HTTPBadRequest(text="partition and count are numbers") from None
    read_committed = request.query.get("read_committed") == "1"
    try:
        partitions = [p.partition for p in (await reader.snapshot()).of_topic(name)]
    except ReadError as e:
        return _html(pages.page(f"Messages of {name}", pages.error_block("the cluster's metadata", e)))
    try:
        records: list | BaseException = await reader.browse(name, partition, count, read_committed)
    except Exception as e:  # confluent-kafka's errors (KafkaException) are the page's to show
        records = e
    title = f"Messages of {name}-{partition}"
    return _html(pages.page(title, pages.messages_fragment(name, partitions, partition, count, read_committed,
                                                           records)))


async def groups(request: web.Request) -> web.Response:
    found = await _or_error(request.app[READER].groups())
    if isinstance(found, BaseException):
        return _respond(request, "Consumer groups", pages.error_block("the groups", found))
    return _respond(request, "Consumer groups", pages.groups_fragment(found))


async def group(request: web.Request) -> web.Response:
    group_id = request.match_info["group"]
    found = await _or_error(request.app[READER].group(group_id))
    if isinstance(found, BaseException):
        return _respond(request, f"Group {group_id}", pages.error_block("the group", found))
    history = request.app[HISTORY]
    history.record(group_id, found.lags(), time.time())
    return _respond(request, f"Group {group_id}", pages.group_fragment(found, history))


async def security(request: web.Request) -> web.Response:
    reader = request.app[READER]
    body = pages.security_fragment(await _or_error(reader.acls()), await _or_error(reader.scram_users()))
    return _html(pages.page("ACLs and SCRAM users", body))


async def index(request: web.Request) -> web.Response:
    raise web.HTTPFound("/placement")


async def _sample_rates(app: web.Application) -> None:
    """Sample the brokers' MessagesIn counters every RATE_INTERVAL_S, for the rates the pages show."""
    while True:
        found = await app[READER].messages_in()
        if found is not None:
            app[RATES].update(time.monotonic(), found)
        await asyncio.sleep(RATE_INTERVAL_S)


def make_app(reader: ClusterReader) -> web.Application:
    """The console's application over ``reader`` (closed with the application)."""
    app = web.Application()
    app[READER] = reader
    app[HISTORY] = LagHistory()
    app[RATES] = MessagesInRates()
    app.router.add_get("/", index)
    app.router.add_get("/placement", placement)
    app.router.add_get("/cluster", cluster)
    app.router.add_get("/topics", topics)
    app.router.add_get("/topics/{topic}", topic)
    app.router.add_get("/topics/{topic}/messages", messages)
    app.router.add_get("/groups", groups)
    app.router.add_get("/groups/{group}", group)
    app.router.add_get("/security", security)

    async def lifetime(app: web.Application) -> AsyncIterator[None]:
        sampler = start(_sample_rates(app), "console-rates") if reader.metrics_urls else None
        yield
        if sampler is not None:
            await cancel_and_wait(sampler)
        with contextlib.suppress(*ReadError):
            await reader.close()

    app.cleanup_ctx.append(lifetime)
    return app
