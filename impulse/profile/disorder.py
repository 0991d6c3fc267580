"""The observed disorder of a sample with an ingestion time (``--arrival-column``), as the source's own disorder
options: ``outOfOrderness``, ``lateRate`` and ``lateBy`` (`impulse.source`).

The source emits each event at its scheduled time and stamps ``timestamp`` earlier by a delay: uniform in
[0, ``outOfOrderness``], plus ``lateBy`` for a ``lateRate`` share of the events. The sample's delay of a row is
its arrival minus its event time (``--time-column``), in µs, over the rows where both are set (an arrival
before its event time counts as 0: a clock skew, counted in the comment). The fit, with Spark aggregates:

- m₀ = the median delay; a delay above 2.5·m₀ is late (beyond the uniform bulk, with a margin);
- ``outOfOrderness`` = 2 × the median of the other delays (a uniform's median is half its width);
- ``lateRate`` = the late share, ``lateBy`` = the late delays' median minus the bulk's (their uniform part).

The report's line for it (`rows`) is the KS distance between the sample's delays and those of the source
generating with the options (a batch read of ``counter`` and ``timestamp``, each delay its scheduled time
minus its ``timestamp``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import TimestampType

from connectors.errors import OptionError
from connectors.options import format_duration_us
from impulse.profile.fidelity import Row, ks
from impulse.schedule import Schedule

__all__ = ["Disorder", "fit", "check", "rows", "LATE_FACTOR"]

#: a delay beyond this many medians is late (the uniform bulk ends at two)
LATE_FACTOR = 2.5
_START = "2026-01-01T00:00:00Z"
_START_US = 1_767_225_600_000_000


@dataclass(frozen=True)
class Disorder:
    """The fitted options and what they were fitted on."""

    arrival: str
    time: str
    out_of_orderness_us: int
    late_rate: float
    late_by_us: int
    rows: int               #: rows with both times
    early: int              #: of which arrived before their event time

    def options(self) -> tuple[tuple[str, str], ...]:
        """The [source] keys: ``outOfOrderness``, and ``lateRate``/``lateBy`` when some rows are late."""
        out = (("outOfOrderness", format_duration_us(self.out_of_orderness_us)),)
        if self.late_rate > 0:
            out += (("lateRate", f"{self.late_rate:.6g}"), ("lateBy", format_duration_us(max(self.late_by_us, 1))))
        return out

    def comment(self) -> str:
        late = (f", {self.late_rate:.3g} of them late by {format_duration_us(max(self.late_by_us, 1))} more"
                if self.late_rate else ", none late")
        early = f" ({self.early} arrived before their event time: counted as 0)" if self.early else ""
        return (f"the disorder of {self.rows} rows, {self.arrival} − {self.time}: uniform up to "
                f"{format_duration_us(self.out_of_orderness_us)}{late}{early}")


def check(sample: DataFrame, arrival: str, time: str | None) -> None:
    """Raise `OptionError` naming ``--arrival-column`` unless it is a TIMESTAMP column beside an event time."""
    types = {f.name: f.dataType for f in sample.schema.fields}
    stamps = [n for n, t in types.items() if isinstance(t, TimestampType)]
    if not isinstance(types.get(arrival), TimestampType):
        found = types[arrival].simpleString().upper() if arrival in types else "no such column"
        raise OptionError("--arrival-column", arrival, f"a TIMESTAMP column of the sample (found: {found}; "
                          f"columns: {', '.join(stamps)})")
    if time is None or time == arrival:
        raise OptionError("--arrival-column", arrival, "an event time beside it: --time-column, or another "
                          "TIMESTAMP column (the first one is taken)")
    if not isinstance(types.get(time), TimestampType):
        found = types[time].simpleString().upper() if time in types else "no such column"
        raise OptionError("--time-column", time, f"a TIMESTAMP column of the sample (found: {found}; columns: "
                          f"{', '.join(stamps)})")


def _delay(arrival: str, time: str) -> F.Column:
    return F.unix_micros(F.col(f"`{arrival}`")) - F.unix_micros(F.col(f"`{time}`"))


def fit(sample: DataFrame, arrival: str, time: str) -> Disorder:
    """The disorder options of `sample` (module docstring)."""
    both = sample.select(_delay(arrival, time).alias("d")).where(F.col("d").isNotNull())
    first = both.agg(F.count(F.lit(1)).alias("n"), F.sum((F.col("d") < 0).cast("long")).alias("early"),
                     F.percentile(F.greatest(F.col("d"), F.lit(0)), 0.5).alias("m")).first()
    if not first["n"]:
        raise OptionError("--arrival-column", arrival, f"rows where both it and {time} are set (none in the sample)")
    d = F.greatest(F.col("d"), F.lit(0))
    cut = LATE_FACTOR * float(first["m"])
    late = d > F.lit(cut)
    second = both.agg(F.percentile(F.when(~late, d), 0.5).alias("bulk"), F.percentile(F.when(late, d), 0.5).alias("late"),
                      F.avg(late.cast("double")).alias("share")).first()
    bulk = float(second["bulk"] or 0.0)
    share = float(second["share"] or 0.0)
    late_by = int(round(float(second["late"]) - bulk)) if share else 0
    return Disorder(arrival, time, int(round(2 * bulk)), share, late_by, int(first["n"]), int(first["early"] or 0))


def rows(spark, sample: DataFrame, disorder: Disorder, seed: int, rate: float) -> list[Row]:
    """The report's line: KS between the sample's delays and the source's with the fitted options."""
    observed = (sample.select(F.greatest(_delay(disorder.arrival, disorder.time), F.lit(0)).cast("double").alias("d"))
                .where(F.col("d").isNotNull()).toArrow()["d"].to_numpy())
    made = (spark.read.format("impulse").schema("counter BIGINT, timestamp TIMESTAMP")
            .options(**dict(disorder.options())).option("seed", seed).option("startTime", _START)
            .option("numPartitions", 1).option("eventsPerSecond", rate).option("limit", len(observed)).load()
            .select("counter", F.unix_micros("timestamp").alias("t")).toArrow())
    scheduled = _START_US + Schedule(0, 1e6 / rate).offsets_us(made["counter"].to_numpy())
    generated = (scheduled - made["t"].to_numpy()).astype(np.float64)
    return [Row(f"{disorder.arrival} − {disorder.time}", "delay", "outOfOrderness"
                + ("+lateRate" if disorder.late_rate else ""), "KS", round(ks(observed, generated), 6), 0.0, 0.0,
                0.0, 0.0)]
