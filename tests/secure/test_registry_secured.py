"""kafka-sink's registry formats against a Schema Registry behind HTTPS with basic auth (Apicurio behind
`connectors.servers.registry_proxy.BasicAuthProxy`): avro, every event once, with ``schema.registry.basic.auth.user.info``
and ``schema.registry.ssl.ca.location``; a wrong password and an untrusted certificate fail at start naming the
option, nothing written, the password nowhere in the error."""

from __future__ import annotations

import secrets

import pytest

from connectors.conformance import expected_events, run_query
from sinks.kafka.adapter import KafkaAdapter

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.schema_registry, pytest.mark.secured]

LIMIT = 200


def _registry(proxy, ca, user: str, password: str) -> dict[str, str]:
    return {"value.format": "avro", "schema.registry.url": proxy.url,
            "schema.registry.basic.auth.user.info": f"{user}:{password}", "schema.registry.ssl.ca.location": str(ca)}


def _adapter(kafka_broker, schema_registry, namespace: str) -> KafkaAdapter:
    """Reads back with the registry itself (not through the proxy): the test's own view."""
    adapter = KafkaAdapter(kafka_broker.bootstrap, registry_url=schema_registry.url)
    adapter.prepare(namespace)
    return adapter


def test_avro_every_event_once_through_https_with_basic_auth(spark, kafka_broker, schema_registry, registry_https,
                                                         throwaway_ca, credentials, tmp_path):
    namespace = "sec" + secrets.token_hex(5)
    adapter = _adapter(kafka_broker, schema_registry, namespace)
    options = _registry(registry_https, throwaway_ca.ca, credentials.user, credentials.password)
    refused = registry_https.refused
    run_query(spark, adapter, namespace, tmp_path / "ck", limit=LIMIT, per_trigger=LIMIT // 2, options=options)
    assert sorted(adapter.read_back(namespace)) == expected_events(LIMIT)
    assert registry_https.refused == refused   # every request carried the credentials
    assert f"{adapter.topic(namespace)}-value" in schema_registry.subjects()


@pytest.mark.parametrize("case", ["password", "ca"])
def test_refused_credentials_or_an_untrusted_registry_fail_at_start_naming_the_option(
        spark, kafka_broker, schema_registry, registry_https, throwaway_ca, stranger_ca, credentials, tmp_path, case):
    namespace = "sec" + secrets.token_hex(5)
    adapter = _adapter(kafka_broker, schema_registry, namespace)
    password = "pw-" + secrets.token_hex(8) if case == "password" else credentials.password
    ca = stranger_ca.ca if case == "ca" else throwaway_ca.ca
    refused = registry_https.refused
    with pytest.raises(Exception) as err:  # noqa: B017 - the query's failure, as Spark reports it
        run_query(spark, adapter, namespace, tmp_path / "ck", limit=LIMIT,
                  options=_registry(registry_https, ca, credentials.user, password))
    message = str(err.value)
    named = {"password": "HTTP 401", "ca": "option 'schema.registry.ssl.ca.location'"}[case]
    assert named in message, message[-3000:]
    if case == "password":
        assert "'schema.registry.basic.auth.user.info'" in message and registry_https.refused > refused
    assert password not in message
    assert adapter.read_back(namespace) == []
