"""The webhook sink against the reference receiver over HTTPS requiring a client certificate (mutual TLS): it writes
exactly once with the certificate; a receiver certificate it does not trust fails at start naming 'verify', and a
missing or foreign client certificate fails naming 'clientCert'."""

from __future__ import annotations

import secrets

import pytest
from pyspark.sql.types import LongType, StructField, StructType

from connectors.conformance import expected_events, run_query
from connectors.errors import OptionError
from connectors.options import OptionReader
from sinks.webhook.adapter import WebhookAdapter
from sinks.webhook.sink import WebhookSinkDataSource

pytestmark = [pytest.mark.integration, pytest.mark.webhook, pytest.mark.secured]

LIMIT = 400


def _tls(ca, client) -> dict[str, str]:
    """The sink's options for a receiver signed by `ca`, presenting `client` (an `Issued`, or None)."""
    options = {"verify": str(ca.ca)}
    if client is not None:
        options.update(clientCert=str(client.cert), clientKey=str(client.key))
    return options


def test_writes_exactly_once_with_a_client_certificate(spark, https_receiver, throwaway_ca, tmp_path):
    adapter = WebhookAdapter(https_receiver, **_tls(throwaway_ca, throwaway_ca.issue("webhook-writer", client=True)))
    namespace = "sec" + secrets.token_hex(5)
    run_query(spark, adapter, namespace, tmp_path / "ck", limit=LIMIT, per_trigger=LIMIT // 4)
    assert sorted(adapter.read_back(namespace)) == expected_events(LIMIT)


def _checked(receiver, **options) -> None:
    schema = StructType([StructField("subtask_index", LongType()), StructField("counter", LongType())])
    reader = OptionReader({"url": f"{receiver.url}/x", **options}, name="webhook-sink")
    WebhookSinkDataSource({}).build(reader, schema).check()


def test_an_untrusted_receiver_certificate_fails_at_start_naming_verify(https_receiver, throwaway_ca, stranger_ca):
    client = throwaway_ca.issue("webhook-writer", client=True)
    for options in (_tls(stranger_ca, client), {"clientCert": str(client.cert), "clientKey": str(client.key)}):
        with pytest.raises(OptionError) as err:
            _checked(https_receiver, **options)
        message = str(err.value)
        assert err.value.option == "verify" and "certificate verify failed" in message, message
    _checked(https_receiver, **_tls(throwaway_ca, client))  # the same receiver, its CA given: the check passes


@pytest.mark.parametrize("client", ["none", "foreign"])
def test_a_refused_client_certificate_names_client_cert(spark, https_receiver, throwaway_ca, stranger_ca, tmp_path,
                                                        client):
    issued = stranger_ca.issue("eve", client=True) if client == "foreign" else None
    adapter = WebhookAdapter(https_receiver, **_tls(throwaway_ca, issued), maxRetries="0", writeRetries="0")
    namespace = "sec" + secrets.token_hex(5)
    with pytest.raises(Exception) as err:  # noqa: B017 - the query's failure, as Spark reports it
        run_query(spark, adapter, namespace, tmp_path / "ck", limit=20)
    assert "clientCert" in str(err.value), str(err.value)[-3000:]
    assert adapter.read_back(namespace) == []
