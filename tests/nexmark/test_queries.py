"""Every Nexmark query gives the batch answer (``impulse-nexmark --check``).

Small by default (10,000 events, 20 s of event time, 2 micro-batches); ``NEXMARK_FULL=1`` runs 200,000 events
(200 s of event time) in 10 micro-batches, and two seeds.
"""

from __future__ import annotations

import os

import pytest

from impulse.nexmark import cli
from impulse.nexmark.queries import QUERIES

pytestmark = pytest.mark.integration

FULL = os.environ.get("NEXMARK_FULL") == "1"
EVENTS, RATE, PER_TRIGGER = (200_000, 1_000, 20_000) if FULL else (10_000, 500, 5_000)
SEEDS = ("0", "11") if FULL else ("0",)


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_check_passes_for_every_query(spark, capsys, seed):
    runnable = [q.name for q in QUERIES if q.runs]
    status = cli.main([*runnable, "--events", str(EVENTS), "--rate", str(RATE), "--per-trigger", str(PER_TRIGGER),
                       "--partitions", "2", "--seed", seed, "--check", "--no-warmup"])
    out = capsys.readouterr().out
    assert status == 0, out
    checks = {line.split()[0]: line for line in out.splitlines() if line.startswith("q")}
    assert sorted(checks) == sorted(runnable), out
    for name, line in checks.items():
        unchecked = next(q.unchecked for q in QUERIES if q.name == name)
        assert ("not checked" in line) if unchecked else (" ok (" in line and " ok (0 rows" not in line), line


def test_an_unknown_query_is_refused(capsys):
    assert cli.main(["q99", "--events", "10"]) == 2
    assert "q0" in capsys.readouterr().err


def _progress(rows: int, millis: int, sources: int = 1) -> dict:
    return {"sources": [{"numInputRows": rows}] * sources, "durationMs": {"triggerExecution": millis}}


def test_steady_rate_leaves_out_the_first_batches_and_counts_a_joined_stream_once():
    # batch 1 and 2 are slow (planning, warm-up); a join reads the stream twice: events count once
    progress = [_progress(100, 5_000, 2), _progress(100, 1_000, 2), _progress(300, 100, 2), _progress(100, 100, 2),
                _progress(0, 7, 2)]
    assert cli.steady_rate(progress) == 400 * 1000 / 200
    assert cli.steady_rate(progress, skip=0) == 600 * 1000 / 6_200
    assert cli.steady_rate(progress[:2]) is None
