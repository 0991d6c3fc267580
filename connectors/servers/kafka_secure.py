"""A Kafka broker with secured listeners (`SecuredKafkaBroker`): SASL_SSL with SCRAM-SHA-512 users, and SSL that
requires a client certificate (mutual TLS), beside the PLAINTEXT listener the helpers of `KafkaBroker` use.

The certificates come from a `connectors.servers.tls.ThrowawayCA` (PEM key stores: no Java keytool); the SCRAM
users are written by the storage format (``--add-scram``), so they exist before the broker first answers.
"""

from __future__ import annotations

from typing import Any, Mapping

from connectors.servers.base import LOOPBACK, free_port
from connectors.servers.kafka import KafkaBroker
from connectors.servers.tls import ThrowawayCA

__all__ = ["SecuredKafkaBroker"]

_SCRAM = "SCRAM-SHA-512"


class SecuredKafkaBroker(KafkaBroker):
    """`KafkaBroker` plus a ``SASL_SSL`` listener (`sasl_ssl_bootstrap`; SCRAM-SHA-512, users `users` as
    ``{name: password}``) and an ``SSL`` listener requiring a client certificate signed by `ca`
    (`mtls_bootstrap`). ACLs are enforced (KRaft's ``StandardAuthorizer``), but a resource without any ACL is open
    to every principal, and the PLAINTEXT and controller listeners' principal (``User:ANONYMOUS``) is a super user:
    `deny_write` takes a topic from a user, `deny_prefixed` the transactional ids or groups of a prefix.

    `sasl_ssl_config(user, password)` and `mtls_config(client)` are the librdkafka settings of a client of each
    (`client` an `Issued` client certificate of `ca`).
    """

    def __init__(self, ca: ThrowawayCA, users: Mapping[str, str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ca = ca
        self.users = dict(users)
        self.server_cert = ca.issue("kafka")
        self.sasl_ssl_port: int | None = None
        self.mtls_port: int | None = None

    @property
    def sasl_ssl_bootstrap(self) -> str:
        return self._address(lambda: f"{LOOPBACK}:{self.sasl_ssl_port}")

    @property
    def mtls_bootstrap(self) -> str:
        return self._address(lambda: f"{LOOPBACK}:{self.mtls_port}")

    def sasl_ssl_config(self, user: str, password: str) -> dict[str, str]:
        """librdkafka's settings for the SASL_SSL listener as `user`."""
        return {"bootstrap.servers": self.sasl_ssl_bootstrap, "security.protocol": "SASL_SSL",
                "sasl.mechanism": _SCRAM, "sasl.username": user, "sasl.password": password,
                "ssl.ca.location": str(self.ca.ca)}

    def mtls_config(self, client) -> dict[str, str]:
        """librdkafka's settings for the mutual-TLS listener with the client certificate `client` (`Issued`)."""
        return {"bootstrap.servers": self.mtls_bootstrap, "security.protocol": "SSL",
                "ssl.ca.location": str(self.ca.ca), "ssl.certificate.location": str(client.cert),
                "ssl.key.location": str(client.key)}

    def deny_write(self, topic: str, user: str, describe: bool = False, timeout: float = 30.0) -> None:
        """An ACL that denies `user` (a SCRAM user) WRITE on `topic`, and with `describe` one that allows it DESCRIBE
        (else, the topic having an ACL now, the user may not even describe it); other principals are not affected."""
        from confluent_kafka.admin import (  # noqa: PLC0415 - the kafka extra's client
            AclBinding,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        bindings = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, f"User:{user}", "*", operation,
                               permission)
                    for operation, permission in [(AclOperation.WRITE, AclPermissionType.DENY),
                                                  *([(AclOperation.DESCRIBE, AclPermissionType.ALLOW)] if describe else [])]]
        admin = self.admin()  # kept until the result: a client that is collected cancels its requests
        for done in admin.create_acls(bindings, request_timeout=timeout).values():
            done.result(timeout)

    def deny_prefixed(self, resource: str, prefix: str, user: str, operation: str, timeout: float = 30.0) -> None:
        """ACLs that deny `user` (a SCRAM user's name, or ``CN=…`` for a client certificate) `operation`
        (``WRITE``, ``READ``, ``DESCRIBE`` …) on every `resource` (``TRANSACTIONAL_ID``, ``GROUP``, ``TOPIC``) whose
        name starts with `prefix`, and allow every other principal everything there (a resource with an ACL is no
        longer open to all). A denied READ or WRITE leaves the DESCRIBE it implies to the allowance: deny ``DESCRIBE``
        too for a principal that may not even look a group up."""
        from confluent_kafka.admin import (  # noqa: PLC0415 - the kafka extra's client
            AclBinding,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        bindings = [AclBinding(ResourceType[resource], prefix, ResourcePatternType.PREFIXED, principal, "*",
                               AclOperation[op], permission)
                    for principal, op, permission in [(f"User:{user}", operation, AclPermissionType.DENY),
                                                      ("User:*", "ALL", AclPermissionType.ALLOW)]]
        admin = self.admin()  # kept until the result: a client that is collected cancels its requests
        for done in admin.create_acls(bindings, request_timeout=timeout).values():
            done.result(timeout)

    def _start(self) -> None:
        if self.sasl_ssl_port is None:
            self.sasl_ssl_port, self.mtls_port = free_port(), free_port()
        super()._start()

    def _properties(self) -> dict[str, Any]:
        props = super()._properties()
        props["listeners"] += (f",SASL_SSL://{LOOPBACK}:{self.sasl_ssl_port},MTLS://{LOOPBACK}:{self.mtls_port}")
        props["advertised.listeners"] += (f",SASL_SSL://{LOOPBACK}:{self.sasl_ssl_port},"
                                          f"MTLS://{LOOPBACK}:{self.mtls_port}")
        props["listener.security.protocol.map"] += ",SASL_SSL:SASL_SSL,MTLS:SSL"
        props["sasl.enabled.mechanisms"] = _SCRAM
        props["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"] = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;")
        props["listener.name.mtls.ssl.client.auth"] = "required"
        props.update({
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",
            "allow.everyone.if.no.acl.found": "true",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.server_cert.chain),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca.ca),
        })
        props.update(self.extra_config)
        return props

    def _format_args(self) -> list[str]:
        args = super()._format_args()
        for user, password in self.users.items():
            args += ["--add-scram", f"{_SCRAM}=[name={user},password={password}]"]
        return args
