"""``serve KIND --secured``: the servers secured as the tests have them (`secured_server`), for trying the sinks'
security options by hand — a throwaway CA (`connectors.servers.tls.ThrowawayCA`) in a folder of its own, one user
``impulse`` with a password drawn at random, and the sink options a client needs, as ``impulse-load`` flags.

- ``kafka``: `SecuredKafkaBroker`, a SASL_SSL listener (SCRAM-SHA-512) and a mutual-TLS one (a client
  certificate is issued);
- ``redis`` and ``redis-cluster``: TLS only, the ACL user ``impulse`` (every key; the ``default`` user stays open
  to the server's own helpers);
- ``http``: the reference receiver over HTTPS requiring a client certificate (one is issued).
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any, Callable

from connectors.servers.kafka_secure import SecuredKafkaBroker
from connectors.servers.receiver import Receiver
from connectors.servers.redis import RedisServer
from connectors.servers.redis_cluster import RedisCluster
from connectors.servers.tls import ThrowawayCA

__all__ = ["SECURED_KINDS", "USER", "secured_server"]

USER = "impulse"
SECURED_KINDS = ("kafka", "redis", "redis-cluster", "http")


def secured_server(kind: str, directory: Path) -> tuple[Any, Callable[[], list[str]]]:
    """The server of `kind` (one of `SECURED_KINDS`), not started, with its CA and certificates in `directory`; and a
    function that gives, once it runs, one line per way in: what it is, then the sink's options as ``-o KEY=VALUE``
    flags (the password among them: this is the user's own throwaway server)."""
    ca = ThrowawayCA(directory, "impulse serve --secured CA")
    password = secrets.token_urlsafe(12)
    acl = [f"{USER} on >{password} ~* &* +@all"]
    if kind == "kafka":
        broker = SecuredKafkaBroker(ca, {USER: password})
        client = ca.issue("client", client=True)

        def kafka_lines() -> list[str]:
            return [_line("kafka-sink over SASL_SSL (SCRAM-SHA-512)",
                          {f"kafka.{k}": v for k, v in broker.sasl_ssl_config(USER, password).items()}),
                    _line("kafka-sink over mutual TLS",
                          {f"kafka.{k}": v for k, v in broker.mtls_config(client).items()})]
        return broker, kafka_lines
    if kind in ("redis", "redis-cluster"):
        tls = ca.server_tls(kind)
        server = RedisServer(tls=tls, acl=acl) if kind == "redis" else RedisCluster(tls=tls, acl=acl)
        return server, lambda: [_line(f"redis-sink over TLS as ACL user {USER}", {"url": server.user_url(USER, password)})]
    if kind == "http":
        receiver = Receiver(tls=ca.server_tls("receiver"), require_client_cert=True)
        client = ca.issue("client", client=True)
        return receiver, lambda: [_line("webhook-sink over mutual TLS", {
            "url": f"{receiver.url}/events", "verify": str(ca.ca), "clientCert": str(client.cert),
            "clientKey": str(client.key)})]
    raise ValueError(f"serve --secured runs {', '.join(SECURED_KINDS)}, not {kind!r}")


def _line(what: str, options: dict[str, str]) -> str:
    return f"{what}: " + " ".join(f"-o {key}={value}" for key, value in options.items())
