"""Rows of every Spark type impulse generates, flat and nested, with nulls, for the record-format tests."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, ByteType, DateType, DecimalType, DoubleType,
                               FloatType, IntegerType, LongType, MapType, ShortType, StringType, StructField,
                               StructType, TimestampType)

UTC = dt.timezone.utc

FLAT = StructType([
    StructField("id", LongType(), False),
    StructField("name", StringType(), True),
    StructField("price", DecimalType(10, 2), True),
    StructField("ts", TimestampType(), True),
    StructField("day", DateType(), True),
    StructField("ok", BooleanType(), True),
    StructField("score", DoubleType(), True),
    StructField("ratio", FloatType(), False),
    StructField("small", ShortType(), False),
    StructField("tiny", ByteType(), False),
    StructField("count", IntegerType(), True),
    StructField("blob", BinaryType(), True),
])

FLAT_ROWS = [
    {"id": 1, "name": "ä \"quoted\"", "price": Decimal("12.34"), "ts": dt.datetime(2026, 1, 2, 3, 4, 5, 678901, UTC),
     "day": dt.date(2026, 1, 2), "ok": True, "score": 0.25, "ratio": 1.5, "small": -300, "tiny": -7, "count": 42,
     "blob": b"\x00\xffab"},
    {"id": -2, "name": None, "price": None, "ts": None, "day": None, "ok": None, "score": None, "ratio": 0.0,
     "small": 0, "tiny": 0, "count": None, "blob": None},
    {"id": 1 << 40, "name": "", "price": Decimal("-99999999.99"), "ts": dt.datetime(1969, 12, 31, 23, 59, 59, 1, UTC),
     "day": dt.date(1970, 1, 1), "ok": False, "score": -1e300, "ratio": -2.25, "small": 32767, "tiny": 127,
     "count": -(1 << 31), "blob": b""},
]

ADDRESS = StructType([StructField("city", StringType(), True), StructField("zip", IntegerType(), True)])
ITEM = StructType([StructField("sku", StringType(), False), StructField("qty", IntegerType(), False),
                   StructField("price", DecimalType(8, 3), True)])
NESTED = StructType([
    StructField("id", LongType(), False),
    StructField("user", StructType([StructField("uid", LongType(), False),
                                    StructField("tags", ArrayType(StringType(), False), False),
                                    StructField("address", ADDRESS, True)]), True),
    StructField("attrs", MapType(StringType(), LongType(), False), False),
    StructField("items", ArrayType(ITEM, False), False),
    StructField("seen", TimestampType(), True),
])

NESTED_ROWS = [
    {"id": 1, "user": {"uid": 7, "tags": ["a", "b"], "address": {"city": "Zürich", "zip": 8001}},
     "attrs": {"x": 1, "y": -2}, "items": [{"sku": "s1", "qty": 2, "price": Decimal("1.250")},
                                          {"sku": "s2", "qty": 1, "price": None}],
     "seen": dt.datetime(2026, 11, 26, 6, 0, 0, 1, UTC)},
    {"id": 2, "user": {"uid": 8, "tags": [], "address": None}, "attrs": {}, "items": [], "seen": None},
    {"id": 3, "user": None, "attrs": {"only": 0}, "items": [{"sku": "", "qty": -1, "price": Decimal("-0.001")}],
     "seen": dt.datetime(2000, 2, 29, 12, 0, tzinfo=UTC)},
]


def batch(struct: StructType, rows: list[dict]) -> pa.RecordBatch:
    """`rows` as the Arrow record batch Spark would hand a sink for `struct` (maps as key/value pairs)."""
    schema = to_arrow_schema(struct, timezone="UTC")

    def arrow_value(value):
        if isinstance(value, dict):
            return {k: arrow_value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [arrow_value(v) for v in value]
        return value

    prepared = []
    for row in rows:
        out = {}
        for field in struct.fields:
            value = arrow_value(row[field.name])
            out[field.name] = list(value.items()) if isinstance(field.dataType, MapType) else value
        prepared.append(out)
    return pa.RecordBatch.from_pylist(prepared, schema=schema)
