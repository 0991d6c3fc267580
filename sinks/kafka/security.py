"""What a failed security handshake with a Kafka broker means, in the options' terms (`handshake_error`): an
untrusted broker certificate names the CA setting, refused credentials the SASL settings, a refused client
certificate the certificate settings; anything else the security protocol of the listener."""

from __future__ import annotations

import socket
import ssl
from typing import Any, Mapping

from connectors.errors import OptionError
from connectors.redact import HIDDEN

__all__ = ["HandshakeWatch", "handshake_error", "is_handshake_failure", "name_mismatch", "principal", "write_denied",
           "authenticated", "transactions_denied"]

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


def authenticated(client: Mapping[str, Any]) -> bool:
    """Whether the client settings `client` (without the ``kafka.`` prefix) authenticate a principal of their own
    (SASL, or a client certificate): a broker's ACLs name such principals; a PLAINTEXT client is ANONYMOUS."""
    return not principal(client).startswith("the anonymous")


def transactions_denied(producer, prefix: str, progress_topic: str, client: Mapping[str, Any], bootstrap: str,
                        timeout_s: float) -> OptionError | None:
    """The `OptionError` when the broker's ACLs refuse the client what an exactly-once write does, tried with
    `producer` (a transactional producer whose ``transactional.id`` is `prefix`'s probe, ``<prefix>-check``):
    ``init_transactions`` (Write on the transactional id), then a transaction that adds the offset of the probe's
    group (the id again) on `progress_topic` and is aborted (Read on the group, Read on the topic). Nothing is
    committed; ask it for an `authenticated` client only (a broker's ACLs name such principals). None when each is
    allowed, and when the probe fails for another reason (a coordinator still loading, a timeout): the write itself
    tells then. `client` names the principal (the settings without the ``kafka.`` prefix)."""
    from confluent_kafka import KafkaException  # noqa: PLC0415 - the kafka extra's client

    probe, begun = f"{prefix}-check", False
    try:
        producer.init_transactions(timeout_s)
        producer.begin_transaction()
        begun = True
        producer.send_offsets_to_transaction(progress_topic, 0, 0, probe, timeout_s)
    except KafkaException as exc:
        error = exc.args[0]
        who, name = principal(client), error.name()
        if name == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED":
            return OptionError("transactionalIdPrefix", prefix,
                               f"a prefix of transactional ids {who} may write with: the ACLs of the broker at "
                               f"{bootstrap} refuse it Write on transactional id '{probe}' ({error.str()}); an "
                               f"exactly_once writer uses the ids '{prefix}-*': grant it Write on them (kafka-acls "
                               f"--add --allow-principal … --operation Write --transactional-id {prefix} "
                               "--resource-pattern-type prefixed), or give a transactionalIdPrefix it may use")
        if name == "GROUP_AUTHORIZATION_FAILED":
            return OptionError("transactionalIdPrefix", prefix,
                               f"a prefix of consumer groups {who} may read: the ACLs of the broker at {bootstrap} "
                               f"refuse it Read on group '{probe}' ({error.str()}); an exactly_once writer keeps its "
                               f"progress as the offsets of the groups '{prefix}-*': grant it Read on them "
                               f"(kafka-acls --add --allow-principal … --operation Read --group {prefix} "
                               "--resource-pattern-type prefixed), or give a transactionalIdPrefix it may use")
        if name == "TOPIC_AUTHORIZATION_FAILED":
            return OptionError("progressTopic", progress_topic,
                               f"a topic {who} may read: the ACLs of the broker at {bootstrap} refuse it Read on "
                               f"topic '{progress_topic}' ({error.str()}), which an exactly_once writer commits its "
                               "progress offsets on: grant it Read (and Write) on the topic, or give another")
    finally:
        if begun:
            try:
                producer.abort_transaction(timeout_s)
            except KafkaException:  # best effort: the probe's id is fenced by its next use, or times out
                pass
    return None
