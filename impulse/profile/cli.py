"""``impulse-profile``: a bounded sample of a table → a load file for `impulse-load` and a fidelity report.

``impulse-profile PATH --format parquet`` (any format Spark reads; ``-o KEY=VALUE`` its reader options),
``impulse-profile --table NAME`` or ``impulse-profile --sql QUERY``; see `impulse.profile` for what it writes.
Exit codes: `EXIT_CODES`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pyspark.errors import PySparkException

from connectors.errors import OptionError
from impulse.profile import fidelity
from impulse.profile.run import DEFAULT_RATE, Settings, profile
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
    p.add_argument("path", nargs="?", help="a file or folder Spark reads with --format")
    p.add_argument("--format", default="parquet", help="the reader's format for PATH (default parquet): json, csv, "
                   "orc, … any format Spark reads")
    p.add_argument("--table", help="a table or view of the session instead of PATH")
    p.add_argument("--sql", help="a query instead of PATH (cast or drop a column impulse cannot generate here)")
    p.add_argument("-o", "--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a reader option for PATH, repeatable (e.g. -o header=true -o inferSchema=true)")
    p.add_argument("--sample", type=int, default=100_000, help="rows sampled: the source's first N (default 100000)")
    p.add_argument("--output", default="profile", help="the folder written: NAME.toml, fidelity.json, fidelity.html "
                   "(default ./profile)")
    p.add_argument("--name", help="the spec's name (default: the file's stem, the table's name, or 'query')")
    p.add_argument("--seed", type=int, default=0, help="impulse's seed in the spec (default 0)")
    p.add_argument("--time-column", help="the TIMESTAMP column the rate is measured by (default: the first "
                   f"TIMESTAMP column; without one the rate is {DEFAULT_RATE:g} events/s)")
    p.add_argument("--max-dictionary", type=int, default=1000, help="at most this many distinct values are generated "
                   "as a weighted dictionary of those seen more than once, when they hold 95%% of the values (default 1000)")
    p.add_argument("--keep-values", action="append", default=[], metavar="COLUMN",
                   help="a column whose values may be copied into the spec (a dictionary even of values seen once)")
    p.add_argument("--quantiles", type=int, default=100, help="quantile steps K of a number, date or timestamp "
                   "(kind=empirical; default 100: KS about 1/K)")
    p.add_argument("--min-fidelity", help="a gate, e.g. KS=0.05,TV=0.05: exit 99 when a column's distance exceeds "
                   "its metric's bound")
    p.add_argument("--master", default="local[*]", help="the Spark master (default local[*])")
    return p


def _usage(message: str) -> int:
    print(f"impulse-profile: {message}", file=sys.stderr)
    return EXIT_USAGE


def _settings(args: argparse.Namespace) -> Settings:
    sources = [s for s in ("path", "table", "sql") if getattr(args, s)]
    if len(sources) != 1:
        raise OptionError("PATH/--table/--sql", sources or None, "exactly one source: a PATH (with --format), "
                          "--table NAME or --sql QUERY")
    for flag, value, low in (("--sample", args.sample, 1), ("--max-dictionary", args.max_dictionary, 0),
                             ("--quantiles", args.quantiles, 1)):
        if value < low:
            raise OptionError(flag, value, f"an integer ≥ {low}")
    if args.quantiles > 10_000:
        raise OptionError("--quantiles", args.quantiles, "at most 10000")
    name = args.name or (Path(args.path.rstrip("/")).stem if args.path else args.table.split(".")[-1] if args.table
                         else "query")
    described = (f"{args.format} {args.path}" if args.path else f"table {args.table}" if args.table
                 else f"query {args.sql!r}")
    return Settings(name=name, output=Path(args.output), sample=args.sample, seed=args.seed,
                    time_column=args.time_column, max_dictionary=args.max_dictionary,
                    keep_values=frozenset(args.keep_values), knots=args.quantiles,
                    bounds=fidelity.parse_bounds(args.min_fidelity), described=described)


def _read(spark, args: argparse.Namespace):
    options = {}
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise OptionError("-o/--option", item, "KEY=VALUE, a reader option")
        options[key] = value
    try:
        if args.table:
            frame = spark.table(args.table)
        elif args.sql:
            frame = spark.sql(args.sql)
        else:
            frame = spark.read.format(args.format).options(**options).load(args.path)
        frame.schema  # noqa: B018 - resolving the schema is what finds an unreadable source
    except PySparkException as err:
        source = args.table or args.sql or f"{args.format} {args.path}"
        raise OptionError("source", source, f"a source Spark can read ({str(err).splitlines()[0]})") from None
    return frame


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns its exit code (`EXIT_CODES`)."""
    args = parser().parse_args(argv)
    try:
        settings = _settings(args)
    except OptionError as err:
        return _usage(str(err))
    spark = make_session(args.master, "impulse-profile")
    try:
        result = profile(_read(spark, args), settings)
    except OptionError as err:
        return _usage(str(err))
    worst = {m: max((r.distance for r in result.report if r.metric == m), default=0.0) for m in fidelity.METRICS}
    print(f"{result.spec_path}: {result.rows} rows profiled, rate {result.rate:.6g} events/s; worst "
          + ", ".join(f"{m} {v:.4f}" for m, v in worst.items()) + f"; report {settings.output / 'fidelity.html'}")
    for row in result.missed:
        print(f"  missed: {row.path} {row.metric} {row.distance:.4f} > {settings.bounds[row.metric]}",
              file=sys.stderr)
    return EXIT_FIDELITY if result.missed else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
