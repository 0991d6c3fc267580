"""Several sources profiled at once: a foreign key found by inclusion between two public tables no one here
generated (Vega's cars, whose model year is a year of Vega's US driving statistics, one row per year) becomes
``kind=ref``, and a join of the generated tables keeps the sample's match rate. One shared Spark session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import vega_datasets
from pyspark.sql import functions as F

from impulse.loadtest.scenario import load_plan
from impulse.profile.cli import EXIT_OK, EXIT_USAGE, main
from impulse.profile.keys import PINNED_START, Side, find
from impulse.profile.run import Settings, measure

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

pytestmark = pytest.mark.integration
DATA = Path(vega_datasets.__file__).parent / "_data"
#: cars (406 rows) meets the single-table gate; driving has 55 rows, where the two-sample KS of one
#: distribution's samples stays under 1.36·√(2/55) ≈ 0.26 at 95 %; a foreign key's match rates agree to 0.01
CARS_BOUNDS = {"KS": 0.1, "TV": 0.1}
DRIVING_BOUND = 0.26


def _tables(spark):
    cars = spark.read.json(str(DATA / "cars.json"), multiLine=True).withColumn("Year", F.year(F.to_date("Year")))
    driving = spark.read.json(str(DATA / "driving.json"), multiLine=True)
    return cars, driving


def test_a_foreign_key_becomes_a_reference_and_the_join_keeps_its_match_rate(spark, tmp_path, capsys):
    cars, driving = _tables(spark)
    cars.createOrReplaceTempView("cars")
    driving.createOrReplaceTempView("driving")
    args = ["--table", "driving", "--table", "cars", "--output", str(tmp_path), "--min-fidelity", "MATCH=0.01"]
    assert main(args) == EXIT_OK
    assert "foreign key cars.Year -> driving.year: match rate 1.0000 in the sample, 1.0000 generated" in \
        capsys.readouterr().out
    report = json.loads((tmp_path / "fidelity.json").read_text())
    assert [(k["name"], k["refers_to"], k["match_sample"], k["match_generated"]) for k in report["keys"]] == \
        [("cars.Year", "driving.year", 1.0, 1.0)] and not report["missed"]
    assert "Foreign keys" in (tmp_path / "fidelity.html").read_text()
    specs = {n: tomllib.loads((tmp_path / f"{n}.toml").read_text()) for n in ("cars", "driving")}
    year = {k.split(".")[-1]: v for k, v in specs["cars"]["source"].items() if k.startswith("fields.Year.")}
    assert year == {"kind": "ref", "refEventsPerSecond": "1000", "refLimit": "55", "refStart": "1956", "refStep": "1"}
    assert specs["cars"]["source"]["startTime"] == specs["driving"]["source"]["startTime"] == PINNED_START
    assert specs["cars"]["source"]["fields.Cylinders.kind"] == "values"  # 3..8 cylinders: no key of driving holds them
    rows = {r["path"]: r for r in report["columns"]}
    assert rows["cars.Year"]["generator"] == "ref" and rows["cars.Year"]["metric"] is None
    assert all(r["distance"] <= CARS_BOUNDS[r["metric"]] for p, r in rows.items()
               if p.startswith("cars.") and r["metric"] in CARS_BOUNDS)
    assert all(r["distance"] <= DRIVING_BOUND for p, r in rows.items() if p.startswith("driving.") and r["metric"])
    # the specs as a user reads them (the documented batch read of each), joined: every generated car finds its year
    frames = {n: spark.read.format("impulse").schema(s["schema"]).options(**s["source"])
              .option("eventsPerSecond", s["rate"]).option("limit", 2000 if n == "cars" else 55).load()
              for n, s in specs.items()}
    assert frames["cars"].join(frames["driving"], frames["cars"]["Year"] == frames["driving"]["year"],
                               "left_semi").count() == 2000
    for name in specs:
        assert load_plan(tmp_path / f"{name}.toml").scenarios[0].config.source_options["startTime"] == PINNED_START


def test_a_one_to_one_pair_refers_from_the_later_source_only(spark, tmp_path):
    a = spark.range(1, 21).withColumnRenamed("id", "k")
    b = spark.range(1, 21).withColumnRenamed("id", "k")
    measured = [measure(f, Settings(name=n, output=tmp_path)) for f, n in ((a, "a"), (b, "b"))]
    found = find([Side(m.settings.name, m.sample, m.families, m.blocks) for m in measured])
    assert [(f.child, f.column, f.parent, f.key) for f in found] == [(1, "k", 0, "k")]


def test_several_sources_take_no_name_and_one_kind(tmp_path, capsys):
    for extra in (["--table", "a", "--table", "b", "--name", "x"], ["--table", "a", "--sql", "SELECT 1"]):
        assert main(extra + ["--output", str(tmp_path)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "--name" in err and "PATH/--table/--sql" in err
