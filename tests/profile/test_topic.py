"""impulse-profile on a Kafka topic of nested JSON values (Vega's cars, each car one record with an ``engine``
object and a ``tags`` array), in its own process: the command's session carries Spark's Kafka connector, which
the shared test session does not. The first --sample records of two partitions are profiled, down to each
nested leaf, within the bounds the README states; a bad topic URL exits 2 before any session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import vega_datasets

from impulse.profile.cli import EXIT_USAGE, main

pytestmark = pytest.mark.integration
DATA = Path(vega_datasets.__file__).parent / "_data"


def _records() -> list[dict]:
    cars = json.loads((DATA / "cars.json").read_text())
    return [{"name": c["Name"], "origin": c["Origin"], "year": c["Year"][:4],
             "engine": {"cylinders": c["Cylinders"], "horsepower": c["Horsepower"], "displacement": c["Displacement"]},
             "tags": [c["Origin"].lower()] + (["efficient"] if (c["Miles_per_Gallon"] or 0) > 30 else [])}
            for c in cars]


def test_a_nested_json_topic_is_profiled_from_its_first_records(kafka_broker, tmp_path):
    topic = kafka_broker.create_topic(f"cars-{uuid.uuid4().hex[:8]}", partitions=2)
    producer = kafka_broker.producer()
    for i, record in enumerate(_records()):
        producer.produce(topic, json.dumps(record).encode(), partition=i % 2)
    assert producer.flush(30) == 0
    run = subprocess.run([sys.executable, "-m", "impulse.profile.cli", f"kafka://{kafka_broker.bootstrap}/{topic}",
                          "--sample", "300", "--output", str(tmp_path), "--master", "local[2]",
                          "--min-fidelity", "TV=0.1"],
                         capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert run.returncode == 0, run.stderr[-3000:]
    spec = (tmp_path / f"{topic}.toml").read_text()
    assert "300 rows sampled" in spec and f"Kafka topic kafka://{kafka_broker.bootstrap}/{topic}" in spec
    report = json.loads((tmp_path / "fidelity.json").read_text())
    paths = {c["path"]: c for c in report["columns"]}
    assert {"engine", "engine.cylinders", "engine.horsepower", "tags", "tags.element", "origin"} <= set(paths)
    assert paths["engine.horsepower"]["null_sample"] > 0 and paths["tags"]["metric"] == "KS"
    assert paths["origin"]["generator"] == "values" and not report["missed"]
    # every leaf within KS 0.1, the tags' sizes too (1..2 tags, most cars one: weighted by the sizes' counts)
    assert all(c["distance"] <= 0.1 for c in report["columns"] if c["metric"] == "KS"), \
        [(c["path"], c["distance"]) for c in report["columns"]]


def test_a_bad_topic_url_exits_2_naming_it(tmp_path, capsys):
    assert main(["kafka://broker-without-topic", "--output", str(tmp_path)]) == EXIT_USAGE
    assert "kafka://HOST:PORT/TOPIC" in capsys.readouterr().err
