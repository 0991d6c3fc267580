"""Generated columns without Spark: distributions on 1M+ rows, determinism, and the errors a user sees.

Statistical bounds are several standard errors wide (or a chi-square critical value at p = 0.001), so a
correct generator fails them with negligible probability, and each generator is deterministic: a test
that passes once passes always.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql.types import (BinaryType, BooleanType, ByteType, DateType, DayTimeIntervalType, DecimalType,
                               DoubleType, IntegerType, LongType, StringType, StructField, StructType, TimestampType)

from connectors.errors import OptionError
from impulse.events import Disorder, EventLayout, event_batches
from impulse import fields
from impulse.fields import generated_column
from impulse.options import ImpulseOptions
from impulse.schedule import Schedule
from impulse.schema import row_spec

N = 1_000_000


def column(data_type=LongType(), nullable: bool = True, seed: int = 0, name: str = "c", **props):
    return generated_column(name, data_type, nullable, {k.lower(): str(v) for k, v in props.items()}, seed)


def values(col, count: int = N, subtask: int = 0, first: int = 0, partitions: int = 1) -> pa.Array:
    return col.array(subtask, first, count, partitions)


def chi_square_critical(dof: int, z: float = 3.09) -> float:
    """The chi-square value exceeded with probability ~0.001 (z = 3.09), Wilson–Hilferty approximation."""
    return dof * (1 - 2 / (9 * dof) + z * math.sqrt(2 / (9 * dof))) ** 3


# --- distributions -----------------------------------------------------------------------------------------

def test_normal_mean_and_stddev_and_clip():
    x = values(column(DoubleType(), kind="normal", mean=50, stddev=15)).to_numpy()
    assert abs(x.mean() - 50) < 5 * 15 / math.sqrt(N)
    assert abs(x.std() - 15) < 5 * 15 / math.sqrt(2 * N)
    clipped = values(column(DoubleType(), kind="normal", mean=50, stddev=15, min=0, max=80)).to_numpy()
    assert clipped.min() == 0 and clipped.max() == 80
    assert np.array_equal(clipped, np.clip(x, 0, 80))  # the clip is the only difference


def test_exponential_mean():
    x = values(column(DoubleType(), kind="exponential", mean=3)).to_numpy()
    assert x.min() >= 0 and abs(x.mean() - 3) < 5 * 3 / math.sqrt(N)


def test_random_integers_are_uniform_and_inclusive():
    x = values(column(IntegerType(), kind="random", min=-50, max=49)).to_numpy()
    counts = np.bincount(x + 50, minlength=100)
    assert len(counts) == 100 and counts.min() > 0  # both ends reached, nothing outside
    expected = N / 100
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < chi_square_critical(99), chi2


def test_random_doubles_are_uniform():
    x = values(column(DoubleType(), kind="random", min=10, max=20)).to_numpy()
    assert x.min() >= 10 and x.max() < 20
    counts, _ = np.histogram(x, bins=50, range=(10, 20))
    chi2 = float(((counts - N / 50) ** 2 / (N / 50)).sum())
    assert chi2 < chi_square_critical(49), chi2


def test_zipf_rank_frequency_exponent_and_hot_key_share():
    s, cardinality = 1.1, 1_000_000
    x = values(column(LongType(), kind="zipf", cardinality=cardinality, exponent=s, min=1000), count=2 * N).to_numpy()
    assert x.min() >= 1000 and x.max() < 1000 + cardinality
    counts = np.bincount(x - 1000)
    ranks = np.arange(1, 201)
    slope = np.polyfit(np.log(ranks), np.log(counts[:200]), 1)[0]
    assert abs(slope + s) <= 0.05, slope
    harmonic = float((np.arange(1, cardinality + 1, dtype=np.float64) ** -s).sum())
    share = counts[0] / len(x)
    assert abs(share - 1 / harmonic) < 5 * math.sqrt(share / len(x)), (share, 1 / harmonic)


def test_weighted_values_shares():
    x = values(column(StringType(), kind="values", values="US,DE,FR,IN,BR", weights="40,15,15,20,10"))
    shares = {v["values"]: v["counts"] / N for v in pc.value_counts(x).to_pylist()}
    for value, weight in zip(["US", "DE", "FR", "IN", "BR"], [40, 15, 15, 20, 10]):
        assert abs(shares[value] - weight / 100) <= 0.003, (value, shares[value])


def test_values_without_weights_are_equally_likely_and_typed():
    x = values(column(IntegerType(), kind="values", values="3, 5, 8")).to_numpy()
    counts = {v: int((x == v).sum()) for v in (3, 5, 8)}
    assert sum(counts.values()) == N and all(abs(c / N - 1 / 3) <= 0.003 for c in counts.values())


def test_null_rate_share_and_nulls_do_not_move_the_values():
    plain = values(column(DoubleType(), kind="normal", mean=1))
    nulled = values(column(DoubleType(), kind="normal", mean=1, nullRate=0.25))
    assert abs(nulled.null_count / N - 0.25) <= 0.003
    valid = nulled.is_valid().to_numpy(zero_copy_only=False)
    assert np.array_equal(nulled.drop_null().to_numpy(), plain.to_numpy()[valid])


def test_booleans_true_with_probability():
    x = values(column(BooleanType(), probability=0.1)).to_numpy(zero_copy_only=False)
    assert abs(x.mean() - 0.1) <= 0.003


def test_out_of_orderness_is_bounded_and_late_share_matches():
    layout = EventLayout(0, Schedule(0, 1000.0), 0, None, 0, partitions=1,
                         disorder=Disorder(max_delay_us=5_000_000, late_rate=0.02, late_by_us=60_000_000, seed=3))
    counters = np.arange(N, dtype=np.int64)
    delay = counters * 1000 - layout.timestamps_us(counters, subtask=1)
    late = delay > 5_000_000
    assert delay.min() >= 0 and delay[~late].max() <= 5_000_000
    assert delay[late].min() >= 60_000_000 and delay[late].max() <= 65_000_000
    assert abs(late.mean() - 0.02) <= 0.003
    assert delay[~late].max() > 4_990_000 and delay[~late].mean() == pytest.approx(2_500_000, rel=0.01)


# --- determinism -------------------------------------------------------------------------------------------

REFERENCE = StructType([
    StructField("event_id", LongType()), StructField("user_id", LongType()), StructField("amount", DoubleType()),
    StructField("country", StringType()), StructField("session", StringType()), StructField("is_promo", BooleanType()),
    StructField("coupon", StringType()), StructField("price", DecimalType(10, 2)), StructField("day", DateType()),
    StructField("at", TimestampType()), StructField("blob", BinaryType()), StructField("tiny", ByteType()),
    StructField("label", StringType()), StructField("counter", LongType()), StructField("subtask_index", LongType()),
    StructField("timestamp", TimestampType()),
])
FIELDS = {
    "event_id": {"kind": "sequence", "start": "100", "step": "2"},
    "user_id": {"kind": "zipf", "cardinality": "1000", "exponent": "1.1"},
    "amount": {"kind": "normal", "mean": "50", "stddev": "15", "min": "0"},
    "country": {"kind": "values", "values": "US,DE,FR", "weights": "5,3,2"},
    "session": {"kind": "uuid"},
    "is_promo": {"probability": "0.1"},
    "coupon": {"minlength": "4", "maxlength": "12", "nullrate": "0.5"},
    "price": {"min": "0.99", "max": "999.99"},
    "label": {"kind": "random", "min": "0", "max": "99", "format": "user-{:03d}"},
}


def table(layout: EventLayout, subtask: int, first: int, end: int, rows_per_batch: int) -> pa.Table:
    return pa.Table.from_batches(list(event_batches(subtask, first, end, layout, rows_per_batch)), schema=layout.rows.arrow)


def reference_layout(seed: int = 0, **disorder) -> EventLayout:
    rows = row_spec(REFERENCE, FIELDS, seed=seed, payload_bytes=0)
    return EventLayout(0, Schedule(0, 1000.0), 0, None, 0, rows, partitions=3,
                       disorder=Disorder(seed=seed, **disorder) if disorder else None)


def test_values_do_not_depend_on_batch_boundaries():
    layout = reference_layout(max_delay_us=1000, late_rate=0.1, late_by_us=10_000)
    whole = table(layout, 1, 0, 10_000, 10_000)
    for size in (1, 7, 333, 4096):
        assert table(layout, 1, 0, 10_000, size).equals(whole), size
    assert pa.concat_tables([table(layout, 1, 0, 4_321, 1000), table(layout, 1, 4_321, 10_000, 999)]).equals(whole)


def test_seed_and_partition_change_values_and_same_seed_repeats_them():
    a, b = table(reference_layout(1), 0, 0, 1000, 500), table(reference_layout(1), 0, 0, 1000, 256)
    assert a.equals(b)
    other_seed, other_partition = table(reference_layout(2), 0, 0, 1000, 500), table(reference_layout(1), 1, 0, 1000, 500)
    for name in ("user_id", "amount", "session", "coupon"):
        assert a.column(name) != other_seed.column(name) and a.column(name) != other_partition.column(name)


def test_a_column_does_not_depend_on_the_other_columns():
    alone = row_spec(StructType([REFERENCE["amount"]]), {"amount": FIELDS["amount"]}, seed=0, payload_bytes=0)
    layout = EventLayout(0, Schedule(0, 1000.0), 0, None, 0, alone, partitions=3)
    assert table(layout, 2, 50, 900, 128).column("amount").equals(table(reference_layout(), 2, 50, 900, 128).column("amount"))


def test_sequence_is_the_global_index_over_partitions():
    opts = ImpulseOptions.from_options({"delay": "1ms", "numPartitions": "3", "limit": "10"})
    col = column(LongType(), kind="sequence", start=100, step=2)
    got = sorted(v for i, cap in enumerate(opts.limits) for v in values(col, cap, subtask=i, partitions=3).to_pylist())
    assert got == [100 + 2 * k for k in range(10)]


def test_random_text_lengths_follow_length_weights_and_unweighted_text_is_unchanged():
    """``lengthWeights`` on a random STRING: each length's share is its weight's (a chi-square at p = 0.001); the
    characters and the unweighted lengths are what they were (weights only re-draw the lengths)."""
    weights = np.array([0, 50, 30, 0, 15, 5], dtype=float)            # lengths 3..8
    weighted = values(column(StringType(), minLength=3, maxLength=8, lengthWeights=",".join(f"{w:g}" for w in weights)))
    lengths = pc.utf8_length(weighted).to_numpy()
    counts = np.bincount(lengths - 3, minlength=6)
    assert counts[0] == counts[3] == 0 and lengths.max() == 8         # a weight of 0 is never drawn
    expected = N * weights / weights.sum()
    seen = expected > 0
    assert ((counts[seen] - expected[seen]) ** 2 / expected[seen]).sum() < chi_square_critical(int(seen.sum()) - 1)
    uniform = values(column(StringType(), minLength=3, maxLength=8))
    assert pc.utf8_length(uniform).to_numpy().min() == 3 and np.ptp(np.bincount(pc.utf8_length(uniform).to_numpy()
                                                                                [:60_000])[3:]) < 1_000
    head = pc.utf8_slice_codeunits(weighted, 0, 3)                     # same characters, other lengths
    assert head.equals(pc.utf8_slice_codeunits(uniform, 0, 3))
    again = values(column(StringType(), minLength=3, maxLength=8, lengthWeights="0,50,30,0,15,5"), 5_000, first=777)
    assert again.equals(weighted.slice(777, 5_000))                    # deterministic per seed and event


def test_shapes_of_strings_uuids_decimals_dates():
    t = table(reference_layout(), 0, 0, 20_000, 8192)
    sessions = t.column("session").to_pylist()
    assert len(set(sessions)) == len(sessions)
    assert all(re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", s) for s in sessions)
    coupons = [c for c in t.column("coupon").to_pylist() if c is not None]
    assert {len(c) for c in coupons} == set(range(4, 13)) and all(c.isalnum() and c.isascii() for c in coupons)
    prices = t.column("price").to_pylist()
    assert min(prices) >= pa.scalar(0.99).as_py() and max(prices) <= 999.99 and t.column("price").type.scale == 2
    days = t.column("day").cast(pa.int32()).to_numpy()
    assert days.min() >= 10_957 and days.max() < 21_915  # [2000-01-01, 2030-01-01)
    labels = t.column("label").to_pylist()
    assert set(labels) == {f"user-{k:03d}" for k in range(100)}
    assert t.column("event_id").to_pylist() == [100 + 2 * (3 * c) for c in range(20_000)]
    assert len(t.column("blob")[0].as_py()) == 16 and t.column("tiny").type == pa.int8()


# --- errors: the column, the property, what is allowed ---------------------------------------------------

@pytest.mark.parametrize("data_type,props,option,words", [
    (BooleanType(), {"kind": "zipf"}, "fields.c.kind", "one of random, values"),
    (LongType(), {"kind": "random", "min": "5", "max": "1"}, "fields.c.min/max", "min ≤ max"),
    (ByteType(), {"kind": "random", "max": "300"}, "fields.c.max", "from -128 to 127"),
    (LongType(), {"kind": "zipf"}, "fields.c.cardinality", "distinct values"),
    (LongType(), {"kind": "normal", "length": "3"}, "fields.c.length", "unknown option 'fields.c.length'"),
    (StringType(), {"kind": "uuid", "format": "{}"}, "fields.c.format", "unknown option"),
    (StringType(), {"kind": "zipf", "cardinality": "9", "format": "id-{:x}"}, "fields.c.format", "'{:0Nd}'"),
    (DoubleType(), {"nullrate": "1.5"}, "fields.c.nullRate", "a fraction from 0 to 1"),
    (IntegerType(), {"kind": "values", "values": "1,x"}, "fields.c.values", "an integer for the INT column"),
    (StringType(), {"kind": "values", "values": "a,b", "weights": "1"}, "fields.c.weights", "2 numbers"),
    (DecimalType(5, 2), {"min": "1.234"}, "fields.c.min", "at most 2 digits after the point"),
    (DayTimeIntervalType(), {}, "schema, column 'c'", "and ARRAY, MAP, STRUCT of them"),
    (StringType(), {"minlength": "1", "maxlength": "3", "lengthweights": "1,2"}, "fields.c.lengthWeights",
     "3 weights ≥ 0, not all 0, comma-separated: one per length from minLength 1 to maxLength 3"),
    (StringType(), {"length": "4", "lengthweights": "1"}, "fields.c.lengthWeights", "no weights with a fixed 'length'"),
    (BinaryType(), {"lengthweights": "1"}, "fields.c.lengthweights", "unknown option"),   # named as given
    (StringType(), {"min": "1", "max": "9", "lengthweights": "1"}, "fields.c.lengthweights", "unknown option"),
])
def test_bad_properties_name_the_column_property_and_what_is_allowed(data_type, props, option, words):
    with pytest.raises(OptionError) as err:
        generated_column("c", data_type, True, props, 0)
    assert err.value.option == option and words in str(err.value), str(err.value)


def test_null_rate_on_a_not_null_column_is_refused():
    with pytest.raises(OptionError, match="0 for a NOT NULL column; declare 'c' nullable"):
        column(DoubleType(), nullable=False, nullRate=0.1)


def test_schema_level_errors():
    schema = StructType([StructField("a", LongType()), StructField("counter", IntegerType())])
    with pytest.raises(OptionError, match="BIGINT: 'counter' is a built-in column"):
        row_spec(schema, {}, seed=0, payload_bytes=0)
    with pytest.raises(OptionError, match=r"a column of the schema \(a\); declare 'b'"):
        row_spec(StructType([StructField("a", LongType())]), {"b": {"kind": "uuid"}}, seed=0, payload_bytes=0)
    with pytest.raises(OptionError, match="no fields.* options for 'counter'"):
        row_spec(StructType([StructField("counter", LongType())]), {"counter": {"kind": "sequence"}}, seed=0, payload_bytes=0)
    with pytest.raises(OptionError, match="declare 'x' with .schema"):
        row_spec(None, {"x": {"kind": "uuid"}}, seed=0, payload_bytes=0)
    with pytest.raises(OptionError, match="'payloadBytes'.*no 'payload BINARY' column"):
        row_spec(StructType([StructField("a", LongType())]), {}, seed=0, payload_bytes=10)


@pytest.mark.parametrize("options,option,words", [
    ({"fields.amount.kindd": "normal"}, "fields.amount.kindd", "unknown property 'kindd'"),
    ({"fields.amount.kind": "gauss"}, "fields.amount.kind", "'normal'"),
    ({"fields.kind": "normal"}, "fields.kind", "fields.<column>.<property>"),
    ({"lateRate": "0.1"}, "lateRate/lateBy", "both or neither"),
    ({"lateRate": "2", "lateBy": "1s"}, "lateRate", "a fraction from 0 to 1"),
    ({"outOfOrderness": "soon"}, "outOfOrderness", "a duration"),
    ({"seed": "x"}, "seed", "an integer"),
])
def test_option_errors_found_before_the_schema(options, option, words):
    with pytest.raises(OptionError) as err:
        ImpulseOptions.from_options({"delay": "1ms", **options})
    assert err.value.option == option and words in str(err.value), str(err.value)


def test_the_docs_table_has_a_row_for_each_kind_naming_its_properties():
    """`impulse.fields`'s docstring documents every kind of `KIND_TABLE`, in its order, with each property it reads:
    a kind added to the table without its row (or a property without its mention) fails here."""
    _, _, body, _ = re.split(r"^=+ .*$\n", fields.__doc__, flags=re.MULTILINE)
    rows: dict[str, str] = {}
    for line in body.splitlines():
        if line and not line[0].isspace():
            name = line.split()[0]
            rows[name] = line
        elif line.strip():
            rows[name] += " " + line
    assert list(rows) == [kind.name for kind in fields.KIND_TABLE]
    for kind in fields.KIND_TABLE:
        missing = [p for p in kind.properties if not re.search(rf"\b{p}\b", rows[kind.name])]
        assert not missing, f"the docs' row of kind {kind.name} does not name {missing}"
