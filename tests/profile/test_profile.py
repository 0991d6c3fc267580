"""impulse-profile on public tables no one here generated (vega_datasets: cars with nulls, categories, text and
numbers; hourly temperatures with a timestamp; airports with unique codes and city names), a nested JSON
file, and its bad input: one shared Spark session, small samples."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import vega_datasets
from pyspark.sql import functions as F

from impulse.loadtest.scenario import load_plan
from impulse.profile import joint
from impulse.profile.cli import EXIT_FIDELITY, EXIT_OK, EXIT_USAGE, main
from impulse.profile.fidelity import ks
from impulse.profile.run import Settings, profile

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

pytestmark = pytest.mark.integration
DATA = Path(vega_datasets.__file__).parent / "_data"
#: the gate these tables meet (the README and docs state the same): numbers, dates, timestamps and sizes within
#: KS 0.1, categories within TV 0.1 (on a few hundred rows a same-distribution pair is ~0.05-0.1 apart)
BOUNDS = {"KS": 0.1, "TV": 0.1}


def _cars(spark):
    return (spark.read.json(str(DATA / "cars.json"), multiLine=True)
            .withColumn("Year", F.to_date("Year")))


def test_cars_profile_meets_the_bounds_and_the_spec_is_a_load_file(spark, tmp_path):
    result = profile(_cars(spark), Settings(name="cars", output=tmp_path, bounds=BOUNDS))
    assert result.rows == 406
    assert not result.missed, result.missed
    by_path = {r.path: r for r in result.report}
    assert by_path["Origin"].generator == "values" and by_path["Origin"].metric == "TV"  # (jointly with Cylinders)
    assert by_path["Name"].generator == "random"            # many distinct names: never copied
    assert by_path["Horsepower"].null_sample > 0            # the sample's nulls, reproduced
    assert abs(by_path["Horsepower"].null_generated - by_path["Horsepower"].null_sample) < 0.02
    report = json.loads((tmp_path / "fidelity.json").read_text())
    assert [c["path"] for c in report["columns"]] == [r.path for r in result.report]
    assert "<table>" in (tmp_path / "fidelity.html").read_text()
    scenario = load_plan(tmp_path / "cars.toml").scenarios[0]
    assert scenario.config.schema.startswith("Acceleration DOUBLE") and scenario.config.source_options["seed"] == "0"
    again = profile(_cars(spark), Settings(name="cars", output=tmp_path / "again", bounds=BOUNDS))
    assert again.spec == result.spec                        # the same sample and seed: the same bytes


def test_dependent_categories_are_generated_jointly_and_keep_their_combinations(spark, tmp_path):
    cars = _cars(spark).cache()
    result = profile(cars, Settings(name="cars", output=tmp_path, bounds=BOUNDS))  # --joint-above 0.3
    pair = {r.path: r for r in result.report}["Cylinders × Origin"]  # V 0.48: Japan's rotary 3s, America's 8s
    assert pair.generator == "joint (V 0.479)" and pair.metric == "TV" and pair.distance <= BOUNDS["TV"]
    spec = tomllib.loads(result.spec)
    assert spec["source"]["fields.Origin.jointWith"] == "Cylinders"
    generated = (spark.read.format("impulse").schema(spec["schema"]).options(**spec["source"])
                 .option("eventsPerSecond", spec["rate"]).option("limit", 2000).load())
    seen = {(r[0], r[1]) for r in cars.select("Cylinders", "Origin").distinct().collect()}
    made = {(r[0], r[1]) for r in generated.select("Cylinders", "Origin").distinct().collect()}
    assert made <= seen and (3, "Japan") in made             # only combinations the sample has
    independent = {k: v for k, v in spec["source"].items() if k != "fields.Origin.jointWith"}
    apart = (spark.read.format("impulse").schema(spec["schema"]).options(**independent)
             .option("eventsPerSecond", spec["rate"]).option("limit", result.rows).load())
    alone = joint.rows(cars, apart, [joint.Pair("Cylinders", "Origin", 0.48, ())])[0]
    assert alone.distance > 2 * pair.distance, (alone.distance, pair.distance)  # the control: independent draws


def test_the_rate_is_measured_from_the_time_column(spark, tmp_path):
    temps = (spark.read.csv(str(DATA / "sf-temps.csv"), header=True, inferSchema=True)
             .withColumn("date", F.to_timestamp("date", "yyyy/MM/dd HH:mm:ss")))
    result = profile(temps, Settings(name="temps", output=tmp_path, sample=2000, bounds=BOUNDS))
    assert result.rate == pytest.approx(1 / 3600, rel=1e-3)  # hourly readings
    assert not result.missed, result.missed


def test_the_cli_profiles_a_csv_and_gates_on_fidelity(spark, tmp_path, capsys):
    args = [str(DATA / "airports.csv"), "--format", "csv", "-o", "header=true", "-o", "inferSchema=true",
            "--output", str(tmp_path), "--sample", "1000"]
    assert main(args + ["--min-fidelity", "KS=0.1,TV=0.1"]) == EXIT_OK
    spec = (tmp_path / "airports.toml").read_text()
    assert '"fields.city.provider" = "city"' in spec and '"fields.state.kind" = "values"' in spec
    assert "Bay Springs" not in spec                         # a city name is never copied
    assert main(args + ["--min-fidelity", "TV=0"]) == EXIT_FIDELITY
    assert "missed: state TV" in capsys.readouterr().err


def test_an_array_s_sizes_are_generated_as_seen_not_uniform(spark, tmp_path):
    """Vega's cars with a tags array (its origin, then "efficient" past 30 mpg): most cars hold one tag. The sizes'
    counts become lengthWeights and the size KS is small; the same spec with uniform sizes (1 or 2 tags alike) is
    off by about the share of one-tag cars less a half."""
    cars = _cars(spark).select("Name", F.when(F.col("Miles_per_Gallon") > 30, F.array(F.lower("Origin"), F.lit("efficient")))
                               .otherwise(F.array(F.lower("Origin"))).alias("tags"))
    result = profile(cars, Settings(name="tags", output=tmp_path, bounds=BOUNDS))
    spec = tomllib.loads((tmp_path / "tags.toml").read_text())
    sizes = [r["n"] for r in cars.select(F.size("tags").alias("n")).collect()]
    one = sizes.count(1)
    assert 0.75 < one / len(sizes) < 1 and spec["source"]["fields.tags.lengthWeights"] == f"{one},{len(sizes) - one}"
    weighted = {r.path: r for r in result.report}["tags"]
    assert weighted.metric == "KS" and weighted.distance <= 0.05, weighted

    def size_ks(source: dict) -> float:
        made = (spark.read.format("impulse").schema(spec["schema"]).options(**source)
                .option("eventsPerSecond", spec["rate"]).option("limit", len(sizes)).load())
        return ks(np.array(sizes, dtype=float), np.array([r["n"] for r in made.select(F.size("tags").alias("n"))
                                                          .collect()], dtype=float))

    uniform = {k: v for k, v in spec["source"].items() if k != "fields.tags.lengthWeights"}
    assert size_ks(spec["source"]) == pytest.approx(weighted.distance, abs=1e-6)  # the report rounds to 6 digits
    assert size_ks(uniform) > one / len(sizes) - 0.5 - 0.07 > 4 * weighted.distance


def test_random_text_lengths_are_generated_as_seen_not_uniform(spark, tmp_path):
    """Vega's car names (many distinct: random text, never copied) are mostly 10 to 25 characters within 6..36. Their
    length counts become lengthWeights and the LEN distance is small; the same spec with uniform lengths over the
    range (what the profiler wrote before) is several times further off."""
    names = _cars(spark).select("Name")
    result = profile(names, Settings(name="names", output=tmp_path, bounds=BOUNDS))
    spec = tomllib.loads((tmp_path / "names.toml").read_text())
    row = {r.path: r for r in result.report}["Name"]
    assert row.generator == "random" and row.metric == "LEN" and row.distance <= 0.05, row
    lengths = np.array([r["n"] for r in names.select(F.length("Name").alias("n")).collect()], dtype=float)
    low, high = int(lengths.min()), int(lengths.max())
    counts = np.bincount(lengths.astype(int) - low, minlength=high - low + 1)
    assert spec["source"]["fields.Name.lengthWeights"] == ",".join(str(c) for c in counts)

    def length_ks(source: dict) -> float:
        made = (spark.read.format("impulse").schema(spec["schema"]).options(**source)
                .option("eventsPerSecond", spec["rate"]).option("limit", len(lengths)).load())
        return ks(lengths, np.array([r["n"] for r in made.select(F.length("Name").alias("n")).collect()], dtype=float))

    uniform = {k: v for k, v in spec["source"].items() if k != "fields.Name.lengthWeights"}
    assert length_ks(spec["source"]) == pytest.approx(row.distance, abs=1e-6)  # the report rounds to 6 digits
    assert length_ks(uniform) > 0.2 > 4 * row.distance


def test_nested_columns_and_timestamp_ntz_are_profiled_down_to_each_leaf(spark, tmp_path):
    path = tmp_path / "orders.json"
    rows = [{"id": i, "items": [{"sku": f"s{(i * 7 + j) % 5}", "qty": (i + j) % 4 + 1} for j in range(i % 4)],
             "tags": {"channel": "web" if i % 3 else "app"}, "meta": None if i % 5 == 0 else {"ok": i % 2 == 0},
             "seen": f"2024-01-01T{i % 24:02d}:{i // 24:02d}:00"}
            for i in range(300)]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    schema = ("id BIGINT, items ARRAY<STRUCT<sku: STRING, qty: INT>>, tags MAP<STRING, STRING>, meta STRUCT<ok: BOOLEAN>, "
              "seen TIMESTAMP_NTZ")
    result = profile(spark.read.schema(schema).json(str(path)), Settings(name="orders", output=tmp_path / "out", bounds=BOUNDS))
    paths = {r.path: r for r in result.report}
    assert set(paths) >= {"items", "items.element", "items.element.qty", "items.element.sku", "tags", "tags.key",
                          "tags.value", "meta", "meta.ok"}
    assert paths["meta"].null_sample == pytest.approx(0.2) and abs(paths["meta"].null_generated - 0.2) < 0.05
    assert paths["items"].metric == "KS" and not result.missed, result.missed
    assert paths["seen"].generator == "empirical" and paths["seen"].distance is not None  # TIMESTAMP_NTZ too


@pytest.mark.parametrize("args, words", [
    (["--sql", "SELECT 1 AS x WHERE false"], "the sample is empty"),
    (["--sql", "SELECT INTERVAL 1 DAY AS gap"], "column 'gap'"),
    (["--sql", "SELECT 'a' AS t", "--time-column", "t"], "--time-column"),
    (["/no/such/folder", "--format", "parquet"], "a source Spark can read"),
    (["--sample", "0", "--sql", "SELECT 1"], "--sample"),
])
def test_bad_input_exits_2_naming_it(spark, tmp_path, capsys, args, words):
    assert main(args + ["--output", str(tmp_path)]) == EXIT_USAGE
    assert words in capsys.readouterr().err
