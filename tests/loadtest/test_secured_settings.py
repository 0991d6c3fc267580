"""The harness's security settings without a server: librdkafka's settings translated for Spark's Kafka source
(`impulse.loadtest.settings.kafka_java`), and report.json's configuration with its secrets hidden."""

from __future__ import annotations

import json

import pytest

from impulse.loadtest.load.result import public_config
from impulse.loadtest.settings.config import LoadConfig
from impulse.loadtest.settings.kafka_java import java_settings
from impulse.loadtest.settings.units import LoadError
from impulse.loadtest.settings.via import parse_via

SCRAM = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "writer",
         "sasl.password": 'p"w\\1', "ssl.ca.location": "/etc/ssl/ca.pem", "linger.ms": "5"}


def test_scram_over_tls_becomes_a_jaas_config_and_a_pem_trust_store():
    java = java_settings(SCRAM)
    assert java == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "linger.ms": "5",
                    "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                        'username="writer" password="p\\"w\\\\1";',
                    "ssl.truststore.type": "PEM", "ssl.truststore.location": "/etc/ssl/ca.pem"}


def test_plain_takes_the_plain_login_module_and_librdkafkas_plural_mechanism_name():
    java = java_settings({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN", "sasl.username": "u",
                          "sasl.password": "p"})
    assert java["sasl.mechanism"] == "PLAIN" and "sasl.mechanisms" not in java
    assert java["sasl.jaas.config"].startswith("org.apache.kafka.common.security.plain.PlainLoginModule required")


def test_the_spark_source_gets_the_translation_and_the_harness_clients_librdkafkas_own():
    via = parse_via("kafka://b:9094/events", {f"kafka.{k}": v for k, v in SCRAM.items()})
    source = via.source_options({0: 3})
    assert "kafka.sasl.password" not in source and "kafka.ssl.ca.location" not in source
    assert source["kafka.ssl.truststore.location"] == "/etc/ssl/ca.pem" and "kafka.sasl.jaas.config" in source
    assert via.client_config["sasl.password"] == SCRAM["sasl.password"]           # librdkafka: the producer's,
    assert via.producer_options()["kafka.sasl.password"] == SCRAM["sasl.password"]  # the harness's clients'


@pytest.mark.parametrize(("options", "named"), [
    ({"kafka.ssl.certificate.location": "/c.pem", "kafka.ssl.key.location": "/c.key"}, "kafka.ssl.certificate.location"),
    ({"kafka.sasl.mechanism": "OAUTHBEARER", "kafka.sasl.username": "u"}, "kafka.sasl.mechanism=OAUTHBEARER"),
    ({"kafka.sasl.username": "u", "kafka.sasl.password": "p"}, "kafka.sasl.mechanism=GSSAPI"),
])
def test_a_setting_without_a_translation_is_refused_naming_it(options, named):
    with pytest.raises(LoadError) as err:
        parse_via("kafka://b:9094/events", options)
    assert str(err.value).startswith(f"--via-option {named}"), err.value


def test_report_config_hides_every_secret_of_its_option_tables():
    secrets_given = ["s3cret-a", "s3cret-b", "s3cret-c", "s3cret-d", "tok-e"]
    config = LoadConfig(sink="kafka-sink", options={"kafka.sasl.password": secrets_given[0]},
                        via="kafka://b:9094/in", via_options={"kafka.sasl.password": secrets_given[1],
                                                              "kafka.sasl.jaas.config": f"x password={secrets_given[2]}"},
                        source_options={"seed": "1"},
                        spark_conf={"spark.hadoop.fs.s3a.secret.key": secrets_given[3]},
                        remote=f"sc://spark.example.com:15002/;token={secrets_given[4]}")
    shown = public_config(config)
    text = json.dumps(shown)
    assert not [s for s in secrets_given if s in text], text
    assert shown["source_options"] == {"seed": "1"} and shown["via"] == "kafka://b:9094/in"
    assert shown["remote"] == "sc://spark.example.com:15002/"
