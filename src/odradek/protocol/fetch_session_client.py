"""The fetching side of a fetch session (KIP-227), as Kafka 2.8's FetchSessionHandler.

A follower that fetches the same partitions round after round need not list them all every
time.  Its first request is a *full* one (session id 0, epoch 0: "make me a session") with
every partition; the leader answers with a session id.  From then on each request is
*incremental*: that session id, the next epoch, only the partitions that are new to the
session or whose fetch fields changed since they were last sent, and in its forgotten topics
the partitions the session holds that this round does not want.  The leader's incremental
answers hold only the partitions with something new; a partition left out had nothing.

Sans-IO: :meth:`FollowerFetchSession.build` says what to send, the caller sends it and
reports what came back with :meth:`~FollowerFetchSession.on_response` (or
:meth:`~FollowerFetchSession.on_send_error` when nothing came back).

Epochs and resets, as in Kafka:

* no session: full request, id 0, epoch 0; a full answer with session id 0 means the
  leader made none, and the next request is again full with id 0, epoch 0;
* an answer with session id S to a full request: next request (S, 1), then (S, 2) ...;
  after 2**31 - 1 the epoch wraps to 1 (0 and -1 are reserved);
* an incremental answer with session id 0: the leader closed the session; next request
  full with id 0, epoch 0;
* top-level error FETCH_SESSION_ID_NOT_FOUND: next request full with id 0, epoch 0;
* any other top-level error, an answer naming a partition the session does not hold (or a
  full answer leaving one out), or a request that got no answer (connection lost, timeout):
  next request full with (S, 0) -- epoch 0 with the old id asks the leader to close S
  and make a new session (Kafka's ``nextCloseExisting``; with no session S is 0).

Per-partition errors do not touch the session.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from odradek.protocol.errors import ErrorCode
from odradek.protocol.replica_fetch import FetchPartitionSpec

__all__ = [
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "INVALID_SESSION_ID",
    "FetchSessionRequest",
    "FollowerFetchSession",
    "next_epoch",
]

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch`` (Kafka's FetchMetadata.nextEpoch)."""
    if epoch < 0:
        return FINAL_EPOCH
    if epoch == _MAX_EPOCH:
        return 1
    return epoch + 1


class FetchSessionRequest(NamedTuple):
    """What one Fetch request carries for the session."""

    session_id: int
    session_epoch: int
    partitions: list[FetchPartitionSpec]  # to put in the request's topics
    forgotten: list[tuple[str, int]]  # to put in its forgotten topics data

    @property
    def is_full(self) -> bool:
        return self.session_epoch in (INITIAL_EPOCH, FINAL_EPOCH)


class FollowerFetchSession:
    """One fetching client's session with one leader (Kafka's FetchSessionHandler).

    Call :meth:`build` once per request, then exactly one of :meth:`on_response` or
    :meth:`on_send_error` for it before the next :meth:`build`.
    """

    __slots__ = ("_partitions", "epoch", "session_id")

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID  # of the next request
        self.epoch = INITIAL_EPOCH  # of the next request
        # What the leader's session holds, as last sent: (topic, partition) -> spec.
        self._partitions: dict[tuple[str, int], FetchPartitionSpec] = {}

    @property
    def is_full(self) -> bool:
        """Whether the next request is a full one."""
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)

    @property
    def partitions(self) -> list[tuple[str, int]]:
        """The partitions the session holds (as the last request left it)."""
        return list(self._partitions)

    def build(self, wanted: Sequence[FetchPartitionSpec]) -> FetchSessionRequest:
        """The next request for fetching ``wanted`` (one spec per partition), and the session
        as it will stand once the leader takes the request."""
        if self.is_full:
            self._partitions = {(spec[0], spec[1]): spec for spec in wanted}
            return FetchSessionRequest(self.session_id, self.epoch, list(wanted), [])
        session = self._partitions
        pending = {(spec[0], spec[1]): spec for spec in wanted}
        altered: list[FetchPartitionSpec] = []
        forgotten: list[tuple[str, int]] = []
        for key, sent in session.items():
            spec = pending.pop(key, None)
            if spec is None:
                forgotten.append(key)
            elif spec != sent:
                altered.append(spec)
        for key in forgotten:
            del session[key]
        for spec in altered:
            session[(spec[0], spec[1])] = spec  # keeps its place in the session
        # What is left in pending is new to the session, in the order wanted lists it;
        # as in Kafka, the request lists the new partitions, then the altered ones.
        added = list(pending.values())
        session.update(pending)
        return FetchSessionRequest(self.session_id, self.epoch, added + altered, forgotten)

    def on_response(self, session_id: int, error_code: int, partitions: Iterable[tuple[str, int]],
                    throttle_time_ms: int = 0) -> bool:
        """Take the answer to the last built request: its top-level session id and error
        code and the (topic, partition) of every partition it holds.  True when the caller
        should use the partitions of the answer; False when the answer is to be ignored
        (an error, or partitions that do not fit the session)."""
        if error_code != ErrorCode.none:
            if error_code == ErrorCode.fetch_session_id_not_found:
                self._initial()
            else:
                self._close_existing()
            return False
        answered = set(partitions)
        if self.is_full:
            if not answered and throttle_time_ms > 0:
                # KIP-219: an empty full answer only says "you are throttled".
                self._initial()
                return False
            if answered != self._partitions.keys():
                self._initial()
                return False
            if session_id == INVALID_SESSION_ID:
                self._initial()
            else:
                self.session_id = session_id
                self.epoch = next_epoch(INITIAL_EPOCH)
            return True
        if not answered.issubset(self._partitions.keys()):
            self._close_existing()
            return False
        if session_id == INVALID_SESSION_ID:
            self._initial()  # the leader closed the session
        else:
            self.epoch = next_epoch(self.epoch)
        return True

    def on_send_error(self) -> None:
        """The last built request got no answer (or the connection it went on is gone): the
        next request is a full one that closes the session and asks for a new one."""
        self._close_existing()

    def reset(self) -> None:
        """Forget the session: the next request is full with session id 0, epoch 0."""
        self._initial()

    def _initial(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH

    def _close_existing(self) -> None:
        self.epoch = INITIAL_EPOCH
