"""A SIGKILL of the driver mid-batch, writing through the secured endpoints: Redis over TLS as an ACL user and Kafka
over SASL_SSL with a SCRAM user. The query restarted from its checkpoint leaves every event exactly once."""

from __future__ import annotations

import secrets

import pytest

from connectors.conformance import expected_events
from sinks.kafka.adapter import KafkaAdapter
from sinks.redis.adapter import RedisAdapter
from tests.sinks.poison_driver import kill_mid_batch, start

pytestmark = [pytest.mark.integration, pytest.mark.secured, pytest.mark.slow]

ROWS, PER_TRIGGER = 6_000, 600


@pytest.mark.parametrize("sink", ["redis", "kafka"])
def test_a_killed_driver_resumes_exactly_once_over_the_secured_endpoint(spark, request, credentials, tmp_path, sink):
    namespace = "sec" + secrets.token_hex(5)
    if sink == "redis":
        server = request.getfixturevalue("redis_tls")
        reader = RedisAdapter(server.url, target="list")  # the default user: reads everything
        options = {**reader.options(namespace), "url": server.user_url(credentials.user, credentials.password)}
    else:
        broker = request.getfixturevalue("kafka_secured")
        reader = KafkaAdapter(broker.bootstrap)  # the topic made and read on the PLAINTEXT listener
        reader.prepare(namespace)
        secured = broker.sasl_ssl_config(credentials.user, credentials.password)
        options = {**reader.options(namespace), **{f"kafka.{k}": v for k, v in secured.items()}}
    checkpoint = str(tmp_path / "ck")
    kill_mid_batch({"format": f"{sink}-sink", "options": options, "rows": ROWS, "perTrigger": PER_TRIGGER,
                    "checkpoint": checkpoint})
    query = start(spark, f"{sink}-sink", options, ROWS, PER_TRIGGER, checkpoint)
    assert query.awaitTermination(240) and query.exception() is None, query.exception()
    assert sorted(reader.read_back(namespace)) == expected_events(ROWS)
