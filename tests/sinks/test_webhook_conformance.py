"""The webhook sink passes the conformance suite, against the project's reference receiver (it dedupes by
Idempotency-Key; `connectors.servers.receiver.Receiver`, the one the load harness and the CLI use).

The webhook cannot ask a generic receiver what it already has (`WebhookSink.is_committed` is always
False), so a replayed batch is sent again with the same keys instead of being skipped: the replay case
is replaced below by the webhook's version of the same promise.
"""

import pytest

from connectors.conformance import SinkConformance, run_query
from connectors.conformance.batch_suite import BatchWriteConformance
from connectors.servers.receiver import Receiver
from sinks.webhook.adapter import WebhookAdapter

pytestmark = [pytest.mark.integration, pytest.mark.webhook]


class TestWebhookConformance(SinkConformance, BatchWriteConformance):
    @pytest.fixture(scope="class")
    @classmethod
    def adapter(cls):
        with Receiver(record=True) as receiver:
            yield WebhookAdapter(receiver)

    def test_replayed_batch_is_skipped(self, spark, adapter, namespace, tmp_path):
        """A replayed batch resends every request with its original key and body; nothing new lands."""
        checkpoint = tmp_path / "ck"
        run_query(spark, adapter, namespace, checkpoint, limit=self.limit, per_trigger=self.per_trigger)
        first = {r.idempotency_key: r.body for r in adapter.receiver.accepted_requests}
        last = max(int(f.name) for f in (checkpoint / "commits").glob("[0-9]*"))
        for name in (str(last), f".{last}.crc"):  # as if the driver died before Spark logged the commit
            (checkpoint / "commits" / name).unlink(missing_ok=True)
        run_query(spark, adapter, namespace, checkpoint, limit=self.limit, per_trigger=self.per_trigger)
        resent = [r for r in adapter.receiver.requests if r.duplicate]
        assert resent and all(r.body == first[r.idempotency_key] for r in resent)
        assert {r.idempotency_key.split(":")[1] for r in resent} == {str(last)}
        self.check_landed(adapter, namespace, self.limit)
