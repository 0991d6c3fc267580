"""``serve KIND --secured``: the servers secured as the tests have them (`secured_server`), for trying the sinks'
security options by hand — a throwaway CA (`connectors.servers.tls.ThrowawayCA`) in a folder of its own, one user
``impulse`` with a password drawn at random, and the sink options a client needs, as ``impulse-load`` flags.

- ``kafka``: `SecuredKafkaBroker`, a SASL_SSL listener (SCRAM-SHA-512) and a mutual-TLS one (a client
  certificate is issued);
- ``redis`` and ``redis-cluster``: TLS only, the ACL user ``impulse`` (every key; the ``default`` user stays open
  to the server's own helpers);
- ``http``: the reference receiver over HTTPS requiring a client certificate (one is issued);
- ``schema-registry``: Apicurio Registry (plain HTTP on loopback) behind `BasicAuthProxy`, HTTPS with basic auth
  as the user ``impulse`` (`RegistryBehindProxy`; Apicurio enforces basic auth only with an identity server).
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any, Callable

from connectors.servers.kafka_secure import SecuredKafkaBroker
from connectors.servers.receiver import Receiver
from connectors.servers.redis import RedisServer
from connectors.servers.redis_cluster import RedisCluster
from connectors.servers.registry_proxy import BasicAuthProxy
from connectors.servers.schema_registry import SchemaRegistry
from connectors.servers.tls import ServerTls, ThrowawayCA

__all__ = ["SECURED_KINDS", "USER", "secured_server", "RegistryBehindProxy"]

USER = "impulse"
SECURED_KINDS = ("kafka", "redis", "redis-cluster", "http", "schema-registry")


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
    if kind == "schema-registry":
        registry = RegistryBehindProxy(ca.server_tls("registry"), {USER: password})
        return registry, lambda: [_line("the registry formats (value.format or key.format avro, protobuf, json-schema) "
                                        "over HTTPS with basic auth", {
            "schema.registry.url": registry.url, "schema.registry.basic.auth.user.info": f"{USER}:{password}",
            "schema.registry.ssl.ca.location": str(ca.ca)})]
    raise ValueError(f"serve --secured runs {', '.join(SECURED_KINDS)}, not {kind!r}")


def _line(what: str, options: dict[str, str]) -> str:
    return f"{what}: " + " ".join(f"-o {key}={value}" for key, value in options.items())


class RegistryBehindProxy:
    """``with RegistryBehindProxy(tls, {"user": "password"}) as registry: … registry.url …``: a `SchemaRegistry`
    and, once it answers, a `BasicAuthProxy` in front of it with `tls` and `users`; `url` is the proxy's (the
    registry's Confluent API path over HTTPS). Stopped in the reverse order."""

    name = "schema-registry"
    client_library = SchemaRegistry.client_library

    def __init__(self, tls: ServerTls, users: dict[str, str]) -> None:
        self.registry = SchemaRegistry()
        self.tls, self.users = tls, dict(users)
        self.proxy: BasicAuthProxy | None = None

    @property
    def url(self) -> str:
        if self.proxy is None:
            raise RuntimeError("schema-registry: not started")
        return self.proxy.url

    def start(self) -> "RegistryBehindProxy":
        self.registry.start()
        try:
            self.proxy = BasicAuthProxy(self.registry.url, self.tls, self.users).start()
        except BaseException:
            self.registry.close()
            raise
        return self

    def close(self) -> None:
        proxy, self.proxy = self.proxy, None
        if proxy is not None:
            proxy.stop()
        self.registry.close()

    def __enter__(self) -> "RegistryBehindProxy":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.close()
