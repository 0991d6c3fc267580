"""The Kafka sink against a broker secured as in production: SASL_SSL with a SCRAM-SHA-512 user, and SSL that
requires a client certificate. It writes exactly once through each; an untrusted broker certificate, a wrong
password, a missing or foreign client certificate and a topic the broker's ACLs forbid each fail at start naming the
option to fix."""

from __future__ import annotations

import secrets

import pytest
from confluent_kafka import KafkaException
from pyspark.sql.types import LongType, StructField, StructType

from connectors.conformance import expected_events, run_query
from connectors.errors import OptionError
from connectors.kafka_topics import read_topic
from connectors.options import OptionReader
from connectors.readback import CannotReadBack
from sinks.kafka.adapter import KafkaAdapter
from sinks.kafka.options import KafkaOptions
from sinks.kafka.security import authenticated
from sinks.kafka.sink import Columns, KafkaSink

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.secured]

LIMIT = 400


def _kafka_options(config: dict[str, str]) -> dict[str, str]:
    """librdkafka settings as the sink's ``kafka.*`` options."""
    return {f"kafka.{key}": value for key, value in config.items()}


def _checked(broker, config: dict[str, str]) -> None:
    """Build the sink on `config` and run its start-of-query check."""
    topic = broker.create_topic("sec-" + secrets.token_hex(4))
    reader = OptionReader({**_kafka_options(config), "topic": topic}, name="kafka sink")
    schema = StructType([StructField("counter", LongType()), StructField("subtask_index", LongType())])
    KafkaSink(KafkaOptions.read(reader), Columns.of(schema)).check()


def _client_cert(ca, name: str):
    return ca.issue(name, client=True)


@pytest.mark.parametrize("listener", ["sasl_ssl", "mtls"])
def test_writes_exactly_once_over_a_secured_listener(spark, kafka_secured, throwaway_ca, credentials, tmp_path,
                                                     listener):
    config = (kafka_secured.sasl_ssl_config(credentials.user, credentials.password) if listener == "sasl_ssl"
              else kafka_secured.mtls_config(_client_cert(throwaway_ca, "writer")))
    reader = KafkaAdapter(kafka_secured.bootstrap)  # topics made and read on the PLAINTEXT listener
    namespace = "sec" + secrets.token_hex(5)
    reader.prepare(namespace)
    run_query(spark, reader, namespace, tmp_path / "ck", limit=LIMIT, per_trigger=LIMIT // 4,
              options=_kafka_options(config))
    assert sorted(reader.read_back(namespace)) == expected_events(LIMIT)
    run_query(spark, reader, namespace, tmp_path / "ck", limit=2 * LIMIT, per_trigger=LIMIT // 2,
              options=_kafka_options(config))  # the batches done are not written again
    assert sorted(reader.read_back(namespace)) == expected_events(2 * LIMIT)


def test_a_wrong_password_blames_the_credentials_not_the_protocol(kafka_secured, credentials):
    wrong = "pw-" + secrets.token_hex(6)
    with pytest.raises(OptionError) as err:
        _checked(kafka_secured, kafka_secured.sasl_ssl_config(credentials.user, wrong))
    message = str(err.value)
    assert err.value.option == "kafka.sasl.password" and "Authentication failed" in message, message
    assert repr(credentials.user) in message and "SCRAM-SHA-512" in message, message
    assert wrong not in message and "security protocol" not in message, message


@pytest.mark.parametrize("ca", ["stranger", "none"])
def test_an_untrusted_broker_certificate_names_the_ca_option(kafka_secured, credentials, stranger_ca, ca):
    config = kafka_secured.sasl_ssl_config(credentials.user, credentials.password)
    if ca == "stranger":
        config["ssl.ca.location"] = str(stranger_ca.ca)
    else:
        del config["ssl.ca.location"]
    with pytest.raises(OptionError) as err:
        _checked(kafka_secured, config)
    message = str(err.value)
    assert err.value.option == "kafka.ssl.ca.location" and "certificate verify failed" in message, message
    assert "'kafka.ssl.ca.location'" in message.split("):")[-1], message  # the fix comes before anything else
    assert credentials.password not in message, message


@pytest.mark.parametrize("client", ["none", "foreign"])
def test_a_refused_client_certificate_names_the_certificate_option(kafka_secured, throwaway_ca, stranger_ca, client):
    config = kafka_secured.mtls_config(_client_cert(stranger_ca if client == "foreign" else throwaway_ca, "eve"))
    if client == "none":
        del config["ssl.certificate.location"], config["ssl.key.location"]
    with pytest.raises(OptionError) as err:
        _checked(kafka_secured, config)
    message = str(err.value)
    assert err.value.option == "kafka.ssl.certificate.location" and "bad certificate" in message, message


@pytest.mark.parametrize("describe", [True, False], ids=["may-describe", "may-not-describe"])
def test_a_topic_the_acls_forbid_fails_at_start_naming_the_user_and_topic(kafka_secured, credentials, describe):
    topic = kafka_secured.create_topic("sec-denied-" + secrets.token_hex(4))
    kafka_secured.deny_write(topic, credentials.user, describe=describe)
    options = {**_kafka_options(kafka_secured.sasl_ssl_config(credentials.user, credentials.password)), "topic": topic}
    schema = StructType([StructField("counter", LongType()), StructField("subtask_index", LongType())])
    with pytest.raises(OptionError) as err:
        KafkaSink(KafkaOptions.read(OptionReader(options, name="kafka sink")), Columns.of(schema)).check()
    message = str(err.value)
    assert err.value.option == "topic" and f"User:{credentials.user}" in message and f"'{topic}'" in message, message
    assert "Write on the topic" in message and credentials.password not in message, message


@pytest.mark.parametrize("denied", ["TRANSACTIONAL_ID:WRITE", "GROUP:READ"])
def test_transactional_ids_or_groups_the_acls_forbid_fail_at_start_naming_the_prefix_and_user(
        kafka_secured, credentials, denied):
    """exactly_once needs Write on the transactional ids ``<transactionalIdPrefix>-*`` and Read on the groups of the
    same names (its progress offsets): the start-of-query check tries both on a probe id and aborts, so a principal
    refused either fails before any task, naming the option and the user."""
    resource, operation = denied.split(":")
    prefix = "sec-tx-" + secrets.token_hex(4)
    kafka_secured.deny_prefixed(resource, prefix, credentials.user, operation)
    topic = kafka_secured.create_topic("sec-" + secrets.token_hex(4))
    options = {**_kafka_options(kafka_secured.sasl_ssl_config(credentials.user, credentials.password)),
               "topic": topic, "transactionalIdPrefix": prefix}
    schema = StructType([StructField("counter", LongType()), StructField("subtask_index", LongType())])
    with pytest.raises(OptionError) as err:
        KafkaSink(KafkaOptions.read(OptionReader(options, name="kafka sink")), Columns.of(schema)).check()
    message = str(err.value)
    words = {"TRANSACTIONAL_ID": f"Write on transactional id '{prefix}-check'",
             "GROUP": f"Read on group '{prefix}-check'"}
    assert err.value.option == "transactionalIdPrefix" and f"User:{credentials.user}" in message, message
    assert words[resource] in message and "--resource-pattern-type prefixed" in message, message
    assert credentials.password not in message, message
    # the prefix another user may use: nothing was taken from it
    other = {**options, "transactionalIdPrefix": "sec-tx-" + secrets.token_hex(4)}
    KafkaSink(KafkaOptions.read(OptionReader(other, name="kafka sink")), Columns.of(schema)).check()


def test_the_transactions_probe_asks_only_for_an_authenticated_principal(kafka_secured, throwaway_ca, credentials):
    """An anonymous (PLAINTEXT) client's broker is never probed: ACLs name authenticated principals."""
    assert not authenticated({"bootstrap.servers": "127.0.0.1:9092"})
    assert authenticated(kafka_secured.sasl_ssl_config(credentials.user, credentials.password))
    assert authenticated(kafka_secured.mtls_config(_client_cert(throwaway_ca, "probe")))


def test_a_check_reader_refused_its_consumer_groups_is_refused_when_built_naming_the_principal(
        kafka_secured, throwaway_ca):
    """The ``--check`` reader (`KafkaAdapter.reader`) reads by assignment and commits nothing, but librdkafka's
    consumer takes a group ``impulse-read-<random>`` and looks it up: a principal refused those groups is refused
    when the reader is built (before any load), naming the principal and the grant, not after the run."""
    name = "reader-" + secrets.token_hex(4)
    kafka_secured.deny_prefixed("GROUP", "impulse-read-", f"CN={name}", "DESCRIBE")
    topic = kafka_secured.create_topic("sec-read-" + secrets.token_hex(4))
    producer = kafka_secured.producer()
    producer.produce(topic, b"{}")
    assert producer.flush(30) == 0
    cert = _client_cert(throwaway_ca, name)
    config = kafka_secured.mtls_config(cert)
    with pytest.raises(CannotReadBack) as err:
        KafkaAdapter.reader({**_kafka_options(config), "topic": topic})
    message = str(err.value)
    assert str(cert.cert) in message and "Group authorization failed" in message, message
    assert "--operation Describe --group impulse-" in message, message
    with pytest.raises(KafkaException, match="GROUP_AUTHORIZATION_FAILED"):  # what the read would meet
        read_topic(config, topic, timeout_s=30)
    other = kafka_secured.mtls_config(_client_cert(throwaway_ca, "reader-" + secrets.token_hex(4)))
    assert KafkaAdapter.reader({**_kafka_options(other), "topic": topic}).values() == [b"{}"]
