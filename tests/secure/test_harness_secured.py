"""``impulse-load`` against the secured servers: ``--via`` a SASL_SSL broker into redis-sink over TLS with an ACL
user, and kafka-sink over SASL_SSL, each with ``--check`` (its readers take the sink's own security options); no
password in what the run prints, its reports (JSON, HTML, CSV, JUnit XML), its Prometheus endpoint or its
checkpoints; wrong credentials and an untrusted CA exit 2 before any load, naming the option, nothing written."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest

from connectors.servers.base import free_port
from tests.loadtest.helpers import run_cli

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.redis, pytest.mark.secured]

ROOT = Path(__file__).resolve().parents[2]
RUN = ["--rate", "100", "--duration", "2s", "--partitions", "2", "--no-warmup", "--drain-timeout", "300s"]  # a loaded
# machine may take half a minute for a first batch


def _via_flags(broker, user: str, password: str, topic: str) -> list[str]:
    """``--via`` the broker's SASL_SSL listener as `user`, with its settings as ``--via-option kafka.*``."""
    config = broker.sasl_ssl_config(user, password)
    bootstrap = config.pop("bootstrap.servers")
    return [f"--via=kafka://{bootstrap}/{topic}",
            *[f"--via-option=kafka.{key}={value}" for key, value in config.items()]]


def _kafka_options(broker, user: str, password: str, topic: str) -> list[str]:
    return [f"-okafka.{key}={value}" for key, value in broker.sasl_ssl_config(user, password).items()] + \
        [f"-otopic={topic}"]


def _redis_options(url: str, namespace: str) -> list[str]:
    return [f"-ourl={url}", "-otarget=list", f"-okeyPrefix={namespace}:", f"-ocommitKeyPrefix=commit:{namespace}:"]


def _texts(folder: Path) -> dict[str, str]:
    return {str(p): p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file()}


def _leaks(password: str, texts: dict[str, str]) -> list[str]:
    return [where for where, text in texts.items() if password in text]


def _scrape(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return answer.read().decode()
    except OSError:
        return None


@pytest.mark.slow
def test_through_a_sasl_ssl_broker_into_redis_over_tls_checks_and_leaves_no_password(kafka_secured, redis_tls,
                                                                                      credentials, tmp_path):
    """One run in a process of its own (Spark's Kafka source needs a session started with it): the input topic on
    the SASL_SSL listener, the pipeline's sink redis-sink over TLS as the ACL user, ``--check`` reading Redis back.
    While it runs, its Prometheus endpoint and its temporary folder (the queries' checkpoints) are read."""
    namespace, out, tmp = "sec" + secrets.token_hex(5), tmp_path / "report", tmp_path / "tmp"
    tmp.mkdir()
    port = free_port()
    argv = [sys.executable, "-m", "impulse.loadtest", "--sink", "redis-sink", *RUN, "--decode", "--create-topic", "2",
            *_via_flags(kafka_secured, credentials.user, credentials.password, f"in-{namespace}"),
            *_redis_options(redis_tls.user_url(credentials.user, credentials.password), namespace),
            "--check", "--output", str(out), "--junit", str(out / "junit.xml"), "--metrics-port", str(port)]
    env = {**os.environ, "TMPDIR": str(tmp),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    run = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    metrics, left = [], {}
    deadline = time.monotonic() + 600
    while run.poll() is None and time.monotonic() < deadline:  # what lives only while the run does
        scraped = _scrape(f"http://127.0.0.1:{port}/metrics")
        if scraped is not None:
            metrics.append(scraped)
        left.update(_texts(tmp))
        time.sleep(0.5)
    printed = run.communicate(timeout=60)[0]
    assert run.returncode == 0, printed[-5000:]
    report = json.loads((out / "report.json").read_text())
    assert report["check"]["passed"] is True, report["check"]
    assert report["config"]["via_options"]["kafka.sasl.password"] == "<hidden>"
    assert metrics, "the metrics endpoint never answered"
    assert any("/offsets/" in where for where in left) and any("/commits/" in where for where in left), sorted(left)
    written = list(redis_tls.client(username=credentials.user, password=credentials.password)
                   .scan_iter(match=f"{namespace}:*"))
    assert written, "nothing in Redis"
    reports = _texts(out)
    assert {"report.json", "report.html", "summary.csv", "batches.csv", "junit.xml"} <= {Path(p).name for p in reports}
    everything = {"output": printed, **reports, **left, **{f"metrics {i}": m for i, m in enumerate(metrics)}}
    assert not _leaks(credentials.password, everything), _leaks(credentials.password, everything)


def test_kafka_sink_over_sasl_ssl_checks_its_topic_and_leaves_no_password(spark, kafka_secured, credentials,
                                                                          tmp_path, capsys):
    """In this process: its Prometheus endpoint is scraped from a thread while the run goes on."""
    topic, port, metrics, done = "sec-out-" + secrets.token_hex(4), free_port(), [], threading.Event()

    def scrape() -> None:
        while not done.is_set():
            scraped = _scrape(f"http://127.0.0.1:{port}/metrics")
            if scraped is not None:
                metrics.append(scraped)
            done.wait(0.2)

    scraper = threading.Thread(target=scrape, daemon=True)
    scraper.start()
    try:
        code, printed, report = run_cli(capsys, tmp_path, "--sink", "kafka-sink", *RUN, "--create-topic", "2",
                                        *_kafka_options(kafka_secured, credentials.user, credentials.password, topic),
                                        "--check", "--junit", str(tmp_path / "junit.xml"), "--metrics-port", str(port))
    finally:
        done.set()
        scraper.join(10)
    assert code == 0, printed[-3000:]
    assert report["check"]["passed"] is True and report["summary"]["events"] == 200, report["check"]
    assert any('impulse_load_events_delivered_total{run_id=' in m or 'sink="kafka-sink"' in m for m in metrics), \
        metrics[-1:] or "the metrics endpoint never answered"
    texts = {"output": printed, **_texts(tmp_path), **{f"metrics {i}": m for i, m in enumerate(metrics)}}
    assert not _leaks(credentials.password, texts), _leaks(credentials.password, texts)


def _topics(broker) -> set[str]:
    return set(broker.admin().list_topics(timeout=10).topics)


@pytest.mark.parametrize("case", ["via-password", "via-ca", "kafka-sink-password"])
def test_refused_kafka_credentials_exit_2_naming_the_option_before_anything_is_written(
        kafka_secured, credentials, stranger_ca, tmp_path, capsys, case):
    topic = "sec-" + secrets.token_hex(4)
    password = credentials.password if case == "via-ca" else "pw-" + secrets.token_hex(8)
    if case.startswith("via"):
        flags = _via_flags(kafka_secured, credentials.user, password, topic)
        if case == "via-ca":
            flags = [f"--via-option=kafka.ssl.ca.location={stranger_ca.ca}" if "ssl.ca.location" in f else f
                     for f in flags]
        argv = ["--sink", "kafka-sink", *flags, *_kafka_options(kafka_secured, credentials.user, password, topic + "o")]
    else:
        argv = ["--sink", "kafka-sink", *_kafka_options(kafka_secured, credentials.user, password, topic)]
    code, printed, report = run_cli(capsys, tmp_path, *argv, *RUN, "--create-topic", "2", "--check")
    assert code == 2 and report is None, printed[-3000:]
    named = {"via-password": "--via-option kafka.sasl.password: the password of user 'impulse-writer'",
             "via-ca": "--via-option kafka.ssl.ca.location: the CA (a PEM file)",
             "kafka-sink-password": "option 'kafka.sasl.password': expected the password of user 'impulse-writer'"}
    assert named[case] in printed and "verif" not in printed.split("(")[0], printed
    assert password not in printed
    assert topic not in _topics(kafka_secured) and topic + "o" not in _topics(kafka_secured)


@pytest.mark.parametrize("case", ["password", "ca"])
def test_refused_redis_credentials_exit_2_naming_the_option_before_anything_is_written(
        redis_tls, credentials, stranger_ca, tmp_path, capsys, case):
    namespace = "sec" + secrets.token_hex(5)
    password = "pw-" + secrets.token_hex(8) if case == "password" else credentials.password
    url = redis_tls.user_url(credentials.user, password)
    if case == "ca":
        url = f"{url.split('?')[0]}?ssl_ca_certs={quote(str(stranger_ca.ca))}"
    code, printed, report = run_cli(capsys, tmp_path, "--sink", "redis-sink", *_redis_options(url, namespace), *RUN,
                                    "--check")
    assert code == 2 and report is None, printed[-3000:]
    words = {"password": "authentication failed", "ca": "ssl_ca_certs"}
    assert words[case] in printed and "'url'" in printed, printed
    assert password not in printed
    admin = redis_tls.client(username=credentials.user, password=credentials.password)
    assert not list(admin.scan_iter(match=f"*{namespace}*"))


def test_a_check_reader_refused_its_consumer_groups_exits_2_naming_the_principal(kafka_secured, throwaway_ca,
                                                                                   tmp_path, capsys):
    """kafka-sink over mutual TLS as a principal the broker refuses the groups ``impulse-read-*`` that ``--check``'s
    reader takes: exit 2 before any load (the sink's own check passes), the certificate and the grant named."""
    name = "reader-" + secrets.token_hex(4)
    kafka_secured.deny_prefixed("GROUP", "impulse-read-", f"CN={name}", "DESCRIBE")
    topic = kafka_secured.create_topic("sec-" + secrets.token_hex(4))
    cert = throwaway_ca.issue(name, client=True)
    options = [f"-okafka.{key}={value}" for key, value in kafka_secured.mtls_config(cert).items()]
    code, printed, report = run_cli(capsys, tmp_path, "--sink", "kafka-sink", *options, f"-otopic={topic}", *RUN,
                                    "--check")
    assert code == 2 and report is None, printed[-3000:]
    assert "--check cannot read kafka-sink's target back" in printed and str(cert.cert) in printed, printed
    assert "--operation Describe --group impulse-" in printed, printed
    assert kafka_secured.end_offsets(topic) == {0: 0}, "something was written"
