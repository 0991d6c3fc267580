"""``report.html``: one self-contained page of a run, a ramp, a file's scenarios, or several runs compared.

Built from ``report.json`` documents alone (one source of truth: a key added to a run's object or to its
``summary`` shows up in the page without a change here). The page holds, per run: headline numbers (for a run
resumed from ``--checkpoint``, ``summary.resumed`` as a note saying what its figures cover), the
summary table, the verdict, every threshold and the ``check`` (pass/FAIL with what was measured), charts
over time (target vs achieved rate, lag, latency percentiles per batch, schedule delay vs delivery,
Spark's phases), the latency distribution as an HDR percentile curve, the configuration and the
deployment; with more than one run (a ramp's steps, a file's scenarios, ``compare``) a comparison table
and overlay charts first.

Charts are Plotly figures (plain JSON specs built here) drawn by plotly.js, which the ``plotly`` package
(the ``report`` extra) ships and which is inlined into the page: the file needs no network to be viewed.
Only `write_html` needs plotly; `render_html` takes the script as text. When every chart is drawn the page
sets ``data-charts="rendered"`` on ``<body>``.
"""

from __future__ import annotations

import html
import json
import math
import re
import textwrap
from pathlib import Path
from typing import Any, Sequence

from connectors.latency import LatencyHistogram
from impulse.loadtest.load.resume import describe_resumed
from impulse.loadtest.measure.latency_names import PARTS as LATENCY_PARTS
from impulse.loadtest.measure.latency_names import description as latency_description
from impulse.loadtest.measure.latency_names import title as latency_title
from impulse.loadtest.measure.metrics import PHASES
from impulse.loadtest.reports.check_examples import example_table
from impulse.loadtest.reports.sections import check_failure, rate_series, run_sections, step_name

__all__ = ["render_html", "write_html", "plotly_js"]

# summary keys in the order and words of the summary table; any other key follows with its own name
_SUMMARY_LABELS = {
    "sink": "sink", "partitions": "partitions", "payloadBytes": "payload (bytes)", "trigger": "trigger",
    "durationS": "duration (s)", "targetRate": "target rate (events/s)", "achievedRate": "achieved rate (events/s)",
    "targetEvents": "target events", "events": "events delivered", "errors": "errors",
    "deadLettered": "dead-lettered", "batches": "micro-batches", "bytes": "bytes (Arrow)", "outcome": "outcome",
    "sustained": "sustained", "latencyP50Ms": "latency p50 (ms)", "latencyP95Ms": "latency p95 (ms)",
    "latencyP99Ms": "latency p99 (ms)", "latencyP999Ms": "latency p99.9 (ms)",
    "latencyP9999Ms": "latency p99.99 (ms)", "latencyMaxMs": "latency max (ms)",
    "latencyMeanMs": "latency mean (ms)", "receiverRows": "rows at the embedded receiver",
}
# keys of a run's object shown by a part of the page of their own (others: "more data", as JSON)
_SHOWN = {"mode", "name", "summary", "config", "deployment", "verdict", "thresholds", "check", "checkDetail",
          "latencyMs",
          "scheduleDelayMs", "deliveryMs", "latencyHistogram", "scheduleDelayHistogram", "deliveryHistogram",
          "phasesMs", "stages", "batches", "scheduleStartUs", "startedUs", "finishedUs", "queryId", "error",
          "receiver", "result", "via", "producer", "viaLatency"}
_PERCENTILE_NAMES = ("p50", "p95", "p99", "p99.9", "p99.99", "max")
_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;color:#1f2328;
background:#f6f8fa}
main{max-width:1280px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;
padding-bottom:4px}h3{font-size:15px;margin:18px 0 6px}
section.run{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:8px 16px 16px;margin:16px 0}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}
.card{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:6px 12px;min-width:130px}
.card b{display:block;font-size:20px}.card span{color:#59636e;font-size:12px}
table{border-collapse:collapse;margin:6px 0;font-variant-numeric:tabular-nums}
th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:right;vertical-align:top}
th{background:#f0f3f6}td.l,th.l{text-align:left}
.pass{color:#1a7f37;font-weight:600}.FAIL{color:#cf222e;font-weight:700}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(560px,1fr));gap:10px}
.chart{height:340px;border:1px solid #eaeef2;border-radius:6px;background:#fff}
pre{background:#f6f8fa;border:1px solid #d0d7de;border-radius:6px;padding:8px;overflow:auto;max-height:360px}
details{margin:8px 0}summary{cursor:pointer;font-weight:600}
.row{display:flex;flex-wrap:wrap;gap:0 24px;align-items:flex-start;margin-bottom:12px}.gates{max-width:440px}
.latency{max-width:640px}
.summary td,.summary th{padding:1px 8px}
.headline{font-size:16px;font-weight:600;margin:6px 0 10px;padding:6px 10px;border-radius:6px;background:#fff;
border:1px solid #d0d7de}.headline.PASS{border-left:6px solid #1a7f37}.headline.FAIL{border-left:6px solid #cf222e}
.headline ul{margin:4px 0 0;font-weight:400}.note{color:#59636e;font-size:12px;margin:2px 0}
.resumed{margin:6px 0 10px;padding:6px 10px;border-radius:6px;background:#fff8c5;border:1px solid #d4a72c}
section.producer{background:#fbfcfd;border:1px dashed #d0d7de;border-radius:8px;padding:4px 12px 12px;margin:12px 0}
"""
_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")


def plotly_js() -> str:
    """plotly.js as shipped by the ``plotly`` package (the ``report`` extra): the script the page inlines."""
    from plotly.offline import get_plotlyjs  # noqa: PLC0415 - the report extra's plotly

    return get_plotlyjs()


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _number(value: Any) -> str:
    """Integers with thousands separators, floats with one decimal (three below 10), the rest as text."""
    if isinstance(value, bool) or value is None:
        return {True: "yes", False: "no", None: "–"}[value]
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    return str(value)


def _mark(passed: Any) -> str:
    return '<span class="pass">pass</span>' if passed else '<span class="FAIL">FAIL</span>'


def _yes_no(value: Any) -> str:
    """A verdict: yes (green), no (red), – (not judged: None)."""
    if value is None:
        return "–"
    return '<span class="pass">yes</span>' if value else '<span class="FAIL">no</span>'


def _kv_table(values: dict, labels: dict | None = None, css: str = "summary") -> str:
    """A two-column table of `values` (known keys first, in the order of `labels`; nested values as JSON)."""
    labels = labels or {}
    keys = [k for k in labels if k in values] + [k for k in values if k not in labels]
    rows = []
    for key in keys:
        value = values[key]
        shown = (f"<code>{_e(json.dumps(value, sort_keys=True))}</code>" if isinstance(value, (dict, list))
                 else _e(_number(value)))
        rows.append(f'<tr><th class="l">{_e(labels.get(key, key))}</th><td>{shown}</td></tr>')
    return f'<table class="{css}">' + "".join(rows) + "</table>"


class _Figures:
    """The page's Plotly figures: each `add` returns the ``<div>`` that will hold it."""

    def __init__(self) -> None:
        self.specs: list[dict] = []

    def add(self, title: str, data: list[dict], layout: dict | None = None) -> str:
        ident = f"chart{len(self.specs) + 1}"
        base = {"title": {"text": title, "font": {"size": 14}, "x": 0.01, "xanchor": "left"},
                "margin": {"l": 64, "r": 16, "t": 40, "b": 88},
                "hovermode": "x unified", "legend": {"orientation": "h", "y": -0.3}, "autosize": True}
        base.update(layout or {})
        self.specs.append({"id": ident, "data": data, "layout": base})
        return f'<div class="chart" id="{ident}"></div>'

    def json(self) -> str:
        return json.dumps(self.specs, separators=(",", ":")).replace("</", "<\\/")


def _line(x: Sequence, y: Sequence, name: str, **extra: Any) -> dict:
    return {"type": "scatter", "mode": "lines+markers", "x": list(x), "y": list(y), "name": name,
            "marker": {"size": 4}, **extra}


def _axes(x: str, y: str, **y_extra: Any) -> dict:
    return {"xaxis": {"title": {"text": x}}, "yaxis": {"title": {"text": y}, "rangemode": "tozero", **y_extra}}


def _target_trace(run: dict) -> dict:
    """The target rate over time: the stages of ``rateStages`` (piecewise linear; a curve's intervals through their
    knots), else the run's constant rate."""
    stages = run.get("stages") or []
    if stages:
        x, y = [], []
        for stage in stages:
            corners = stage.get("knots") or [[stage["startS"], stage["fromRate"]],
                                             [stage["startS"] + stage["durationS"], stage["toRate"]]]
            x += [t for t, _ in corners]
            y += [r for _, r in corners]
    else:
        batches = run.get("batches") or []
        end = max([float(b["timeS"]) for b in batches] + [float((run.get("summary") or {}).get("durationS") or 0)])
        x, y = [0.0, end], [(run.get("summary") or {}).get("targetRate") or 0] * 2
    return {"type": "scatter", "mode": "lines", "x": x, "y": y, "name": "target",
            "line": {"dash": "dash", "color": "#6e7781"}}


def _percentile_curve(histogram: dict | None) -> tuple[list[float], list[float], list[str]]:
    """The HDR percentile curve of a histogram object of report.json: x = 1 / (1 − percentile) (1 = p0,
    100 = p99, …), y in ms, and each point's name (``p99.9``, ``max``); up to the percentile the event count
    resolves (10^n events: n nines, at most 6), then the maximum."""
    hist = LatencyHistogram.from_dict(histogram)
    if not hist.count:
        return [], [], []
    nines = max(1.0, min(6.0, math.log10(hist.count)))
    quantiles = [q / 100 for q in range(1, 90, 2)] + [1 - 10 ** -(k / 20) for k in range(20, int(nines * 20) + 1)]
    return ([1 / (1 - q) for q in quantiles] + [10 ** nines * 2],
            [hist.percentile(100 * q) / 1e3 for q in quantiles] + [hist.max_us / 1e3],
            [f"p{100 * q:.4g}" for q in quantiles] + ["max"])


def _hdr_layout() -> dict:
    ticks = [1, 2, 10, 100, 1_000, 10_000, 100_000, 1_000_000]
    labels = ["0%", "50%", "90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%"]
    return {"xaxis": {"type": "log", "tickvals": ticks, "ticktext": labels, "title": {"text": "percentile"}},
            "yaxis": {"title": {"text": "latency (ms)"}, "rangemode": "tozero"}, "hovermode": "closest"}


def _definition(run: dict) -> str:
    """The name of what the run's latency measures (`impulse.loadtest.measure.latency_names`; old reports:
    end-to-end)."""
    return (run.get("summary") or {}).get("latencyDefinition") or "end-to-end"


def _measured(batches: Sequence[dict], key: str) -> tuple[list, list]:
    """(times, values) of the batch rows that have `key`: a batch with no output measured is left out, not drawn
    at 0."""
    points = [(b["timeS"], b[key]) for b in batches if b.get(key) is not None]
    return [t for t, _ in points], [v for _, v in points]


def _run_charts(run: dict, figures: _Figures) -> str:
    """The charts of one run: over time (per micro-batch) and the latency distribution. Through Kafka (a run with
    ``via``) its batches are the pipeline's: the records it read, its input's lag, its output's latency."""
    batches = run.get("batches") or []
    times = [b["timeS"] for b in batches]
    via = isinstance(run.get("via"), dict)
    producer = run.get("summary", {}).get("latencyDefinition") == "producer"
    x_title = "seconds since the start of the run"
    name = latency_title(_definition(run))
    divs = []
    if batches:
        _, rates = rate_series(batches)
        divs.append(figures.add(
            "Rate: target vs records read by the pipeline (records/s, trailing 1 s)" if via else
            "Rate: target vs written into the input topic (events/s, trailing 1 s)" if producer else
            "Rate: target vs achieved (events/s, trailing 1 s)",
            [_target_trace(run), _line(times, rates, "read" if via else "achieved", line={"color": _COLORS[0]})],
            _axes(x_title, "records/s" if via else "events/s")))
        lag_t, lag = _measured(batches, "lag")
        if lag_t:
            divs.append(figures.add(
                "Lag: input records not yet read by the pipeline (after each batch)" if via else
                "Lag: events due − delivered (at each acknowledgement)",
                [_line(lag_t, lag, "lag", line={"color": _COLORS[3]})], _axes(x_title, "records" if via else "events")))
        latency_t, _ = _measured(batches, "latencyP99Ms")
        if latency_t:
            divs.append(figures.add(f"Latency per micro-batch: {name} (ms)", [
                _line(*_measured(batches, "latencyP50Ms"), f"p50 ({name})", line={"color": _COLORS[2]}),
                _line(*_measured(batches, "latencyP99Ms"), f"p99 ({name})", line={"color": _COLORS[1]}),
                _line(*_measured(batches, "latencyMaxMs"), f"max ({name})", line={"color": _COLORS[3], "width": 1}),
            ], {**_axes(x_title, "ms"), **_subtitle(latency_description(_definition(run)))}))
        parts = [(key, label, color) for (key, label, _), color in zip(LATENCY_PARTS, (_COLORS[4], _COLORS[5]))
                 if any(b.get(f"{key}P99Ms") is not None for b in batches)]
        if parts:
            traces = [_line(*_measured(batches, f"{key}{p}Ms"), f"{label} {p.lower()}",
                            line={"color": color, **({"dash": "dot"} if p == "P50" else {})})
                      for p in ("P99", "P50") for key, label, color in parts]
            divs.append(figures.add("Schedule delay vs delivery per micro-batch (ms)", traces,
                                    {**_axes(x_title, "ms"), **_subtitle(" · ".join(
                                        f"{label}: {text}" for _, label, text in LATENCY_PARTS))}))
        phases = [p for p in PHASES if p != "triggerExecution" and any(b.get(f"{p}Ms") for b in batches)]
        divs.append(figures.add(f"Spark's phases per micro-batch{_whose(run)} (ms)", [
            *({"type": "bar", "x": times, "y": [b.get(f"{p}Ms", 0) for b in batches], "name": p,
               "marker": {"color": _COLORS[i % len(_COLORS)]}} for i, p in enumerate(phases)),
            _line(times, [b.get("triggerExecutionMs", 0) for b in batches], "triggerExecution (total)",
                  line={"color": "#24292f", "width": 1}),
        ], {**_axes(x_title, "ms"), "barmode": "stack"}))
    curves = []
    histograms = [("latencyHistogram", name, _COLORS[1])]
    if isinstance(run.get("viaLatency"), dict):
        histograms.append((run["viaLatency"].get("histogram"), latency_title(run["viaLatency"].get("definition")),
                           _COLORS[0]))
    histograms += [(f"{key}Histogram", label, color) for (key, label, _), color in zip(LATENCY_PARTS,
                                                                                       (_COLORS[4], _COLORS[5]))]
    for key, label, color in histograms:
        x, y, names = _percentile_curve(run.get(key) if isinstance(key, str) else key)
        if x:
            curves.append({"type": "scatter", "mode": "lines", "x": x, "y": y, "text": names, "name": label,
                           "hovertemplate": "%{text}: %{y:,.1f} ms", "line": {"color": color}})
    if curves:
        divs.append(figures.add("Latency distribution (HDR percentile curve)", curves, _hdr_layout()))
    return '<div class="charts">' + "".join(divs) + "</div>" if divs else "<p>No micro-batch completed.</p>"


def _subtitle(text: str, width: int = 90) -> dict:
    """A chart's lines under its title (wrapped at `width` characters): what its latency measures."""
    lines = textwrap.wrap(text, width)
    return {"annotations": [{"text": "<br>".join(html.escape(line, quote=False) for line in lines), "xref": "paper",
                             "yref": "paper", "x": 0, "y": 1.0, "xanchor": "left", "yanchor": "bottom",
                             "align": "left", "showarrow": False, "font": {"size": 11, "color": "#59636e"}}],
            "margin": {"l": 64, "r": 16, "t": 44 + 14 * len(lines), "b": 88}}


def _cards(run: dict) -> str:
    s = run.get("summary") or {}
    checks = run.get("thresholds") or []
    rates = [s.get(k) for k in ("achievedRate", "targetRate")]
    cards = [("events delivered / target", f"{_number(s.get('events'))} / {_number(s.get('targetEvents'))}"),
             ("achieved / target events/s", " / ".join(f"{r:,.0f}" if isinstance(r, (int, float)) else "–"
                                                       for r in rates)),
             (f"p99 latency (ms): {latency_title(_definition(run))}", _number(s.get("latencyP99Ms"))),
             ("sustained", _number(s.get("sustained"))), ("outcome", _number(s.get("outcome")))]
    if checks:
        cards.append(("thresholds passed", f"{sum(bool(c.get('passed')) for c in checks)} of {len(checks)}"))
    return '<div class="cards">' + "".join(f'<div class="card"><b>{_e(v)}</b><span>{_e(k)}</span></div>'
                                           for k, v in cards) + "</div>"


def _gates(run: dict) -> str:
    """The verdict, every threshold and the check, with what was measured."""
    verdict = run.get("verdict") or {}
    out = ["<h3>Verdict</h3>", f"<p>sustained: {_yes_no(verdict.get('sustained'))}"
           + (" — " + _e("; ".join(verdict.get("reasons") or [])) if verdict.get("reasons") else "") + "</p>"]
    if run.get("error"):
        out.append(f"<p>error: <code>{_e(run['error'])}</code></p>")
    checks = run.get("thresholds") or []
    if checks:
        out.append(f"<h3>Thresholds: {sum(bool(c.get('passed')) for c in checks)} of {len(checks)} passed</h3>")
        out.append('<table class="thresholds"><tr><th class="l">result</th><th class="l">threshold</th>'
                   '<th>measured</th></tr>' + "".join(
                       f'<tr><td class="l">{_mark(c.get("passed"))}</td><td class="l"><code>{_e(c.get("threshold"))}'
                       f'</code></td><td>{_e(c.get("measured"))}</td></tr>' for c in checks) + "</table>")
    check = run.get("check")
    if isinstance(check, dict):
        failure = check_failure(check)
        out.append(f"<h3>Check: {_mark(failure is None)}</h3>" + (f"<p>{_e(failure)}</p>" if failure else ""))
        counts = {k: v for k, v in check.items() if not isinstance(v, (list, dict))}
        out.append(_kv_table(counts))
        detail = run.get("checkDetail") if isinstance(run.get("checkDetail"), dict) else {}
        if detail.get("basis"):
            out.append(f"<p>compared: {_e(detail['basis'])}</p>")
        nested = {**{k: v for k, v in check.items() if isinstance(v, (list, dict))},
                  **{k: v for k, v in detail.items() if k not in ("basis", "examples")}}
        for key, value in nested.items():
            out.append(f"<details open><summary>{_e(key)}</summary><pre>{_e(json.dumps(value, indent=2))}</pre>"
                       "</details>")
    return "".join(out)


def _check_examples(run: dict) -> str:
    """The check's example rows as a table (`impulse.loadtest.reports.check_examples`): the kind of difference, how
    often the row was expected and delivered, and the row's columns."""
    detail = run.get("checkDetail") if isinstance(run.get("checkDetail"), dict) else {}
    examples = detail.get("examples")
    if not isinstance(examples, dict) or not any(examples.values()):
        return ""
    columns, rows = example_table(examples)
    head = "".join(f'<th class="{"l" if i == 0 or i > 2 else ""}">{_e(c)}</th>' for i, c in enumerate(columns))
    body = "".join("<tr>" + "".join(
        f'<td class="l">{_mark_kind(v)}</td>' if i == 0 else f'<td>{_e(_number(v))}</td>' if i <= 2
        else f'<td class="l">{_e("–" if v is None else v)}</td>'
        for i, v in enumerate(cells)) + "</tr>" for cells in rows)
    return (f"<h3>Check: example rows</h3><table class='examples'><tr>{head}</tr>{body}</table>"
            "<p class='note'>expected / delivered: how often the row is in the batch answer / in the target</p>")


def _mark_kind(kind: str) -> str:
    return f'<span class="FAIL">{_e(kind)}</span>'


def _latency_table(run: dict) -> str:
    """The run's latency percentiles, one row per measure, each named and said what it measures: the run's latency
    (its definition), then a direct run's schedule delay and delivery, or through Kafka the latency through it."""
    rows = [(latency_title(_definition(run)), latency_description(_definition(run)), run.get("latencyMs") or {})]
    extra = run.get("viaLatency")
    if isinstance(extra, dict):
        rows.append((latency_title(extra.get("definition")), latency_description(extra.get("definition")),
                     extra.get("ms") or {}))
    rows += [(label, text, run.get(f"{key}Ms") or {}) for key, label, text in LATENCY_PARTS if run.get(f"{key}Ms")]
    if not any(values for _, _, values in rows):
        return ""
    return ("<h3>Latency (ms)</h3><table class='latency'><tr><th class='l'></th>" + "".join(
        f"<th>{p}</th>" for p in _PERCENTILE_NAMES) + "</tr>"
            + "".join(f'<tr><th class="l">{_e(label)}</th>'
                      + "".join(f"<td>{_e(_number(values.get(p)))}</td>" for p in _PERCENTILE_NAMES) + "</tr>"
                      for label, _, values in rows) + "</table>"
            + "".join(f'<p class="note measures"><b>{_e(label)}:</b> {_e(text)}</p>' for label, text, _ in rows))


def _whose(run: dict) -> str:
    """Whose micro-batches a run object's are: through Kafka the pipeline's, in its ``producer`` the producer's."""
    if isinstance(run.get("via"), dict):
        return " of the pipeline"
    return " of the producer" if (run.get("summary") or {}).get("latencyDefinition") == "producer" else ""


def _phases_table(run: dict) -> str:
    phases = run.get("phasesMs") or {}
    if not phases:
        return ""
    return (f"<h3>Spark's phases{_whose(run)} (ms per micro-batch)</h3><table><tr><th class='l'>phase</th><th>mean</th>"
            "<th>max</th></tr>" + "".join(f'<tr><th class="l">{_e(p)}</th><td>{_e(_number(v.get("mean")))}</td>'
                                          f'<td>{_e(_number(v.get("max")))}</td></tr>' for p, v in phases.items())
            + "</table>")


def _stages_table(run: dict) -> str:
    stages = run.get("stages") or []
    if not stages:
        return ""
    head = ["stage", "label", "targetRate", "achievedRate", "events", "p50", "p99", "max", "sustained"]
    rows = "".join("<tr>" + "".join(f"<td>{_e(_number(v))}</td>" for v in (
        s.get("stage"), s.get("label"), s.get("targetRate"), s.get("achievedRate"), s.get("events"),
        *((s.get("latencyMs") or {}).get(p) for p in ("p50", "p99", "max")), s.get("sustained"))) + "</tr>"
        for s in stages)
    title = "Intervals of rateCurve" if any(s.get("knots") for s in stages) else "Stages of rateStages"
    return (f"<h3>{title}</h3><table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>" + rows
            + "</table>")


def _setup(run: dict) -> str:
    """The run's configuration and deployment, and any key of its object no part of the page shows."""
    out = []
    if run.get("deployment"):
        out.append("<h3>Deployment</h3>" + _kv_table(run["deployment"]))
    if run.get("config"):
        out.append("<details><summary>Configuration</summary>" + _kv_table(run["config"]) + "</details>")
    ids = {k: run[k] for k in ("queryId", "scheduleStartUs", "startedUs", "finishedUs") if run.get(k) is not None}
    if run.get("receiver"):
        ids["receiver"] = run["receiver"]
    if ids:
        out.append("<details><summary>Query</summary>" + _kv_table(ids) + "</details>")
    more = {k: v for k, v in run.items() if k not in _SHOWN}
    if more:
        out.append("<details open><summary>More data</summary>" + _kv_table(more) + "</details>")
    return "".join(out)


def _headline(result: Any) -> str:
    """PASS or FAIL, the query and every reason (report.json's ``result``, `impulse.loadtest.reports.verdict`)."""
    if not isinstance(result, dict) or result.get("status") not in ("PASS", "FAIL"):
        return ""
    status = result["status"]
    reasons = result.get("reasons") or []
    return (f'<div class="headline {status}"><span class="{"pass" if status == "PASS" else "FAIL"}">{status}</span>'
            f' — {_e(result.get("query"))}' + ("<ul>" + "".join(f"<li>{_e(r.get('text'))}</li>" for r in reasons)
                                                + "</ul>" if reasons else "") + "</div>")


def _resumed(run: dict) -> str:
    """A run resumed from ``--checkpoint`` (``summary.resumed``, `impulse.loadtest.load.resume`): what its figures
    cover, under the headline; nothing for any other run."""
    resumed = (run.get("summary") or {}).get("resumed")
    if not isinstance(resumed, dict):
        return ""
    return f'<p class="resumed"><b>Resumed run</b> — {_e(describe_resumed(resumed))}</p>'


def _via_block(run: dict, figures: _Figures) -> str:
    """Through Kafka: the pipeline's input and what its latency is read from, then the producer's own section (its
    batches, rate, latency scheduled → committed, phases and charts)."""
    via = run.get("via")
    if not isinstance(via, dict):
        return ""
    # the pipeline's own latency is the run's (its latency table); the lag is a chart
    shown = {k: v for k, v in via.items() if k not in ("lagSamples", "pipelinePartMs") and v is not None}
    out = ["<h3>Through Kafka</h3>", _kv_table(shown)]
    producer = run.get("producer")
    if isinstance(producer, dict):
        s = producer.get("summary") or {}
        out.append(f'<section class="producer"><h3>The producer (impulse → {_e(via.get("input"))}): the load</h3>'
                   + _kv_table(s, _SUMMARY_LABELS) + '<div class="row">'
                   + f"<div>{_latency_table(producer)}</div><div>{_phases_table(producer)}</div></div>"
                   + _run_charts(producer, figures) + "</section>")
    return "".join(out)


def _run_section(name: str, run: dict, figures: _Figures) -> str:
    """The headline (PASS/FAIL and why), what a resumed run's figures cover, cards; the verdict, thresholds and check
    beside the summary table; the latency and phases tables; the check's example rows; the charts; through Kafka the producer's section; the stages, configuration
    and deployment."""
    summary = {k: v for k, v in (run.get("summary") or {}).items() if k != "resumed"}   # shown by `_resumed`
    return (f'<section class="run"><h2>{_e(name)}</h2>' + _headline(run.get("result")) + _resumed(run) + _cards(run)
            + '<div class="row">'
            + f'<div class="gates">{_gates(run)}</div>'
            + "<div><h3>Summary</h3>" + _kv_table(summary, _SUMMARY_LABELS) + "</div></div>"
            + f'<div class="row"><div class="latency">{_latency_table(run)}</div><div>{_phases_table(run)}</div></div>'
            + _check_examples(run)
            + _run_charts(run, figures) + _via_block(run, figures) + _stages_table(run) + _setup(run) + "</section>")


def _comparison(runs: Sequence[tuple[str, dict]], figures: _Figures, heading: str) -> str:
    """One row per run and overlay charts: rate and p99 per batch over time, latency percentiles side by side."""
    head = ["run", "sink", "target/s", "achieved/s", "events", *(f"{p} ms" for p in _PERCENTILE_NAMES), "errors",
            "sustained", "thresholds"]
    rows = []
    for name, run in runs:
        s, checks = run.get("summary") or {}, run.get("thresholds") or []
        latency = run.get("latencyMs") or {}
        passed = f"{sum(bool(c.get('passed')) for c in checks)} of {len(checks)}" if checks else "–"
        cells = [s.get("sink"), s.get("targetRate"), s.get("achievedRate"), s.get("events"),
                 *(latency.get(p) for p in _PERCENTILE_NAMES), s.get("errors")]
        rows.append(f'<tr><td class="l">{_e(name)}</td>' + "".join(f"<td>{_e(_number(v))}</td>" for v in cells)
                    + f"<td>{_yes_no(s.get('sustained'))}</td><td>{_e(passed)}</td></tr>")
    rate_traces, p99_traces = [], []
    for i, (name, run) in enumerate(runs):
        batches = run.get("batches") or []
        if not batches:
            continue
        color = _COLORS[i % len(_COLORS)]
        times, rates = rate_series(batches)
        rate_traces.append(_line(times, rates, name, line={"color": color}))
        p99_traces.append(_line(*_measured(batches, "latencyP99Ms"), name, line={"color": color}))
    names = _short_names([name for name, _ in runs])
    bars = [{"type": "bar", "x": names, "y": [(run.get("latencyMs") or {}).get(p) for _, run in runs], "name": p,
             "marker": {"color": _COLORS[i]}} for i, p in enumerate(("p50", "p99", "p99.9", "max"))]
    rate_bars = [{"type": "bar", "x": names, "y": [(run.get("summary") or {}).get(key) for _, run in runs],
                  "name": label, "marker": {"color": color}}
                 for key, label, color in (("targetRate", "target", "#8c959f"), ("achievedRate", "achieved",
                                                                                     _COLORS[0]))]
    x_title = "seconds since the start of each run"
    definitions = sorted({_definition(run) for _, run in runs})
    bar_layout = {"barmode": "group", "hovermode": "closest", "legend": {"orientation": "v"}}
    x_axis = {"xaxis": {"title": {"text": "run"}, "tickangle": 0, "automargin": True, "type": "category"}}
    charts = [figures.add("Target vs achieved rate (events/s)", rate_bars,
                          {**_axes("run", "events/s"), **x_axis, **bar_layout}),
              figures.add(f"Latency percentiles: {' / '.join(latency_title(d) for d in definitions)} (ms)", bars,
                          {**_axes("run", "ms"), **x_axis, **bar_layout})]
    if rate_traces:
        charts += [figures.add("Achieved rate per micro-batch (events/s, trailing 1 s)", rate_traces,
                               {**_axes(x_title, "events/s"), "hovermode": "closest"}),
                   figures.add(f"p99 latency per micro-batch: {' / '.join(latency_title(d) for d in definitions)} (ms)",
                               p99_traces,
                               {**_axes(x_title, "ms"), "hovermode": "closest"})]
    return (f'<section class="run comparison"><h2>{_e(heading)}</h2><table><tr>'
            + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>" + "".join(rows) + "</table>"
            + '<div class="charts">' + "".join(charts) + "</div></section>")


def _short_names(names: Sequence[str]) -> list[str]:
    """Bar charts' category labels that fit: the names less the part all share (``file / ramp / ``), each part on a
    line of its own (``step 2<br>20,000 events/s``)."""
    parts = [name.split(" / ") for name in names]
    common = 0
    while len(names) > 1 and all(len(p) > common + 1 for p in parts) and len({p[common] for p in parts}) == 1:
        common += 1
    return ["<br>".join(re.sub(r"([\d,]+) events/s", lambda m: _compact(int(m[1].replace(",", ""))) + "/s",
                               " / ".join(p[common:])).replace(" / ", ": ").split(": ")) for p in parts]


def _compact(value: int) -> str:
    """20000 → 20k, 1500000 → 1.5M."""
    for size, suffix in ((1_000_000, "M"), (1_000, "k")):
        if value >= size:
            return f"{value / size:,.3g}{suffix}"
    return f"{value:,}"


def _ramp_header(name: str, ramp: dict) -> str:
    best = ramp.get("highestSustainedRate")
    settings = ramp.get("ramp") or {}
    return (f'<section class="run"><h2>{_e(name)}: ramp</h2>{_headline(ramp.get("result"))}<div class="cards">'
            f'<div class="card"><b>{_e(_number(best) if best is not None else "none")}</b>'
            f"<span>highest sustained rate (events/s)</span></div>"
            f'<div class="card"><b>{len(ramp.get("steps") or [])}</b><span>steps run</span></div></div>'
            f"<p>sustained = {_e(ramp.get('bound', ''))}"
            + ("; <b>interrupted</b>: the ramp did not reach its end" if ramp.get("interrupted") else "")
            + "</p>" + _kv_table(settings) + "</section>")


def _document_sections(name: str, document: dict, figures: _Figures) -> list[str]:
    """A document's parts: a ramp's header, then one section per run (step, scenario)."""
    mode = document.get("mode")
    if mode == "scenarios":
        out = []
        for index, section in enumerate(document.get("scenarios") or [], 1):
            out += _document_sections(f"{name} / {section.get('name') or f'scenario {index}'}", section, figures)
        return out
    if mode == "ramp":
        out = [_ramp_header(name, document)]
        for index, step in enumerate(document.get("steps") or [], 1):
            out.append(_run_section(f"{name} / {step_name(index, step)}", step, figures))
        return out
    return [_run_section(name, document, figures)]


def render_html(documents: Sequence[tuple[str, dict]], title: str, script: str) -> str:
    """The page of `documents` (each a ``report.json`` document with its name) with `script` (plotly.js) inlined.

    One document of one run: that run's section. More runs (a ramp's steps, a file's scenarios, several
    documents): a comparison of them all first, then each one's section. Deterministic for the same input."""
    figures = _Figures()
    runs = [pair for name, document in documents for pair in run_sections(document, name)]
    parts = []
    if len(runs) > 1:
        parts.append(_comparison(runs, figures, f"Comparison of {len(runs)} runs"))
    for name, document in documents:
        parts += _document_sections(name, document, figures)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_e(title)}</title><style>{_CSS}</style></head>\n<body><main>"
            f"<h1>{_e(title)}</h1>" + "".join(_headline(d.get("result")) for _, d in documents
                                              if d.get("mode") == "scenarios")
            + "".join(parts) + "</main>\n"
            f"<script>{script}</script>\n"
            f'<script type="application/json" id="figures">{figures.json()}</script>\n'
            "<script>\n(function () {\n"
            "  var specs = JSON.parse(document.getElementById('figures').textContent);\n"
            "  var config = {responsive: true, displaylogo: false};\n"
            "  Promise.all(specs.map(function (s) { return Plotly.newPlot(s.id, s.data, s.layout, config); }))\n"
            "    .then(function () { document.body.setAttribute('data-charts', 'rendered'); },\n"
            "          function (e) { document.body.setAttribute('data-charts', 'failed: ' + e); });\n"
            "})();\n</script>\n</body></html>\n")


def write_html(documents: Sequence[tuple[str, dict]], path: str | Path, title: str) -> Path:
    """`render_html` with plotly.js from the ``plotly`` package into `path` (its folder created); returns the path.
    Raises ImportError without plotly (the ``report`` extra)."""
    script = plotly_js()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(documents, title, script), encoding="utf-8")
    return path
