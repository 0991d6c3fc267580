"""``python -m connectors.servers serve KIND --secured``: the secured servers by hand. It prints the sink options
a client needs, and those options (only those) reach the server; Ctrl-C or SIGTERM removes the throwaway CA."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import redis
import requests
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

pytestmark = [pytest.mark.integration, pytest.mark.secured]

ROOT = Path(__file__).resolve().parents[2]


def _served(kind: str) -> tuple[subprocess.Popen, dict[str, str]]:
    """The server started, and the options of its first way in (``-o KEY=VALUE`` of the line under "ready at")."""
    serve = subprocess.Popen([sys.executable, "-m", "connectors.servers", "serve", kind, "--secured"], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ready = serve.stdout.readline()
    assert f"{kind} ready at" in ready, ready + serve.stdout.read()
    way_in = serve.stdout.readline()
    return serve, dict(re.findall(r"-o ([^=\s]+)=(\S+)", way_in))


def _stopped(serve: subprocess.Popen, ca_dir: Path) -> None:
    serve.send_signal(signal.SIGTERM)
    assert serve.wait(60) == 0
    assert not ca_dir.exists(), "the throwaway CA outlived the server"


@pytest.mark.redis
def test_serve_redis_secured_prints_a_url_that_reaches_it_and_tls_is_required():
    serve, options = _served("redis")
    try:
        url = options["url"]
        assert url.startswith("rediss://impulse:") and "ssl_ca_certs=" in url, url
        assert redis.Redis.from_url(url).acl_whoami() in ("impulse", b"impulse")
        plain = url.replace("rediss://", "redis://").split("?")[0]
        with pytest.raises(redis.exceptions.ConnectionError):
            redis.Redis.from_url(plain, socket_timeout=5).ping()
    finally:
        ca_dir = Path(url.split("ssl_ca_certs=")[1]).parent
        _stopped(serve, ca_dir)


@pytest.mark.webhook
def test_serve_http_secured_requires_the_client_certificate_it_prints():
    serve, options = _served("http")
    try:
        assert options["url"].startswith("https://"), options
        answer = requests.post(options["url"], data=b"[]", verify=options["verify"],
                               cert=(options["clientCert"], options["clientKey"]), timeout=10)
        assert answer.status_code < 500, answer.text
        with pytest.raises(requests.exceptions.RequestException):
            requests.post(options["url"], data=b"[]", verify=options["verify"], timeout=10)
    finally:
        _stopped(serve, Path(options["verify"]).parent)


@pytest.mark.schema_registry
def test_serve_schema_registry_secured_answers_the_credentials_it_prints_and_refuses_others():
    """Apicurio behind the HTTPS proxy: confluent-kafka's registry client (the sinks' own) with the printed options
    lists subjects; a wrong password is answered 401, plain HTTP is refused. Its cost: Apicurio's start (about 26 s
    on the CI machine; a JVM of its own beside the tests' shared registry)."""
    serve, options = _served("schema-registry")
    url, ca = options.get("schema.registry.url", ""), options.get("schema.registry.ssl.ca.location", "")
    try:
        assert url.startswith("https://") and url.endswith("/apis/ccompat/v7") and ca, options
        user_info = options["schema.registry.basic.auth.user.info"]
        assert user_info.startswith("impulse:"), options
        assert SchemaRegistryClient({"url": url, "basic.auth.user.info": user_info,
                                     "ssl.ca.location": ca}).get_subjects() == []
        with pytest.raises(SchemaRegistryError) as refused:
            SchemaRegistryClient({"url": url, "basic.auth.user.info": "impulse:wrong",
                                  "ssl.ca.location": ca}).get_subjects()
        assert refused.value.http_status_code == 401
        with pytest.raises(requests.exceptions.ConnectionError):
            requests.get(url.replace("https://", "http://") + "/subjects", timeout=10)
    finally:
        _stopped(serve, Path(ca).parent)
