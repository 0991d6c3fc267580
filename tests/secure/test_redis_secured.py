"""The Redis sink against redis-server and a Redis Cluster secured as in production: TLS only, an ACL user allowed
one key prefix. Each writes exactly once through them; an untrusted certificate, a wrong password, a key outside
the ACL and a cluster node written to as a single node each fail at start with an error naming what to fix."""

from __future__ import annotations

import secrets
from urllib.parse import quote

import pytest
from pyspark.sql.types import LongType, StructField, StructType

from connectors.conformance import expected_events, run_query
from connectors.errors import OptionError, SinkError
from connectors.options import OptionReader
from connectors.protocol import WriteIdentity
from sinks.redis.adapter import RedisAdapter
from sinks.redis.sink import RedisSinkDataSource

pytestmark = [pytest.mark.integration, pytest.mark.redis, pytest.mark.secured]

LIMIT = 400


def _namespace() -> str:
    return "sec" + secrets.token_hex(5)  # inside the ACL user's key patterns (tests/secure/conftest.py)


def _with_ca(url: str, ca) -> str:
    return f"{url.split('?')[0]}?ssl_ca_certs={quote(str(ca))}"


def _sink(url: str, namespace: str, **options):
    """The sink as the query's start builds it, and checked as it is before the first batch."""
    schema = StructType([StructField("subtask_index", LongType()), StructField("counter", LongType())])
    reader = OptionReader({"url": url, "target": "list", "keyPrefix": f"{namespace}:",
                           "commitKeyPrefix": f"commit:{namespace}:", **options}, name="redis-sink")
    sink = RedisSinkDataSource({}).build(reader, schema)
    sink.check()
    return sink


@pytest.mark.parametrize("where", ["redis_tls", "redis_cluster_tls"])
def test_an_acl_user_over_tls_writes_exactly_once(spark, request, credentials, tmp_path, where):
    server = request.getfixturevalue(where)
    cluster = where == "redis_cluster_tls"
    namespace = _namespace()
    reader = RedisAdapter(server.url, target="list", cluster=cluster)  # the default user: reads everything
    user_url = server.user_url(credentials.user, credentials.password)
    run_query(spark, reader, namespace, tmp_path / "ck", limit=LIMIT, per_trigger=LIMIT // 4,
              options={"url": user_url})
    assert sorted(reader.read_back(namespace)) == expected_events(LIMIT)
    # the same batches again from the checkpoint with more input: the old ones are not written twice
    run_query(spark, reader, namespace, tmp_path / "ck", limit=2 * LIMIT, per_trigger=LIMIT // 2,
              options={"url": user_url})
    assert sorted(reader.read_back(namespace)) == expected_events(2 * LIMIT)


@pytest.mark.parametrize("where", ["redis_tls", "redis_cluster_tls"])
def test_an_untrusted_server_certificate_names_the_ca_setting(request, credentials, stranger_ca, where):
    server = request.getfixturevalue(where)
    url = _with_ca(server.user_url(credentials.user, credentials.password), stranger_ca.ca)
    with pytest.raises(OptionError) as err:
        _sink(url, _namespace())
    message = str(err.value)
    assert err.value.option == "url" and "ssl_ca_certs" in message and "CERTIFICATE_VERIFY_FAILED" in message, message
    assert "verify" not in message.split("CERTIFICATE_VERIFY_FAILED")[-1].split(")")[-1], message  # no "turn it off"
    assert credentials.password not in message and "is the server running" not in message, message


def test_a_wrong_password_blames_the_credentials(redis_tls, credentials):
    wrong = "pw-" + secrets.token_hex(6)
    with pytest.raises(SinkError) as err:
        _sink(redis_tls.user_url(credentials.user, wrong), _namespace())
    message = str(err.value)
    assert "authentication failed" in message and "user name and password" in message, message
    assert wrong not in message and credentials.password not in message, message


def test_a_key_outside_the_acl_is_refused_naming_the_options(redis_tls, credentials):
    namespace = "open" + secrets.token_hex(4)  # not under the user's ~sec* pattern
    sink = _sink(redis_tls.user_url(credentials.user, credentials.password), namespace)
    identity = WriteIdentity("q", 0, 0, 0)
    conn = sink.open(identity)
    try:
        with pytest.raises(SinkError) as err:
            sink.is_committed(conn, identity)  # the first command of a partition: read its commit record
    finally:
        sink.close(conn)
    message = str(err.value)
    assert "NOPERM" in message and "'keyPrefix'" in message and "'commitKeyPrefix'" in message, message
    assert credentials.password not in message, message


def test_a_cluster_node_written_as_a_single_node_names_moved_and_the_option(redis_cluster):
    """``cluster=false`` against a node of a (plain) Redis Cluster: the key's slot is elsewhere, and the error keeps
    the word MOVED and says which option to set."""
    namespace = _namespace()
    sink = _sink(redis_cluster.url, namespace, cluster="false")
    # a key whose slot the startup node does not serve: the commit record of some partition
    startup = redis_cluster.url.split("//")[1]
    partition = next(p for p in range(64)
                     if redis_cluster.node_for_key(f"commit:{namespace}:q:{p}").address != startup)
    conn = sink.open(WriteIdentity("q", 0, partition, 0))
    try:
        with pytest.raises(SinkError) as err:
            sink.is_committed(conn, WriteIdentity("q", 0, partition, 0))
    finally:
        sink.close(conn)
    message = str(err.value)
    assert "MOVED" in message and "cluster mode" in message and "'cluster'" in message and "'auto'" in message, message
