"""The hand-written ProduceResponse (v3-v9) writes, byte for byte, what kio's generic writer
(``framing.encode_response``) writes for the payload ``broker.apis.produce`` builds."""

from __future__ import annotations

import datetime
import random
from collections.abc import Sequence
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode

from odradek.protocol.framing import decode_response, encode_response
from odradek.protocol.messages import build, response_module
from odradek.protocol.produce_response import ProducedPartition, encode_produce_response

VERSIONS = range(3, 10)  # kio has no v0-v2 (test_legacy_records.py checks them)
_UTC = datetime.UTC
_ERROR_CODES = [int(code) for code in ErrorCode]
# The largest millisecond timestamp a datetime holds (produce.py goes through datetime).
_MAX_APPEND_TIME = int(datetime.datetime.max.replace(tzinfo=_UTC).timestamp() * 1000) - 86_400_000
_ALPHABET = "abcXYZ019._-éß日本語🦆\u00a0"

Topics = Sequence[tuple[str, Sequence[ProducedPartition]]]


def _kio_payload(version: int, topics: Topics, throttle_time_ms: int = 0) -> Any:
    """The kio ProduceResponse, built the way broker/apis/produce.py builds it."""
    m = response_module(0, version)

    def record_errors(errors: tuple[tuple[int, str | None], ...]) -> tuple[object, ...]:
        if not errors or not hasattr(m, "BatchIndexAndErrorMessage"):
            return ()
        return tuple(build(m.BatchIndexAndErrorMessage, batch_index=index, batch_index_error_message=message)
                     for index, message in errors)

    return build(m.ProduceResponse, throttle_time=throttle_time_ms, responses=tuple(
        build(m.TopicProduceResponse, name=name, partition_responses=tuple(
            build(m.PartitionProduceResponse, index=p.index, error_code=p.error_code, base_offset=p.base_offset,
                  log_append_time=None if p.log_append_time_ms < 0 else datetime.datetime.fromtimestamp(
                      p.log_append_time_ms / 1000, _UTC),
                  log_start_offset=p.log_start_offset, record_errors=record_errors(p.record_errors),
                  error_message=p.error_message)
            for p in partitions))
        for name, partitions in topics))


def _text(rng: random.Random, max_size: int) -> str:
    return "".join(rng.choices(_ALPHABET, k=rng.randint(0, max_size)))


def _message(rng: random.Random) -> str | None:
    kind = rng.randrange(4)  # null, empty, short, or long (90 chars: > 127 bytes)
    return None if kind == 0 else "" if kind == 1 else _text(rng, 10 if kind == 2 else 90)


def _i64(rng: random.Random) -> int:
    return rng.choice([-1, 0, rng.randint(-(2**63), 2**63 - 1), rng.randint(0, 2**40), 2**63 - 1, -(2**63)])


def _partition(rng: random.Random) -> ProducedPartition:
    return ProducedPartition(
        index=rng.choice([0, rng.randint(0, 1000), rng.randint(-(2**31), 2**31 - 1)]),
        error_code=rng.choice(_ERROR_CODES),
        base_offset=_i64(rng),
        log_append_time_ms=rng.choice([-1, -2, -(2**63), 0, rng.randint(0, _MAX_APPEND_TIME),
                                       rng.randint(1_600_000_000_000, 1_800_000_000_000)]),
        log_start_offset=_i64(rng),
        record_errors=tuple((rng.randint(-(2**31), 2**31 - 1), _message(rng))
                            for _ in range(rng.choice([0, 0, 1, 3]))),
        error_message=_message(rng))


def _topics(rng: random.Random) -> list[tuple[str, list[ProducedPartition]]]:
    shape = rng.random()
    if shape < 0.05:  # counts that take two varint bytes
        return [(_text(rng, 8), [_partition(rng) for _ in range(130)])]
    if shape < 0.1:
        return [(_text(rng, 3), [_partition(rng)]) for _ in range(140)]
    return [(_text(rng, rng.choice([5, 20, 150])), [_partition(rng) for _ in range(rng.randint(0, 5))])
            for _ in range(rng.randint(0, 5))]


@pytest.mark.parametrize("version", VERSIONS)
def test_same_bytes_as_kio(version: int) -> None:
    rng = random.Random(1000 + version)
    for _ in range(300):
        topics = _topics(rng)
        correlation_id = rng.randint(-(2**31), 2**31 - 1)
        throttle_time_ms = rng.choice([0, 0, rng.randint(0, 2**31 - 1)])
        expected = encode_response(_kio_payload(version, topics, throttle_time_ms), correlation_id)
        assert encode_produce_response(correlation_id, version, topics, throttle_time_ms) == expected


@pytest.mark.parametrize("version", VERSIONS)
def test_kio_decodes_the_same_payload(version: int) -> None:
    rng = random.Random(2000 + version)
    schema = load_response_schema(0, version)
    for _ in range(100):
        topics = _topics(rng)
        frame = encode_produce_response(7, version, topics, 25)
        assert int.from_bytes(frame[:4], "big", signed=True) == len(frame) - 4
        correlation_id, payload = decode_response(frame[4:], schema)
        assert correlation_id == 7
        assert payload == _kio_payload(version, topics, 25)


@pytest.mark.parametrize("version", VERSIONS)
def test_defaults_and_empty(version: int) -> None:
    expected = encode_response(_kio_payload(version, []), 1)
    assert encode_produce_response(1, version, []) == expected
    topics = [("t", [ProducedPartition(0, 0, 42)])]
    assert encode_produce_response(1, version, topics) == encode_response(_kio_payload(version, topics), 1)


def test_error_code_members_and_ints_write_alike() -> None:
    as_int = [("t", [ProducedPartition(3, 6, -1)])]
    as_member = [("t", [ProducedPartition(3, ErrorCode.not_leader_or_follower, -1)])]
    assert encode_produce_response(5, 9, as_int) == encode_produce_response(5, 9, as_member)


@pytest.mark.parametrize("version", [-1, 10])
def test_unsupported_versions(version: int) -> None:
    with pytest.raises(ValueError, match="not supported"):
        encode_produce_response(1, version, [])
