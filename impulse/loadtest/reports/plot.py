"""The PNG of a report: throughput and latency per micro-batch, over time.

Top: events/s of each batch (its events over the time since the previous acknowledgement) against
the target rate; through Kafka, the records the pipeline read. Bottom: each batch's p50, p99 and max
latency, named by the run's definition (`impulse.loadtest.measure.latency_names`); a batch with no output
measured (an event-time run's batch that closed no window) is left out, not drawn at 0. Ramp steps share
one time axis (seconds since the first step's start), so the step where the sink stops keeping up is
visible. Rendered with Matplotlib's Agg canvas (no display, no pyplot global state).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from impulse.loadtest.measure.latency_names import title as latency_title
from impulse.loadtest.via.report import report_rows

__all__ = ["plot_runs", "two_panels", "finish_panels"]


def _series(rows: Sequence[dict], start_s: float):
    """Per batch row (`impulse.loadtest.via.report.report_rows`): its time, its events/s since the previous row; and
    the times and p50, p99, max latency of the rows with a latency."""
    times, rates, previous = [], [], (start_s, 0)
    for row in rows:
        span = row["timeS"] - previous[0]
        times.append(row["timeS"])
        rates.append((row["delivered"] - previous[1]) / span if span > 0 else 0.0)
        previous = (row["timeS"], row["delivered"])
    measured = [row for row in rows if row.get("latencyP99Ms") is not None]
    return (times, rates, [row["timeS"] for row in measured], [row["latencyP50Ms"] for row in measured],
            [row["latencyP99Ms"] for row in measured], [row["latencyMaxMs"] for row in measured])


def _short(value: float) -> str:
    """A tick label that fits the axis: 950, 1.5k, 20k, 2M."""
    for size, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:,.3g}{suffix}"
    return f"{value:,.4g}"


def two_panels(size: tuple[float, float]):
    """A figure on Matplotlib's Agg canvas with throughput (top) and latency (bottom) axes sharing x."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415 - the load extra's matplotlib
    from matplotlib.figure import Figure  # noqa: PLC0415 - the load extra's matplotlib

    figure = Figure(figsize=size, dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    rate_axes, latency_axes = figure.subplots(2, 1, sharex=True)
    return figure, rate_axes, latency_axes


def finish_panels(figure, rate_axes, latency_axes, path: str | Path, *, title: str, rate_label: str,
                  latency_label: str, x_label: str, latency_values: Sequence[float]) -> Path:
    """Labels, grids and legends; a log latency scale when `latency_values` span more than 50×; the PNG at `path`."""
    from matplotlib.ticker import FuncFormatter  # noqa: PLC0415 - the load extra's matplotlib

    rate_axes.set_ylabel(rate_label)
    rate_axes.set_ylim(bottom=0, top=rate_axes.get_ylim()[1] * 1.08)
    rate_axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: _short(value)))
    rate_axes.grid(alpha=0.3)
    rate_axes.legend(loc="upper left", fontsize=8, bbox_to_anchor=(1.005, 1.0), borderaxespad=0)
    rate_axes.set_title(title, fontsize=10)
    values = [v for v in latency_values if v > 0]
    if values and max(values) / max(min(values), 1e-3) > 50:
        latency_axes.set_yscale("log")
    else:
        latency_axes.set_ylim(bottom=0, top=max(values) * 1.08 if values else None)
        latency_axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.4g}"))
    latency_axes.set_ylabel(latency_label)
    latency_axes.set_xlabel(x_label)
    latency_axes.grid(alpha=0.3, which="both")
    latency_axes.legend(loc="upper left", fontsize=8, bbox_to_anchor=(1.005, 1.0), borderaxespad=0)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    return path


def plot_runs(runs: Sequence, path: str | Path, title: str) -> Path:
    """Draw `runs` (`LoadResult`s: one run, or the steps of a ramp) into the PNG at `path`."""
    figure, rate_axes, latency_axes = two_panels((9, 5.6))
    started = [r for r in runs if r.batches]
    origin = min(((r.schedule_start_us or r.started_us) for r in started), default=0)
    definitions = sorted({r.latency_definition for r in started}) or ["end-to-end"]
    name = " / ".join(latency_title(d) for d in definitions)
    via = any(hasattr(r, "pipeline_batches") for r in started)
    latency_values = []
    for index, run in enumerate(started):
        rows = report_rows(run, origin)
        start = ((run.schedule_start_us or run.started_us) - origin) / 1e6
        times, rates, measured, p50, p99, top = _series(rows, start)
        first = index == 0
        end = max(times[-1] if times else start, start + run.config.duration_s)
        rate_axes.hlines(run.target_rate, start, end, colors="0.55", linestyles="--", label="target" if first else None)
        rate_axes.plot(times, rates, "o-", color="tab:blue", markersize=3, linewidth=1,
                       label=("read by the pipeline (per batch)" if via else "achieved (per batch)") if first else None)
        latency_axes.plot(measured, top, "-", color="tab:red", linewidth=1, alpha=0.6,
                          label=f"max ({name})" if first else None)
        latency_axes.plot(measured, p99, "o-", color="tab:orange", markersize=3, linewidth=1,
                          label=f"p99 ({name})" if first else None)
        latency_axes.plot(measured, p50, "o-", color="tab:green", markersize=3, linewidth=1,
                          label=f"p50 ({name})" if first else None)
        latency_values += top
        if len(started) > 1:
            rate_axes.axvline(start, color="0.85", linewidth=0.8)
            latency_axes.axvline(start, color="0.85", linewidth=0.8)
    return finish_panels(figure, rate_axes, latency_axes, path, title=title,
                         rate_label="records/s" if via else "events/s", latency_label=f"{name} latency (ms)",
                         x_label="seconds since the start of the run", latency_values=latency_values)
