"""Checks shared by the load-harness tests."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from impulse.loadtest.measure.metrics import percentiles_ms

ORDER = ("p50", "p95", "p99", "p99.9", "max")


def assert_latency_plausible(latency_ms: dict, run_seconds: float) -> None:
    """Percentiles ordered p50 ≤ p95 ≤ p99 ≤ p99.9 ≤ max, all > 0 and below the run's duration."""
    values = [latency_ms[name] for name in ORDER]
    assert values == sorted(values), latency_ms
    assert values[0] > 0, latency_ms
    assert values[-1] <= run_seconds * 1000 + 1, (latency_ms, run_seconds)


def assert_result_plausible(result) -> None:
    assert result.outcome == "completed", (result.outcome, result.error)
    assert result.events == result.target_events
    assert sum(b.rows for b in result.batches) == result.events
    assert result.latency.count == result.events  # one latency per event
    assert result.errors == 0
    assert result.achieved_rate > 0
    assert_latency_plausible(percentiles_ms(result.latency), result.duration_s)


def assert_report_files(directory: Path, events: int) -> dict:
    """report.json, summary.csv, batches.csv, a PNG and the HTML page exist and agree on the event count."""
    for name in ("report.json", "summary.csv", "batches.csv", "report.png", "report.html"):
        assert (directory / name).is_file() and (directory / name).stat().st_size > 0, name
    assert (directory / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = json.loads((directory / "report.json").read_text())
    summary = report["summary"] if report["mode"] == "run" else report["steps"][-1]["summary"]
    assert summary["events"] == events
    lines = (directory / "summary.csv").read_text().splitlines()
    assert lines[0].startswith("sink,") and len(lines) >= 2
    return report


def run_cli(capsys, tmp_path: Path, *argv: str) -> tuple[int, str, dict | None]:
    """``impulse-load ARGV --output DIR`` in-process: (exit code, stdout + stderr, report.json or None)."""
    from impulse.loadtest.cli import main

    out_dir = tmp_path / f"report-{uuid.uuid4().hex[:6]}"
    code = main([*argv, "--output", str(out_dir)])
    captured = capsys.readouterr()
    report = json.loads((out_dir / "report.json").read_text()) if (out_dir / "report.json").exists() else None
    return code, captured.out + captured.err, report
