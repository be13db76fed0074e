"""A transactional producer's moves while faults happen around it, shared by the durability
run (local/durability.py) and the nemesis workload (local/nemesis_workload.py): make one whose
transactions are initialised, end a transaction, and learn what became of it after an error.

An outcome is what the client learnt: ``committed``, ``aborted``, or ``unknown`` when it got
no definite answer (a commit that timed out may still complete). A producer left with an
unknown outcome is replaced: the new one's InitProducerId makes the coordinator complete or
abort whatever the old one left open.

A call can also never return: librdkafka's ``send_offsets_to_transaction`` waits without a
bound for a group coordinator it cached while that broker left the cluster's metadata
(librdkafka#5456, #5511, open in 2.16; the same against Kafka's brokers).
:func:`within` gives such a call a deadline; a producer wedged in one is abandoned
(``Wedged``), its transaction's outcome unknown, and replaced.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

from confluent_kafka import KafkaException, Producer

__all__ = ["Wedged", "after_error", "end_transaction", "replace_producer", "transactional_producer", "within"]

_T = TypeVar("_T")


class Wedged(Exception):
    """A client call that did not return within its deadline (it goes on, abandoned, on a
    daemon thread of its own)."""


def within(deadline_s: float, call: Callable[[], _T], what: str) -> _T:
    """``call()``'s result or exception, or Wedged if it has neither after ``deadline_s``."""
    outcome: list[tuple[bool, object]] = []
    thread = threading.Thread(target=lambda: outcome.append(_attempt(call)), name=f"within:{what}", daemon=True)
    thread.start()
    thread.join(deadline_s)
    if not outcome:
        raise Wedged(f"{what} did not return within {deadline_s:.0f} s")
    ok, value = outcome[0]
    if not ok:
        raise value  # type: ignore[misc]
    return value  # type: ignore[return-value]


def _attempt(call: Callable[[], object]) -> tuple[bool, object]:
    try:
        return True, call()
    except BaseException as e:  # handed to the caller's thread
        return False, e


def transactional_producer(config: Mapping[str, object], transactional_id: str, log: Callable[[str], None], *,
                           transaction_timeout_ms: int = 60000, give_up_s: float = 180.0) -> Producer:
    """A producer with ``transactional_id`` whose transactions are initialised; retried with a
    new producer while faults last, for up to ``give_up_s``."""
    deadline = time.monotonic() + give_up_s
    while True:
        producer = Producer({**config, "transactional.id": transactional_id, "linger.ms": 5,
                             "message.timeout.ms": transaction_timeout_ms,
                             "transaction.timeout.ms": transaction_timeout_ms, "log_level": 0})
        try:
            producer.init_transactions(30)
            return producer
        except KafkaException as e:
            if time.monotonic() > deadline:
                raise
            log(f"{transactional_id}: init_transactions failed, retrying with a new producer: {e}")
            time.sleep(1)


def end_transaction(producer: Producer, commit: bool, log: Callable[[str], None], *,
                    give_up_s: float = 120.0) -> str:
    """commit_transaction or abort_transaction, retried while the error is retriable; a commit
    that needs an abort is aborted. Returns the outcome the client learnt."""
    deadline = time.monotonic() + give_up_s
    while True:
        try:
            if commit:
                producer.commit_transaction(30)
                return "committed"
            producer.abort_transaction(30)
            return "aborted"
        except KafkaException as e:
            error = e.args[0]
            if error.retriable() and time.monotonic() < deadline:
                continue
            if commit and error.txn_requires_abort():
                log(f"commit needs an abort: {error}")
                return end_transaction(producer, False, log, give_up_s=give_up_s)
            log(f"{'commit' if commit else 'abort'} failed, outcome unknown to the client: {error}")
            return "unknown"


def after_error(producer: Producer, e: KafkaException, log: Callable[[str], None]) -> str:
    """The outcome of a transaction that failed before its end (a produce, or sending the
    consumer's offsets): aborted where the error allows an abort, else unknown."""
    error = e.args[0]
    log(f"transaction failed before its end: {error}")
    if error.txn_requires_abort():
        return end_transaction(producer, False, log)
    return "unknown"


def replace_producer(producer: Producer, config: Mapping[str, object], transactional_id: str,
                     log: Callable[[str], None], *, transaction_timeout_ms: int = 60000) -> Producer:
    """A new producer for one whose last transaction's outcome is unknown (it may be in a
    fatal state): the new one's InitProducerId settles that transaction, whichever way the
    coordinator had got. A wedged producer (:class:`Wedged`) is only dropped: a call on it
    could block too."""
    try:
        within(5, lambda: producer.flush(1), "flush")
    except (KafkaException, Wedged):  # a producer in a fatal state raises its error again
        pass
    return transactional_producer(config, transactional_id, log, transaction_timeout_ms=transaction_timeout_ms)
