"""PASS or FAIL, and why: the one decision about a run, a ramp or a file's scenarios.

The summary's headline, the HTML report's headline, the JUnit file's ``result`` property and the CLI's exit code
all come from `decide` (as k6 reports its thresholds). A run FAILs for each of these reasons:

- ``threshold``: a ``--threshold`` failed (an ``aborted`` run, ``--abort-on-fail``, failed one for good);
- ``check``: ``--check`` found rows lost, duplicated or unexpected;
- ``run``: the query failed, the run timed out (not every event delivered within the drain time), or task
  attempts failed (``errors`` > 0, the sink recovered by retrying);
- ``interrupted``: stopped (Ctrl-C, SIGTERM) before every event was delivered;
- ``ramp``: a ramp's gate failed (`impulse.loadtest.load.ramp.RampResult.failures`: no step sustained, or the highest
  sustained rate below ``--min-sustained``); a step's query that failed is a ``run`` reason of the ramp.

A run that did not sustain its rate but passed every gate above is a PASS, as the CLI's exit code 0 has always
said: ``sustained`` is a measurement (the summary's verdict line), a gate only where a threshold makes it one.

Exit codes (`Decision.exit_code`, the CLI's): 130 interrupted, else 99 a threshold, check or ramp failed, else 1 the
run failed, else 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from impulse.loadtest.load.ramp import RampResult
from impulse.loadtest.query.transform import describe

__all__ = ["Reason", "Decision", "decide", "decide_all", "query_name", "headline_of", "EXIT_OK", "EXIT_FAILED",
           "EXIT_THRESHOLDS", "EXIT_INTERRUPTED"]

EXIT_OK, EXIT_FAILED, EXIT_THRESHOLDS, EXIT_INTERRUPTED = 0, 1, 99, 130   # the CLI's exit codes of a decision
_KINDS_BY_PRECEDENCE = (("interrupted", EXIT_INTERRUPTED), ("threshold", EXIT_THRESHOLDS),
                        ("check", EXIT_THRESHOLDS), ("ramp", EXIT_THRESHOLDS), ("run", EXIT_FAILED))


@dataclass(frozen=True)
class Reason:
    """Why a run failed: its `kind` (a key of the module docstring's list) and the words the reports show."""

    kind: str
    text: str

    def to_dict(self) -> dict:
        return {"kind": self.kind, "text": self.text}


@dataclass(frozen=True)
class Decision:
    """PASS (no reasons) or FAIL (every reason, in the order found) of `query` (`query_name`)."""

    query: str
    reasons: tuple[Reason, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.reasons

    @property
    def status(self) -> str:
        return "PASS" if self.passed else "FAIL"

    @property
    def exit_code(self) -> int:
        """The CLI's exit code (module docstring)."""
        kinds = {reason.kind for reason in self.reasons}
        return next((code for kind, code in _KINDS_BY_PRECEDENCE if kind in kinds), EXIT_OK)

    def headline(self) -> str:
        """``PASS — QUERY`` or ``FAIL — QUERY: reason; reason``: the summary's first line and the HTML page's headline
        (`headline_of` for report.json's ``result``)."""
        return headline_of(self.to_dict())

    def to_dict(self) -> dict:
        """``{status, passed, query, reasons: [{kind, text}]}``: the ``result`` of report.json."""
        return {"status": self.status, "passed": self.passed, "query": self.query,
                "reasons": [reason.to_dict() for reason in self.reasons]}


def headline_of(result: dict) -> str:
    """The headline of report.json's ``result`` object (`Decision.to_dict`)."""
    reasons = "; ".join(reason["text"] for reason in result.get("reasons") or ())
    return f"{result.get('status')} — {result.get('query')}" + (f": {reasons}" if reasons else "")


def query_name(config) -> str:
    """What ran, in a few words: the events, the topic they went through (``--via``), the user's query
    (`impulse.loadtest.query.transform.describe`) and the sink, e.g. ``impulse events → --transform my:enrich (append)
    into redis-sink``."""
    events = describe(config) or f"{config.source} events"
    via = f" through {config.via}" if config.via else ""
    if via and " → " in events:
        head, tail = events.split(" → ", 1)
        events = f"{head}{via} → {tail}"
    elif via:
        events += via
    return f"{events} into {config.sink}"


def decide(result) -> Decision:
    """The decision of a run (`impulse.loadtest.load.run.LoadResult`, a `ViaResult` too) or a ramp
    (`impulse.loadtest.load.ramp.RampResult`)."""
    if isinstance(result, RampResult):
        return Decision(query_name(result.config), tuple(_ramp_reasons(result)))
    return Decision(query_name(result.config), tuple(_run_reasons(result)))


def decide_all(named: Sequence[tuple[str | None, object]]) -> Decision:
    """The decision of a file's scenarios (name, run or ramp): FAIL when any failed, each reason prefixed with its
    scenario's name; one unnamed result: its own decision."""
    if len(named) == 1:
        return decide(named[0][1])
    reasons, queries = [], []
    for name, result in named:
        decision = decide(result)
        queries.append(f"{name}: {decision.query}" if name else decision.query)
        reasons += [Reason(r.kind, f"{name}: {r.text}" if name else r.text) for r in decision.reasons]
    return Decision("; ".join(queries), tuple(reasons))


def _run_reasons(result) -> list[Reason]:
    reasons = []
    if result.outcome == "failed":
        reasons.append(Reason("run", f"the run failed: {result.error}" if result.error else "the run failed"))
    elif result.outcome == "timed out":
        reasons.append(Reason("run", "the run timed out" + (f": {result.error}" if result.error else "")))
    elif result.outcome == "interrupted":
        reasons.append(Reason("interrupted", "interrupted before every event was delivered"))
    retries = result.errors - (result.outcome == "failed")
    if retries > 0:
        reasons.append(Reason("run", f"{retries:,} task attempt{'s' if retries != 1 else ''} failed (errors > 0)"))
    failed = [check for check in result.checks if not check.passed]
    reasons += [Reason("threshold", f"threshold {check.threshold.text} failed (measured {check.measured})")
                for check in failed]
    if result.outcome == "aborted" and not failed:
        reasons.append(Reason("threshold", f"aborted: {result.error}"))
    check = result.check
    if check is not None and not check.passed:
        reasons.append(Reason("check", f"check failed: {check.lost:,} lost, {check.duplicated:,} duplicated, "
                                       f"{check.unexpected:,} unexpected of {check.expected:,} expected rows"))
    return reasons


def _ramp_reasons(ramp) -> list[Reason]:
    """Why a ramp failed: stopped, a step's query failed, its gate (`RampResult.failures`; a ramp interrupted before
    any step was sustained is only interrupted)."""
    reasons = []
    if ramp.interrupted:
        reasons.append(Reason("interrupted", "interrupted: the ramp did not reach its end"))
    for index, step in enumerate(ramp.steps, 1):
        if step.outcome == "failed":
            reasons.append(Reason("run", f"step {index} ({step.target_rate:,.0f} events/s) failed: {step.error}"))
    reasons += [Reason("ramp", failure) for failure in ramp.failures
                if not (ramp.interrupted and ramp.highest_sustained_rate is None)]
    return reasons
