"""How the durability run judges acknowledgements against the final log."""

from __future__ import annotations

from odradek.local.durability import misplaced_acks


def test_an_ack_with_an_offset_must_be_found_there_exactly_once() -> None:
    acked = {"a": (0, 5), "b": (0, 6), "c": (1, 0), "d": (2, 3)}
    positions = {"a": [(0, 5)], "b": [(0, 7)], "c": [(1, 0), (1, 1)]}
    assert misplaced_acks(acked, positions) == [
        "b acked at (0, 6), found at [(0, 7)]",
        "c acked at (1, 0), found at [(1, 0), (1, 1)]",
        "d acked at (2, 3), found at None",
    ]


def test_an_ack_without_an_offset_must_be_found_once_in_its_partition() -> None:
    # librdkafka reports an implicitly acknowledged record with no offset (None in Python).
    acked = {"kept": (0, None), "gone": (0, None), "twice": (1, None), "elsewhere": (2, None)}
    positions = {"kept": [(0, 18933)], "twice": [(1, 4), (1, 9)], "elsewhere": [(0, 2)]}
    assert misplaced_acks(acked, positions) == [
        "gone acked at (0, None), found at None",
        "twice acked at (1, None), found at [(1, 4), (1, 9)]",
        "elsewhere acked at (2, None), found at [(0, 2)]",
    ]
