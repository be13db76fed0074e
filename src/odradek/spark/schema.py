"""Row layout of the `odradek` data source: Spark's Kafka source schema and its sink columns."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from odradek.spark.options import OptionError

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def source_schema(include_headers: bool) -> StructType:
    """The columns of every row read, as Spark's Kafka source has them."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def source_arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow form of source_schema, exactly as PySpark expects record batches to be
    (it converts Spark timestamps to microseconds in UTC)."""
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
        fields.append(pa.field("headers", pa.list_(pa.field("element", header))))
    return pa.schema(fields)


def check_user_schema(schema: StructType, include_headers: bool) -> None:
    """Reject a user-specified schema that is not the source's own."""
    expected = source_schema(include_headers)
    if [(f.name, f.dataType) for f in schema.fields] != [
        (f.name, f.dataType) for f in expected.fields
    ]:
        raise OptionError(
            "schema",
            "the odradek source has a fixed schema; do not call .schema() "
            f"(expected {expected.simpleString()}, got {schema.simpleString()})",
        )


_SINK_COLUMNS: dict[str, tuple[tuple[type[DataType], ...], str]] = {
    "key": ((BinaryType, StringType), "string or binary"),
    "value": ((BinaryType, StringType), "string or binary"),
    "topic": ((StringType,), "string"),
    "partition": ((IntegerType,), "int"),
}


def check_sink_schema(schema: StructType, topic_option: str | None) -> None:
    """Check the columns of a DataFrame written to Kafka; other columns are ignored."""
    names = {f.name.lower(): f for f in schema.fields}
    if "value" not in names:
        raise OptionError("value", "the DataFrame written needs a 'value' column")
    if topic_option is None and "topic" not in names:
        raise OptionError("topic", "set the 'topic' option or give the DataFrame a 'topic' column")
    for name, (types, spelled) in _SINK_COLUMNS.items():
        column = names.get(name)
        if column is not None and not isinstance(column.dataType, types):
            raise OptionError(
                name,
                f"column '{column.name}' must be {spelled}, not {column.dataType.simpleString()}",
            )
    headers = names.get("headers")
    if headers is not None and not _is_headers_type(headers.dataType):
        raise OptionError(
            "headers",
            "column 'headers' must be array<struct<key: string, value: binary>>, not "
            f"{headers.dataType.simpleString()}",
        )


def _is_headers_type(data_type: DataType) -> bool:
    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return False
    fields = data_type.elementType.fields
    return (
        len(fields) == 2
        and fields[0].name == "key"
        and isinstance(fields[0].dataType, StringType)
        and fields[1].name == "value"
        and isinstance(fields[1].dataType, BinaryType)
    )
