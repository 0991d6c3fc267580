"""Two answers of one query compared, as the load harness's ``--check`` and ``impulse-nexmark --check`` both do it.

`compare` takes the expected answer and the delivered rows as DataFrames and compares them as multisets of rows:
both sides are rendered by Spark's ``to_json`` (so a target's JSON values, parsed with the answer's schema, meet
the answer's own rows); counts per distinct row give `CheckResult.lost` (expected more often than delivered),
`CheckResult.duplicated` (delivered more often than expected, for rows the answer has) and
`CheckResult.unexpected` (delivered rows the answer does not have), with up to `EXAMPLES` rows of each kind.

A stream's answer is not all final while it runs: `last_watermark` reads a query's newest event-time watermark,
`final_rows` keeps the rows a finality rule makes final under it, and `latest` reduces an update stream to its
final row per key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from pyspark.sql import Window
from pyspark.sql import functions as F

__all__ = ["CheckResult", "EXAMPLES", "compare", "last_watermark", "final_rows", "latest"]

EXAMPLES = 3   # rows shown per kind of difference


@dataclass(frozen=True)
class CheckResult:
    """The comparison of the delivered rows with the expected ones (counts of rows; `examples`: up to
    `EXAMPLES` rows, as JSON, per kind of difference; `basis`: what was compared, for the summary)."""

    expected: int
    delivered: int
    lost: int
    duplicated: int
    unexpected: int
    examples: Mapping[str, Sequence[str]] = field(default_factory=dict)
    basis: str = ""
    unique: tuple[str, ...] = ()   # key columns each delivered row must hold a distinct value of (none: not checked)
    repeated: int = 0              # with `unique`: delivered rows repeating a key (beyond its first)

    @property
    def passed(self) -> bool:
        return self.lost == 0 and self.duplicated == 0 and self.unexpected == 0 and self.repeated == 0

    def to_json(self) -> dict:
        """``{passed, expected, delivered, lost, duplicated, unexpected}`` (the report's ``check``), with `unique`
        also ``unique`` (the key columns) and ``repeated``."""
        out = {"passed": self.passed, "expected": self.expected, "delivered": self.delivered, "lost": self.lost,
               "duplicated": self.duplicated, "unexpected": self.unexpected}
        if self.unique:
            out.update(unique=list(self.unique), repeated=self.repeated)
        return out

    def line(self) -> str:
        """``check: pass`` or ``check: FAIL: expected N, delivered M: L lost, D duplicated, U unexpected``, with
        `unique` followed by ``, R repeated (COLS)``."""
        if self.passed:
            return "check: pass"
        repeated = f", {self.repeated:,} repeated ({', '.join(self.unique)})" if self.unique else ""
        return (f"check: FAIL: expected {self.expected:,}, delivered {self.delivered:,}: {self.lost:,} lost, "
                f"{self.duplicated:,} duplicated, {self.unexpected:,} unexpected{repeated}")

    def lines(self) -> list[str]:
        """`line`, what was compared, and the example rows."""
        out = [self.line() + (f" ({self.expected:,} rows: {self.basis})" if self.passed and self.basis else "")]
        if not self.passed and self.basis:
            out.append(f"  compared: {self.basis}")
        for kind in ("lost", "duplicated", "unexpected", "repeated"):
            for row in self.examples.get(kind, ()):
                out.append(f"  {kind}: {row}")
        return out


def compare(expected, delivered, basis: str = "") -> CheckResult:
    """Compare two DataFrames as multisets of rows (same column names; `delivered`'s are selected in `expected`'s
    order); see the module docstring for the counts."""
    columns = list(expected.columns)
    key = F.to_json(F.struct(*[F.col(f"`{c}`") for c in columns]))
    if set(delivered.columns) >= set(columns):
        delivered_rows = delivered.select(key.alias("row"))
    else:  # not the answer's shape at all: every delivered row is unexpected
        delivered_rows = delivered.select(F.to_json(F.struct("*")).alias("row"))
    e = expected.select(key.alias("row")).groupBy("row").agg(F.count(F.lit(1)).alias("e"))
    d = delivered_rows.groupBy("row").agg(F.count(F.lit(1)).alias("d"))
    joined = e.join(d, "row", "full_outer").fillna(0, ["e", "d"]).cache()
    try:
        totals = joined.agg(
            F.sum("e").alias("expected"), F.sum("d").alias("delivered"),
            F.sum(F.greatest(F.col("e") - F.col("d"), F.lit(0))).alias("lost"),
            F.sum(F.when(F.col("e") > 0, F.greatest(F.col("d") - F.col("e"), F.lit(0))).otherwise(0)).alias("dup"),
            F.sum(F.when(F.col("e") == 0, F.col("d")).otherwise(0)).alias("unexpected")).first()
        counts = {name: int(totals[name] or 0) for name in ("expected", "delivered", "lost", "dup", "unexpected")}
        examples: dict[str, list[str]] = {}
        for kind, condition in (("lost", F.col("e") > F.col("d")), ("duplicated", (F.col("e") > 0) & (F.col("d") > F.col("e"))),
                                ("unexpected", F.col("e") == 0)):
            if counts["dup" if kind == "duplicated" else kind]:
                rows = joined.where(condition).orderBy("row").limit(EXAMPLES).collect()
                examples[kind] = [f"{r['row']} (expected {r['e']}, delivered {r['d']})" for r in rows]
    finally:
        joined.unpersist()
    return CheckResult(counts["expected"], counts["delivered"], counts["lost"], counts["dup"], counts["unexpected"],
                       examples, basis)


def last_watermark(query) -> str | None:
    """The newest event-time watermark of a query's progress (``YYYY-MM-DD HH:MM:SS[.fff]``, UTC), None without one."""
    for progress in reversed(list(query.recentProgress)):
        watermark = (progress.get("eventTime") or {}).get("watermark")
        if watermark:
            return watermark.replace("T", " ").rstrip("Z")
    return None


def final_rows(frame, rule: str | None, watermark: str | None):
    """`frame`'s rows that are final under `watermark`: ``rule <= watermark`` (all rows without a rule; none of a
    rule's rows before the first watermark, Spark's 1970-01-01)."""
    if rule is None:
        return frame
    return frame.where(F.expr(f"{rule} <= TIMESTAMP'{watermark or '1970-01-01 00:00:00'}'"))


def latest(rows, key: Sequence[str], latest_by: str):
    """Of an update stream's `rows`, the final state: per `key`, the row with the greatest `latest_by` (SQL)."""
    order = Window.partitionBy(*key).orderBy(F.expr(latest_by).desc())
    return rows.withColumn("_n", F.row_number().over(order)).where("_n = 1").drop("_n")
