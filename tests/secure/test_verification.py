"""Verification is on by default, and each failure names the option to fix (never turning verification off): a
server reached by a name its certificate does not hold (the secured servers behind a relay on ``127.0.0.2``, an
address their certificates lack), and an expired client certificate at a listener that requires one."""

from __future__ import annotations

import secrets

import pytest
from pyspark.sql.types import LongType, StructField, StructType

from connectors.errors import OptionError
from connectors.options import OptionReader
from connectors.servers.tap import Tap
from sinks.kafka.options import KafkaOptions
from sinks.kafka.sink import Columns, KafkaSink
from sinks.redis.sink import RedisSinkDataSource
from sinks.webhook.sink import WebhookSinkDataSource

pytestmark = [pytest.mark.integration, pytest.mark.secured]

ELSEWHERE = "127.0.0.2"   # a loopback address no certificate of `connectors.servers.tls.ThrowawayCA` names
SCHEMA = StructType([StructField("subtask_index", LongType()), StructField("counter", LongType())])
OFF_WORDS = ("verify=false", "ssl_cert_reqs", "check_hostname", "endpoint.identification", "CERT_NONE", "insecure")


def _no_way_off(message: str) -> None:
    assert not [w for w in OFF_WORDS if w.lower() in message.lower()], message


def _kafka_check(config: dict[str, str]) -> None:
    topic = "sec-" + secrets.token_hex(4)
    options = {**{f"kafka.{k}": v for k, v in config.items()}, "topic": topic}
    KafkaSink(KafkaOptions.read(OptionReader(options, name="kafka sink")), Columns.of(SCHEMA)).check()


@pytest.mark.kafka
def test_kafka_at_a_name_the_certificate_lacks_names_the_bootstrap_servers(kafka_secured, credentials):
    config = kafka_secured.sasl_ssl_config(credentials.user, credentials.password)
    with Tap(config["bootstrap.servers"], listen=ELSEWHERE) as relay:
        config["bootstrap.servers"] = relay.address
        with pytest.raises(OptionError) as err:
            _kafka_check(config)
    message = str(err.value)
    assert err.value.option == "kafka.bootstrap.servers" and "certificate for another name" in message, message
    _no_way_off(message)
    assert credentials.password not in message


@pytest.mark.kafka
def test_kafka_with_an_expired_client_certificate_names_the_certificate_option(kafka_secured, throwaway_ca):
    with pytest.raises(OptionError) as err:
        _kafka_check(kafka_secured.mtls_config(throwaway_ca.issue("expired-writer", client=True, expired=True)))
    message = str(err.value)
    assert err.value.option == "kafka.ssl.certificate.location" and "expired-writer.pem" in message, message
    _no_way_off(message)


@pytest.mark.redis
def test_redis_at_a_name_the_certificate_lacks_names_the_url(redis_tls, credentials):
    url = redis_tls.user_url(credentials.user, credentials.password)
    with Tap(f"{redis_tls.host}:{redis_tls.port}", listen=ELSEWHERE) as relay:
        reader = OptionReader({"url": url.replace(f"{redis_tls.host}:{redis_tls.port}", relay.address),
                               "target": "list", "keyPrefix": "sec-host:", "commitKeyPrefix": "commit:sec-host:"},
                              name="redis-sink")
        with pytest.raises(OptionError) as err:
            RedisSinkDataSource({}).build(reader, SCHEMA).check()
    message = str(err.value)
    assert err.value.option == "url" and "certificate for another host" in message, message
    _no_way_off(message)
    assert credentials.password not in message


@pytest.mark.webhook
def test_a_webhook_at_a_name_the_certificate_lacks_names_the_url(https_receiver, throwaway_ca):
    client = throwaway_ca.issue("webhook-writer", client=True)
    host_port = https_receiver.url.split("//", 1)[1].split("/", 1)[0]
    with Tap(host_port, listen=ELSEWHERE) as relay:
        reader = OptionReader({"url": f"https://{relay.address}/x", "verify": str(throwaway_ca.ca),
                               "clientCert": str(client.cert), "clientKey": str(client.key)}, name="webhook-sink")
        with pytest.raises(OptionError) as err:
            WebhookSinkDataSource({}).build(reader, SCHEMA).check()
    message = str(err.value)
    assert err.value.option == "url" and "mismatch" in message, message
    _no_way_off(message)
