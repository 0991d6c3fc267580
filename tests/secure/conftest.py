"""The secured servers, started once per test worker and only when a test asks (session-scoped, lazy), with a
throwaway CA of their own: redis-server and a 6-node Redis Cluster over TLS with an ACL user, a Kafka broker
with a SASL_SSL listener (SCRAM-SHA-512) and a mutual-TLS listener, the webhook receiver over mutual TLS, and the
Schema Registry behind an HTTPS proxy enforcing basic auth. Each password is drawn at random per run, so
a test can search for it in everything a run leaves behind."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import pytest

from connectors.servers.kafka_secure import SecuredKafkaBroker
from connectors.servers.receiver import Receiver
from connectors.servers.redis import RedisServer
from connectors.servers.redis_cluster import RedisCluster
from connectors.servers.registry_proxy import BasicAuthProxy
from connectors.servers.tls import ThrowawayCA
from tests.conftest import _serving


@dataclass(frozen=True)
class Credentials:
    """An ACL or SCRAM user, and the key prefix its Redis ACL allows (``~<prefix>*``, commit records too)."""

    user: str
    password: str
    prefix: str = "sec"

    @property
    def acl(self) -> str:
        return f"{self.user} on >{self.password} ~{self.prefix}* ~commit:{self.prefix}* +@all"


@pytest.fixture(scope="session")
def throwaway_ca(tmp_path_factory):
    """The CA every secured server's certificate is signed by (`connectors.servers.tls.ThrowawayCA`)."""
    return ThrowawayCA(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="session")
def stranger_ca(tmp_path_factory):
    """Another CA, which signed nothing the servers trust: a client given it does not trust them either."""
    return ThrowawayCA(tmp_path_factory.mktemp("stranger-ca"), "a stranger's CA")


@pytest.fixture(scope="session")
def credentials():
    return Credentials("impulse-writer", "pw-" + secrets.token_hex(12))


@pytest.fixture(scope="session")
def redis_tls(throwaway_ca, credentials):
    """redis-server on TLS only, with the ACL user `credentials` (keys ``sec*`` and ``commit:sec*``)."""
    yield from _serving(RedisServer(tls=throwaway_ca.server_tls("redis"), acl=[credentials.acl]))


@pytest.fixture(scope="session")
def redis_cluster_tls(throwaway_ca, credentials):
    """A Redis Cluster (3 primaries, 3 replicas) on TLS only, nodes talking TLS to each other, with the same ACL
    user as `redis_tls`."""
    yield from _serving(RedisCluster(tls=throwaway_ca.server_tls("redis-cluster"), acl=[credentials.acl]))


@pytest.fixture(scope="session")
def kafka_secured(throwaway_ca, credentials):
    """A Kafka broker with a SASL_SSL listener (SCRAM-SHA-512, the user `credentials`) and an SSL listener that
    requires a client certificate of `throwaway_ca`; its PLAINTEXT listener serves the tests' own reads."""
    yield from _serving(SecuredKafkaBroker(throwaway_ca, {credentials.user: credentials.password}))


@pytest.fixture(scope="session")
def https_receiver(throwaway_ca):
    """The reference receiver (recording) over HTTPS, requiring a client certificate of `throwaway_ca`."""
    yield from _serving(Receiver(record=True, tls=throwaway_ca.server_tls("receiver"), require_client_cert=True))


@pytest.fixture(scope="session")
def registry_https(schema_registry, throwaway_ca, credentials):
    """The Schema Registry (`schema_registry`) behind HTTPS with basic auth: `BasicAuthProxy` with a certificate of
    `throwaway_ca`, allowing the user `credentials` (Apicurio enforces basic auth only with an identity server)."""
    with BasicAuthProxy(schema_registry.url, throwaway_ca.server_tls("registry"),
                        {credentials.user: credentials.password}) as proxy:
        yield proxy
