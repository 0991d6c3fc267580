"""The runs of a ``report.json`` document, each with its name, and a run's rate over time: what the HTML report,
the JUnit file and `impulse-load compare` read.

A document is one of the three shapes `impulse.loadtest.reports.report.write_report` writes: a run (``mode: run``:
``summary``, ``thresholds``, ``batches``, …), a ramp (``mode: ramp``: ``steps``, each a run) or a file's
scenarios (``mode: scenarios``: ``scenarios``, each a run or a ramp with its ``name``). Only these keys
are read; every other key passes through untouched, so keys added to a run's object reach the readers.
"""

from __future__ import annotations

from typing import Iterator, Sequence

__all__ = ["run_sections", "ramp_sections", "step_name", "check_failure", "rate_series"]


def step_name(index: int, step: dict) -> str:
    """``step 2: 20,000 events/s`` for the `index`-th (from 1) step of a ramp (a search's: ``probe 2: …`` or
    ``confirming run 5: …``)."""
    rate = (step.get("summary") or {}).get("targetRate")
    name = {"probe": "probe", "confirm": "confirming run"}.get(step.get("role"), "step")
    return f"{name} {index}" + (f": {rate:,.0f} events/s" if isinstance(rate, (int, float)) else "")


def run_sections(document: dict, name: str) -> Iterator[tuple[str, dict]]:
    """Every run of `document` in order, as (name, the run's object): `name` for a run; ``name / step i: RATE`` per
    step of a ramp; ``name / SCENARIO`` (and its steps) per scenario of a file."""
    mode = document.get("mode")
    if mode == "scenarios":
        for index, section in enumerate(document.get("scenarios") or [], 1):
            yield from run_sections(section, _scenario_name(name, index, section))
    elif mode == "ramp":
        for index, step in enumerate(document.get("steps") or [], 1):
            yield f"{name} / {step_name(index, step)}", step
    else:
        yield name, document


def ramp_sections(document: dict, name: str) -> Iterator[tuple[str, dict]]:
    """Every ramp of `document` as (its name, the ramp's object): the name `run_sections` puts before its steps."""
    if document.get("mode") == "scenarios":
        for index, section in enumerate(document.get("scenarios") or [], 1):
            yield from ramp_sections(section, _scenario_name(name, index, section))
    elif document.get("mode") == "ramp":
        yield name, document


def _scenario_name(name: str, index: int, section: dict) -> str:
    return f"{name} / {section.get('name') or f'scenario {index}'}"


def check_failure(check: dict) -> str | None:
    """Why a run's ``check`` object (expected, delivered, lost, duplicated, unexpected, passed) failed, in one line;
    None when it passed."""
    if check.get("passed"):
        return None
    counts = ", ".join(f"{key} {check[key]:,}" if isinstance(check.get(key), int) else f"{key} {check.get(key)}"
                       for key in ("lost", "duplicated", "unexpected") if key in check)
    of = check.get("expected")
    delivered = check.get("delivered")
    return (f"{counts or 'failed'}" + (f" of {of:,} expected" if isinstance(of, int) else "")
            + (f" ({delivered:,} delivered)" if isinstance(delivered, int) else "") + "; bound: every expected row "
            "delivered exactly once, nothing else")


def rate_series(batches: Sequence[dict], window_s: float = 1.0) -> tuple[list[float], list[float]]:
    """Per batch row of a report (``timeS``, ``delivered``): its time (s since the run's start) and events/s over the
    trailing `window_s` of acknowledgements (at least one batch: back-to-back batches of a few events would make a
    jagged line)."""
    times = [float(row["timeS"]) for row in batches]
    delivered = [int(row["delivered"]) for row in batches]
    rates, ref = [], -1   # ref: the batch the window starts after (-1: the run's start, 0 events)
    for i, t in enumerate(times):
        while ref + 1 < i and times[ref + 1] <= t - window_s:
            ref += 1
        t0, n0 = (times[ref], delivered[ref]) if ref >= 0 else (0.0, 0)
        rates.append((delivered[i] - n0) / (t - t0) if t > t0 else 0.0)
    return times, rates
