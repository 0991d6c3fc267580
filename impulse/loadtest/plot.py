"""The PNG of a report: throughput and end-to-end latency per micro-batch, over time.

Top: events/s of each batch (its events over the time since the previous acknowledgement) against
the target rate. Bottom: each batch's p50, p99 and max latency. Ramp steps share one time axis
(seconds since the first step's start), so the step where the sink stops keeping up is visible.
Rendered with Matplotlib's Agg canvas (no display, no pyplot global state).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

__all__ = ["plot_runs", "two_panels", "finish_panels"]


def _series(run, origin_us: int):
    times, rates, p50, p99, top = [], [], [], [], []
    previous = run.schedule_start_us or run.started_us
    for batch in run.batches:
        span = (batch.ack_us - previous) / 1e6
        previous = batch.ack_us
        times.append((batch.ack_us - origin_us) / 1e6)
        rates.append(batch.rows / span if span > 0 else 0.0)
        p50.append(batch.latency.percentile(50.0) / 1e3)
        p99.append(batch.latency.percentile(99.0) / 1e3)
        top.append(batch.latency.max_us / 1e3)
    return times, rates, p50, p99, top


def two_panels(size: tuple[float, float]):
    """A figure on Matplotlib's Agg canvas with throughput (top) and latency (bottom) axes sharing x."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=size, dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    rate_axes, latency_axes = figure.subplots(2, 1, sharex=True)
    return figure, rate_axes, latency_axes


def finish_panels(figure, rate_axes, latency_axes, path: str | Path, *, title: str, rate_label: str,
                  latency_label: str, x_label: str, latency_values: Sequence[float]) -> Path:
    """Labels, grids and legends; a log latency scale when `latency_values` span more than 50×; the PNG at `path`."""
    rate_axes.set_ylabel(rate_label)
    rate_axes.set_ylim(bottom=0)
    rate_axes.grid(alpha=0.3)
    rate_axes.legend(loc="lower right", fontsize=8)
    rate_axes.set_title(title, fontsize=10)
    values = [v for v in latency_values if v > 0]
    if values and max(values) / max(min(values), 1e-3) > 50:
        latency_axes.set_yscale("log")
    else:
        latency_axes.set_ylim(bottom=0)
    latency_axes.set_ylabel(latency_label)
    latency_axes.set_xlabel(x_label)
    latency_axes.grid(alpha=0.3, which="both")
    latency_axes.legend(loc="upper right", fontsize=8)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    return path


def plot_runs(runs: Sequence, path: str | Path, title: str) -> Path:
    """Draw `runs` (`LoadResult`s: one run, or the steps of a ramp) into the PNG at `path`."""
    figure, rate_axes, latency_axes = two_panels((9, 5.6))
    started = [r for r in runs if r.batches]
    origin = min(((r.schedule_start_us or r.started_us) for r in started), default=0)
    for index, run in enumerate(started):
        times, rates, p50, p99, top = _series(run, origin)
        start = ((run.schedule_start_us or run.started_us) - origin) / 1e6
        first = index == 0
        rate_axes.hlines(run.target_rate, start, max(times[-1], start + run.config.duration_s), colors="0.55",
                         linestyles="--", label="target" if first else None)
        rate_axes.plot(times, rates, "o-", color="tab:blue", markersize=3, linewidth=1,
                       label="achieved (per batch)" if first else None)
        latency_axes.plot(times, top, "-", color="tab:red", linewidth=1, alpha=0.6, label="max" if first else None)
        latency_axes.plot(times, p99, "o-", color="tab:orange", markersize=3, linewidth=1,
                          label="p99" if first else None)
        latency_axes.plot(times, p50, "o-", color="tab:green", markersize=3, linewidth=1,
                          label="p50" if first else None)
        if len(started) > 1:
            rate_axes.axvline(start, color="0.85", linewidth=0.8)
            latency_axes.axvline(start, color="0.85", linewidth=0.8)
    return finish_panels(figure, rate_axes, latency_axes, path, title=title, rate_label="events/s",
                         latency_label="end-to-end latency (ms)", x_label="seconds since the start of the run",
                         latency_values=[b.latency.max_us / 1e3 for r in started for b in r.batches])
