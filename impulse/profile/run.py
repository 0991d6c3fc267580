"""One profile, start to end: a sample → its statistics → the load file → the fidelity report (`impulse.profile`).

`profile` takes a DataFrame (any source Spark reads) and writes ``<name>.toml``, ``fidelity.json`` and
``fidelity.html`` into the output folder. The sample is the source's first `sample` rows (``LIMIT``: the same
rows for the same files or table), cached on the executors; the statistics are Spark aggregates over it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import TimestampType

from connectors.errors import OptionError
from impulse.profile import disorder as disorder_fit
from impulse.profile import fidelity, joint
from impulse.profile.infer import check_type, infer
from impulse.profile.leaves import leaves
from impulse.profile.measure import leaf_stats
from impulse.profile.spec import Block, render
from impulse.schema import BUILT_IN

__all__ = ["Settings", "Result", "Measured", "measure", "write_spec", "generate", "profile", "DEFAULT_RATE"]

#: events/s written when the sample has no time column to measure a rate by
DEFAULT_RATE = 1000.0


@dataclass(frozen=True)
class Settings:
    """What `profile` is asked (the flags of ``impulse-profile``)."""

    name: str
    output: Path
    sample: int = 100_000
    seed: int = 0
    time_column: str | None = None
    arrival_column: str | None = None  #: an ingestion time: the disorder against the time column is measured
    max_dictionary: int = 1000
    keep_values: frozenset[str] = frozenset()
    knots: int = 100
    joint_above: float = joint.DEFAULT_BOUND  #: Cramér's V above which two dictionaries are generated jointly
    bounds: dict[str, float] = field(default_factory=dict)
    described: str = ""              #: where the sample came from, for the file's first comment


@dataclass(frozen=True)
class Result:
    """What `profile` wrote and measured."""

    spec_path: Path
    spec: str
    rows: int
    rate: float
    report: list[fidelity.Row]
    missed: list[fidelity.Row]


def _rate(sample: DataFrame, settings: Settings) -> tuple[float, str]:
    """(events/s, the comment saying how): (rows − 1) / the time column's span, else `DEFAULT_RATE`."""
    fields = {f.name: f for f in sample.schema.fields}
    column = settings.time_column
    if column is None:
        column = _time_column(sample, settings)
        if column is None:
            return DEFAULT_RATE, "a default: the sample has no TIMESTAMP column (name one with --time-column)"
    elif column not in fields or not isinstance(fields[column].dataType, TimestampType):
        found = fields[column].dataType.simpleString().upper() if column in fields else "no such column"
        raise OptionError("--time-column", column, f"a TIMESTAMP column of the sample (found: {found}; columns: "
                          + ", ".join(f.name for f in sample.schema.fields if isinstance(f.dataType, TimestampType))
                          + ")")
    row = sample.agg(F.count(F.col(f"`{column}`")).alias("n"), F.min(F.unix_micros(f"`{column}`")).alias("lo"),
                     F.max(F.unix_micros(f"`{column}`")).alias("hi")).first()
    if row["n"] < 2 or row["hi"] == row["lo"]:
        return DEFAULT_RATE, f"a default: column {column} spans no time"
    rate = (row["n"] - 1) * 1e6 / (row["hi"] - row["lo"])
    return rate, f"events/s observed: {row['n']} rows over {(row['hi'] - row['lo']) / 1e6:g} s of column {column}"


def _time_column(sample: DataFrame, settings: Settings) -> str | None:
    """`Settings.time_column`, else the first TIMESTAMP column that is not the arrival column."""
    return settings.time_column or next((f.name for f in sample.schema.fields if isinstance(f.dataType, TimestampType)
                                         and f.name != settings.arrival_column), None)


def _built_in(name: str, data_type) -> str | None:
    """The comment of a top-level column impulse fills itself (None: a generated one)."""
    entry = BUILT_IN.get(name.lower())
    if entry is None:
        return None
    if data_type != entry[0]:
        raise OptionError(f"column '{name}'", data_type.simpleString().upper(),
                          f"{entry[2]}: '{name.lower()}' is a built-in column of impulse (rename it in --sql)")
    return "built-in: impulse fills it (timestamp: each event's scheduled time, at the spec's rate)"


@dataclass
class Measured:
    """One source measured, before its spec is written (`measure`; `impulse.profile.keys` may still turn a
    column's generator into a reference)."""

    settings: Settings
    sample: DataFrame                #: the cached sample
    rows: int
    schema_ddl: str
    blocks: list[Block]              #: one per leaf, in schema order
    generators: dict[str, str]       #: leaf path → its kind ("built-in", "" for a struct, "size" for a container)
    families: dict[str, str]         #: leaf path → its family
    rate: float
    rate_comment: str
    pairs: list[joint.Pair] = field(default_factory=list)          #: the columns generated jointly
    disorder: disorder_fit.Disorder | None = None                 #: with an arrival column
    source_options: dict[str, str] = field(default_factory=dict)  #: [source] keys besides seed and fields.*

    def options(self) -> dict[str, str]:
        """What ``format("impulse")`` takes to generate this source (its [source] table)."""
        options = {"seed": str(self.settings.seed), **self.source_options}
        options.update({f"fields.{b.path}.{k}": v for b in self.blocks for k, v in b.properties})
        return options


def measure(source: DataFrame, settings: Settings) -> Measured:
    """The sample of `source` and each leaf's generator. Raises `OptionError` for bad input: an empty sample, a
    type impulse cannot generate (naming the column), a bad time column."""
    sample = source.limit(settings.sample).cache()
    rows = sample.count()
    if rows == 0:
        raise OptionError("source", settings.described or settings.name, "a source with rows: the sample is empty")
    if settings.arrival_column is not None:
        disorder_fit.check(sample, settings.arrival_column, _time_column(sample, settings))
    blocks, generators, families = [], {}, {}
    for leaf in leaves(sample.schema):  # every type checked before any is measured
        check_type(leaf)
    for leaf in leaves(sample.schema):
        comment = _built_in(leaf.path[0], leaf.data_type) if len(leaf.path) == 1 else None
        stats = leaf_stats(sample, leaf, settings.knots, settings.max_dictionary)
        families[leaf.name] = stats.family
        if comment is not None:
            blocks.append(Block(leaf.name, comment, ()))
            generators[leaf.name] = "built-in"
            continue
        inference = infer(stats, settings.max_dictionary, leaf.path[0] in settings.keep_values,
                          map_key=leaf.steps[-1:] == ("key",))
        blocks.append(Block(leaf.name, inference.comment, inference.properties))
        generators[leaf.name] = dict(inference.properties).get(
            "kind", "" if stats.family == "struct" else "size" if stats.leaf.container else "random")
    pairs = joint.find(sample, blocks, families, settings.joint_above, settings.max_dictionary, settings.keep_values)
    for pair in pairs:
        blocks = joint.apply(pair, blocks)
    rate, rate_comment = _rate(sample, settings)
    measured = Measured(settings, sample, rows, sample.schema.toDDL(), blocks, generators, families, rate,
                        rate_comment, pairs)
    if settings.arrival_column is not None:
        measured.disorder = disorder_fit.fit(sample, settings.arrival_column, _time_column(sample, settings))
        measured.source_options.update(measured.disorder.options())
        measured.blocks = [Block(b.path, f"{b.comment}; {measured.disorder.comment()}: outOfOrderness, lateRate and "
                                 "lateBy in [source]", b.properties) if b.path == settings.arrival_column else b
                           for b in measured.blocks]
    return measured


def write_spec(measured: Measured) -> tuple[Path, str]:
    """``<name>.toml`` in the output folder: (its path, its text)."""
    settings = measured.settings
    header = (f"impulse-profile of {settings.described or settings.name}: {measured.rows} rows sampled, seed "
              f"{settings.seed}\nA load file: `schema` is the sample's, `rate` the observed one, [source] makes "
              "format(\"impulse\") generate data like it.")
    text = render(settings.name, measured.schema_ddl, measured.rate, measured.rate_comment, settings.seed,
                  measured.blocks, header, tuple(measured.source_options.items()))
    settings.output.mkdir(parents=True, exist_ok=True)
    spec_path = settings.output / f"{settings.name}.toml"
    spec_path.write_text(text)
    return spec_path, text


def generate(measured: Measured) -> DataFrame:
    """As many rows as the sample, generated by the spec (cached: read once per leaf)."""
    return (measured.sample.sparkSession.read.format("impulse").schema(measured.schema_ddl)
            .options(**measured.options()).option("eventsPerSecond", measured.rate).option("limit", measured.rows)
            .load().cache())


def profile(source: DataFrame, settings: Settings) -> Result:
    """Profile `source` (module docstring). Raises `OptionError` for bad input: an empty sample, a type impulse
    cannot generate (naming the column), a bad time column."""
    measured = measure(source, settings)
    spec_path, text = write_spec(measured)
    generated = generate(measured)
    report = fidelity.compare(measured.sample, generated, leaves(measured.sample.schema), measured.generators,
                              measured.families) + joint.rows(measured.sample, generated, measured.pairs)
    if measured.disorder is not None:
        report += disorder_fit.rows(generated.sparkSession, measured.sample, measured.disorder, settings.seed,
                                    measured.rate)
    fidelity.write(settings.output, report, settings.bounds, f"Fidelity of {settings.name}: {measured.rows} "
                   f"sampled rows against {measured.rows} generated")
    measured.sample.unpersist()
    generated.unpersist()
    return Result(spec_path, text, measured.rows, measured.rate, report, fidelity.misses(report, settings.bounds))
