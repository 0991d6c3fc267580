"""impulse.profile's pure parts: inference rules, distances, the gate's bounds, the spec's text."""

from __future__ import annotations

import numpy as np
import pytest
from pyspark.sql.types import (
    ArrayType,
    DateType,
    DayTimeIntervalType,
    IntegerType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
)

from connectors.errors import OptionError
from impulse.profile.fidelity import Row as FidelityRow
from impulse.profile.fidelity import ks, misses, parse_bounds, tv
from impulse.profile.infer import faker_cardinality, infer
from impulse.profile.joint import Pair, cramers_v
from impulse.profile.joint import apply as joint_apply
from impulse.profile.leaves import Leaf, leaves
from impulse.profile.measure import Numbered, Stats, family
from impulse.profile.spec import Block, render

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib


def _stats(name, data_type, rows=100, nulls=0, distinct=50, quantiles=(0.0, 5.0, 10.0), dictionary=(),
           patterns=(), steps=()):
    leaf = Leaf((name,), data_type, steps)
    return Stats(leaf, family(data_type), rows, nulls, distinct, quantiles, dictionary, patterns)


def test_a_small_dictionary_becomes_weighted_values_and_nulls_a_null_rate():
    s = _stats("status", StringType(), nulls=10, distinct=2, dictionary=(("paid", 60), ("new", 30)))
    props = dict(infer(s).properties)
    assert props == {"nullRate": "0.1", "kind": "values", "values": "paid,new", "weights": "60,30"}


def test_values_seen_once_are_never_copied_unless_kept():
    s = _stats("code", StringType(), rows=4, distinct=3, dictionary=(("a", 2), ("secret", 1), ("b", 1)))
    assert dict(infer(s).properties)["kind"] == "random"
    assert dict(infer(s, keep_values=True).properties)["values"] == "a,secret,b"
    mostly = _stats("state", StringType(), rows=100, distinct=3, dictionary=(("CA", 60), ("TX", 38), ("DE", 1)))
    assert dict(infer(mostly).properties)["values"] == "CA,TX"     # a value seen once left out


def test_a_faker_pool_is_sized_for_the_distinct_ratio():
    assert faker_cardinality(632, 1000) in range(990, 1011)        # 1 − 1/e of the draws are distinct
    assert faker_cardinality(1000, 1000) == 100_000 and faker_cardinality(1, 1000) == 1


def test_a_value_holding_a_comma_is_not_written_as_a_dictionary():
    s = _stats("city", StringType(), distinct=1, dictionary=(("Paris, FR", 5),))
    assert dict(infer(s).properties)["kind"] != "values"


@pytest.mark.parametrize("name, patterns, provider", [
    ("contact_email", (), "email"), ("userAgent", (), "user_agent"), ("x", (("email", 0.95),), "email"),
    ("x", (("ipv4", 0.99),), "ipv4"), ("first_name", (), "first_name")])
def test_high_cardinality_text_becomes_faker_by_name_or_values(name, patterns, provider):
    s = _stats(name, StringType(), distinct=90, patterns=patterns)
    props = dict(infer(s).properties)
    assert props["kind"] == "faker" and props["provider"] == provider and props["cardinality"] == "467"  # 467·(1 − e^(−100/467)) ≈ 90


def test_other_text_is_random_within_the_observed_lengths_and_unique_uuids_stay_uuids():
    assert dict(infer(_stats("note", StringType(), quantiles=(3.0, 8.0, 29.0))).properties) == {
        "kind": "random", "minLength": "3", "maxLength": "29"}
    unique = _stats("id", StringType(), distinct=100, patterns=(("uuid", 1.0),))
    assert dict(infer(unique).properties) == {"kind": "uuid"}


def test_unique_integers_are_a_sequence_and_others_empirical_quantiles():
    assert dict(infer(_stats("id", IntegerType(), distinct=100, quantiles=(10.0, 60.0, 208.0))).properties) == {
        "kind": "sequence", "start": "10", "step": "2"}
    props = dict(infer(_stats("n", IntegerType(), quantiles=(1.0, 4.6, 9.0))).properties)
    assert props == {"kind": "empirical", "quantiles": "1,5,9"}


def test_dates_are_written_as_iso_dates():
    props = dict(infer(_stats("d", DateType(), quantiles=(19723.0, 19753.0))).properties)
    assert props["quantiles"] == "2024-01-01,2024-01-31"


def test_a_collection_gets_its_size_range_and_map_keys_no_weights():
    arr = _stats("items", ArrayType(IntegerType()), quantiles=(0.0, 1.0, 7.0))
    assert dict(infer(arr).properties) == {"minLength": "0", "maxLength": "7"}
    key = _stats("k", StringType(), rows=5, distinct=2, dictionary=(("a", 3), ("b", 2)), steps=("key",))
    assert dict(infer(key, map_key=True).properties) == {"kind": "values", "values": "a,b"}


def test_unique_numbered_strings_become_a_formatted_sequence():
    padded = _stats("id", StringType(), rows=40, distinct=40)
    padded = Stats(padded.leaf, "string", 40, 0, 40, (6.0, 6.0, 6.0), numbered=Numbered("C-", 1, 40, 4))
    assert dict(infer(padded).properties) == {"kind": "sequence", "start": "1", "step": "1", "format": "C-{:04d}"}
    plain = Stats(padded.leaf, "string", 40, 0, 40, (2.0, 3.0, 4.0), numbered=Numbered("u", 10, 400, 0))
    assert dict(infer(plain).properties) == {"kind": "sequence", "start": "10", "step": "10", "format": "u{}"}
    braces = Stats(padded.leaf, "string", 40, 0, 40, (2.0, 3.0, 4.0), numbered=Numbered("{x}", 1, 40, 0))
    assert dict(infer(braces).properties)["kind"] == "random"  # a prefix format cannot write: text as before


def test_a_collection_s_sizes_are_weighted_by_their_counts_unless_too_many():
    counts = ((1, 90), (3, 6), (4, 4))  # most arrays hold one element; no array holds 2
    arr = _stats("tags", ArrayType(StringType()), quantiles=(1.0, 1.0, 4.0), dictionary=counts)
    inferred = infer(arr)
    assert dict(inferred.properties) == {"minLength": "1", "maxLength": "4", "lengthWeights": "90,0,6,4"}
    assert "weighted as seen" in inferred.comment
    assert "lengthWeights" not in dict(infer(arr, max_dictionary=3).properties)  # 4 sizes over 3: uniform


def test_random_text_lengths_are_weighted_by_their_counts_unless_too_many():
    note = Stats(Leaf(("note",), StringType(), ()), "string", 100, 0, 80, (3.0, 4.0, 6.0),
                 lengths=((3, 10), (4, 70), (6, 20)))
    inferred = infer(note)
    assert dict(inferred.properties) == {"kind": "random", "minLength": "3", "maxLength": "6",
                                         "lengthWeights": "10,70,0,20"}
    assert "weighted as seen" in inferred.comment
    assert "lengthWeights" not in dict(infer(note, max_dictionary=3).properties)  # 4 lengths over 3: uniform


def test_a_type_impulse_cannot_generate_is_named_with_its_column():
    with pytest.raises(OptionError) as err:
        infer(_stats("t", DayTimeIntervalType()))
    assert err.value.option == "column 't'" and "INTERVAL" in str(err.value)


def test_timestamp_ntz_is_profiled_as_a_wall_clock_time():
    props = dict(infer(_stats("t", TimestampNTZType(), quantiles=(0.0, 1e6, 2e6))).properties)
    assert props["quantiles"] == "1970-01-01T00:00:00.000000Z,1970-01-01T00:00:01.000000Z,1970-01-01T00:00:02.000000Z"


def test_leaves_walk_nested_types_in_schema_order():
    schema = StructType([StructField("a", MapType(StringType(), ArrayType(IntegerType()))),
                         StructField("s", StructType([StructField("x.y", IntegerType())]))])
    assert [leaf.name for leaf in leaves(schema)] == ["a", "a.key", "a.value", "a.value.element", "s", "s.`x.y`"]


def test_ks_and_tv_measure_distances():
    a = np.arange(100.0)
    assert ks(a, a) == 0 and ks(a, a + 100) == 1 and ks(a, a + 10) == pytest.approx(0.1)
    assert tv(np.array(["x", "x", "y", "y"]), np.array(["x", "y", "y", "y"])) == pytest.approx(0.25)
    assert ks(np.array([]), np.array([])) == 0 and tv(np.array([]), np.array(["x"])) == 1


def test_bounds_parse_and_gate():
    bounds = parse_bounds("ks=0.05, TV=0.1")
    assert bounds == {"KS": 0.05, "TV": 0.1}
    rows = [FidelityRow("a", "int", "empirical", "KS", 0.06, 0, 0, 1, 1),
            FidelityRow("b", "string", "values", "TV", 0.09, 0, 0, 1, 1)]
    assert [r.path for r in misses(rows, bounds)] == ["a"]
    for bad in ("KS", "XX=0.1", "KS=2"):
        with pytest.raises(OptionError) as err:
            parse_bounds(bad)
        assert err.value.option == "--min-fidelity"


def test_the_spec_is_toml_with_a_comment_per_column():
    text = render("orders", "a INT, b STRING", 12.5, "observed", 7,
                  [Block("a", "100 values", (("kind", "values"), ("values", "1,2"))), Block("b", "text \"q\"", ())],
                  "from somewhere")
    doc = tomllib.loads(text)
    assert doc["rate"] == 12.5 and doc["schema"] == "a INT, b STRING" and doc["name"] == "orders"
    assert doc["source"] == {"seed": "7", "fields.a.kind": "values", "fields.a.values": "1,2"}
    assert "# a: 100 values" in text and '# b: text "q"' in text


def test_cramers_v_is_one_for_dependence_zero_for_independence_and_phi_on_two_by_two():
    assert cramers_v(np.array([[30, 0, 0], [0, 20, 0], [0, 0, 5]])) == pytest.approx(1.0)
    assert cramers_v(np.outer([1, 2, 3], [4, 5])) == pytest.approx(0.0, abs=1e-12)
    assert cramers_v(np.array([[10, 20], [30, 40]])) == pytest.approx(200 / np.sqrt(30 * 70 * 40 * 60))
    assert cramers_v(np.array([[7, 3]])) == 0.0                 # one category on a side: no association


def test_a_joint_pair_lists_the_combinations_in_both_columns():
    blocks = [Block("a", "seen a", (("kind", "values"), ("values", "x,y"), ("weights", "5,5"))),
              Block("b", "seen b", (("nullRate", "0.1"), ("kind", "values"), ("values", "1,2"), ("weights", "6,4")))]
    out = joint_apply(Pair("a", "b", 0.9, (("x", "1", 4), ("y", "2", 3), ("x", "2", 2))), blocks)
    assert dict(out[0].properties) == {"kind": "values", "values": "x,y,x", "weights": "4,3,2"}
    assert dict(out[1].properties) == {"nullRate": "0.1", "kind": "values", "values": "1,2,2", "weights": "4,3,2",
                                       "jointWith": "a"}
    assert "jointly with a (Cramér's V 0.9): the 3 combinations seen" in out[1].comment
