"""``--checkpoint DIR`` without Spark: telling a checkpoint an earlier run left (`impulse.loadtest.load.resume`),
the events its last committed batch had delivered, the source's schedule kept, and the refusals before Spark.
The runs that SIGKILL impulse-load and resume it are in tests/loadtest/test_crash.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from impulse.loadtest.load.events import impulse_options
from impulse.loadtest.load.resume import committed_events, describe_resumed, resumed_info, resumes
from impulse.loadtest.measure.metrics import Batch
from impulse.loadtest.scenario import plan_from_args
from impulse.loadtest.settings.config import LoadConfig
from impulse.loadtest.settings.units import LoadError


def _offsets(checkpoint: Path, batch: int, counters: list[int]) -> None:
    """Spark's offsets log entry of `batch`: its version, its metadata and the impulse source's offset."""
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    offset = {"startTime": 1, "anchorTime": 1, "counters": counters}
    (checkpoint / "offsets" / str(batch)).write_text("v1\n" + json.dumps({"batchWatermarkMs": 0}) + "\n"
                                                     + json.dumps(offset))


def test_a_checkpoint_with_a_planned_batch_is_resumed_and_its_committed_events_are_read(tmp_path):
    checkpoint = tmp_path / "checkpoint"
    assert not resumes(None) and not resumes(str(checkpoint)) and committed_events(str(checkpoint)) is None
    checkpoint.mkdir()
    assert not resumes(str(checkpoint))           # an empty directory: a new query
    _offsets(checkpoint, 0, [10, 12])
    assert resumes(str(checkpoint)) and resumes(f"file://{checkpoint}")
    assert committed_events(str(checkpoint)) is None   # planned, not committed
    (checkpoint / "commits").mkdir()
    (checkpoint / "commits" / "0").write_text("v1\n{}")
    _offsets(checkpoint, 1, [30, 31])             # planned after it, not committed: not counted
    assert committed_events(str(checkpoint)) == 22
    assert not resumes("s3a://bucket/checkpoint")   # another file system: not looked at


def test_a_resumed_run_says_where_it_started():
    first = Batch(7, 0, 0, 0, rows=40, delivered=340, lag=0, held_back=0, bytes=0, retried=0, durations={},
                  latency_data={}, schedule_data={}, delivery_data={})
    assert resumed_info("/c", [first]) == {"checkpoint": "/c", "firstBatchId": 7, "eventsBefore": 300}
    assert resumed_info("/c", []) == {"checkpoint": "/c", "firstBatchId": None, "eventsBefore": None}
    said = describe_resumed(resumed_info("/c", [first]))
    assert said.startswith("resumed from --checkpoint /c at micro-batch 7: 300 events committed by earlier runs")
    assert "at micro-batch ?: ? events" in describe_resumed(resumed_info("/c", []))   # no batch ran: unknown


def test_with_a_checkpoint_the_source_keeps_its_schedule_on_a_rerun(tmp_path):
    assert "downtime" not in impulse_options(LoadConfig(sink="noop"))
    assert impulse_options(LoadConfig(sink="noop", checkpoint_dir=str(tmp_path)))["downtime"] == "catchup"
    given = LoadConfig(sink="noop", checkpoint_dir=str(tmp_path), source_options={"downtime": "skip"})
    assert impulse_options(given)["downtime"] == "skip"


def test_checkpoint_is_a_flag_and_a_key_refused_with_via_and_ramp(tmp_path):
    assert plan_from_args(["--checkpoint", "ck"]).scenarios[0].config.checkpoint_dir == "ck"
    with pytest.raises(LoadError, match="--checkpoint ck resumes a direct run; with --via"):
        plan_from_args(["--checkpoint", "ck", "--via", "kafka://h:1/t", "--sink", "kafka"])
    with pytest.raises(LoadError, match="--checkpoint ck resumes one query; with --ramp"):
        plan_from_args(["--checkpoint", "ck", "--ramp", "1000:1000:3000"])


def test_a_toml_file_gives_the_checkpoint(tmp_path):
    from impulse.loadtest.scenario import load_plan

    file = tmp_path / "resumable.toml"
    file.write_text('sink = "parquet"\noptions = { path = "/data/out" }\ncheckpoint = "/data/ckpt"\n')
    assert load_plan(str(file)).scenarios[0].config.checkpoint_dir == "/data/ckpt"
