"""The report of a run or a ramp: the summary table printed at the end, and the files of ``--output DIR``.

Files (every one rewritten at each report):

- ``report.json``: everything — ``result`` (PASS or FAIL, the query and why: `impulse.loadtest.reports.verdict`),
  summary, configuration (secret-looking option values hidden), verdict, latency percentiles and
  histogram (``summary.latencyDefinition`` names what they measure), Spark's per-phase durations, the
  stages of ``rateStages`` (target vs achieved rate and latency per stage), one record per batch; for a
  ramp, one such object per step plus the highest sustained rate; for a file's scenarios, one section per
  scenario (``mode: scenarios``). Through Kafka the batches, phases, output rows and latency are the
  pipeline's and ``producer`` holds the producer's (`impulse.loadtest.via.report`);
- ``summary.csv``: one row per run (per step for a ramp), redis-benchmark style;
- ``batches.csv``: one row per micro-batch (with the step's target rate for a ramp);
- ``report.png``: throughput and latency per batch over time (`impulse.loadtest.reports.plot`; needs
  matplotlib, the ``load`` extra: without it the PNG is skipped);
- ``report.html``: one self-contained page of all of the above with interactive charts, drawn from the
  report.json object (`impulse.loadtest.reports.html`; needs plotly, the ``report`` extra, part of ``load``:
  without it the page is skipped).

Latencies are in ms, rates in events/s, times in s since the start of the run.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Sequence

from connectors.latency import LatencyHistogram
from impulse.loadtest.load.ramp import RampResult
from impulse.loadtest.load.result import LATENCY_PARTS, LoadResult
from impulse.loadtest.load.resume import describe_resumed
from impulse.loadtest.measure.latency_names import description as latency_description
from impulse.loadtest.measure.latency_names import title as latency_title
from impulse.loadtest.measure.metrics import PERCENTILES, PHASES, percentiles_ms, phase_stats
from impulse.loadtest.query.transform import describe as describe_query
from impulse.loadtest.reports.html import write_html
from impulse.loadtest.reports.plot import plot_runs
from impulse.loadtest.reports.verdict import decide, decide_all
from impulse.loadtest.via.kafka import ViaResult
from impulse.loadtest.via.report import report_rows, via_lines
from impulse.session import describe

__all__ = ["summary_text", "ramp_text", "stages_lines", "report_document", "write_report"]


def _ms(value: float) -> str:
    return f"{value:,.1f}"


def _is_via(result: LoadResult) -> bool:
    return isinstance(result, ViaResult)


def _latency_rows(result: LoadResult) -> list[tuple[str, LatencyHistogram]]:
    """The summary's latency rows: the run's latency, named by its definition; then a direct run's two parts
    (schedule delay + delivery, see `metrics`), or through Kafka the latency through it when the run's is the
    pipeline's own part (the producer's rows are in its block)."""
    rows = [(latency_title(result.latency_definition), result.latency)]
    if not _is_via(result):
        return rows + [(title, result.histogram(part)) for part, title in LATENCY_PARTS if part != "latency"]
    if result.via_latency is not None:
        rows.append((latency_title(result.via_latency_definition), result.via_latency))
    return rows


def _latency_lines(result: LoadResult) -> list[str]:
    """What the latency measures (every definition shown), then its percentiles, one row per `_latency_rows`."""
    names = [name for name, _ in PERCENTILES] + ["max"]
    definitions = [result.latency_definition] + ([result.via_latency_definition] if _is_via(result)
                                                 and result.via_latency is not None else [])
    lines = [f"  latency: {latency_title(d)}: {latency_description(d)}" for d in definitions]
    lines.append("  " + f"{'latency (ms)':<24}" + "".join(f"{n:>10}" for n in names))
    for title, histogram in _latency_rows(result):
        values = percentiles_ms(histogram)
        lines.append(f"    {title:<22}" + "".join(f"{_ms(values[n]):>10}" for n in names))
    return lines


def stages_lines(result: LoadResult) -> list[str]:
    """One row per stage of ``rateStages`` (per interval of ``rateCurve``): target vs achieved rate, events, latency percentiles, sustained (holds)."""
    stages = result.stage_results
    if not stages:
        return []
    width = max(len(s.stage.label) for s in stages)
    lines = [f"  {'stage':<{width + 4}}{'target/s':>11}{'achieved/s':>12}{'events':>11}{'p50 ms':>10}{'p95 ms':>10}"
             f"{'p99 ms':>10}{'max ms':>10}  sustained"]
    for stage in stages:
        latency = percentiles_ms(stage.latency)
        sustained = {None: "– (curve)" if stage.stage.knots else "– (ramp)", True: "yes", False: "no"}[stage.sustained]
        lines.append(f"  {stage.index:<3} {stage.stage.label:<{width}}{stage.stage.mean_rate:>11,.0f}"
                     f"{stage.achieved_rate:>12,.0f}{stage.events:>11,}" + "".join(
                         f"{_ms(latency[p]):>10}" for p in ("p50", "p95", "p99", "max")) + f"  {sustained}")
    return lines


def summary_text(result: LoadResult, name: str | None = None) -> str:
    """The end-of-run text. First line, the headline: PASS or FAIL, the query and why
    (`impulse.loadtest.reports.verdict`); then target vs achieved, events, output rows, errors, micro-batches, latency
    percentiles (each row named by what it measures, `impulse.loadtest.measure.latency_names`), Spark's phases, the
    stages of ``rateStages``, the thresholds' and the check's pass/fail. Through Kafka the output rows, micro-batches,
    latency and phases are the pipeline's, and the producer has a block of its own
    (`impulse.loadtest.via.report.via_lines`). `name`: the scenario's."""
    c = result.config
    via = _is_via(result)
    stages = stages_lines(result)
    titled = f" {name!r}" if name else ""
    lines = [
        f"impulse-load{titled}: {decide(result).headline()}",
        f"impulse-load summary{' of ' + repr(name) if name else ''}: {result.sink}, {c.partitions} partitions, {c.payload_bytes} B payload, "
        f"trigger {c.trigger}, {result.outcome}" + (f" ({result.error})" if result.error else ""),
        *([f"  on {describe(result.deployment)}"] if result.deployment else []),
        *([f"  {describe_resumed(result.resumed)}"] if result.resumed else []),
        *([f"  query: {describe_query(c)}"] if describe_query(c) else []),
        *([f"  schema: {c.schema}" + (f"; {len(c.source_options)} source options" if c.source_options else "")]
          if c.schema else []),
        f"  {'':<24}{'target':>14}{'achieved':>14}",
        f"  {'rate (events/s)':<24}{result.target_rate:>14,.0f}{result.achieved_rate:>14,.0f}",
        f"  {'events':<24}{result.target_events:>14,}{result.events:>14,}",
        *([f"  {'records read (pipeline)':<24}{'':>14}{result.via.get('rowsRead') or 0:>14,}"] if via else []),
        *([f"  {'output rows':<24}{'':>14}{result.output_rows:>14,}"] if result.output_rows is not None else []),
        f"  {'errors':<24}{'':>14}{result.errors:>14,}",
        f"  {'dead-lettered':<24}{'':>14}{result.dead_lettered:>14,}",
        *([] if via else [f"  {'MB (Arrow)':<24}{'':>14}{result.bytes / 2**20:>14,.1f}"]),
        f"  {'batches (pipeline)' if via else 'batches':<24}{'':>14}{_batch_count(result):>14,}",
        f"  {'time (s)':<24}{c.duration_s:>14,.1f}{result.duration_s:>14,.1f}",
        f"  sustained: {result.verdict}",
        *([f"  {c.stages.option}: {c.stages.text}"] if stages else []),
        *stages,
        "",
        *_latency_lines(result),
        "",
        f"  {'Spark phase (ms)' + (', pipeline' if via else ''):<24}{'mean':>10}{'max':>10}",
    ]
    for phase, stats in _phase_stats(result).items():
        lines.append(f"    {phase:<22}{stats['mean']:>10,.1f}{stats['max']:>10,.0f}")
    checks = result.checks
    if checks:
        width = max(len(check.threshold.text) for check in checks)
        lines += ["", f"  thresholds: {sum(c.passed for c in checks)} of {len(checks)} passed"]
        lines += [f"    {'pass' if check.passed else 'FAIL'}  {check.threshold.text:<{width}}  measured {check.measured}"
                  for check in checks]
    if result.check is not None:
        lines += ["", *("  " + line for line in result.check.lines())]
    if result.receiver is not None:
        rows = result.receiver["rows"]
        if c.transform is None and c.sql is None:
            check = "= the committed events" if rows == result.events else f"≠ {result.events:,} committed events"
        else:
            out = result.output_rows
            check = "= the output rows" if rows == out else f"≠ {out if out is not None else '?':,} output rows"
        lines += ["", f"  embedded receiver: {rows:,} rows accepted in {result.receiver['requests']:,} requests "
                      f"({result.receiver['duplicates']:,} duplicates ignored) {check}"]
    if via:
        lines += ["", *via_lines(result)]
    return "\n".join(lines)


def _batch_count(result: LoadResult) -> int:
    """The run's micro-batches: through Kafka, the pipeline's."""
    return len(result.pipeline_batches) if _is_via(result) else len(result.batches)


def _phase_stats(result: LoadResult) -> dict:
    """Spark's phases of the run's micro-batches: through Kafka, the pipeline's."""
    return phase_stats(result.pipeline_batches if _is_via(result) else result.batches)


def ramp_text(ramp: RampResult) -> str:
    """The headline (PASS or FAIL, the query and why), one row per step, the highest sustained rate and the ramp's
    verdict as a gate (`RampResult.failures`)."""
    c = ramp.config
    search = ramp.ramp.search
    how = (f"search {ramp.ramp.start:,.0f}–{ramp.ramp.maximum:,.0f} events/s to within {ramp.ramp.precision:.0%}, "
           f"{ramp.ramp.step_duration_s:g}s per probe, twice that to confirm" if search
           else f"{ramp.ramp.step_duration_s:g}s per step")
    lines = [
        f"impulse-load: {decide(ramp).headline()}",
        f"impulse-load ramp: {c.sink}, {c.partitions} partitions, {c.payload_bytes} B payload, "
        f"{how}; sustained = {ramp.bound}",
        *([f"  query: {describe_query(c)}"] if describe_query(c) else []),
        f"  {'step':<9}" * search + f"  {'target/s':>12}{'achieved/s':>12}{'events':>12}{'errors':>8}{'p50 ms':>10}"
        f"{'p99 ms':>10}{'p99.9 ms':>10}{'max ms':>10}  sustained",
    ]
    for step, role in zip(ramp.steps, ramp.step_roles):
        latency = percentiles_ms(step.latency)
        lines.append(f"  {role:<9}" * search + f"  {step.target_rate:>12,.0f}{step.achieved_rate:>12,.0f}"
                     f"{step.events:>12,}{step.errors:>8,}"
                     f"{_ms(latency['p50']):>10}{_ms(latency['p99']):>10}{_ms(latency['p99.9']):>10}"
                     f"{_ms(latency['max']):>10}  {step.verdict}")
    best = ramp.highest_sustained_rate
    if search:
        lines.append(f"sustainable rate (confirmed): {best:,.0f} events/s" if best is not None
                     else "sustainable rate: none confirmed")
    else:
        lines.append(f"highest sustained rate: {best:,.0f} events/s" if best is not None
                     else "highest sustained rate: none (the first step was not sustained)")
    if ramp.interrupted:
        lines.append("(interrupted: the ramp did not reach its end)")
    minimum = ramp.ramp.min_sustained
    gate = f" (min-sustained {minimum:,.0f} events/s)" if minimum is not None else ""
    lines += [f"ramp: passed{gate}"] if ramp.passed else [f"ramp: FAILED{gate}", *(f"  {r}" for r in ramp.failures)]
    return "\n".join(lines)


def _write_csv(path: Path, rows: Sequence[dict]) -> None:
    fields: list[str] = []
    for row in rows:
        fields += [k for k in row if k not in fields]
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def _summary_row(result: LoadResult) -> dict:
    """summary.csv's row: the summary and Spark's phases (through Kafka, the pipeline's)."""
    row = result.summary()
    for phase, stats in _phase_stats(result).items():
        row[f"{phase}MeanMs"] = stats["mean"]
        row[f"{phase}MaxMs"] = stats["max"]
    return row


def _document(result: LoadResult | RampResult) -> tuple[dict, list[LoadResult], str]:
    """The report.json object of a run or a ramp (with its ``result``: PASS or FAIL and why,
    `impulse.loadtest.reports.verdict`), its runs, and its plot's title."""
    if isinstance(result, RampResult):
        title = (f"impulse-load ramp: {result.config.sink}, highest sustained "
                 + (f"{result.highest_sustained_rate:,.0f} events/s" if result.highest_sustained_rate else "rate: none"))
        return {"mode": "ramp", "result": decide(result).to_dict(), **result.to_dict()}, result.steps, title
    title = (f"impulse-load: {result.sink}, target {result.target_rate:,.0f} events/s, "
             f"achieved {result.achieved_rate:,.0f}")
    return {"mode": "run", "result": decide(result).to_dict(), **result.to_dict()}, [result], title


def report_document(result: LoadResult | RampResult | Sequence[tuple[str, LoadResult | RampResult]], *,
                    file: str | None = None, name: str | None = None) -> tuple[dict, list, str]:
    """The report.json object of `result` (see `write_report`), its (scenario name, run) pairs and its title."""
    if isinstance(result, (LoadResult, RampResult)):
        document, runs, title = _document(result)
        document = {"name": name, **document} if name else document
        return document, [(None, run) for run in runs], title
    sections, named = [], []
    for name, one in result:
        section, runs, _ = _document(one)
        sections.append({"name": name, **section})
        named += [(name, run) for run in runs]
    title = f"impulse-load: {file}, {len(sections)} scenario{'s' if len(sections) != 1 else ''}"
    return ({"mode": "scenarios", "file": file, "result": decide_all(list(result)).to_dict(), "scenarios": sections},
            named, title)


def write_report(result: LoadResult | RampResult | Sequence[tuple[str, LoadResult | RampResult]],
                 directory: str | Path, *, file: str | None = None, name: str | None = None) -> dict[str, Path]:
    """Write report.json, summary.csv, batches.csv, report.png and report.html into `directory`; returns their paths.

    `result`: one run or ramp (named `name`, if given), or the named scenarios of a file (`file`): then report.json is
    ``{"mode": "scenarios", "file", "scenarios": [{"name", "mode": "run"|"ramp", …}]}``, one section per
    scenario (with its ``stages``), and the CSV rows carry a ``scenario`` column. report.html is drawn from the
    report.json object (`impulse.loadtest.reports.html`).
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / name for name in ("report.json", "summary.csv", "batches.csv", "report.png", "report.html")}
    document, named, title = report_document(result, file=file, name=name)
    runs = [run for _, run in named]
    paths["report.json"].write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    _write_csv(paths["summary.csv"], [{**({"scenario": name} if name else {}), **_summary_row(r)} for name, r in named])
    batch_rows = []
    origin = (runs[0].schedule_start_us or runs[0].started_us) if runs else 0
    for name, run in named:
        batch_rows += [{**({"scenario": name} if name else {}), "targetRate": run.target_rate, **row}
                       for row in report_rows(run, origin)]
    _write_csv(paths["batches.csv"], batch_rows or [{"targetRate": "", **{f"{p}Ms": "" for p in PHASES}}])
    try:
        plot_runs(runs, paths["report.png"], title)
    except ImportError:  # matplotlib is optional (the 'load' extra): the numbers are all in the other files
        del paths["report.png"]
    try:
        write_html([(document.get("name") or file or f"run: {runs[0].sink if runs else '?'}", document)],
                   paths["report.html"], title)
    except ImportError:  # plotly is optional (the 'report' extra, part of 'load')
        del paths["report.html"]
    return paths
