"""Poison records at a webhook: the reference receiver refuses some rows (422), deadLetterUrl
set, the driver SIGKILLed while a batch is in flight and the query restarted; read back from the receiver's own log
(the first accepted request per idempotency key): every accepted row once, and the dead-letter URL holds exactly
the refused rows once."""

from __future__ import annotations

import uuid

import pytest

from connectors.conformance import expected_events
from tests.sinks.poison_driver import LANES, kill_mid_batch, start
from tests.sinks.test_webhook import accepted, landed

pytestmark = [pytest.mark.integration]

ROWS, PER_TRIGGER = 5_000, 500


def _refused(row) -> bool:
    return row["counter"] % LANES == 3


def test_dead_letters_are_exactly_the_refused_rows_across_a_killed_driver(spark, http_receiver, tmp_path):
    path = f"/poison-{uuid.uuid4().hex[:8]}"
    http_receiver.refuse_rows(_refused, path + "/events")
    options = {"url": http_receiver.url + path + "/events", "deadLetterUrl": http_receiver.url + path + "/dead",
               "batchSize": "100"}
    checkpoint = tmp_path / "ck"
    try:
        kill_mid_batch({"format": "webhook-sink", "options": options, "rows": ROWS, "perTrigger": PER_TRIGGER,
                        "checkpoint": str(checkpoint), "columns": ["subtask_index", "counter"]})
        query = start(spark, "webhook-sink", options, ROWS, PER_TRIGGER, str(checkpoint), ["subtask_index", "counter"])
        query.awaitTermination(240)
        assert query.exception() is None
    finally:
        http_receiver.reset_behaviour()
    events = expected_events(ROWS)
    refused = [e for e in events if e[1] % LANES == 3]
    assert landed(http_receiver, path + "/events") == [e for e in events if e not in refused]
    letters = [r.json()["row"] for r in accepted(http_receiver, path + "/dead")]
    assert sorted((row["subtask_index"], row["counter"]) for row in letters) == refused
