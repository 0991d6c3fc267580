"""librdkafka's security settings as the Java client's (`java_settings`): ``--via-option kafka.*`` settings are
librdkafka's (kafka-sink's producer and the harness's own clients take them as given), and Spark's Kafka source,
a Java client, takes the same credentials under other names.

=====================================  =========================================================================
librdkafka                             Java client (Spark's Kafka source)
=====================================  =========================================================================
``sasl.mechanism`` (``mechanisms``)    ``sasl.mechanism``
``sasl.username``, ``sasl.password``   ``sasl.jaas.config`` (``PlainLoginModule`` for PLAIN, ``ScramLoginModule``
                                       for SCRAM-SHA-256/512), which Spark's plans redact (its value holds
                                       ``password=``)
``ssl.ca.location``                    ``ssl.truststore.type`` PEM and ``ssl.truststore.location``
=====================================  =========================================================================

``security.protocol`` is the same in both. A client certificate (``ssl.certificate.location``), another SASL
mechanism (GSSAPI, OAUTHBEARER) or a setting of the Java client's that librdkafka lacks has no translation: refused
with `LoadError` before the load, naming the option.
"""

from __future__ import annotations

from typing import Mapping

from impulse.loadtest.settings.units import LoadError

__all__ = ["java_settings"]

_LOGIN_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                  "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                  "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}
# librdkafka's security settings this module translates (and so leaves out of the Java client's)
_TRANSLATED = ("sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password", "ssl.ca.location")
# librdkafka's settings for a client certificate: the Java client wants a key store instead
_CLIENT_CERT = ("ssl.certificate.location", "ssl.key.location", "ssl.key.password", "ssl.certificate.pem",
                "ssl.key.pem", "ssl.keystore.location", "ssl.keystore.password")


def java_settings(client: Mapping[str, str], flag: str = "--via-option") -> dict[str, str]:
    """The Java client's settings (without the ``kafka.`` prefix) for the librdkafka settings `client` (likewise
    without it): the security settings translated (see the module docstring), the others as given. `LoadError`
    naming ``FLAG kafka.<setting>`` for a security setting without a translation."""
    given = {key.lower(): (key, value) for key, value in client.items()}
    for name in _CLIENT_CERT:
        if name in given:
            raise LoadError(f"{flag} kafka.{given[name][0]}: a client certificate (mutual TLS) is not supported "
                            "through --via: Spark's Kafka source, a Java client, takes it as a key store that librdkafka "
                            "cannot read; authenticate the harness with SASL (kafka.sasl.username and "
                            "kafka.sasl.password over SASL_SSL) instead")
    out = {key: value for key, value in client.items() if key.lower() not in _TRANSLATED}
    mechanism = (given.get("sasl.mechanism") or given.get("sasl.mechanisms") or (None, None))[1]
    if mechanism is not None:
        out["sasl.mechanism"] = mechanism
    if "sasl.username" in given or "sasl.password" in given:
        module = _LOGIN_MODULES.get(str(mechanism or "GSSAPI").upper())
        if module is None:
            raise LoadError(f"{flag} kafka.sasl.mechanism={mechanism or 'GSSAPI (not set)'}: a user name and password "
                            f"are passed to Spark's Kafka source for SASL mechanism {', '.join(_LOGIN_MODULES)}; set "
                            "kafka.sasl.mechanism to one of them")
        user = (given.get("sasl.username") or ("", ""))[1]
        password = (given.get("sasl.password") or ("", ""))[1]
        out["sasl.jaas.config"] = f'{module} required username="{_quoted(user)}" password="{_quoted(password)}";'
    if "ssl.ca.location" in given:
        out["ssl.truststore.type"] = "PEM"
        out["ssl.truststore.location"] = given["ssl.ca.location"][1]
    return out


def _quoted(text: str) -> str:
    """`text` inside a JAAS option's double quotes (a backslash escapes the next character)."""
    return str(text).replace("\\", "\\\\").replace('"', '\\"')
