"""``--junit FILE``: a run's thresholds and ``--check`` as JUnit XML, the format Jenkins, GitLab and Azure DevOps show.

Built from the ``report.json`` document (`impulse.loadtest.reports.sections`), so it says what the report says:

- ``<testsuites>``: one ``<testsuite>`` per run — a ramp's steps and a file's scenarios each have their own
  (named ``NAME``, ``NAME / step i: RATE events/s``, ``NAME / SCENARIO``);
- in each suite, one ``<testcase>`` per threshold (named as written, e.g. ``p99<1s``) whose ``<failure>``
  message is what was measured against the bound (``measured 1,234.5 ms; bound p99<1s``), one for the
  run's ``check`` when it has one, and ``run completed``, an ``<error>`` when the query failed, timed out or
  was interrupted;
- one more ``<testsuite>`` per ramp (named as its steps' prefix, after every run's suite) holding the ramp's gate:
  one ``<testcase>``, ``a step sustained`` (with ``--min-sustained``: ``highest sustained rate ≥ RATE events/s``),
  whose ``<failure>`` message is the ramp's ``failures`` (`impulse.loadtest.load.ramp.RampResult.failures`), joined;
  a ramp's object without ``failures`` (an older report) has no such suite;
- the suite's ``<properties>``: the headline numbers of its ``summary`` (every key, as written), what its latency
  measures (``latencyMeasures``) and, for a run or scenario, its PASS/FAIL and why (``result``, the headline of
  `impulse.loadtest.reports.verdict`);
- times in seconds with at most 3 decimals, as the Surefire schema (junit-10.xsd) demands.

Deterministic: the same document gives the same bytes.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

from impulse.loadtest.measure.latency_names import description as latency_description
from impulse.loadtest.reports.sections import check_failure, ramp_sections, run_sections
from impulse.loadtest.reports.verdict import headline_of

__all__ = ["junit_xml", "write_junit"]

_PASSING_OUTCOMES = ("completed", "aborted")   # aborted: a threshold failed for good, its own test case says so


def _seconds(value: float | None) -> str:
    return f"{max(0.0, float(value or 0.0)):.3f}"


def _case(suite: ET.Element, classname: str, name: str, *, failure: str | None = None, error: str | None = None,
          kind: str = "threshold") -> None:
    case = ET.SubElement(suite, "testcase", {"classname": classname, "name": name, "time": "0.000"})
    if failure is not None:
        ET.SubElement(case, "failure", {"type": kind, "message": failure}).text = failure
    if error is not None:
        ET.SubElement(case, "error", {"type": kind, "message": error}).text = error


def _suite(parent: ET.Element, name: str, run: dict) -> tuple[int, int, int]:
    """One run's suite; returns its (tests, failures, errors)."""
    summary = run.get("summary") or {}
    duration = (((run.get("batches") or [{}])[-1]).get("timeS") if run.get("batches") else 0.0)
    attributes = {"name": name, "tests": "0", "failures": "0", "errors": "0", "skipped": "0",
                  "time": _seconds(duration)}
    started = run.get("startedUs")
    if isinstance(started, int):
        attributes["timestamp"] = datetime.fromtimestamp(started / 1e6, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    suite = ET.SubElement(parent, "testsuite", attributes)
    properties = ET.SubElement(suite, "properties")
    for key, value in {**summary, **_more_properties(run)}.items():
        text = "" if value is None else json.dumps(value) if isinstance(value, (bool, dict, list)) else str(value)
        ET.SubElement(properties, "property", {"name": key, "value": text})
    failures = errors = 0
    for check in run.get("thresholds") or []:
        failed = not check.get("passed")
        failures += failed
        _case(suite, name, str(check.get("threshold")),
              failure=f"measured {check.get('measured')}; bound {check.get('threshold')}" if failed else None)
    tests = len(run.get("thresholds") or [])
    check = run.get("check")
    if isinstance(check, dict):
        message = check_failure(check)
        failures += message is not None
        tests += 1
        _case(suite, name, "check: every expected row delivered exactly once", failure=message, kind="check")
    outcome = summary.get("outcome")
    error = None
    if outcome is not None and outcome not in _PASSING_OUTCOMES:
        error = f"the run {outcome}" + (f": {run['error']}" if run.get("error") else "")
        errors += 1
    _case(suite, name, "run completed", error=error, kind="outcome")
    tests += 1
    suite.set("tests", str(tests))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    return tests, failures, errors


def _ramp_suite(parent: ET.Element, name: str, ramp: dict) -> tuple[int, int, int]:
    """A ramp's gate as a suite of one test case; returns its (tests, failures, errors)."""
    failures = ramp.get("failures") or []
    minimum = (ramp.get("ramp") or {}).get("minSustained")
    suite = ET.SubElement(parent, "testsuite", {"name": name, "tests": "1", "failures": str(int(bool(failures))),
                                                "errors": "0", "skipped": "0", "time": _seconds(0)})
    properties = ET.SubElement(suite, "properties")
    for key in ("highestSustainedRate", "bound"):
        value = ramp.get(key)
        ET.SubElement(properties, "property", {"name": key, "value": "" if value is None else str(value)})
    case = (f"highest sustained rate ≥ {minimum:,.0f} events/s" if isinstance(minimum, (int, float))
            else "a step sustained")
    _case(suite, name, case, failure="; ".join(failures) if failures else None, kind="ramp")
    return 1, int(bool(failures)), 0


def _more_properties(run: dict) -> dict:
    """What the latency measures (`impulse.loadtest.measure.latency_names`) and the run's PASS/FAIL and why (its
    ``result``, `impulse.loadtest.reports.verdict`)."""
    out = {"latencyMeasures": latency_description((run.get("summary") or {}).get("latencyDefinition"))}
    result = run.get("result")
    if isinstance(result, dict):
        out["result"] = headline_of(result)
    return out


def junit_xml(document: dict, name: str = "impulse-load") -> bytes:
    """The JUnit XML (UTF-8, with its declaration) of a ``report.json`` document; `name` names the root and prefixes
    every suite."""
    root = ET.Element("testsuites", {"name": name})
    totals = [0, 0, 0]
    time = 0.0
    for suite_name, run in run_sections(document, document.get("name") or name):
        for i, count in enumerate(_suite(root, suite_name, run)):
            totals[i] += count
        time += float(root[-1].get("time"))
    for suite_name, ramp in ramp_sections(document, document.get("name") or name):
        if isinstance(ramp.get("failures"), list):
            for i, count in enumerate(_ramp_suite(root, suite_name, ramp)):
                totals[i] += count
    root.set("tests", str(totals[0]))
    root.set("failures", str(totals[1]))
    root.set("errors", str(totals[2]))
    root.set("time", _seconds(time))
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def write_junit(document: dict, path: str | Path, name: str = "impulse-load") -> Path:
    """Write `junit_xml` of `document` to `path` (its folder created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(junit_xml(document, name))
    return path
