"""One side of the comparison: a running cluster (Apache Kafka's or odradek's), the raw
connections a case sends its requests on, and the topics and groups a case sets up.

A case is a function of a :class:`Session`, run once per side with the same arguments; the
session builds requests at the case's version (``s.req.MetadataRequest(...)``: kio's class of
that version, fields the version lacks dropped), sends them to a broker of its side over a
fresh raw connection, and decodes the answers with the project's own codec.  Whatever the
case returns (a response, or a dict of named responses) is what gets compared.
"""

from __future__ import annotations

import datetime
import struct
import sys
import time
import types
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.find_coordinator.v3 import request as find_coordinator_req
from kio.schema.find_coordinator.v3 import response as find_coordinator_resp
from kio.schema.init_producer_id.v2 import request as init_pid_req
from kio.schema.init_producer_id.v2 import response as init_pid_resp
from kio.schema.metadata.v12 import request as metadata_req
from kio.schema.metadata.v12 import response as metadata_resp
from kio.schema.sasl_authenticate.v2 import request as sasl_auth_req
from kio.schema.sasl_authenticate.v2 import response as sasl_auth_resp
from kio.schema.sasl_handshake.v1 import request as sasl_handshake_req
from kio.schema.sasl_handshake.v1 import response as sasl_handshake_resp

from odradek.local.cluster import LocalCluster
from odradek.protocol.errors import ErrorCode
from odradek.protocol.framing import (
    decode_response,
    request_schema,
    response_schema,
)
from odradek.protocol.messages import build
from support.cluster import controller_of
from support.topics import create_topic
from support.waiting import wait_until
from support.wire import RawConnection

__all__ = ["Closed", "NoAnswer", "Outcome", "Req", "Session", "Side", "now_ms"]

_SIZE = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class Closed:
    """What a request got instead of an answer: the broker closed the connection."""

    closed: bool = True


@dataclass(frozen=True, slots=True)
class NoAnswer:
    """What a request got instead of an answer: nothing, within the time allowed, on a
    connection still open."""

    no_answer: bool = True


Outcome = Any  # a decoded response, Closed(), NoAnswer(), or None (a request that expects none)


class Side:
    """A cluster under comparison, named ``kafka`` or ``odradek``.

    On a secure cluster, ``login`` is (user, password) for the SASL PLAIN login of the cases'
    connections and ``admin_login`` that of their setup steps and of the side's own requests;
    topics made through :meth:`topic` exist once per side.
    """

    def __init__(self, name: str, cluster: LocalCluster, *, login: tuple[str, str] | None = None,
                 admin_login: tuple[str, str] | None = None) -> None:
        self.name = name
        self.cluster = cluster
        self.login = login
        self.admin_login = admin_login
        self._topics: set[str] = set()
        self._topic_names: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"Side({self.name})"

    def connect(self, broker_id: int, *, admin: bool = False) -> RawConnection:
        """A fresh connection to one broker, logged in (on a secure cluster) as the cases' user,
        or with ``admin`` as the administrator."""
        conn = RawConnection(self.cluster.brokers[broker_id].port, timeout_s=30, client_id="oracle")
        login = self.admin_login if admin else self.login
        if login is not None:
            _sasl_plain(conn, *login)
        return conn

    @property
    def controller(self) -> int:
        return controller_of(self.cluster)[0]

    def topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
              config: Mapping[str, str] | None = None, assignment: Sequence[Sequence[int]] | None = None) -> str:
        """Create ``name`` (through ZooKeeper, as ``kafka-topics.sh --zookeeper`` would) once,
        and wait until every broker's metadata shows it with leaders and full ISRs."""
        if name not in self._topics:
            create_topic(self.cluster, name, partitions, replication_factor, config,
                         assignment=assignment or [[p % len(self.cluster.brokers) for p in range(
                             i, i + replication_factor)] for i in range(partitions)])
            self._topics.add(name)
        return name

    def topic_name(self, topic_id: str) -> str | None:
        """The topic of one of this cluster's topic ids (None if it has none such). Every broker
        is asked: a topic a case just made is known to the broker that answered the case
        before the others' metadata shows it."""
        for broker_id, broker in self.cluster.brokers.items():
            if topic_id in self._topic_names:
                break
            if broker.alive:
                self._refresh_topic_ids(broker_id)
        return self._topic_names.get(topic_id)

    def topic_id(self, name: str) -> uuid.UUID:
        """This cluster's id of a topic."""
        for topic_id, topic in self._topic_names.items():
            if topic == name:
                return uuid.UUID(topic_id)
        self._refresh_topic_ids()
        return uuid.UUID(next(i for i, t in self._topic_names.items() if t == name))

    def warm_up(self) -> None:
        """Create the internal topics (FindCoordinator does) and get a first block of producer
        ids, so that no case's answer depends on whether an earlier case did."""
        conn = self.connect(next(iter(self.cluster.brokers)), admin=True)
        try:
            for key_type in (0, 1):
                wait_until(lambda key_type=key_type: conn.request(
                    find_coordinator_req.FindCoordinatorRequest(key="warm-up", key_type=key_type),
                    find_coordinator_resp.FindCoordinatorResponse).error_code == ErrorCode.none,
                    timeout=120, message=f"{self.name}: the coordinators (key type {key_type})")
            wait_until(lambda: conn.request(init_pid_req.InitProducerIdRequest(
                transactional_id=None, transaction_timeout=datetime.timedelta(minutes=1)),
                init_pid_resp.InitProducerIdResponse).error_code == ErrorCode.none,
                timeout=60, message=f"{self.name}: a producer id")
        finally:
            conn.close()

    def leader(self, topic: str, partition: int) -> int:
        """The partition's leader, as the first broker's metadata says."""
        (t,) = self._metadata([topic]).topics
        return next(p.leader_id for p in t.partitions if p.partition_index == partition)

    def _refresh_topic_ids(self, broker_id: int | None = None) -> None:
        self._topic_names.update({str(t.topic_id): t.name for t in self._metadata(None, broker_id).topics})

    def _metadata(self, topics: Sequence[str] | None, broker_id: int | None = None) -> Any:
        conn = self.connect(next(iter(self.cluster.brokers)) if broker_id is None else broker_id, admin=True)
        try:
            return conn.request(metadata_req.MetadataRequest(
                topics=None if topics is None else tuple(
                    metadata_req.MetadataRequestTopic(name=t, topic_id=None) for t in topics),
                allow_auto_topic_creation=False, include_topic_authorized_operations=False),
                metadata_resp.MetadataResponse)
        finally:
            conn.close()


def _sasl_plain(conn: RawConnection, user: str, password: str) -> None:
    handshake = conn.request(sasl_handshake_req.SaslHandshakeRequest(mechanism="PLAIN"),
                             sasl_handshake_resp.SaslHandshakeResponse)
    assert handshake.error_code == ErrorCode.none, handshake
    token = b"\0" + user.encode() + b"\0" + password.encode()
    auth = conn.request(sasl_auth_req.SaslAuthenticateRequest(auth_bytes=token), sasl_auth_resp.SaslAuthenticateResponse)
    assert auth.error_code == ErrorCode.none, auth


class Req:
    """Builds one API's request classes at one version: ``req.MetadataRequest(topics=...)``
    is kio's class of that version (or the control-plane one), built with the fields that
    version has; lists become tuples."""

    def __init__(self, api_key: int, version: int) -> None:
        schema = request_schema(api_key, version)
        if schema is None:
            raise LookupError(f"no request schema for api key {api_key} version {version}")
        self.api_key = api_key
        self.version = version
        self.module: types.ModuleType = sys.modules[schema.__module__]

    def __getattr__(self, name: str) -> Callable[..., Any]:
        cls = getattr(self.module, name, None)
        if cls is None:
            # A class this version does not have (LeaveGroup's MemberIdentity before v3): the
            # field that would hold it is absent too, and build() drops whatever is made here.
            return lambda **values: None

        def make(**values: Any) -> Any:
            return build(cls, **{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})

        return make

    def has(self, field_name: str, cls_name: str) -> bool:
        """Whether this version's ``cls_name`` has the field (to skip a case's step)."""
        return field_name in getattr(self.module, cls_name).__dataclass_fields__


@dataclass
class Session:
    """One case's run on one side: its request version, its connections (one per broker,
    opened on first use, reopened after the broker closed one) and its naming."""

    side: Side
    api_key: int
    version: int
    case_id: str
    req: Req = field(init=False)
    _conns: dict[tuple[int, bool], RawConnection] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.req = Req(self.api_key, self.version)

    def at(self, api_key: int, version: int) -> Req:
        """Request classes of another API (a setup step's)."""
        return Req(api_key, version)

    def name(self, kind: str = "t") -> str:
        """A name unique to this case and version, the same on both sides."""
        return f"{kind}-{self.case_id}-v{self.version}".replace("_", "-")[:200]

    def topic(self, suffix: str = "", partitions: int = 1, replication_factor: int = 1,
              config: Mapping[str, str] | None = None) -> str:
        """A topic of this case's own (created once per side)."""
        return self.side.topic(self.name("t") + suffix, partitions, replication_factor, config)

    def leader(self, topic: str, partition: int = 0) -> int:
        """The broker leading a partition on this side (the only one, on a one-broker cluster)."""
        brokers = self.side.cluster.brokers
        return next(iter(brokers)) if len(brokers) == 1 else self.side.leader(topic, partition)

    def call(self, payload: Any, broker: int = 0, timeout: float = 30.0, *, admin: bool = False) -> Outcome:
        """Send ``payload`` to ``broker`` and return its decoded answer, :class:`Closed`, or
        :class:`NoAnswer` when none came within ``timeout`` seconds; with ``admin``, on the
        administrator's connection (a secure cluster's setup steps)."""
        key = (broker, admin)
        conn = self._conn(key)
        try:
            conn.send(payload)
        except OSError:
            self._drop(key)
            return Closed()
        if _expects_no_response(payload):
            return None
        frame = self._receive(key, timeout)
        if not isinstance(frame, bytes):
            return frame
        schema = response_schema(type(payload).__api_key__, type(payload).__version__)
        correlation, response = decode_response(frame, schema)
        assert correlation == conn.correlation
        return response

    def raw(self, data: bytes, broker: int = 0, timeout: float = 5.0) -> bytes | Closed | NoAnswer:
        """Send raw bytes; the next response frame (without its size), :class:`Closed`, or
        :class:`NoAnswer` if nothing came within ``timeout`` seconds."""
        key = (broker, False)
        conn = self._conn(key)
        try:
            conn.sock.sendall(data)
        except OSError:
            self._drop(key)
            return Closed()
        return self._receive(key, timeout)

    def _receive(self, key: tuple[int, bool], timeout: float) -> bytes | Closed | NoAnswer:
        """One response frame read with a deadline, telling a closed connection from silence."""
        sock = self._conns[key].sock
        deadline = time.monotonic() + timeout
        data = b""
        wanted = _SIZE.size
        try:
            while len(data) < wanted:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return NoAnswer()
                sock.settimeout(remaining)
                chunk = sock.recv(wanted - len(data))
                if not chunk:
                    self._drop(key)
                    return Closed()
                data += chunk
                if len(data) == _SIZE.size:
                    wanted += _SIZE.unpack(data)[0]
        except TimeoutError:
            return NoAnswer()
        except OSError:
            self._drop(key)
            return Closed()
        return data[_SIZE.size:]

    def wait(self, condition: Callable[[], Any], message: str, timeout: float = 30.0) -> Any:
        """wait_until, for a step whose outcome settles in the background (markers, ISRs)."""
        return wait_until(condition, timeout=timeout, message=f"{self.side.name}: {message}")

    def poll(self, ask: Callable[[], Any], done: Callable[[Any], bool], timeout: float) -> Any:
        """``ask()`` until ``done`` holds for its answer or ``timeout`` passes; the last answer
        (for an outcome that may never come on one side, such as an auto-created topic)."""
        deadline = time.monotonic() + timeout
        while True:
            answer = ask()
            if done(answer) or time.monotonic() >= deadline:
                return answer
            time.sleep(0.05)

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def _conn(self, key: tuple[int, bool]) -> RawConnection:
        if key not in self._conns:
            self._conns[key] = self.side.connect(key[0], admin=key[1])
        return self._conns[key]

    def _drop(self, key: tuple[int, bool]) -> None:
        conn = self._conns.pop(key, None)
        if conn is not None:
            conn.close()


def _expects_no_response(payload: Any) -> bool:
    return type(payload).__name__ == "ProduceRequest" and payload.acks == 0


def now_ms() -> int:
    """The timestamp records are built with: one per test run, so both sides get the same bytes."""
    return _RUN_STARTED_MS


_RUN_STARTED_MS = int(time.time() * 1000)
