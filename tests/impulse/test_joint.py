"""``kind=values`` with ``jointWith``, without Spark: two columns drawing one position write only the pairs listed,
at their weights; each keeps its own null rate; a partner that is not a ``values`` column is refused."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from connectors.errors import OptionError
from impulse.events import EventLayout, event_batches
from impulse.schedule import Schedule
from impulse.schema import row_spec

CITY = {"kind": "values", "values": "Paris,Lyon,Boston", "weights": "5,3,2"}
COUNTRY = {"kind": "values", "values": "FR,FR,US", "weights": "5,3,2", "jointwith": "city"}
SCHEMA = StructType([StructField("city", StringType()), StructField("country", StringType()),
                     StructField("n", LongType())])


def _table(fields: dict, events: int = 60_000) -> pa.Table:
    rows = row_spec(SCHEMA, fields, seed=3, payload_bytes=0)
    layout = EventLayout(0, Schedule(0, 1000.0), 0, None, 0, rows, 1, None)
    return pa.Table.from_batches(list(event_batches(0, 0, events, layout)))


def test_joint_columns_write_only_the_listed_pairs_at_their_weights():
    table = _table({"city": CITY, "country": COUNTRY})
    pairs = np.char.add(np.char.add(table["city"].to_numpy(zero_copy_only=False).astype(str), "/"),
                        table["country"].to_numpy(zero_copy_only=False).astype(str))
    found, counts = np.unique(pairs, return_counts=True)
    assert set(found) == {"Paris/FR", "Lyon/FR", "Boston/US"}
    shares = dict(zip(found, counts / len(pairs)))
    assert abs(shares["Paris/FR"] - 0.5) < 0.01 and abs(shares["Boston/US"] - 0.2) < 0.01


def test_without_joint_the_pairs_are_independent_and_nulls_stay_per_column():
    table = _table({"city": CITY, "country": {k: v for k, v in COUNTRY.items() if k != "jointwith"}})
    pairs = set(zip(table["city"].to_pylist(), table["country"].to_pylist()))
    assert ("Paris", "US") in pairs                           # the control: independent draws mix them
    nulls = _table({"city": CITY, "country": {**COUNTRY, "nullrate": "0.3"}})
    country = nulls["country"].to_pylist()
    assert abs(country.count(None) / len(country) - 0.3) < 0.01 and nulls["city"].null_count == 0
    kept = [(c, k) for c, k in zip(nulls["city"].to_pylist(), country) if k is not None]
    assert {k for c, k in kept if c == "Boston"} == {"US"}   # the non-null pairs stay the listed ones


@pytest.mark.parametrize("partner", ["n", "nowhere", "country"])
def test_a_partner_that_is_not_a_values_column_is_refused(partner):
    with pytest.raises(OptionError) as err:
        row_spec(SCHEMA, {"city": CITY, "country": {**COUNTRY, "jointwith": partner}}, seed=3, payload_bytes=0)
    assert err.value.option == "fields.country.jointWith" and "kind=values" in str(err.value)
