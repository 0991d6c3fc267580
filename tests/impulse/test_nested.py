"""Nested columns and Faker text without Spark: shapes, sizes, distinct map keys, null rates at every level,
independence from batch boundaries, Faker pools, and the errors a user sees (the full option path).

Null-rate bounds are 5 standard errors wide: a correct generator fails them with negligible probability, and
each generator is deterministic, so a test that passes once passes always.
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, DateType, DecimalType, DoubleType, IntegerType,
                               LongType, MapType, StringType, StructField, StructType)

from connectors.errors import OptionError
from impulse.changelog import Changelog
from impulse.events import EventLayout, event_batches
from impulse.fields import generated_column
from impulse.options import ImpulseOptions
from impulse.schedule import Schedule
from impulse.schema import row_spec

ROOT = Path(__file__).resolve().parents[2]
N = 20_000


def struct(*fields) -> StructType:
    return StructType([StructField(n, t, nullable) for n, t, nullable in fields])


def rows_of(schema: StructType, options: dict[str, object], *, seed: int = 0, partitions: int = 2, changelog=None):
    opts = ImpulseOptions.from_options({"delay": "1ms", **{k: str(v) for k, v in options.items()}})
    spec = row_spec(schema, opts.fields, seed=seed, payload_bytes=0, changelog=changelog)
    return EventLayout(0, Schedule(0, 1000.0), 0, None, 0, spec, partitions=partitions)


def table(layout: EventLayout, subtask: int = 0, first: int = 0, end: int = N, rows_per_batch: int = 8192) -> pa.Table:
    return pa.Table.from_batches(list(event_batches(subtask, first, end, layout, rows_per_batch)), schema=layout.rows.arrow)


ORDER = struct(
    ("items", ArrayType(struct(("sku", StringType(), False), ("quantity", IntegerType(), False),
                               ("price", DecimalType(10, 2), True)), containsNull=True), True),
    ("attrs", MapType(StringType(), DoubleType(), valueContainsNull=True), True),
    ("address", struct(("city", StringType(), True),
                       ("geo", struct(("lat", DoubleType(), False), ("lon", DoubleType(), False)), True)), True),
    ("grid", ArrayType(ArrayType(IntegerType(), containsNull=False), containsNull=False), False),
)
ORDER_OPTIONS = {
    "fields.items.minLength": 1, "fields.items.maxLength": 5, "fields.items.nullRate": 0.1,
    "fields.items.element.nullRate": 0.05, "fields.items.element.sku.kind": "zipf",
    "fields.items.element.sku.cardinality": 500, "fields.items.element.sku.format": "SKU-{:05d}",
    "fields.items.element.quantity.min": 1, "fields.items.element.quantity.max": 9,
    "fields.items.element.price.kind": "normal", "fields.items.element.price.mean": 20,
    "fields.items.element.price.stddev": 5, "fields.items.element.price.min": 0.01,
    "fields.items.element.price.nullRate": 0.2,
    "fields.attrs.key.kind": "values", "fields.attrs.key.values": "color,size,gift,channel,coupon,promo",
    "fields.attrs.value.min": 0, "fields.attrs.value.max": 100, "fields.attrs.value.nullRate": 0.25,
    "fields.attrs.maxLength": 6,
    "fields.address.nullRate": 0.3, "fields.address.city.nullRate": 0.1,
    "fields.address.geo.nullRate": 0.5, "fields.address.geo.lat.min": -90, "fields.address.geo.lat.max": 90,
    "fields.grid.length": 3, "fields.grid.element.minLength": 0, "fields.grid.element.maxLength": 2,
    "fields.grid.element.element.kind": "sequence",
}


@pytest.fixture(scope="module")
def orders() -> pa.Table:
    return table(rows_of(ORDER, ORDER_OPTIONS))


def lengths(array: pa.Array) -> np.ndarray:
    """Sizes of a list or map array's valid rows."""
    offsets = array.filter(array.is_valid()).offsets.to_numpy()
    return np.diff(offsets)


def within_5_sigma(nulls: int, total: int, rate: float) -> bool:
    return abs(nulls / total - rate) <= 5 * math.sqrt(rate * (1 - rate) / total)


# --- shapes and sizes ----------------------------------------------------------------------------------------

def test_every_nested_shape_has_spark_s_arrow_type_and_typed_values(orders):
    assert orders.schema.field("items").type == pa.list_(pa.field("element", pa.struct([
        pa.field("sku", pa.string(), False), pa.field("quantity", pa.int32(), False),
        pa.field("price", pa.decimal128(10, 2), True)]), True))
    assert orders.schema.field("attrs").type == pa.map_(pa.field("key", pa.string(), False),
                                                          pa.field("value", pa.float64(), True))
    assert orders.schema.field("grid").type == pa.list_(pa.field("element", pa.list_(pa.field("element", pa.int32(),
                                                                                              False)), False))
    items = pc.list_flatten(orders.column("items").combine_chunks())
    valid = items.filter(items.is_valid())
    skus = valid.field("sku").to_pylist()
    assert all(re.fullmatch(r"SKU-\d{5}", s) and int(s[4:]) < 500 for s in skus)
    quantity = valid.field("quantity").to_numpy()
    assert quantity.min() == 1 and quantity.max() == 9
    geo = orders.column("address").combine_chunks().field("geo")
    lat = geo.field("lat").to_numpy(zero_copy_only=False)
    assert lat.min() >= -90 and lat.max() <= 90 and lat.min() < -80 and lat.max() > 80
    values = orders.column("attrs").combine_chunks().items
    finite = values.filter(values.is_valid()).to_numpy()
    assert finite.min() >= 0 and finite.max() <= 100


def test_sizes_stay_within_bounds_and_reach_both(orders):
    items = lengths(orders.column("items").combine_chunks())
    assert items.min() == 1 and items.max() == 5 and set(np.unique(items)) == {1, 2, 3, 4, 5}
    attrs = lengths(orders.column("attrs").combine_chunks())
    assert attrs.min() == 0 and attrs.max() == 6  # the default minLength 0, maxLength 6 = the whole key set
    grid = orders.column("grid").combine_chunks()
    assert set(lengths(grid)) == {3}
    inner = pc.list_flatten(grid)
    assert set(lengths(inner)) == {0, 1, 2}
    # each size is about equally likely (uniform): every size of items within 5 sigma of 1/5
    counts = np.bincount(items, minlength=6)[1:]
    assert all(within_5_sigma(c, len(items), 0.2) for c in counts), counts


def test_length_weights_give_each_size_its_share_within_5_sigma():
    layout = rows_of(struct(("tags", ArrayType(StringType()), True), ("m", MapType(IntegerType(), LongType()), True)),
                     {"fields.tags.minLength": 1, "fields.tags.maxLength": 4, "fields.tags.lengthWeights": "90,0,6,4",
                      "fields.m.maxLength": 2, "fields.m.lengthWeights": "1,1,2", "fields.m.key.min": 0,
                      "fields.m.key.max": 9})
    t = table(layout)
    for name, low, shares in (("tags", 1, [0.9, 0, 0.06, 0.04]), ("m", 0, [0.25, 0.25, 0.5])):
        sizes = lengths(t.column(name).combine_chunks())
        counts = np.bincount(sizes - low, minlength=len(shares))
        assert len(counts) == len(shares) and all(within_5_sigma(c, len(sizes), p) for c, p in zip(counts, shares)), \
            (name, counts)
    again = table(layout, first=777, end=2000, rows_per_batch=100)  # a pure function of (seed, path, event)
    assert again.column("tags").equals(t.column("tags").slice(777, 2000 - 777))


@pytest.mark.parametrize("props,words", [
    ({"minLength": 1, "maxLength": 3, "lengthWeights": "1,2"}, "3 weights ≥ 0, not all 0"),
    ({"minLength": 1, "maxLength": 2, "lengthWeights": "0,0"}, "2 weights ≥ 0, not all 0"),
    ({"minLength": 1, "maxLength": 2, "lengthWeights": "1,-1"}, "2 weights ≥ 0"),
    ({"minLength": 1, "maxLength": 2, "lengthWeights": "a,b"}, "one per length from minLength 1 to maxLength 2"),
    ({"length": 2, "lengthWeights": "1"}, "no weights with a fixed 'length'"),
])
def test_bad_length_weights_are_refused_naming_the_property(props, words):
    with pytest.raises(OptionError) as err:
        rows_of(struct(("tags", ArrayType(StringType()), True)), {f"fields.tags.{k}": v for k, v in props.items()})
    assert err.value.option == "fields.tags.lengthWeights" and words in str(err.value), str(err.value)


def test_default_sizes_are_0_to_4():
    layout = rows_of(struct(("tags", ArrayType(StringType()), True), ("m", MapType(IntegerType(), LongType()), True)), {})
    t = table(layout, end=5000)
    for name in ("tags", "m"):
        assert set(lengths(t.column(name).combine_chunks())) == {0, 1, 2, 3, 4}, name


def test_map_keys_are_distinct_in_every_map_and_each_key_is_equally_likely(orders):
    keys = orders.column("attrs").combine_chunks()
    per_map = keys.filter(keys.is_valid()).to_pylist()
    assert all(len({k for k, _ in m}) == len(m) for m in per_map)
    first = [m[0][0] for m in per_map if m]
    names = "color,size,gift,channel,coupon,promo".split(",")
    assert set(first) == set(names)
    assert all(within_5_sigma(first.count(n), len(first), 1 / 6) for n in names)
    # a small key set is shuffled per map: every pair of keys occurs in two-key maps, about equally often
    pairs = [frozenset(k for k, _ in m) for m in per_map if len(m) == 2]
    assert len(set(pairs)) == 15 and all(within_5_sigma(pairs.count(p), len(pairs), 1 / 15) for p in set(pairs))
    # every key kind with a finite set: integers, random STRING keys of a short length, faker
    layout = rows_of(struct(("a", MapType(IntegerType(), IntegerType()), True),
                            ("b", MapType(StringType(), IntegerType()), True)),
                     {"fields.a.key.min": 5, "fields.a.key.max": 9, "fields.a.length": 5,
                      "fields.b.key.length": 2, "fields.b.minLength": 60, "fields.b.maxLength": 62})
    t = table(layout, end=2000)
    for m in t.column("a").to_pylist():
        assert sorted(k for k, _ in m) == [5, 6, 7, 8, 9]
    for m in t.column("b").to_pylist():
        assert len({k for k, _ in m}) == len(m) >= 60 and all(len(k) == 2 and k.isalnum() for k, _ in m)
    # 62² = 3,844 keys: stratified, each key about equally likely in the first slot
    firsts = [m[0][0][0] for m in t.column("b").to_pylist()]
    assert len(set(firsts)) > 55


def test_null_rates_at_each_level_are_within_5_sigma(orders):
    items = orders.column("items").combine_chunks()
    assert within_5_sigma(items.null_count, len(items), 0.1)
    elements = pc.list_flatten(items)
    assert within_5_sigma(elements.null_count, len(elements), 0.05)
    present = elements.filter(elements.is_valid())
    assert within_5_sigma(present.field("price").null_count, len(present), 0.2)
    assert present.field("sku").null_count == 0
    attrs = orders.column("attrs").combine_chunks()
    assert attrs.null_count == 0 and within_5_sigma(attrs.items.null_count, len(attrs.items), 0.25)
    address = orders.column("address").combine_chunks()
    assert within_5_sigma(address.null_count, len(address), 0.3)
    # a struct's fields are drawn for every row: their own rates hold over all rows
    assert within_5_sigma(address.field("city").null_count, len(address), 0.1)
    assert within_5_sigma(address.field("geo").null_count, len(address), 0.5)


def test_nested_values_do_not_depend_on_batch_boundaries_or_other_columns(orders):
    layout = rows_of(ORDER, ORDER_OPTIONS)
    whole = table(layout, 1, 0, 3000, 3000)
    for size in (1, 7, 1000):
        assert table(layout, 1, 0, 3000, size).equals(whole), size
    assert pa.concat_tables([table(layout, 1, 0, 1234, 500), table(layout, 1, 1234, 3000, 999)]).equals(whole)
    alone = rows_of(StructType([ORDER["attrs"]]), {k: v for k, v in ORDER_OPTIONS.items() if ".attrs." in f".{k}"})
    assert table(alone, end=5000).column("attrs").equals(orders.column("attrs").slice(0, 5000))
    other_seed = table(rows_of(ORDER, ORDER_OPTIONS, seed=1), end=N)
    assert not other_seed.column("items").equals(orders.column("items"))


@pytest.mark.parametrize("data_type,props", [
    (LongType(), {"kind": "sequence", "start": "5"}), (LongType(), {"kind": "zipf", "cardinality": "9"}),
    (DoubleType(), {"kind": "normal", "nullrate": "0.3"}), (StringType(), {"minlength": "0", "maxlength": "9"}),
    (StringType(), {"kind": "uuid"}), (StringType(), {"kind": "values", "values": "a,b,c"}),
    (StringType(), {"kind": "exponential", "format": "{:.2f}"}), (BinaryType(), {"length": "3"}),
    (BooleanType(), {}), (DateType(), {}), (DecimalType(6, 2), {}),
])
def test_a_column_s_kept_slots_are_exactly_those_values(data_type, props):
    """`impulse.nested` asks a leaf for the slots within each event's size only: the same values as all slots,
    filtered, so a value never depends on which other slots exist."""
    column = generated_column("c", data_type, True, props, 7)
    keep = np.random.default_rng(1).random(5000) < 0.6
    assert column.array(1, 100, 5000, 2, keep=keep).equals(column.array(1, 100, 5000, 2).filter(pa.array(keep)))


def test_a_struct_field_named_like_a_property_and_a_dotted_name_are_addressable():
    schema = struct(("meta", struct(("kind", StringType(), True), ("length", IntegerType(), True),
                                    ("a.b", LongType(), True)), True))
    t = table(rows_of(schema, {"fields.meta.kind.kind": "values", "fields.meta.kind.values": "x,y",
                               "fields.meta.length.min": 3, "fields.meta.length.max": 3,
                               "fields.meta.`a.b`.kind": "sequence"}), end=100)
    meta = t.column("meta").combine_chunks()
    assert set(meta.field("kind").to_pylist()) == {"x", "y"} and set(meta.field("length").to_pylist()) == {3}
    assert meta.field("a.b").to_pylist() == [2 * c for c in range(100)]  # global index, 2 partitions


def test_ref_and_changelog_work_beside_nested_columns():
    schema = struct(("id", LongType(), False), ("op", StringType(), False),
                    ("customers", ArrayType(LongType(), containsNull=False), True))
    options = {"startTime": "0", "fields.customers.element.kind": "ref",
               "fields.customers.element.refEventsPerSecond": 1000, "fields.customers.length": 2}
    layout = rows_of(schema, options, changelog=Changelog.parse("id", None, 16, 0), partitions=1)
    t = table(layout, end=1000)
    assert t.column("op").to_pylist()[0] == "insert"
    refs = np.array(t.column("customers").to_pylist())
    assert refs.shape == (1000, 2)
    # event c is scheduled at c ms, when the referenced stream (1000 events/s from the same start) has c + 1 entities
    assert (refs >= 0).all() and (refs <= np.arange(1000)[:, None]).all()


# --- Faker --------------------------------------------------------------------------------------------------

FAKER = struct(("email", StringType(), True), ("ip", StringType(), True), ("city", StringType(), True),
               ("tags", MapType(StringType(), IntegerType()), True))
FAKER_OPTIONS = {"fields.email.kind": "faker", "fields.email.provider": "email",
                 "fields.ip.kind": "faker", "fields.ip.provider": "ipv4", "fields.ip.cardinality": 50,
                 "fields.city.kind": "faker", "fields.city.provider": "city", "fields.city.locale": "de_DE",
                 "fields.tags.key.kind": "faker", "fields.tags.key.provider": "color_name",
                 "fields.tags.key.cardinality": 40}


def faker_table(seed: int = 3) -> pa.Table:
    return table(rows_of(FAKER, FAKER_OPTIONS, seed=seed), end=20_000)


def test_faker_values_are_of_their_kind_and_at_most_cardinality_distinct():
    from faker.providers.address.de_DE import Provider as GermanAddresses

    t = faker_table()
    emails = t.column("email").to_pylist()
    assert all(re.fullmatch(r"[^@\s]+@[^@\s]+\.[a-z]{2,}", e) for e in emails)
    assert 1000 < len(set(emails)) <= 10_000  # the default cardinality
    ips = set(t.column("ip").to_pylist())
    assert len(ips) <= 50 and all(ipaddress.IPv4Address(ip) for ip in ips)
    cities = set(t.column("city").to_pylist())
    assert cities <= set(GermanAddresses.cities) and len(cities) > 100
    for m in t.column("tags").to_pylist():
        assert len({k for k, _ in m}) == len(m)


def test_faker_pools_are_identical_in_another_process_and_change_with_the_seed():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", _OTHER_PROCESS], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    t = faker_table()
    assert json.loads(done.stdout) == {name: t.column(name).to_pylist()[:500] for name in ("email", "ip", "city")}
    assert faker_table(seed=4).column("email") != t.column("email")


_OTHER_PROCESS = """
import json
from tests.impulse.test_nested import faker_table
t = faker_table()
print(json.dumps({name: t.column(name).to_pylist()[:500] for name in ("email", "ip", "city")}))
"""


def test_without_faker_a_faker_column_fails_naming_the_extra():
    code = ("import sys; sys.modules['faker'] = None\n"
            "from tests.impulse.test_nested import faker_table\n"
            "try:\n    faker_table()\nexcept Exception as e:\n    print(type(e).__name__, e)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert ("OptionError invalid value 'faker' for option 'fields.email.kind': expected the 'faker' extra installed "
            "for kind=faker (pip install 'impulse-connectors[faker]')") in done.stdout, done.stdout + done.stderr[-2000:]


# --- errors: the full option path and what is allowed -----------------------------------------------------

@pytest.mark.parametrize("schema,options,option,words", [
    (ORDER, {"fields.items.element.prise.kind": "normal"}, "fields.items.element.prise.kind",
     "its nested paths: items.element, items.element.price"),
    (ORDER, {"fields.items.kind": "values"}, "fields.items.kind", "a property of an ARRAY: nullRate, length"),
    (ORDER, {"fields.address.minLength": 1}, "fields.address.minLength", "a property of a STRUCT: nullRate"),
    (ORDER, {"fields.items.element.sku.nullRate": 0.1}, "fields.items.element.sku.nullRate",
     "0 for a NOT NULL column; declare 'items.element.sku' nullable"),
    (ORDER, {"fields.grid.element.nullRate": 0.1}, "fields.grid.element.nullRate", "ARRAY<T NOT NULL>"),
    (ORDER, {"fields.items.element.quantity.kind": "uuid"}, "fields.items.element.quantity.kind",
     "a kind for a INT column"),
    (ORDER, {"fields.attrs.minLength": 7, "fields.attrs.key.kind": "values", "fields.attrs.key.values": "a,b,c,d,e,f"},
     "fields.attrs.minLength", "at most 6: a map's keys are distinct"),
    (ORDER, {"fields.attrs.key.values": "a,b", "fields.attrs.key.kind": "values", "fields.attrs.maxLength": 3},
     "fields.attrs.maxLength", "at most 2"),
    (ORDER, {"fields.attrs.key.kind": "uuid"}, "fields.attrs.key.kind", "a kind that gives a map's STRING keys a finite"),
    (ORDER, {"fields.attrs.key.nullRate": 0.1}, "fields.attrs.key.nullRate", "they are never null"),
    (ORDER, {"fields.items.minLength": 3, "fields.items.maxLength": 2}, "fields.items.minLength/maxLength",
     "minLength ≤ maxLength"),
    (ORDER, {"fields.items.maxLength": 5000}, "fields.items.maxLength", "from 0 to 4096"),
    (FAKER, {"fields.email.kind": "faker"}, "fields.email.provider", "a Faker provider for kind=faker"),
    (FAKER, {"fields.email.kind": "faker", "fields.email.provider": "emale"}, "fields.email.provider",
     "a Faker provider method that takes no argument"),
    (FAKER, {"fields.email.kind": "faker", "fields.email.provider": "enum"}, "fields.email.provider", "argument"),
    (FAKER, {"fields.email.kind": "faker", "fields.email.provider": "email", "fields.email.locale": "de_XX"},
     "fields.email.locale", "for this language: de, de_AT, de_CH, de_DE"),
    (FAKER, {"fields.email.provider": "email"}, "fields.email.provider", "unknown option"),
])
def test_errors_name_the_full_option_path_and_what_is_allowed(schema, options, option, words):
    with pytest.raises(OptionError) as err:
        rows_of(schema, options)
    assert err.value.option == option and words in str(err.value), str(err.value)
