"""The console's HTML, rendered on the server from plain data (no I/O).  Every string that
comes from the cluster or the user goes through :func:`esc`.  A page that updates live wraps
its changing part in ``<div id="live" data-src=...>``, which a few lines of script reload
every second from the fragment URL (the same renderer, without the layout)."""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from urllib.parse import quote

from odradek.console.cluster_reader import BrowsedRecord, ConfigEntry, GroupLag, LogDirSummary
from odradek.console.model import (
    ClusterSnapshot,
    LagHistory,
    PartitionInfo,
    PlacementRow,
    ReplicaState,
    sparkline_svg,
)
from odradek.protocol.errors import ErrorCode, for_code
from odradek.security.acls import Acl, ResourcePattern

__all__ = ["esc", "page"]

REFRESH_MS = 1000
_NAV = (("/placement", "Placement"), ("/cluster", "Cluster"), ("/topics", "Topics"), ("/groups", "Groups"),
        ("/security", "Security"))
_STYLE = """
body{font-family:system-ui,sans-serif;margin:0;color:#222}
nav{background:#2d3e50;padding:.5em 1em}nav a{color:#fff;margin-right:1.2em;text-decoration:none}
main{padding:1em}table{border-collapse:collapse;margin:.5em 0}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;font-size:14px}
th{background:#f3f3f3}td.cell{text-align:center;min-width:5em}
.leader{background:#2e7d32;color:#fff;font-weight:bold}.follower{background:#a5d6a7}
.out-of-isr{background:#ffcc80}.offline{background:#e57373;color:#fff}
td.preferred{outline:2px solid #1565c0;outline-offset:-3px}th.down{background:#e57373;color:#fff}
.legend span{display:inline-block;padding:.1em .5em;margin-right:.4em}.muted{color:#777}
.spark{color:#1565c0;vertical-align:middle}pre{margin:0;white-space:pre-wrap}
"""
_LIVE_SCRIPT = """<script>
const live = document.getElementById("live");
async function refresh() {
  try {
    const r = await fetch(live.dataset.src, {cache: "no-store"});
    if (r.ok) { live.innerHTML = await r.text(); }
  } catch (e) { /* the console itself is gone or busy: try again */ }
  setTimeout(refresh, REFRESH_MS);
}
setTimeout(refresh, REFRESH_MS);
</script>""".replace("REFRESH_MS", str(REFRESH_MS))


def esc(value: object) -> str:
    """``value`` as HTML text (quotes too, so it is safe in attributes)."""
    return escape(str(value), quote=True)


def page(title: str, body: str, live_src: str | None = None, header: str = "") -> str:
    """A whole page: navigation, ``header``, ``body``; with ``live_src``, the body reloads from
    it every second."""
    nav = "".join(f'<a href="{href}">{name}</a>' for href, name in _NAV)
    if live_src is not None:
        body = f'<div id="live" data-src="{esc(live_src)}">{body}</div>{_LIVE_SCRIPT}'
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)} · odradek console</title>"
            f"<style>{_STYLE}</style></head><body><nav>{nav}</nav><main><h1>{esc(title)}</h1>{header}{body}"
            "</main></body></html>")


def error_block(what: str, error: BaseException) -> str:
    return f'<p class="error">Could not read {esc(what)}: {esc(type(error).__name__)}: {esc(error)}</p>'


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], attrs: str = "") -> str:
    """A table; ``rows`` hold HTML already (escape on the way in)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table {attrs}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _topic_link(topic: str) -> str:
    return f'<a href="/topics/{quote(topic, safe="")}">{esc(topic)}</a>'


def _ids(ids: Iterable[int]) -> str:
    return esc(",".join(str(i) for i in ids))


# ---------------------------------------------------------------- placement map

_CELL_TEXT = {ReplicaState.LEADER: "leader", ReplicaState.FOLLOWER: "follower",
              ReplicaState.OUT_OF_ISR: "out of ISR", ReplicaState.OFFLINE: "offline"}


def topic_picker(snapshot: ClusterSnapshot, topic: str | None) -> str:
    options = ['<option value="">all topics</option>'] + [
        f'<option value="{esc(t)}"{" selected" if t == topic else ""}>{esc(t)}</option>' for t in snapshot.topics()]
    return ('<form method="get" action="/placement">Topic: <select name="topic" onchange="this.form.submit()">'
            + "".join(options) + "</select></form>")


def placement_fragment(snapshot: ClusterSnapshot, rows: Sequence[PlacementRow]) -> str:
    """Brokers as columns (rack, address, down), partitions as rows, one cell per replica."""
    headers = []
    for b in snapshot.brokers.values():
        notes = [f"rack {esc(b.rack)}" if b.rack else "no rack", f"{esc(b.host)}:{b.port}" if b.alive else "down"]
        if b.broker_id == snapshot.controller_id:
            notes.append("controller")
        headers.append(f'<th class="{"up" if b.alive else "down"}" data-broker="{b.broker_id}">broker {b.broker_id}'
                       f'<br><span class="muted">{"<br>".join(notes)}</span></th>')
    lines = []
    for row in rows:
        p = row.partition
        cells = []
        for broker_id in snapshot.brokers:
            cell = row.cells.get(broker_id)
            if cell is None:
                cells.append(f'<td class="cell none" data-broker="{broker_id}"></td>')
                continue
            classes = f"cell {cell.state.value}" + (" preferred" if cell.preferred else "")
            mark = " ★" if cell.preferred else ""
            cells.append(f'<td class="{classes}" data-broker="{broker_id}" data-state="{cell.state.value}"'
                         f' data-preferred="{str(cell.preferred).lower()}">{_CELL_TEXT[cell.state]}{mark}</td>')
        lines.append(f'<tr data-topic="{esc(p.topic)}" data-partition="{p.partition}" data-leader="{p.leader}">'
                     f"<td>{_topic_link(p.topic)}</td><td>{p.partition}</td><td>{_ids(p.isr)}</td>{''.join(cells)}</tr>")
    head = "<th>topic</th><th>partition</th><th>ISR</th>" + "".join(headers)
    legend = ('<p class="legend"><span class="leader">leader</span> <span class="follower">follower (in ISR)'
              '</span> <span class="out-of-isr">out of ISR</span> <span class="offline">offline</span> '
              "★ preferred leader (first replica)</p>")
    summary = (f"<p>{len(snapshot.under_replicated())} under-replicated, {len(snapshot.offline())} offline "
               f"partition(s); updated {datetime.datetime.now():%H:%M:%S}</p>")
    return (f'{summary}<table id="placement"><thead><tr>{head}</tr></thead><tbody>{"".join(lines)}</tbody>'
            f"</table>{legend}")


# ---------------------------------------------------------------- cluster

def cluster_fragment(snapshot: ClusterSnapshot, log_dirs: Mapping[int, Sequence[LogDirSummary] | str]) -> str:
    brokers = _table(("id", "address", "rack", "state", "role"), (
        (str(b.broker_id), esc(f"{b.host}:{b.port}") if b.alive else "", esc(b.rack or ""),
         "up" if b.alive else "down", "controller" if b.broker_id == snapshot.controller_id else "")
        for b in snapshot.brokers.values()), 'id="brokers"')

    def partitions(parts: Sequence[PartitionInfo]) -> str:
        if not parts:
            return "<p>none</p>"
        return _table(("topic", "partition", "leader", "replicas", "ISR"), (
            (_topic_link(p.topic), str(p.partition), str(p.leader), _ids(p.replicas), _ids(p.isr))
            for p in parts))

    dirs = []
    for broker_id, found in log_dirs.items():
        if isinstance(found, str):
            dirs.append((str(broker_id), "", esc(found), "", ""))
            continue
        for d in found:
            dirs.append((str(broker_id), esc(d.path), esc(d.error or "ok"), str(d.replicas), _size(d.size)))
    return (f"<p>Controller: broker {snapshot.controller_id}. {len(snapshot.brokers)} broker(s), "
            f"{len(snapshot.topics())} topic(s), {len(snapshot.partitions)} partition(s).</p>"
            f"<h2>Brokers</h2>{brokers}"
            f'<h2>Under-replicated partitions</h2><div id="under-replicated">{partitions(snapshot.under_replicated())}</div>'
            f'<h2>Offline partitions</h2><div id="offline">{partitions(snapshot.offline())}</div>'
            f"<h2>Log directories</h2>{_table(('broker', 'path', 'state', 'replicas', 'size'), dirs, 'id=log-dirs')}")


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


# ---------------------------------------------------------------- topics

def _rate(rates: Mapping[str, float] | None, topic: str) -> str:
    if rates is None:
        return '<span class="muted">unknown (no --metrics)</span>'
    return f"{rates.get(topic, 0.0):.1f}"


def topics_fragment(snapshot: ClusterSnapshot, sizes: Mapping[str, int], rates: Mapping[str, float] | None) -> str:
    rows = []
    under_replicated = {(p.topic, p.partition) for p in snapshot.under_replicated()}
    for topic in snapshot.topics():
        parts = snapshot.of_topic(topic)
        under = sum(1 for p in parts if (p.topic, p.partition) in under_replicated)
        rows.append((_topic_link(topic), str(len(parts)), str(len(parts[0].replicas)), str(under),
                     _size(sizes.get(topic, 0)), _rate(rates, topic)))
    return _table(("topic", "partitions", "replication factor", "under-replicated", "size (leaders)",
                   "messages in /s"), rows, 'id="topics"')


def topic_fragment(topic: str, snapshot: ClusterSnapshot, ends: Mapping[tuple[str, int], int],
                   starts: Mapping[tuple[str, int], int], sizes: Mapping[tuple[str, int], int],
                   rates: Mapping[str, float] | None, configs: Sequence[ConfigEntry] | BaseException) -> str:
    parts = snapshot.of_topic(topic)
    rows = [(str(p.partition), str(p.leader), _ids(p.replicas), _ids(p.isr), esc(starts.get((topic, p.partition), "?")),
             esc(ends.get((topic, p.partition), "?")), _size(sizes.get((topic, p.partition), 0)),
             f'<a href="/topics/{quote(topic, safe="")}/messages?partition={p.partition}">browse</a>') for p in parts]
    if isinstance(configs, BaseException):
        config_html = error_block("the configs", configs)
    else:
        config_html = _table(("name", "value", "source"), (
            (esc(c.name), "(sensitive)" if c.sensitive else esc(c.value), esc(c.source))
            for c in configs), 'id="configs"')
    return (f'<p>Messages in per second: <span id="rate">{_rate(rates, topic)}</span>; '
            f'<a href="/placement?topic={quote(topic, safe="")}">placement map</a></p>'
            + _table(("partition", "leader", "replicas", "ISR", "start offset", "end offset", "size", ""), rows,
                     'id="partitions"')
            + f"<h2>Configs</h2>{config_html}")


def messages_fragment(topic: str, partitions: Sequence[int], partition: int, count: int, read_committed: bool,
                      records: Sequence[BrowsedRecord] | BaseException) -> str:
    options = "".join(f'<option{" selected" if p == partition else ""}>{p}</option>' for p in partitions)
    form = (f'<form method="get">Partition <select name="partition">{options}</select> latest '
            f'<input name="count" type="number" min="1" max="500" value="{count}"> records '
            f'<label><input type="checkbox" name="read_committed" value="1"{" checked" if read_committed else ""}>'
            " read_committed</label> <button>Show</button></form>")
    if isinstance(records, BaseException):
        return form + error_block("the records", records)

    def text(raw: bytes | None) -> str:
        return '<span class="muted">null</span>' if raw is None else f"<pre>{esc(raw.decode(errors='replace'))}</pre>"

    rows = [(str(r.offset), esc(datetime.datetime.fromtimestamp(r.timestamp / 1000, datetime.UTC)
                                 .isoformat(timespec="milliseconds")),
             text(r.key), text(r.value),
             "<br>".join(f"{esc(k)}: {text(v)}" for k, v in r.headers))
            for r in records]
    return form + f"<p>{len(rows)} record(s)</p>" + _table(("offset", "timestamp", "key", "value", "headers"), rows,
                                                         'id="records"')


# ---------------------------------------------------------------- groups

def groups_fragment(groups: Sequence[tuple[str, str, str]]) -> str:
    return _table(("group", "protocol type", "state"), (
        (f'<a href="/groups/{quote(g, safe="")}">{esc(g)}</a>', esc(kind), esc(state)) for g, kind, state in groups),
        'id="groups"')


def group_fragment(group: GroupLag, history: LagHistory) -> str:
    d = group.description
    members = _table(("member", "client id", "host", "assignment"), (
        (esc(m.member_id), esc(m.client_id), esc(m.host),
         esc(", ".join(f"{t}-{p}" for t, p in m.assignment))) for m in d.members), 'id="members"')
    rows = []
    total = 0
    for topic, partition, committed, end in group.rows:
        lag = None if committed is None or end is None else max(end - committed, 0)
        total += lag or 0
        samples = [v for _, v in history.of(d.group_id, topic, partition)]
        rows.append((_topic_link(topic), str(partition), esc("-" if committed is None else committed),
                     esc("-" if end is None else end),
                     f'<span class="lag" data-topic="{esc(topic)}" data-partition="{partition}">'
                     f'{"-" if lag is None else lag}</span>', sparkline_svg(samples),
                     esc(" ".join(str(v) for v in samples[-5:]))))
    return (f'<p>State: <b id="state">{esc(d.state)}</b>; coordinator: broker {d.coordinator[0]}; '
            f'assignment strategy: {esc(d.assignment_strategy or "-")}; total lag: <b id="total-lag">{total}</b></p>'
            f"<h2>Members</h2>{members}<h2>Lag per partition</h2>"
            + _table(("topic", "partition", "committed", "log-end", "lag", "lag over time", "last samples"), rows,
                     'id="lag"'))


# ---------------------------------------------------------------- security

def security_fragment(acls: Mapping[ResourcePattern, frozenset[Acl]] | BaseException,
                      users: Sequence[tuple[str, str]] | BaseException) -> str:
    if isinstance(acls, for_code(ErrorCode.security_disabled)):
        acl_html = '<p id="acls">No authorizer on this cluster: ACLs are off.</p>'
    elif isinstance(acls, BaseException):
        acl_html = error_block("the ACLs", acls)
    else:
        acl_html = _table(("resource type", "name", "pattern", "principal", "host", "operation", "permission"), (
            (esc(r.resource_type.name), esc(r.name), esc(r.pattern_type.name), esc(a.principal), esc(a.host),
             esc(a.operation.name), esc(a.permission.name))
            for r, entries in sorted(acls.items(), key=lambda kv: str(kv[0]))
            for a in sorted(entries, key=lambda a: a.sort_key())), 'id="acls"')
    if isinstance(users, BaseException):
        user_html = error_block("the SCRAM users", users)
    else:
        user_html = _table(("user", "credentials"), ((esc(u), esc(c)) for u, c in users), 'id="scram-users"')
    return f"<h2>ACLs</h2>{acl_html}<h2>SCRAM users</h2>{user_html}"
