import base64
import json
from datetime import datetime, timezone

import numpy as np
import pyarrow as pa
import pytest

from connectors.rows import as_binary, json_objects


def test_json_matches_the_standard_library():
    stamps = [datetime(2026, 1, 1, 0, 0, 0, 123456, tzinfo=timezone.utc), None,
              datetime(1970, 1, 1, tzinfo=timezone.utc)]
    batch = pa.RecordBatch.from_pydict({
        "i": pa.array([1, None, -3], pa.int64()),
        "f": pa.array([1.5, float("nan"), -0.25]),
        "b": pa.array([True, False, None]),
        "s": pa.array(['quote " back \\ nl \n tab \t', "ctrl \x01", "é✓"]),
        "t": pa.array(stamps, pa.timestamp("us", tz="UTC")),
        "bin": pa.array([b"\x00\xff", None, b"abc"]),
        "nested": pa.array([[1, 2], [], None], pa.list_(pa.int64())),
    })
    rows = [json.loads(text) for text in json_objects(batch).to_pylist()]
    assert [r["i"] for r in rows] == [1, None, -3]
    assert [r["f"] for r in rows] == [1.5, None, -0.25]
    assert [r["b"] for r in rows] == [True, False, None]
    assert [r["s"] for r in rows] == batch.column("s").to_pylist()
    assert [r["t"] for r in rows] == ["2026-01-01T00:00:00.123456Z", None, "1970-01-01T00:00:00.000000Z"]
    assert [r["bin"] for r in rows] == ["AP8=", None, "YWJj"]
    assert [r["nested"] for r in rows] == [[1, 2], [], None]
    assert list(rows[0]) == batch.schema.names


@pytest.mark.parametrize("width", [0, 1, 2, 3, 4, 5, 16, 100])
def test_fixed_width_base64_is_vectorised_and_exact(width):
    rng = np.random.default_rng(width)
    values = [rng.bytes(width) for _ in range(37)]
    column = pa.array(values, pa.binary()).slice(2)  # an offset into the buffers, as Spark's slices have
    rows = [json.loads(t)["p"] for t in json_objects(pa.RecordBatch.from_pydict({"p": column})).to_pylist()]
    assert rows == [base64.b64encode(v).decode() for v in values[2:]]


def test_as_binary():
    assert as_binary(pa.array(["a", "é"])).to_pylist() == [b"a", "é".encode()]
    assert as_binary(pa.array([b"\x00"])).to_pylist() == [b"\x00"]
    assert as_binary(pa.array([7, None])).to_pylist() == [b"7", b"null"]
