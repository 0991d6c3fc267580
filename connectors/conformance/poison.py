"""The poison-record case of the conformance suite: rows the target refuses for good.

An adapter provides such rows with `SinkAdapter.poison` (a `Poison`: the frame's extra columns, the options
that route some rows to where the target refuses them, the dead-letter option, and how to read both back).
Two tests, in `PoisonRecordConformance` (mixed into `connectors.conformance.SinkConformance`):

- with the dead-letter target set, an executor crash in the middle of batch 1's write of partition 0 on every
  attempt fails the query; its restart replays the batch: exactly the refused rows are dead-lettered, once,
  and every other row lands once;
- without it, the query fails with an error naming a refused row, and nothing of the batches it reached is
  committed (every batch holds refused rows, so nothing lands at all; under an ``at_least_once`` guarantee rows
  sent before the refusal may land, and duplicates are allowed in the first test; a target without transactions,
  a webhook, keeps what was delivered before the refused request: `Poison.partial`).

An adapter whose target refuses nothing it can provoke returns None, and both tests skip naming it.
"""

from __future__ import annotations

from typing import Mapping

import pytest

from connectors.conformance.adapter import Poison, SinkAdapter
from connectors.conformance.harness import Override, expected_events, failure_of, run_query

__all__ = ["PoisonRecordConformance"]


class PoisonRecordConformance:
    """The poison-record tests; a base of `connectors.conformance.SinkConformance`, whose fixtures (``spark``,
    ``adapter``, ``namespace``) and sizes (``limit``, ``per_trigger``) they use."""

    def _poison(self, adapter: SinkAdapter, namespace: str) -> Poison:
        poison = adapter.poison(namespace)
        if poison is None:
            pytest.skip(f"{type(adapter).__name__} provides no rows its target refuses (SinkAdapter.poison)")
        return poison

    def test_poison_rows_are_dead_lettered_once_across_a_crash(self, spark, adapter, namespace, tmp_path):
        poison = self._poison(adapter, namespace)
        checkpoint = tmp_path / "ck"
        options = {**poison.options, **poison.dead_letter}

        def run(extra: Mapping[str, str]) -> None:
            run_query(spark, Override(adapter, options), namespace, checkpoint, limit=self.limit,
                      per_trigger=self.per_trigger, columns=poison.columns, options=extra)

        crash = "point=mid_write,action=crash,batch=1,partition=0"
        if adapter.supports_fault_injection:
            failure = failure_of(lambda: run({"faultInjection": crash}))
            assert failure is not None, "the crash on every attempt never fired"
        run({})
        events = expected_events(self.limit)
        refused = [e for e in events if poison.refused(e)]
        assert refused and len(refused) < len(events), "the adapter's refused rows must be some, not all"
        once = sorted if adapter.guarantee == "exactly_once" else lambda found: sorted(set(found))  # at_least_once
        assert once(poison.read_dead_letters()) == refused, f"{self.case}: dead letters are not the refused rows"
        assert once(poison.read_back()) == [e for e in events if not poison.refused(e)], \
            f"{self.case}: the accepted rows did not land exactly once"

    def test_poison_rows_fail_the_query_without_a_dead_letter_target(self, spark, adapter, namespace, tmp_path):
        poison = self._poison(adapter, namespace)
        failure = failure_of(lambda: run_query(spark, Override(adapter, poison.options), namespace, tmp_path / "ck",
                                               limit=self.limit, per_trigger=self.per_trigger, columns=poison.columns))
        assert failure is not None, "a refused row without a dead-letter target must fail the query"
        for word in poison.words:
            assert word in str(failure), f"the failure does not say {word!r}: {str(failure)[-2000:]}"
        assert poison.read_dead_letters() == [], "rows were dead-lettered without a dead-letter target"
        if adapter.guarantee == "exactly_once" and not poison.partial:  # else rows sent before the refusal may land
            assert poison.read_back() == [], "rows of a batch with a refused row were committed"
