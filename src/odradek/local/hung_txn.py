"""A transactional producer for the nemesis's ``hung-txn`` fault (local/nemesis_faults.py): it
opens a transaction, writes one record to each of some partitions, waits for their delivery
reports, prints ``open <json>`` and reads a line from stdin. The fault SIGSTOPs it past its
``transaction.timeout.ms``, continues it and sends the line: it then tries to commit and prints
``outcome committed`` or ``outcome refused <error>``. The coordinator should have aborted the
transaction when its timeout passed, so the commit must be refused and the records never
visible to read_committed.

    python -m odradek.local.hung_txn --bootstrap H:P,... --topic T --id h1 --partitions 0,2 --timeout-ms 4000
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TextIO

from confluent_kafka import KafkaException

from odradek.local.txn_client import transactional_producer

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m odradek.local.hung_txn")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--id", required=True, help="the transaction's id in the history; records <id>.<i>")
    parser.add_argument("--partitions", required=True, help="comma-separated partitions, one record each")
    parser.add_argument("--timeout-ms", type=int, default=4000)
    args = parser.parse_args(argv)
    partitions = [int(p) for p in args.partitions.split(",")]
    producer = transactional_producer({"bootstrap.servers": args.bootstrap}, f"{args.topic}-{args.id}",
                                      lambda line: _say(line, sys.stderr),
                                      transaction_timeout_ms=args.timeout_ms, give_up_s=60)
    offsets: dict[str, int] = {}

    def delivered(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            offsets[msg.value().decode()] = msg.offset()

    records = [(f"{args.id}.{i}", p) for i, p in enumerate(partitions)]
    producer.begin_transaction()
    for value, partition in records:
        producer.produce(args.topic, value=value.encode(), partition=partition, on_delivery=delivered)
    producer.flush(30)
    _say("open " + json.dumps([[v, p, offsets.get(v)] for v, p in records]))
    sys.stdin.readline()  # the fault stops this process here, then continues it
    try:
        producer.commit_transaction(30)
    except KafkaException as e:
        _say(f"outcome refused {e.args[0].name()}")
    else:
        _say("outcome committed")
    return 0


def _say(line: str, stream: TextIO = sys.stdout) -> None:
    """One line of the protocol with the fault (stdout, a pipe), or a log line (stderr)."""
    stream.write(line + "\n")
    stream.flush()


if __name__ == "__main__":
    raise SystemExit(main())
