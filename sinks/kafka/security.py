"""What a failed security handshake with a Kafka broker means, in the options' terms (`handshake_error`): an
untrusted broker certificate names the CA setting, refused credentials the SASL settings, a refused client
certificate the certificate settings; anything else the security protocol of the listener."""

from __future__ import annotations

import socket
import ssl
from typing import Any, Mapping

from connectors.errors import OptionError
from connectors.redact import HIDDEN

__all__ = ["HandshakeWatch", "handshake_error", "is_handshake_failure", "name_mismatch", "principal", "write_denied"]

# librdkafka's words for a handshake the broker refused because of the client's certificate (it reports them as a
# transport failure: the broker closes the connection with a TLS alert)
_CLIENT_CERT_REFUSED = ("alert bad certificate", "alert certificate required", "alert unknown ca",
                        "alert certificate expired", "alert certificate unknown")


def is_handshake_failure(name: str, text: str) -> bool:
    """Whether librdkafka's error `name` with `text` is a failed TLS or SASL handshake (not a broker that is down)."""
    return name in ("_AUTHENTICATION", "_SSL") or (name == "_TRANSPORT" and any(w in text for w in _CLIENT_CERT_REFUSED))


def handshake_error(text: str, client: dict[str, Any], bootstrap: str) -> OptionError:
    """The `OptionError` for the failed handshake librdkafka described as `text`, with the client settings `client`
    (``kafka.*`` without the prefix) at `bootstrap`: the option named is the one to fix."""
    given = {key.lower(): value for key, value in client.items()}
    protocol = str(given.get("security.protocol", "PLAINTEXT")).upper()
    if "certificate verify failed" in text or "CERTIFICATE_VERIFY_FAILED" in text:
        mismatch = name_mismatch(bootstrap, given.get("ssl.ca.location"))
        if mismatch is not None:
            text = f"{text}; {mismatch}"
        if "hostname" in text.lower() or "mismatch" in text:
            return OptionError("kafka.bootstrap.servers", bootstrap,
                               f"a host name the broker's TLS certificate names: the broker at {bootstrap} presented a "
                               f"certificate for another name ({text})")
        return OptionError("kafka.ssl.ca.location", given.get("ssl.ca.location", "(not set)"),
                           f"the CA (a PEM file) that signed the TLS certificate of the broker at {bootstrap}: the "
                           f"client does not trust the certificate it presented ({text}); set "
                           "'kafka.ssl.ca.location' to that CA's file")
    if "SASL authentication error" in text or ("Authentication failed" in text and protocol.startswith("SASL")):
        mechanism = given.get("sasl.mechanism", given.get("sasl.mechanisms", "GSSAPI"))
        return OptionError("kafka.sasl.password", HIDDEN,
                           f"the password of user {given.get('sasl.username', '(not set)')!r} for SASL mechanism "
                           f"{mechanism}: the broker at {bootstrap} refused these credentials ({text}); check "
                           "'kafka.sasl.username', 'kafka.sasl.password' and 'kafka.sasl.mechanism'")
    if any(word in text for word in _CLIENT_CERT_REFUSED):
        return OptionError("kafka.ssl.certificate.location", given.get("ssl.certificate.location", "(not set)"),
                           f"a client certificate the broker at {bootstrap} accepts, with its key "
                           f"('kafka.ssl.key.location'): the listener requires one signed by a CA it trusts, and "
                           f"refused the handshake ({text})")
    return OptionError("kafka.security.protocol", given.get("security.protocol", "PLAINTEXT"),
                       f"the security protocol of the listener at {bootstrap} (and the credentials it takes): the "
                       f"broker answers, but the client's security handshake failed ({text}). A SASL client talking "
                       "to a PLAINTEXT listener, or a PLAINTEXT/SASL_PLAINTEXT client to an SSL one, fails so")


class HandshakeWatch:
    """A librdkafka client's ``error_cb`` that keeps the last failed TLS or SASL handshake (`failure`, a
    ``KafkaError``): the cause a client's timeout hides ("transport failure"). Callbacks are served by the client's
    ``poll``; call it before reading `failure`."""

    def __init__(self) -> None:
        self.failure: Any = None

    def __call__(self, err) -> None:
        if is_handshake_failure(err.name(), err.str()):
            self.failure = err

    def error(self, client: dict[str, Any], bootstrap: str) -> OptionError | None:
        """`handshake_error` of the failure seen, if any (`client`: the settings without the ``kafka.`` prefix)."""
        return None if self.failure is None else handshake_error(self.failure.str(), client, bootstrap)


def name_mismatch(bootstrap: str, ca: str | None, timeout_s: float = 5.0) -> str | None:
    """Python's words when the first broker of `bootstrap` presents a certificate, signed by `ca` (a PEM file; None:
    the system's trust store), that does not name the host it was reached by; None when it does, or when the cause
    is another (librdkafka says only "certificate verify failed" for either). One TLS handshake, nothing sent."""
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    host = host.strip("[]")
    try:
        context = ssl.create_default_context(cafile=ca)
        with socket.create_connection((host, int(port)), timeout=timeout_s) as sock, \
                context.wrap_socket(sock, server_hostname=host):
            return None
    except ssl.SSLCertVerificationError as exc:
        return str(exc) if "mismatch" in str(exc) else None
    except (OSError, ValueError):
        return None


def principal(client: Mapping[str, Any]) -> str:
    """Who the broker sees with the client settings `client` (without the ``kafka.`` prefix), in words."""
    given = {key.lower(): value for key, value in client.items()}
    if "sasl.username" in given and str(given.get("security.protocol", "")).upper().startswith("SASL"):
        return f"user {given['sasl.username']!r} (User:{given['sasl.username']})"
    if given.get("ssl.certificate.location"):
        return f"the subject of the client certificate {given['ssl.certificate.location']}"
    return "the anonymous principal (User:ANONYMOUS)"


def write_denied(admin, topics: Mapping[str, str], client: Mapping[str, Any], bootstrap: str,
                 timeout_s: float) -> OptionError | None:
    """The `OptionError` for the first of `topics` (``{topic: the option naming it}``) the broker's ACLs do not let
    the client write to, asked with `admin` (an ``AdminClient``: the operations the principal is authorized for,
    KIP-430); None when each may be written, when the broker runs no authorizer, or when it cannot be told."""
    from confluent_kafka import TopicCollection  # noqa: PLC0415 - the kafka extra's client
    from confluent_kafka.admin import AclOperation  # noqa: PLC0415 - the kafka extra's client

    try:
        futures = admin.describe_topics(TopicCollection(sorted(topics)), include_authorized_operations=True,
                                        request_timeout=timeout_s)
    except Exception:  # noqa: BLE001 - a client or broker without the request: the write itself tells
        return None
    for topic in sorted(topics):
        try:
            allowed = futures[topic].result(timeout_s).authorized_operations
        except Exception:  # noqa: BLE001 - described or not, the write itself tells
            continue
        if allowed is None or {AclOperation.WRITE, AclOperation.ALL} & set(allowed):
            continue
        who = principal(client)
        names = ", ".join(sorted(op.name for op in allowed)) or "nothing"
        return OptionError(topics[topic], topic, f"a topic {who} may write to: the ACLs of the broker at {bootstrap} "
                           f"allow it only {names} on topic '{topic}'; grant it Write on the topic (kafka-acls "
                           f"--add --allow-principal … --operation Write --topic {topic}), or write to another")
    return None
