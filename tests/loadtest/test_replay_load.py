"""``impulse-load --source replay``: a recording replayed through a query at ``--rate``, its ``--check`` exact (the
rows are the recording's at each position, laps of ``loop`` shifted in time), and the options the harness owns
refused before any load. The run is small: 300 events/s for 2 s, one shared Spark session."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from impulse.loadtest.cli import main
from impulse.loadtest.load.events import impulse_options
from impulse.loadtest.settings.config import LoadConfig, LoadError
from impulse.loadtest.measure.metrics import positional_offset
from impulse.schedule import Schedule

ROWS = 250  # the recording: fewer than the run's 600 positions, so loop replays it in laps
START_US = 1_700_000_000_000_000


def _recording(path) -> None:
    ids = np.arange(ROWS)
    pq.write_table(pa.table({"id": ids, "ts": pa.array(START_US + ids * 4_000).cast(pa.timestamp("us", tz="UTC")),
                             "city": pa.array(np.array(["Paris", "Lyon", "Nice", "Lille", "Metz"])[ids % 5])}), path)


@pytest.mark.integration
@pytest.mark.webhook
def test_a_looped_recording_runs_through_a_query_and_its_check_is_exact(spark, tmp_path, capsys):
    _recording(tmp_path / "rec.parquet")
    code = main(["--source", "replay", "--source-option", f"path={tmp_path / 'rec.parquet'}", "--source-option",
                 "timeColumn=ts", "--source-option", "loop=true", "--rate", "300", "--duration", "2s",
                 "--partitions", "2", "--trigger", "500ms", "--check", "--output", str(tmp_path / "out"),
                 "--sql", "SELECT id, ts, city FROM events WHERE city <> 'Metz'"])
    out = capsys.readouterr().out
    assert code == 0, out
    check = json.loads((tmp_path / "out" / "report.json").read_text())["check"]
    # 600 positions: laps of 250, 250, 100; a fifth of each lap is Metz
    assert check == {"passed": True, "expected": 480, "delivered": 480, "lost": 0, "duplicated": 0, "unexpected": 0}
    assert "check: pass (480 rows" in out


def test_the_harness_sets_replay_s_pace_and_bound():
    config = LoadConfig(source="replay", rate=300, duration_s=2, partitions=2,
                        source_options={"path": "/recordings/orders.parquet", "timeColumn": "ts"})
    options = impulse_options(config)
    assert options["eventsPerSecond"] == "300.0" and options["limit"] == "600" and options["numPartitions"] == "2"
    assert "payloadBytes" not in options
    with pytest.raises(LoadError, match=r"--source-option speed: set by the harness from --rate"):
        impulse_options(LoadConfig(source="replay", source_options={"path": "/r", "speed": "10"}))
    with pytest.raises(LoadError, match=r"replay: .*'path'"):
        impulse_options(LoadConfig(source="replay"))
    with pytest.raises(LoadError, match=r"leave --schema out with --source replay"):
        LoadConfig(source="replay", schema="x INT", source_options={"path": "/r"}).validate()


def test_a_replay_offset_is_measured_on_its_own_schedule():
    """Position p is due (p + 1) / rate after the start (the replay source's due count ⌊elapsed × rate⌋)."""
    offset = positional_offset({"position": 30, "startTime": START_US}, 300.0)
    assert offset["counters"] == [30] and offset["anchorCounters"] == [0]
    times = Schedule.of_offset(offset).times_us(np.arange(3, dtype=np.int64), 0)
    assert np.abs(times - (START_US + (np.arange(3) + 1) * 1e6 / 300)).max() <= 1
