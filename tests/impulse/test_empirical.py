"""kind=empirical: a piecewise-linear inverse CDF through given quantiles."""

from __future__ import annotations

import numpy as np
import pytest
from pyspark.sql.types import DateType, DecimalType, DoubleType, IntegerType, TimestampNTZType, TimestampType

from connectors.errors import OptionError
from impulse.fields import generated_column


def _values(data_type, quantiles: str, count: int = 20_000) -> np.ndarray:
    column = generated_column("x", data_type, True, {"kind": "empirical", "quantiles": quantiles}, seed=7)
    return column.array(0, 0, count, 1).to_numpy(zero_copy_only=False)


def test_doubles_follow_the_quantiles_and_stay_within_the_extremes():
    values = _values(DoubleType(), "0,1,2,10,100")
    assert values.min() >= 0 and values.max() <= 100
    # a quarter of the mass between consecutive knots
    shares = np.histogram(values, bins=[0, 1, 2, 10, 100])[0] / len(values)
    assert np.allclose(shares, 0.25, atol=0.02), shares


def test_integers_stay_integral_and_decimals_keep_their_scale():
    ints = _values(IntegerType(), "-5,0,5")
    assert ints.dtype == np.int32 and ints.min() >= -5 and ints.max() <= 5 and len(np.unique(ints)) == 11
    decimals = _values(DecimalType(6, 2), "1.00,2.50")
    assert min(decimals) >= 1 and max(decimals) <= 2.5
    assert all(d == d.quantize(type(d)("0.01")) for d in decimals[:100])


def test_dates_and_timestamps_interpolate_between_their_knots():
    days = _values(DateType(), "2024-01-01,2024-01-31")
    assert str(min(days)) >= "2024-01-01" and str(max(days)) <= "2024-01-31"
    times = _values(TimestampType(), "2024-01-01T00:00:00Z,2024-01-01T01:00:00Z")
    span = (times.max() - times.min()) / np.timedelta64(1, "s")
    assert 3500 < span <= 3600


def test_timestamp_ntz_is_generated_as_a_wall_clock_time():
    times = _values(TimestampNTZType(), "2024-01-01T00:00:00,2024-01-01T01:00:00")
    assert times.dtype == np.dtype("datetime64[us]")
    assert times.min() >= np.datetime64("2024-01-01T00:00:00") and times.max() <= np.datetime64("2024-01-01T01:00:00")


def test_the_same_seed_gives_the_same_values():
    assert (_values(DoubleType(), "0,1") == _values(DoubleType(), "0,1")).all()


@pytest.mark.parametrize("quantiles, words", [("5", "at least 2"), ("3,1", "ascending"), ("a,b", "a number")])
def test_bad_quantiles_name_the_option(quantiles, words):
    with pytest.raises(OptionError) as err:
        _values(DoubleType(), quantiles)
    assert err.value.option == "fields.x.quantiles" and words in str(err.value)
