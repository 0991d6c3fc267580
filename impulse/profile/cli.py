"""``impulse-profile``: a bounded sample of a table → a load file for `impulse-load` and a fidelity report.

``impulse-profile PATH --format parquet`` (any format Spark reads; ``-o KEY=VALUE`` its reader options),
``impulse-profile --table NAME`` or ``impulse-profile --sql QUERY``; see `impulse.profile` for what it writes.
A PATH ``kafka://HOST:PORT/TOPIC`` is a topic of JSON values, or of Avro / JSON Schema / Protobuf values through
the Schema Registry with ``-o schema.registry.url=URL`` (`impulse.profile.topic`). Several PATHs (or
several ``--table``) are profiled at once: a spec each, foreign keys between them as
references and one fidelity report (`impulse.profile.several`).
Exit codes: `EXIT_CODES`.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from pyspark.errors import PySparkException

from connectors.errors import OptionError
from impulse.profile import fidelity, joint, topic
from impulse.profile.run import DEFAULT_RATE, Settings, profile
from impulse.profile.several import profile_many
from impulse.session import make_session

__all__ = ["main", "parser", "EXIT_CODES"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_FIDELITY = 0, 1, 2, 99
EXIT_CODES: dict[int, str] = {
    EXIT_OK: "the spec and the report were written (and --min-fidelity, if given, was met)",
    EXIT_FAILED: "Spark failed while profiling",
    EXIT_USAGE: "a bad flag, an unreadable source, an empty sample, a column impulse cannot generate or a "
                "--time-column that is not a TIMESTAMP (one line on stderr naming it)",
    EXIT_FIDELITY: "the report was written but a column missed --min-fidelity",
}


def parser() -> argparse.ArgumentParser:
    """The command's flags (the documentation's reference lists them)."""
    p = argparse.ArgumentParser(
        prog="impulse-profile", description="Profile a sample of a table into an impulse load file and a fidelity "
        "report.", epilog="exit codes: " + "; ".join(f"{k} {v}" for k, v in EXIT_CODES.items()))
    p.add_argument("path", nargs="*", help="a file or folder Spark reads with --format, or a Kafka topic "
                   "kafka://HOST:PORT/TOPIC of JSON values, or Avro / JSON Schema / Protobuf ones with "
                   "-o schema.registry.url=URL (its first --sample records); several are profiled "
                   "together, foreign keys between them found")
    p.add_argument("--format", default="parquet", help="the reader's format for PATH (default parquet): json, csv, "
                   "orc, … any format Spark reads")
    p.add_argument("--table", action="append", default=[], help="a table or view of the session instead of PATH "
                   "(repeatable: several are profiled together)")
    p.add_argument("--sql", help="a query instead of PATH (cast or drop a column impulse cannot generate here)")
    p.add_argument("-o", "--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a reader option for PATH, repeatable (e.g. -o header=true -o inferSchema=true; for a topic, "
                   "Spark's Kafka source options such as -o kafka.security.protocol=SSL, and the Schema Registry's: "
                   "-o schema.registry.url=URL, -o schema.registry.basic.auth.user.info=USER:PASSWORD…)")
    p.add_argument("--sample", type=int, default=100_000, help="rows sampled: the source's first N (default 100000)")
    p.add_argument("--output", default="profile", help="the folder written: NAME.toml, fidelity.json, fidelity.html "
                   "(default ./profile)")
    p.add_argument("--name", help="the spec's name, one source only (default: the file's stem, the table's name, "
                   "or 'query')")
    p.add_argument("--seed", type=int, default=0, help="impulse's seed in the spec (default 0)")
    p.add_argument("--time-column", help="the TIMESTAMP column the rate is measured by (default: the first "
                   f"TIMESTAMP column; without one the rate is {DEFAULT_RATE:g} events/s); with several sources, of "
                   "each source that has it")
    p.add_argument("--arrival-column", help="a TIMESTAMP column of ingestion times: the disorder of the time column "
                   "against it becomes the spec's outOfOrderness, lateRate and lateBy; with several sources, of each "
                   "source that has it")
    p.add_argument("--max-dictionary", type=int, default=1000, help="at most this many distinct values are generated "
                   "as a weighted dictionary of those seen more than once, when they hold 95%% of the values (default 1000)")
    p.add_argument("--keep-values", action="append", default=[], metavar="COLUMN",
                   help="a column whose values may be copied into the spec (a dictionary even of values seen once)")
    p.add_argument("--quantiles", type=int, default=100, help="quantile steps K of a number, date or timestamp "
                   "(kind=empirical; default 100: KS about 1/K)")
    p.add_argument("--joint-above", type=float, default=joint.DEFAULT_BOUND, metavar="V",
                   help="two dictionary columns whose Cramér's V exceeds V are generated jointly, their combinations "
                   f"as seen (default {joint.DEFAULT_BOUND:g}: a moderate association; 1 turns it off)")
    p.add_argument("--min-fidelity", help="a gate, e.g. KS=0.05,TV=0.05: exit 99 when a column's distance exceeds "
                   "its metric's bound (MATCH: a foreign key's match rates, sample against generated)")
    p.add_argument("--master", default="local[*]", help="the Spark master (default local[*])")
    return p


def _usage(message: str) -> int:
    print(f"impulse-profile: {message}", file=sys.stderr)
    return EXIT_USAGE


def _sources(args: argparse.Namespace) -> list[tuple[str, str, str]]:
    """(kind, what, name) of each source: ("path", PATH, stem), ("table", NAME, name) or ("sql", QUERY, name)."""
    sources = ([("path", p, topic.parse(p)[1] if topic.is_topic(p) else Path(p.rstrip("/")).stem) for p in args.path]
               + [("table", t, t.split(".")[-1]) for t in args.table]
               + ([("sql", args.sql, "query")] if args.sql else []))
    kinds = {k for k, _, _ in sources}
    if not sources or len(kinds) > 1 or ("sql" in kinds and len(sources) > 1):
        raise OptionError("PATH/--table/--sql", [w for _, w, _ in sources] or None, "one kind of source: PATHs "
                          "(with --format), --table NAMEs or one --sql QUERY")
    names = [n for _, _, n in sources]
    if len(sources) > 1 and args.name:
        raise OptionError("--name", args.name, "no --name with several sources (each spec is named by its file's "
                          "stem or table's name)")
    if len(set(names)) < len(names):
        raise OptionError("PATH/--table", names, "sources of distinct names (each spec is <name>.toml)")
    if len(sources) == 1 and args.name:
        sources = [(sources[0][0], sources[0][1], args.name)]
    return sources


def _settings(args: argparse.Namespace, name: str, described: str) -> Settings:
    for flag, value, low in (("--sample", args.sample, 1), ("--max-dictionary", args.max_dictionary, 0),
                             ("--quantiles", args.quantiles, 1)):
        if value < low:
            raise OptionError(flag, value, f"an integer ≥ {low}")
    if args.quantiles > 10_000:
        raise OptionError("--quantiles", args.quantiles, "at most 10000")
    if not 0 <= args.joint_above <= 1:
        raise OptionError("--joint-above", args.joint_above, "a Cramér's V from 0 to 1 (1: no joint pairs)")
    return Settings(name=name, output=Path(args.output), sample=args.sample, seed=args.seed,
                    time_column=args.time_column, arrival_column=args.arrival_column, max_dictionary=args.max_dictionary,
                    keep_values=frozenset(args.keep_values), knots=args.quantiles, joint_above=args.joint_above,
                    bounds=fidelity.parse_bounds(args.min_fidelity), described=described)


def _read(spark, args: argparse.Namespace, kind: str, what: str):
    options = {}
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise OptionError("-o/--option", item, "KEY=VALUE, a reader option")
        options[key] = value
    try:
        if kind == "table":
            frame = spark.table(what)
        elif kind == "sql":
            frame = spark.sql(what)
        elif topic.is_topic(what):
            frame = topic.read(spark, what, args.sample, options)
        else:
            frame = spark.read.format(args.format).options(**options).load(what)
        frame.schema  # noqa: B018 - resolving the schema is what finds an unreadable source
    except PySparkException as err:
        source = what if kind != "path" else f"{args.format} {what}"
        raise OptionError("source", source, f"a source Spark can read ({str(err).splitlines()[0]})") from None
    return frame


def _described(args: argparse.Namespace, kind: str, what: str) -> str:
    if kind == "path" and topic.is_topic(what):
        return f"Kafka topic {what}"
    return f"{args.format} {what}" if kind == "path" else f"table {what}" if kind == "table" else f"query {what!r}"


def _several(spark, args: argparse.Namespace, sources: list[tuple[str, str, str]]) -> int:
    frames = []
    for kind, what, name in sources:
        settings = _settings(args, name, _described(args, kind, what))
        frame = _read(spark, args, kind, what)
        if args.time_column and args.time_column not in frame.columns:
            settings = replace(settings, time_column=None)
        if args.arrival_column and args.arrival_column not in frame.columns:
            settings = replace(settings, arrival_column=None)
        frames.append((frame, settings))
    for flag, value, given in (("--time-column", args.time_column, lambda s: s.time_column),
                               ("--arrival-column", args.arrival_column, lambda s: s.arrival_column)):
        if value and all(given(s) is None for _, s in frames):
            raise OptionError(flag, value, "a TIMESTAMP column of at least one source")
    bounds = frames[0][1].bounds
    many = profile_many(frames, Path(args.output), bounds)
    for result in many.results:
        print(f"{result.spec_path}: {result.rows} rows profiled, rate {result.rate:.6g} events/s")
    for key in many.keys:
        print(f"foreign key {key.name} -> {key.refers_to}: match rate {key.match_sample:.4f} in the sample, "
              f"{key.match_generated:.4f} generated")
    print(f"report {Path(args.output) / 'fidelity.html'}")
    for path in many.missed:
        print(f"  missed: {path}", file=sys.stderr)
    return EXIT_FIDELITY if many.missed else EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns its exit code (`EXIT_CODES`)."""
    args = parser().parse_args(argv)
    try:
        sources = _sources(args)
        kind, what, name = sources[0]
        settings = _settings(args, name, _described(args, kind, what))
    except OptionError as err:
        return _usage(str(err))
    spark = make_session(args.master, "impulse-profile", kafka=any(topic.is_topic(p) for p in args.path))
    try:
        if len(sources) > 1:
            return _several(spark, args, sources)
        result = profile(_read(spark, args, kind, what), settings)
    except OptionError as err:
        return _usage(str(err))
    worst = {m: max((r.distance for r in result.report if r.metric == m), default=0.0) for m in fidelity.METRICS
             if m != "MATCH"}
    print(f"{result.spec_path}: {result.rows} rows profiled, rate {result.rate:.6g} events/s; worst "
          + ", ".join(f"{m} {v:.4f}" for m, v in worst.items()) + f"; report {settings.output / 'fidelity.html'}")
    for row in result.missed:
        print(f"  missed: {row.path} {row.metric} {row.distance:.4f} > {settings.bounds[row.metric]}",
              file=sys.stderr)
    return EXIT_FIDELITY if result.missed else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
