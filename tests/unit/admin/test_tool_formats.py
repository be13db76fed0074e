"""The text of Kafka's small tools, without a cluster: the console producer's line reader and
the console consumer's formatter (Kafka 2.8), GetOffsetShell's partition rules and time
(Kafka 3.9), DeleteRecordsCommand's offset file and BrokerApiVersionsCommand's lines."""

from __future__ import annotations

import pytest

from odradek.admin.broker_api_versions import broker_block, node_text
from odradek.admin.console import (
    ConsoleError,
    LineReader,
    MessageFormatter,
    line_text,
    parse_key_values,
)
from odradek.admin.delete_records import (
    DeleteRecordsCommandError,
    completed_lines,
    parse_offset_json,
)
from odradek.admin.get_offset_shell import (
    GetOffsetShellError,
    matching,
    offset_lines,
    parse_time,
    parse_topic_partitions,
    topic_rule,
)
from odradek.common import TopicPartition
from odradek.protocol.errors import ErrorCode


def test_line_reader_splits_key_and_value() -> None:
    reader = LineReader.from_properties({"parse.key": "TRUE", "key.separator": "::"})
    assert reader.record(b"k::v::w", 1) == (b"k", b"v::w")
    assert reader.record(b"k::", 2) == (b"k", b"")
    with pytest.raises(ConsoleError, match="No key found on line 3: plain"):
        reader.record(b"plain", 3)
    assert LineReader.from_properties({"parse.key": "true", "ignore.error": "true"}).record(b"plain", 1) == \
        (None, b"plain")
    assert LineReader().record(b"a\tb", 1) == (None, b"a\tb")
    assert [line_text(raw) for raw in (b"a\n", b"b\r\n", b"c")] == [b"a", b"b", b"c"]


def test_message_formatter_columns() -> None:
    record = {"timestamp_type": 1, "timestamp": 5, "partition": 2, "offset": 9, "headers": [("h", b"1"), ("n", None)],
              "key": None, "value": b"v"}
    assert MessageFormatter().format(**record) == b"v\n"
    every = MessageFormatter.from_properties({p: "true" for p in (
        "print.timestamp", "print.partition", "print.offset", "print.headers", "print.key")})
    assert every.format(**record) == b"CreateTime:5\tPartition:2\tOffset:9\th:1,n:null\tnull\tv\n"
    no_value = MessageFormatter.from_properties({"print.key": "true", "print.value": "false", "null.literal": "-"})
    assert no_value.format(**record) == b"-\n"
    assert MessageFormatter(print_timestamp=True).format(**{**record, "timestamp_type": 0, "headers": []}) == \
        b"NO_TIMESTAMP\tv\n"
    assert parse_key_values(["a=b=c", "d"], "--property") == {"a": "b=c", "d": ""}


def test_get_offset_shell_rules() -> None:
    partitions = {"orders": [0, 1, 2, 3], "payments": [0, 1], "__consumer_offsets": [0, 1]}
    assert matching(parse_topic_partitions("orders:1-3,pay.*:1,:0"), partitions, exclude_internal=True) == [
        TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("orders", 2),
        TopicPartition("payments", 0), TopicPartition("payments", 1)]
    assert matching([topic_rule("orders,payments", [1])], partitions, False) == [
        TopicPartition("orders", 1), TopicPartition("payments", 1)]
    assert len(matching([topic_rule(None, [])], partitions, False)) == 8
    assert [parse_time(t) for t in ("latest", "-2", "max-timestamp", "1700000000000")] == [-1, -2, -3, 1700000000000]
    with pytest.raises(GetOffsetShellError, match="Malformed time argument x"):
        parse_time("x")
    # Kafka sorts by the text "topic-partition": partition 10 comes before partition 2.
    assert offset_lines({TopicPartition("t", 2): 5, TopicPartition("t", 10): 1, TopicPartition("t", 3): -1}) == [
        "t:10:1", "t:2:5"]


def test_delete_records_offset_file_and_lines() -> None:
    parsed = parse_offset_json('{"partitions": [{"topic": "a", "partition": 0, "offset": 3}], "version": 1}')
    assert parsed == {TopicPartition("a", 0): 3}
    with pytest.raises(DeleteRecordsCommandError, match="Expected `partition` to be an integer"):
        parse_offset_json('{"partitions": [{"topic": "a", "partition": "0", "offset": 3}]}')
    assert completed_lines({TopicPartition("a", 0): (ErrorCode.none, 3),
                            TopicPartition("a", 1): (ErrorCode.policy_violation, -1)}) == [
        "partition: a-1\terror: org.apache.kafka.common.errors.PolicyViolationException: "
        "Request parameters do not satisfy the configured policy.",
        "partition: a-0\tlow_watermark: 3"]


def test_broker_api_versions_block() -> None:
    block = broker_block(node_text(0, "h", 9092, None), {0: (0, 9), 18: (0, 4), 56: (2, 3), 65: (0, 0)})
    lines = block.splitlines()
    assert lines[0] == "h:9092 (id: 0 rack: null) -> ("
    assert lines[1] == "\tProduce(0): 0 to 9 [usable: 9],"
    assert "\tFetch(1): UNSUPPORTED," in lines
    assert "\tApiVersions(18): 0 to 4 [usable: 3]," in lines
    assert "\tAlterIsr(56): 2 to 3 [unusable: node too new]," in lines
    assert "\tVote(52): UNSUPPORTED," not in lines  # not an API of 2.8's ZooKeeper-mode broker
    assert lines[-2:] == ["\tUNKNOWN(65): 0", ")"]
