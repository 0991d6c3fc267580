"""``impulse-load compare DIR…``: the reports of several runs side by side — to compare sinks, options or versions.

Reads ``report.json`` from each directory (written by ``--output DIR``; a ramp contributes one row
per step, a file's report one row per scenario, a run with ``rateStages`` one more row per stage), prints one table — target and achieved rate, end-to-end latency p50 … p99.99 and max,
errors, sustained — and writes one PNG (``--output``, default ``compare.png``) overlaying every
run's throughput and p99 latency per micro-batch over time (seconds since each run's start), and one
self-contained HTML page (``--html``, default the PNG's path with ``.html``) with every report side by side.
Exit codes: 0 done, 2 a directory without a readable report.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from impulse.loadtest.reports.html import write_html
from impulse.loadtest.reports.plot import finish_panels, two_panels
from impulse.loadtest.reports.sections import rate_series
from impulse.loadtest.settings.units import LoadError

__all__ = ["Run", "load_runs", "compare_text", "plot_compare", "write_compare_html", "main"]

_PERCENTILES = ("p50", "p95", "p99", "p99.9", "p99.99", "max")
_SUSTAINED = {True: "yes", False: "no", None: "–"}   # None: a ramping stage, not judged


@dataclass(frozen=True)
class Run:
    """One run of a report: its name in the table and plot, its summary, latency (ms) and batch rows."""

    name: str
    summary: dict
    latency_ms: dict
    batches: list


def load_runs(directories: Sequence[str | Path]) -> list[Run]:
    """The runs of each directory's ``report.json``; raises `LoadError` naming a directory that has none."""
    runs: list[Run] = []
    for directory in directories:
        path = Path(directory) / "report.json"
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise LoadError(f"compare: {directory}: no report.json (write one with impulse-load --output "
                            f"{directory})") from None
        except (OSError, ValueError) as exc:
            raise LoadError(f"compare: {path}: not a readable report: {exc}") from None
        name = Path(directory).resolve().name or str(directory)
        if document.get("mode") == "scenarios":
            for section in document.get("scenarios", []):
                runs += _runs(f"{name}/{section.get('name', '?')}", section)
        else:
            runs += _runs(name, document)
    return runs


def _runs(name: str, document: dict) -> list[Run]:
    """A run's row and one row per stage of its ``rateStages``; a ramp's row per step."""
    if document.get("mode") == "ramp":
        return [run for index, step in enumerate(document.get("steps", []), 1)
                for run in _runs(f"{name} step {index}", step)]
    try:
        summary = document["summary"]
        out = [Run(name, summary, document.get("latencyMs", {}), document.get("batches", []))]
    except (KeyError, TypeError):
        raise LoadError(f"compare: {name}: report.json has no run summary") from None
    for stage in document.get("stages") or []:
        stage_summary = {"sink": summary.get("sink"), "targetRate": stage.get("targetRate"),
                         "achievedRate": stage.get("achievedRate"), "errors": None,
                         "sustained": stage.get("sustained")}
        out.append(Run(f"{name} stage {stage.get('stage')}", stage_summary, stage.get("latencyMs", {}), []))
    return out


def _cell(value, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def compare_text(runs: Sequence[Run]) -> str:
    """One row per run: target, achieved, p50 … p99.99 and max (ms), errors, sustained."""
    width = max([len("run")] + [len(r.name) for r in runs])
    head = (f"{'run':<{width}}  {'sink':<12}{'target/s':>11}{'achieved/s':>12}"
            + "".join(f"{p + ' ms':>11}" for p in _PERCENTILES) + f"{'errors':>8}  sustained")
    lines = [head]
    for run in runs:
        s = run.summary
        lines.append(f"{run.name:<{width}}  {s.get('sink', '?'):<12}{_cell(s.get('targetRate'), ',.0f'):>11}"
                     f"{_cell(s.get('achievedRate'), ',.0f'):>12}"
                     + "".join(f"{_cell(run.latency_ms.get(p), ',.1f'):>11}" for p in _PERCENTILES)
                     + f"{_cell(s.get('errors'), ',d'):>8}  {_SUSTAINED[s.get('sustained')]}")
    return "\n".join(lines)


def _series(run: Run, window_s: float = 1.0) -> tuple[list[float], list[float], list[float]]:
    """Per batch: time (s since the run's start), events/s (`rate_series`), p99 (ms)."""
    times, rates = rate_series(run.batches, window_s)
    return times, rates, [float("nan") if row.get("latencyP99Ms") is None else float(row["latencyP99Ms"])
                          for row in run.batches]   # nan: a batch with no output measured, left out of the line


def plot_compare(runs: Sequence[Run], path: str | Path) -> Path:
    """Overlay throughput (top) and p99 latency (bottom) of `runs` per micro-batch into the PNG at `path`."""
    figure, rate_axes, latency_axes = two_panels((10, 6.4))
    colors = [f"C{i % 10}" for i in range(len(runs))]
    p99_values = []
    for run, color in zip(runs, colors):
        if not run.batches:  # a stage's row: its batches are its run's, plotted once
            continue
        times, rates, p99 = _series(run)
        target = run.summary.get("targetRate")
        label = f"{run.name} ({run.summary.get('sink', '?')}, target {target:,.0f}/s)" if target else run.name
        rate_axes.plot(times, rates, "o-", color=color, markersize=2.5, linewidth=1, label=label)
        if target:
            rate_axes.axhline(target, color=color, linestyle=":", linewidth=1)
        latency_axes.plot(times, p99, "o-", color=color, markersize=2.5, linewidth=1,
                          label=f"{run.name}: p99 {run.latency_ms.get('p99', 0):,.0f} ms overall")
        p99_values += p99
    return finish_panels(figure, rate_axes, latency_axes, path,
                         title=f"impulse-load compare: {len(runs)} runs — throughput and p99 per micro-batch "
                               "(dotted: each run's target)",
                         rate_label="events/s (trailing 1 s)", latency_label="p99 end-to-end latency (ms)",
                         x_label="seconds since the start of each run", latency_values=p99_values)


def main(argv: Sequence[str] | None = None) -> int:
    """``impulse-load compare DIR… [--output PNG]``; returns the exit code."""
    parser = argparse.ArgumentParser(prog="impulse-load compare",
                                     description="Compare the reports (--output DIRs) of earlier impulse-load runs: "
                                                 "one table and one overlay plot of throughput and p99 over time.")
    parser.add_argument("directories", nargs="+", metavar="DIR", help="a directory holding a run's report.json")
    parser.add_argument("--output", default="compare.png", metavar="PNG",
                        help="where to write the overlay plot (default compare.png)")
    parser.add_argument("--html", metavar="HTML",
                        help="where to write the self-contained page of every report side by side (default: the "
                             "plot's path with .html, e.g. compare.html)")
    args = parser.parse_args(argv)
    try:
        runs = load_runs(args.directories)
    except LoadError as exc:
        print(f"impulse-load: error: {exc}", file=sys.stderr)
        return 2
    print(compare_text(runs))
    try:
        print(f"plot: {plot_compare(runs, args.output)}")
    except ImportError:
        print("plot: skipped (needs matplotlib, the 'load' extra)")
    try:
        print(f"page: {write_compare_html(args.directories, args.html or Path(args.output).with_suffix('.html'))}")
    except ImportError:
        print("page: skipped (needs plotly, the 'report' extra)")
    return 0


def write_compare_html(directories: Sequence[str | Path], path: str | Path) -> Path:
    """The reports of `directories` side by side in one self-contained page (`impulse.loadtest.reports.html`): a
    comparison of every run (each step, scenario), then each report's sections. Needs plotly (ImportError)."""

    documents = [(Path(d).resolve().name or str(d), json.loads((Path(d) / "report.json").read_text(encoding="utf-8")))
                 for d in directories]
    return write_html(documents, path, f"impulse-load compare: {', '.join(name for name, _ in documents)}")
