"""Several sources profiled at once, as the tutorial does it: a foreign key found by inclusion between two public
tables no one here generated (Vega's cars, whose model year is a year of Vega's US driving statistics, one row per
year) becomes ``kind=ref``, and a join of the generated tables keeps the sample's match rate. One shared Spark
session. ``IMPULSE_FIDELITY_SCREENSHOT=docs/fidelity-report.png`` keeps the report's screenshot in headless
Chromium (the tutorial's)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from impulse.loadtest.cli import main as load_main
from impulse.loadtest.scenario import load_plan
from impulse.profile.cli import EXIT_OK, EXIT_USAGE, main
from impulse.profile.keys import PINNED_START, Side, find
from impulse.profile.run import Settings, measure
from tests.loadtest.chromium import chromium_path
from tests.readme import DOCS, python_block

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

pytestmark = pytest.mark.integration
TUTORIAL = DOCS / "tutorial" / "profile-to-load-test.md"
#: cars (406 rows) meets the single-table gate; driving has 55 rows, where the two-sample KS of one
#: distribution's samples stays under 1.36·√(2/55) ≈ 0.26 at 95 %; a foreign key's match rates agree to 0.01
CARS_BOUNDS = {"KS": 0.1, "TV": 0.1}
DRIVING_BOUND = 0.26


def test_the_tutorial_profiles_two_tables_and_the_join_keeps_its_match_rate(spark, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # Spark's JVM keeps its own working directory: the block's paths are made absolute
    exec(python_block("## The sample", page=TUTORIAL).replace('"sample/', f'"{tmp_path}/sample/'), {})
    assert main([f"{tmp_path}/sample/driving", f"{tmp_path}/sample/cars", "--output", "profile", "--min-fidelity",
                 "KS=0.26,TV=0.26,MATCH=0.01"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "foreign key cars.Year -> driving.year: match rate 1.0000 in the sample, 1.0000 generated" in out
    assert "profile/cars.toml: 406 rows profiled, rate 1000 events/s" in out and (tmp_path / "sample" / "cars").is_dir()
    folder = tmp_path / "profile"
    report = json.loads((folder / "fidelity.json").read_text())
    assert [(k["name"], k["refers_to"], k["match_sample"], k["match_generated"]) for k in report["keys"]] == \
        [("cars.Year", "driving.year", 1.0, 1.0)] and not report["missed"]
    html = (folder / "fidelity.html").read_text()
    assert "Foreign keys" in html and "Cylinders × Origin" in html
    specs = {n: tomllib.loads((folder / f"{n}.toml").read_text()) for n in ("cars", "driving")}
    year = {k.split(".")[-1]: v for k, v in specs["cars"]["source"].items() if k.startswith("fields.Year.")}
    assert year == {"kind": "ref", "refEventsPerSecond": "1000", "refLimit": "55", "refStart": "1956", "refStep": "1"}
    assert specs["cars"]["source"]["refStartTime"] == PINNED_START  # the parent's timeline, apart from its own start
    assert not any("startTime" in s["source"] for s in specs.values())  # impulse-load owns startTime
    assert specs["cars"]["source"]["fields.Cylinders.kind"] == "values"  # 3..8 cylinders: no key of driving holds them
    assert "(Cramér's V 0.479)" in (folder / "cars.toml").read_text()    # as the tutorial says
    rows = {r["path"]: r for r in report["columns"]}
    assert rows["cars.Year"]["generator"] == "ref" and rows["cars.Year"]["metric"] is None
    assert all(r["distance"] <= CARS_BOUNDS[r["metric"]] for p, r in rows.items()
               if p.startswith("cars.") and r["metric"] in CARS_BOUNDS)
    assert all(r["distance"] <= DRIVING_BOUND for p, r in rows.items() if p.startswith("driving.") and r["metric"])
    assert rows["cars.Name"]["metric"] == "LEN" and rows["cars.Name"]["distance"] <= CARS_BOUNDS["KS"]  # lengths as seen
    # the tutorial's read of the specs (the documented batch read of each), joined: every generated car finds its year
    names = {"spark": spark}
    exec(python_block("## Run your pipeline on the generated stream", page=TUTORIAL), names)
    cars, driving = names["cars"], names["driving"]
    assert cars.count() == 2000 and cars.join(driving, cars["Year"] == driving["year"], "left_semi").count() == 2000
    assert load_plan(folder / "cars.toml").scenarios[0].config.source_options["refStartTime"] == PINNED_START
    keep = os.environ.get("IMPULSE_FIDELITY_SCREENSHOT")  # where to keep the report's screenshot (the tutorial's)
    if keep:
        subprocess.run([chromium_path(), "--headless", "--no-sandbox", "--hide-scrollbars", f"--screenshot={keep}",
                        "--window-size=1400,1000", (folder / "fidelity.html").as_uri()], check=True, timeout=120,
                       capture_output=True)
        assert Path(keep).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.webhook
def test_a_spec_with_a_reference_runs_under_impulse_load_and_its_check_is_exact(spark, tmp_path, capsys):
    """The referring spec (cars, whose Year refers to driving.year) under ``impulse-load run`` with ``--check``: the
    run starts now, its references stay on the parent's pinned timeline (``refStartTime``), and the batch twin made
    with the run's schedule start writes the same years, so every delivered row is an expected one."""
    exec(python_block("## The sample", page=TUTORIAL).replace('"sample/', f'"{tmp_path}/sample/'), {})
    folder = tmp_path / "profile"
    assert main([f"{tmp_path}/sample/driving", f"{tmp_path}/sample/cars", "--output", str(folder)]) == EXIT_OK
    code = load_main(["run", str(folder / "cars.toml"), "--rate", "300", "--duration", "3s", "--trigger", "500ms",
                      "--check", "--output", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code == 0, out
    check = json.loads((tmp_path / "out" / "report.json").read_text())["scenarios"][0]["check"]
    assert check["passed"] and check["expected"] == 900 == check["delivered"], check
    years = {r["year"] for r in spark.read.parquet(f"{tmp_path}/sample/driving").select("year").collect()}
    generated = spark.read.format("impulse").schema(tomllib.loads((folder / "cars.toml").read_text())["schema"]) \
        .options(**tomllib.loads((folder / "cars.toml").read_text())["source"]).option("eventsPerSecond", 300) \
        .option("limit", 900).load().select("Year").distinct().collect()
    assert {r["Year"] for r in generated if r["Year"] is not None} <= years


def test_numbered_string_keys_become_a_formatted_reference_that_keeps_the_join(spark, tmp_path, capsys):
    """Customers keyed by numbered texts (``C-0001`` … ``C-0040``) and orders naming them: the key is a ``sequence``
    written with ``format``, the orders' column a reference with the same format, and every generated order finds
    its customer."""
    customers = spark.createDataFrame([(f"C-{i:04d}", f"name {i % 7}") for i in range(1, 41)], "id STRING, name STRING")
    orders = spark.createDataFrame([(i, f"C-{(i * 7) % 40 + 1:04d}", float(i % 13)) for i in range(300)],
                                   "order_id BIGINT, customer STRING, amount DOUBLE")
    for name, frame in (("customers", customers), ("orders", orders)):
        frame.coalesce(1).write.parquet(str(tmp_path / name))
    folder = tmp_path / "profile"
    assert main([str(tmp_path / "customers"), str(tmp_path / "orders"), "--output", str(folder)]) == EXIT_OK
    assert "foreign key orders.customer -> customers.id: match rate 1.0000 in the sample, 1.0000 generated" in \
        capsys.readouterr().out
    specs = {n: tomllib.loads((folder / f"{n}.toml").read_text()) for n in ("customers", "orders")}
    key = {k.split(".")[-1]: v for k, v in specs["customers"]["source"].items() if k.startswith("fields.id.")}
    assert key == {"kind": "sequence", "start": "1", "step": "1", "format": "C-{:04d}"}
    ref = {k.split(".")[-1]: v for k, v in specs["orders"]["source"].items() if k.startswith("fields.customer.")}
    assert ref == {"kind": "ref", "refEventsPerSecond": "1000", "refLimit": "40", "refStart": "1", "refStep": "1",
                   "format": "C-{:04d}"}
    made = {n: spark.read.format("impulse").schema(s["schema"]).options(**s["source"])
            .option("eventsPerSecond", s["rate"]).option("limit", rows).load()
            for (n, s), rows in zip(specs.items(), (40, 500))}
    assert made["orders"].join(made["customers"], made["orders"]["customer"] == made["customers"]["id"],
                               "left_semi").count() == 500


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
