"""--arrival-column: a sample whose delays (arrival − event time) are known — uniform up to 2 s, a tenth of the
rows 30 s later — is fitted back to outOfOrderness, lateRate and lateBy, and the source generating with them
shows the same delays (KS); bad input names the flag. One shared Spark session, 2,000 rows."""

from __future__ import annotations

import numpy as np
import pytest

from connectors.options import parse_duration_us
from impulse.profile.cli import EXIT_USAGE, main
from impulse.profile.run import Settings, profile

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

pytestmark = pytest.mark.integration
ROWS = 2000


def _arrivals(spark):
    rng = np.random.default_rng(7)
    delays = rng.uniform(0, 2_000_000, ROWS) + np.where(rng.random(ROWS) < 0.1, 30_000_000, 0)
    event = 1_700_000_000_000_000 + np.arange(ROWS, dtype=np.int64) * 100_000   # 10 events/s
    rows = [(int(i), int(e), int(e + d)) for i, (e, d) in enumerate(zip(event, delays))]
    return (spark.createDataFrame(rows, "id BIGINT, e BIGINT, a BIGINT")
            .selectExpr("id", "timestamp_micros(e) AS event_time", "timestamp_micros(a) AS arrived"))


def test_the_observed_disorder_becomes_the_sources_disorder_options(spark, tmp_path):
    sample = _arrivals(spark)
    result = profile(sample, Settings(name="arrivals", output=tmp_path, arrival_column="arrived"))
    source = tomllib.loads(result.spec)["source"]
    assert 1.9e6 <= parse_duration_us(source["outOfOrderness"]) <= 2.1e6
    assert abs(float(source["lateRate"]) - 0.1) < 0.02 and 29e6 <= parse_duration_us(source["lateBy"]) <= 31e6
    assert result.rate == pytest.approx(10, rel=1e-3)           # by event_time, not by the arrival column
    line = {r.path: r for r in result.report}["arrived − event_time"]
    assert line.metric == "KS" and line.distance <= 0.06, line


@pytest.mark.parametrize("args, flag, words", [
    (["--arrival-column", "id"], "--arrival-column", "a TIMESTAMP column of the sample (found: BIGINT"),
    (["--arrival-column", "arrived", "--time-column", "arrived"], "--arrival-column", "an event time beside it"),
    (["--arrival-column", "arrived", "--time-column", "nope"], "--time-column", "(found: no such column"),
])
def test_a_bad_arrival_column_exits_2_naming_it(spark, tmp_path, capsys, args, flag, words):
    _arrivals(spark).limit(50).createOrReplaceTempView("arrivals")
    assert main(["--table", "arrivals", "--output", str(tmp_path)] + args) == EXIT_USAGE
    err = capsys.readouterr().err
    assert flag in err and words in err, err
