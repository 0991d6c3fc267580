"""The webhook sink against a real HTTP server (`connectors.servers.receiver.Receiver`, which dedupes by Idempotency-Key).

Every Spark test writes impulse events (``(subtask_index, counter)`` is each one's unique key) under its own
URL path and checks the EXACT list of events in the accepted (deduplicated) requests: a lost event and a
duplicate both fail. The first tests call the sink's hooks directly, without Spark.
"""

from __future__ import annotations

import base64
import http.server
import json
import os
import pickle
import re
import ssl
import subprocess
import threading
import time
import uuid
from collections import Counter
from email.utils import formatdate
from pathlib import Path

import pyarrow as pa
import pytest

from connectors.conformance.harness import expected_events
from connectors.errors import (CommitError, DeliveryError, OptionError, PartitioningChangedError, SinkError,
                               TransientError)
from connectors.options import OptionReader
from connectors.protocol import CommitMessage, ProtocolOptions, WriteIdentity
from connectors.redact import redact_url
from connectors.servers import free_port, wait_until
from connectors.servers.receiver import Receiver
from sinks.webhook.bodies import Bodies
from sinks.webhook.client import Pacer, read_by, retry_after, translate
from sinks.webhook.options import WebhookOptions
from sinks.webhook.sink import WebhookSink

pytestmark = [pytest.mark.integration, pytest.mark.webhook]

# Read by the executors' Python workers, which inherit the environment the JVM had when the Spark session
# started: set it at import (collection), before any fixture starts Spark.
SECRET = "s3cret-" + uuid.uuid4().hex[:6]
os.environ["IMPULSE_WEBHOOK_TEST_TOKEN"] = SECRET
KEY = re.compile(r"^(?P<query>[0-9a-f-]{36}):(?P<batch>\d+):(?P<partition>\d+):(?P<seq>\d+)$")


# --------------------------------------------------------------------------------------------- helpers


def events_of(request, fmt: str = "json") -> list[tuple[int, int]]:
    """``(subtask_index, counter)`` of the rows in one request body."""
    if fmt == "ndjson":
        rows = [json.loads(line) for line in request.body.decode().splitlines()]
    else:
        body = request.json()
        rows = body if isinstance(body, list) else [body]
    return [(r["subtask_index"], r["counter"]) for r in rows]


def accepted(receiver: Receiver, path: str) -> list:
    return [r for r in receiver.accepted_requests if r.path == path]


def landed(receiver: Receiver, path: str, fmt: str = "json") -> list[tuple[int, int]]:
    return sorted(e for r in accepted(receiver, path) for e in events_of(r, fmt))


def namespace(name: str) -> str:
    return f"/{name}-{uuid.uuid4().hex[:8]}"


def impulse(spark, limit: int, *, per_trigger: int | None = None, **extra):
    reader = (spark.readStream.format("impulse").option("eventsPerSecond", 1_000_000).option("startTime", "0")
              .option("limit", limit).option("numPartitions", 2))
    if per_trigger:
        reader = reader.option("maxEventsPerTrigger", per_trigger)
    return reader.options(**{k: str(v) for k, v in extra.items()}).load()


def run(spark, checkpoint: Path, url: str, limit: int, *, per_trigger: int | None = None,
        wait: float = 180, **options):
    """impulse → webhook-sink with Trigger.AvailableNow until the end; raises what the query raised."""
    query = (impulse(spark, limit, per_trigger=per_trigger).writeStream.format("webhook-sink")
             .option("url", url).options(**{k: str(v) for k, v in options.items()})
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(wait), f"the query did not end within {wait}s"
    finally:
        query.stop()
    return query


def uncommit_last_batch(checkpoint: Path) -> int:
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)
    return last


def options(**given) -> WebhookOptions:
    reader = OptionReader({k: str(v) for k, v in given.items()}, name="webhook sink")
    opts = WebhookOptions.read(reader)
    reader.finish()
    return opts


def write_directly(sink: WebhookSink, identity: WriteIdentity, batches) -> None:
    conn = sink.open(identity)
    try:
        sink.write(conn, identity, iter(batches))
    finally:
        sink.close(conn)


def rows(first: int, count: int, subtask: int = 0) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"counter": pa.array(range(first, first + count), pa.int64()),
                            "subtask_index": pa.array([subtask] * count, pa.int64()),
                            "note": pa.array([f'row "{i}"\n' for i in range(first, first + count)])})


# --------------------------------------------------------------------------------- options and hooks


def test_options_defaults_and_validation():
    opts = options(url="https://example.com/x")
    assert (opts.method, opts.batch_size, opts.format, opts.max_in_flight, opts.timeout_s, opts.max_retries,
            opts.verify, opts.idempotency_header) == ("POST", 100, "json", 4, 10.0, 5, True, "Idempotency-Key")
    assert [opts.retryable(s) for s in (500, 503, 599, 429, 408, 400, 404, 301)] == [True] * 5 + [False] * 3
    assert options(url="http://h/", retryOn="50x, 429").retry_on == ("50x", "429")
    assert options(url="http://h/", verify="/etc/ssl/ca.pem").verify == "/etc/ssl/ca.pem"
    with pytest.raises(OptionError, match="'url'"):
        options()
    for bad, option in [({"url": "ftp://h/x"}, "url"), ({"method": "GET"}, "method"),
                        ({"retryOn": "5xx,abc"}, "retryOn"), ({"batchSize": "0"}, "batchSize"),
                        ({"maxInFlight": "0"}, "maxInFlight"), ({"format": "xml"}, "format"),
                        ({"timeout": "10"}, "timeout"), ({"header.bad name": "x"}, "header.bad name"),
                        ({"commitUrl": "localhost:80"}, "commitUrl"), ({"colour": "red"}, "colour"),
                        ({"maxRequestsPerSecond": "0"}, "maxRequestsPerSecond"),
                        ({"maxRequestsPerSecond": "-2"}, "maxRequestsPerSecond"),
                        ({"maxRequestsPerSecond": "fast"}, "maxRequestsPerSecond"),
                        ({"maxRequestsPerSecond": "inf"}, "maxRequestsPerSecond")]:
        with pytest.raises(OptionError) as info:
            options(**{"url": "http://h/x", **bad})
        assert info.value.option.lower() == option.lower(), info.value


def test_secrets_stay_out_of_the_plan_and_of_messages():
    opts = options(url="https://user:pw@example.com:8443/hook?token=abc",
                   **{"header.X-Api-Key": "Bearer ${ENV:IMPULSE_WEBHOOK_TEST_TOKEN}"})
    assert SECRET.encode() not in pickle.dumps(WebhookSink(opts))
    assert opts.resolved_headers("here")["X-Api-Key"] == f"Bearer {SECRET}"
    assert redact_url(opts.url) == "https://example.com:8443/hook"
    with pytest.raises(SinkError, match="IMPULSE_WEBHOOK_TEST_UNSET.*spark.executorEnv"):
        options(url="http://h/", **{"header.X-Key": "${ENV:IMPULSE_WEBHOOK_TEST_UNSET}"}).resolved_headers("here")


def test_retry_after_seconds_and_http_date():
    assert retry_after("3") == 3.0 and retry_after(None) is None and retry_after("soon") is None
    assert 8 <= retry_after(formatdate(time.time() + 10, usegmt=True)) <= 10


@pytest.mark.parametrize("fmt,size", [("json", 4), ("ndjson", 3), ("json", 1)])
def test_request_boundaries_do_not_depend_on_record_batches(fmt, size):
    whole = [r.body() for r in Bodies(options(url="http://h/", batchSize=size, format=fmt)).add(rows(0, 25))]
    bodies = Bodies(options(url="http://h/", batchSize=size, format=fmt))
    split = [r.body() for part in (rows(0, 7), rows(7, 3), rows(10, 1), rows(11, 14)) for r in bodies.add(part)]
    split += [r.body() for r in bodies.rest()]
    whole += [r.body() for r in Bodies(options(url="http://h/", batchSize=size, format=fmt)).rest()]
    assert whole[:len(split)] == split[:len(whole)] and len(whole) <= len(split)
    assert len(split) == -(-25 // size)
    # the last (short) request is only cut at the end of the partition
    decoded = [[json.loads(line) for line in b.decode().splitlines()] if fmt == "ndjson" else json.loads(b)
               for b in split]
    if size == 1:
        assert all(isinstance(d, dict) for d in decoded)
        decoded = [[d] for d in decoded]
    assert [[r["counter"] for r in d] for d in decoded] == [list(range(k, min(k + size, 25))) for k in range(0, 25, size)]
    assert decoded[0][0]["note"] == 'row "0"\n'


def test_write_hook_keys_and_bodies_are_stable_across_splits(http_receiver):
    http_receiver.reset()
    path = namespace("hooks")
    sink = WebhookSink(options(url=http_receiver.url + path, batchSize=10, maxInFlight=3))
    identity = WriteIdentity("11111111-2222-3333-4444-555555555555", 7, 1, 0)
    write_directly(sink, identity, [rows(0, 95)])
    first = {r.idempotency_key: r.body for r in http_receiver.requests if r.path == path}
    write_directly(sink, WriteIdentity(identity.commit_id, 7, 1, 1), [rows(0, 13), rows(13, 50), rows(63, 32)])
    again = [r for r in http_receiver.requests if r.path == path][len(first):]
    assert sorted(first) == sorted(r.idempotency_key for r in again) == \
        sorted(f"{identity.commit_id}:7:1:{k}" for k in range(10))
    assert all(r.duplicate and r.body == first[r.idempotency_key] for r in again)
    assert sorted(c for r in accepted(http_receiver, path) for _, c in events_of(r)) == list(range(95))


def test_a_422_is_a_reused_key_only_when_its_problem_document_says_so(http_receiver):
    """The Idempotency-Key draft answers a key reused with another body with 422 and a problem document naming
    the key; many APIs answer 422 to rows they cannot accept. Only the first means the partition's rows changed."""
    http_receiver.reset()
    path = namespace("unprocessable")
    sink = WebhookSink(options(url=http_receiver.url + path, batchSize=10))
    identity = WriteIdentity("q", 0, 0, 0)
    write_directly(sink, identity, [rows(0, 10)])
    with pytest.raises(PartitioningChangedError, match="rows of this partition changed"):
        write_directly(sink, identity, [rows(0, 10, subtask=1)])  # the same key, another body
    http_receiver.respond_with(422, body=b'{"error": "field amount must be positive"}')
    try:
        with pytest.raises(DeliveryError) as refused:
            write_directly(sink, WriteIdentity("q", 1, 0, 0), [rows(10, 10)])
    finally:
        http_receiver.reset_behaviour()
    assert not isinstance(refused.value, PartitioningChangedError)
    assert "422" in str(refused.value) and "field amount must be positive" in str(refused.value)
    assert "not retried" in str(refused.value)


def _poison(row) -> bool:
    return row["counter"] % 7 == 3


def test_refused_rows_fail_the_partition_naming_them(http_receiver):
    http_receiver.reset()
    path = namespace("poison")
    http_receiver.refuse_rows(_poison, path)
    sink = WebhookSink(options(url=http_receiver.url + path, batchSize=10))
    try:
        with pytest.raises(DeliveryError, match=r"answered 422.*the request held rows 0-9 of batch 4 partition 1 "
                                                r"attempt 0 of q.*set 'deadLetterUrl'"):
            write_directly(sink, WriteIdentity("q", 4, 1, 0), [rows(0, 10)])
    finally:
        http_receiver.reset_behaviour()


def test_dead_letter_url_takes_exactly_the_refused_rows_once(http_receiver):
    """A refused request is halved until the refused rows are alone: those go to deadLetterUrl with the status and
    the receiver's answer, the others are delivered; a replay (same keys) adds nothing anywhere."""
    http_receiver.reset()
    path = namespace("poison")
    http_receiver.refuse_rows(_poison, path + "/events")
    sink = WebhookSink(options(url=http_receiver.url + path + "/events", batchSize=10, maxInFlight=3,
                               deadLetterUrl=http_receiver.url + path + "/dead"))
    identity = WriteIdentity("q", 4, 1, 0)
    poisoned = [c for c in range(95) if _poison({"counter": c})]
    try:
        for attempt in range(2):  # the run, then a replay of the batch
            conn = sink.open(identity)
            try:
                assert sink.write(conn, identity, iter([rows(0, 40), rows(40, 55)])) == len(poisoned)
            finally:
                sink.close(conn)
            events = sorted(c for r in accepted(http_receiver, path + "/events") for _, c in events_of(r))
            assert events == [c for c in range(95) if c not in poisoned]
            letters = [r.json() for r in accepted(http_receiver, path + "/dead")]
            assert sorted(letter["row"]["counter"] for letter in letters) == poisoned
    finally:
        http_receiver.reset_behaviour()
    letter = next(x for x in letters if x["row"]["counter"] == 3)
    assert letter["row"] == {"counter": 3, "subtask_index": 0, "note": 'row "3"\n'}
    assert (letter["status"], letter["rowIndex"], letter["batchId"], letter["partition"]) == (422, 3, 4, 1)
    assert "rows refused" in letter["response"] and letter["idempotencyKey"].startswith("q:4:1:0/")
    dead_keys = [r.idempotency_key for r in http_receiver.requests if r.path == path + "/dead"]
    assert sorted(set(dead_keys)) == sorted(f"q:4:1:dead:{c}" for c in poisoned) and len(dead_keys) == 2 * len(poisoned)


def test_statuses_about_the_endpoint_are_never_dead_lettered(http_receiver):
    http_receiver.reset()
    path = namespace("forbidden")
    http_receiver.respond_with(403, body=b"no")
    sink = WebhookSink(options(url=http_receiver.url + path, batchSize=10, deadLetterUrl=http_receiver.url + "/dead"))
    try:
        with pytest.raises(DeliveryError, match="answered 403"):
            write_directly(sink, WriteIdentity("q", 0, 0, 0), [rows(0, 10)])
    finally:
        http_receiver.reset_behaviour()
    assert not [r for r in http_receiver.requests if r.path == "/dead"]


def _whsec() -> str:
    return "whsec_" + base64.b64encode(os.urandom(24)).decode()


def test_requests_are_signed_as_standard_webhooks_with_every_secret(http_receiver):
    """Verified with the specification's reference implementation; a retry keeps webhook-id and signs again."""
    from standardwebhooks import Webhook

    http_receiver.reset()
    path = namespace("signed")
    old, new = _whsec(), _whsec()
    for secret in (old, new):  # two receivers' views: each secret alone verifies (rotation)
        sink = WebhookSink(options(url=http_receiver.url + path, batchSize=10, signingSecret=f"{old} {new}",
                                   maxRetries=2, retryBackoff="10ms"))
        http_receiver.verify_requests(lambda headers, body, s=secret: Webhook(s).verify(body, dict(headers.items())),
                                      path)
        http_receiver.fail_next(1, 503)
        try:
            write_directly(sink, WriteIdentity("q", 0, 0, 0), [rows(0, 20)])
        finally:
            http_receiver.reset_behaviour()
    sent = [r for r in http_receiver.requests if r.path == path]
    assert sorted(r.status for r in sent[:3]) == [200, 200, 503]
    retried = [r for r in sent if r.status == 503][0]
    again = [r for r in sent if r.headers["webhook-id"] == retried.headers["webhook-id"] and r.status == 200][0]
    assert again.headers["webhook-id"] == again.idempotency_key  # the request's key, kept by the retry
    assert len(again.headers["webhook-signature"].split(" ")) == 2
    assert sorted(c for r in accepted(http_receiver, path) for _, c in events_of(r)) == list(range(20))

    http_receiver.verify_requests(lambda headers, body: Webhook(_whsec()).verify(body, dict(headers.items())), path)
    try:
        with pytest.raises(DeliveryError, match="answered 401.*No matching signature"):
            write_directly(sink, WriteIdentity("q", 1, 0, 0), [rows(0, 10)])
    finally:
        http_receiver.reset_behaviour()


@pytest.mark.parametrize("secret", ["s3cret", "whsec_", "whsec_!!!! not base64"])
def test_a_bad_signing_secret_fails_at_start_without_showing_it(secret):
    with pytest.raises(OptionError) as bad:
        options(url="http://h/", signingSecret=secret)
    assert "signingSecret" in str(bad.value) and "whsec_<base64>" in str(bad.value)
    assert secret not in str(bad.value) or secret == "whsec_"


def test_url_user_info_is_basic_auth_and_cookies_are_not_kept(http_receiver):
    http_receiver.reset()
    path = namespace("auth")
    http_receiver.respond_with(200, headers={"Set-Cookie": "session=abc; Path=/"})
    url = f"http://hook:pa55@127.0.0.1:{http_receiver.port}{path}"
    write_directly(WebhookSink(options(url=url, batchSize=2, maxInFlight=1)), WriteIdentity("q", 0, 0, 0), [rows(0, 6)])
    requests = [r for r in http_receiver.requests if r.path == path]
    assert len(requests) == 3 and all(r.headers["Authorization"] == "Basic aG9vazpwYTU1" for r in requests)
    assert not any(r.headers.get("Cookie") for r in requests)


def test_commit_and_abort_notifications(http_receiver):
    http_receiver.reset()
    path = namespace("notices")
    sink = WebhookSink(options(url=http_receiver.url + path, commitUrl=http_receiver.url + path + "/commit",
                               abortUrl=http_receiver.url + path + "/abort"))
    done = [CommitMessage("q", 3, p, 0, rows=10) for p in range(2)]
    sink.commit_batch("q", 3, done)
    sink.commit_batch("q", 3, done)  # Spark may call commit twice
    sink.abort_batch("q", 4, [done[0], None])
    notices = [r for r in http_receiver.requests if r.path.startswith(path)]
    assert [(r.path, r.idempotency_key, r.duplicate) for r in notices] == [
        (path + "/commit", "q:3:commit", False), (path + "/commit", "q:3:commit", True), (path + "/abort", "q:4:abort", False)]
    assert notices[0].json() == {"commitId": "q", "batchId": 3, "rows": 20, "partitions": 2}
    assert notices[2].json() == {"commitId": "q", "batchId": 4, "rows": 10, "partitions": 2, "failedPartitions": [1]}
    http_receiver.respond_with(422, body=b"unknown batch")
    with pytest.raises(CommitError, match="422.*unknown batch"):
        sink.commit_batch("q", 5, done)
    http_receiver.reset_behaviour()


def test_check_names_the_url_when_nothing_listens():
    sink = WebhookSink(options(url=f"http://user:pw@127.0.0.1:{free_port()}/hook?token=abc"))
    with pytest.raises(SinkError, match=r"cannot reach http://127\.0\.0\.1:\d+/hook \(option 'url'\)") as info:
        sink.check()
    assert "pw" not in str(info.value) and "abc" not in str(info.value)


def test_connection_errors_are_retried_then_transient():
    sink = WebhookSink(options(url=f"http://127.0.0.1:{free_port()}/x", maxRetries=2, retryBackoff="1ms"))
    with pytest.raises(TransientError, match="gave up: 3 requests with this key"):
        write_directly(sink, WriteIdentity("q", 0, 0, 0), [rows(0, 5)])


def test_giving_up_reports_the_requests_really_sent_with_the_key(http_receiver):
    """maxRetries + 1 requests per write, and the protocol rewrites the partition writeRetries times: the last
    error counts every request of the key in the task attempt (36 with the defaults), as the receiver saw them."""
    http_receiver.reset()
    path = namespace("giveup")
    http_receiver.respond_with(503)
    sink = WebhookSink(options(url=http_receiver.url + path, retryBackoff="1ms", maxInFlight=1))
    protocol = ProtocolOptions.read(OptionReader({"retryBackoff": "1ms"}, name="webhook sink"))
    identity = WriteIdentity("q", 0, 0, 0)
    try:
        with pytest.raises(TransientError) as failed:
            protocol.retry.call(lambda: write_directly(sink, identity, [rows(0, 1)]))
    finally:
        http_receiver.reset_behaviour()
    sent = Counter(r.idempotency_key for r in http_receiver.requests if r.path == path)
    expected = (sink.options.max_retries + 1) * protocol.retry.attempts
    assert sent == {"q:0:0:0": expected}
    assert f"gave up: {expected} requests with this key" in str(failed.value)


def test_user_info_and_an_authorization_header_are_refused_together():
    """Two credentials for one header: refused at start, naming the URL option (whose secret is not shown)."""
    for option in ("url", "commitUrl", "deadLetterUrl"):
        urls = {"url": "http://h/x", option: "http://hook:pa55@h/y"}
        with pytest.raises(OptionError) as both:
            options(**urls, **{"header.Authorization": "Bearer t0k"})
        assert both.value.option == option and "header.Authorization" in str(both.value)
        assert "pa55" not in str(both.value)
        options(**urls, **{"header.X-Api-Key": "t0k"})  # user info alone, or with other headers: fine


def test_timeout_bounds_a_response_whose_body_drips(http_receiver):
    """20 bytes at one per second with timeout=2s: given up after about 2 s, not after the 20 s of the body
    (every socket read returns within a second, so a per-read timeout would never fire)."""
    http_receiver.reset()
    path = namespace("drip")
    http_receiver.drip_next(1, b'{"ok": true, "x": 1}', 1.0)
    sink = WebhookSink(options(url=http_receiver.url + path, timeout="2s", maxRetries=0, maxInFlight=1))
    started = time.monotonic()
    with pytest.raises(TransientError, match=r"timed out after 2s \(option 'timeout'\)"):
        write_directly(sink, WriteIdentity("q", 0, 0, 0), [rows(0, 1)])
    took = time.monotonic() - started
    assert 1.9 <= took < 3.5, took


def test_a_deadline_passed_between_two_reads_is_the_timeout_naming_the_option(http_receiver):
    """The drip above ends either in a socket read that times out or, when the time left runs out between two
    reads, in `read_by`'s own check: both are the timeout (this one was once reported as 'cannot connect')."""
    import requests

    response = requests.post(http_receiver.url + namespace("late"), data=b"[]", stream=True, timeout=10)
    with pytest.raises(requests.exceptions.ReadTimeout) as late:
        read_by(response, time.monotonic() - 1)
    assert "timed out after 2s (option 'timeout')" in str(translate(late.value, "POST /late", 2.0))


@pytest.mark.parametrize("rate, interval", [(4, 0.25), (2.5, 0.5), (0.5, 2.0)])
def test_the_pacer_spaces_starts_by_one_over_the_rate(rate, interval):
    """Starts taken by 4 threads at once are 1/rate apart (a fractional rate above 1 is rounded down): k + 1
    starts span k/rate seconds, so no one-second window holds more than the rate."""
    pacer, stopped, starts, lock = Pacer(rate), threading.Event(), [], threading.Lock()
    assert pacer.interval_s == interval

    def take(n):
        for _ in range(n):
            assert pacer.wait(stopped)
            with lock:
                starts.append(time.monotonic())
    threads = [threading.Thread(target=take, args=(2,)) for _ in range(4)] if interval < 1 else \
        [threading.Thread(target=take, args=(1,)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    starts.sort()
    # a start is recorded just after its wait returns: the gap can only shrink by that recording's delay
    assert min(b - a for a, b in zip(starts, starts[1:])) >= interval - 0.05


@pytest.fixture
def https_server(tmp_path):
    """A one-thread HTTPS server on 127.0.0.1 with a fresh self-signed certificate; yields (url, cert path)."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/hook", cert
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_tls_is_verified_by_default(https_server):
    url, cert = https_server
    identity = WriteIdentity("q", 0, 0, 0)
    with pytest.raises(SinkError, match="TLS failed.*'verify'") as info:
        write_directly(WebhookSink(options(url=url, retryBackoff="1ms")), identity, [rows(0, 5)])
    assert not isinstance(info.value, TransientError), "a certificate error must not be retried"
    write_directly(WebhookSink(options(url=url, verify=str(cert))), identity, [rows(0, 5)])  # the CA bundle option
    write_directly(WebhookSink(options(url=url, verify="false")), identity, [rows(0, 5)])


# ------------------------------------------------------------------------------------- Spark queries


@pytest.mark.floor
@pytest.mark.parametrize("fmt,size,method", [("json", 64, "POST"), ("ndjson", 100, "PUT"), ("json", 1, "PATCH")],
                         ids=["json-array", "ndjson", "single-object"])
def test_basic_write(spark, http_receiver, tmp_path, fmt, size, method):
    http_receiver.reset()
    path = namespace(f"basic-{fmt}-{size}")
    limit = 1_000 if size > 1 else 100
    query = run(spark, tmp_path / "ck", http_receiver.url + path, limit, batchSize=size, format=fmt, method=method,
                maxInFlight=8 if size == 1 else 2)
    assert landed(http_receiver, path, fmt) == expected_events(limit)
    requests = accepted(http_receiver, path)
    assert len(requests) == len(http_receiver.requests) == 2 * -(-(limit // 2) // size)  # no retry, no duplicate
    content_type = "application/x-ndjson" if fmt == "ndjson" else "application/json"
    for request in requests:
        match = KEY.match(request.idempotency_key)
        assert match and match["query"] == str(query.id) and request.method == method
        assert request.headers["Content-Type"] == content_type
        # request k of partition P holds the partition's rows [k × size, (k+1) × size)
        seq, partition = int(match["seq"]), int(match["partition"])
        assert events_of(request, fmt) == [(partition, c) for c in range(seq * size, min((seq + 1) * size, limit // 2))]
        body = request.json() if fmt != "ndjson" else None
        assert isinstance(body, dict) if size == 1 else fmt == "ndjson" or isinstance(body, list)


def test_requests_are_cut_at_fixed_rows_whatever_spark_record_batches(spark, http_receiver, tmp_path):
    http_receiver.reset()
    path = namespace("record-batches")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "37")
    try:
        run(spark, tmp_path / "ck", http_receiver.url + path, 1_000, batchSize=50)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    requests = accepted(http_receiver, path)
    assert sorted(len(events_of(r)) for r in requests) == [50] * 20
    assert landed(http_receiver, path) == expected_events(1_000)


def test_headers_with_environment_references(spark, http_receiver, tmp_path):
    http_receiver.reset()
    path = namespace("headers")
    run(spark, tmp_path / "ck", http_receiver.url + path, 200, idempotencyHeader="X-Request-Key",
        **{"header.Authorization": "Bearer ${ENV:IMPULSE_WEBHOOK_TEST_TOKEN}", "header.X-Source": "impulse"})
    requests = [r for r in http_receiver.requests if r.path == path]
    assert requests and all(r.headers["Authorization"] == f"Bearer {SECRET}" and r.headers["X-Source"] == "impulse"
                            and KEY.match(r.headers["X-Request-Key"]) and r.idempotency_key is None for r in requests)
    assert sorted(e for r in requests for e in events_of(r)) == expected_events(200)


def test_missing_environment_variable_fails_the_query_naming_it(spark, http_receiver, tmp_path):
    http_receiver.reset()
    path = namespace("missing-env")
    with pytest.raises(Exception, match="IMPULSE_WEBHOOK_TEST_UNSET"):
        run(spark, tmp_path / "ck", http_receiver.url + path, 200,
            **{"header.Authorization": "Bearer ${ENV:IMPULSE_WEBHOOK_TEST_UNSET}"})
    assert not [r for r in http_receiver.requests if r.path == path]


def test_503_for_a_while_is_retried_with_no_loss(spark, http_receiver, tmp_path):
    http_receiver.reset()
    path = namespace("unavailable")
    http_receiver.fail_next(8, status=503)
    run(spark, tmp_path / "ck", http_receiver.url + path, 1_000, batchSize=50, retryBackoff="10ms")
    statuses = Counter(r.status for r in http_receiver.requests)
    assert statuses[503] == 8 and statuses[200] == 20
    assert landed(http_receiver, path) == expected_events(1_000)


def test_429_retry_after_is_honoured(spark, http_receiver, tmp_path):
    http_receiver.reset()
    path = namespace("throttled")
    http_receiver.fail_next(1, status=429, headers={"Retry-After": "2"}, body=b'{"error": "slow down"}')
    run(spark, tmp_path / "ck", http_receiver.url + path, 200, maxInFlight=1, retryBackoff="1ms")
    requests = [r for r in http_receiver.requests if r.path == path]
    throttled = [r for r in requests if r.status == 429]
    assert len(throttled) == 1
    retry = next(r for r in requests if r.idempotency_key == throttled[0].idempotency_key and r.status == 200)
    assert retry.time - throttled[0].time >= 1.9, "the retry did not wait for Retry-After (backoff alone is ~1ms)"
    assert landed(http_receiver, path) == expected_events(200)


def test_400_fails_the_query_with_status_url_and_body(spark, http_receiver, tmp_path):
    http_receiver.reset()
    path = namespace("refused")
    http_receiver.respond_with(400, body=b'{"error": "field counter: expected string"}')
    url = f"http://user:hunter2@127.0.0.1:{http_receiver.port}{path}?token=t0ps3cret"
    with pytest.raises(Exception) as info:
        run(spark, tmp_path / "ck", url, 200, maxInFlight=1)
    http_receiver.reset_behaviour()
    message = str(info.value)
    assert "DeliveryError" in message and "400" in message and "field counter: expected string" in message
    assert f"http://127.0.0.1:{http_receiver.port}{path}" in message
    assert "hunter2" not in message and "t0ps3cret" not in message
    # not retried per request; only Spark's task retry (local[2,2]) may resend
    sent = [r for r in http_receiver.requests if r.path == f"{path}?token=t0ps3cret"]
    assert sent and max(Counter(r.idempotency_key for r in sent).values()) <= 2
    assert not [r for r in http_receiver.accepted_requests if r.path.startswith(path)]


def test_slow_response_times_out_and_is_retried(spark, http_receiver, tmp_path):
    http_receiver.reset()
    path = namespace("slow")
    http_receiver.delay_next(1, 4.0)  # the receiver accepts it on arrival but answers after 4 s
    run(spark, tmp_path / "ck", http_receiver.url + path, 200, maxInFlight=1, timeout="1s", retryBackoff="10ms")
    requests = [r for r in http_receiver.requests if r.path == path]
    duplicates = [r for r in requests if r.duplicate]
    assert len(duplicates) == 1, "the timed-out request was not resent with its key"
    assert landed(http_receiver, path) == expected_events(200)


def test_receiver_restarted_mid_stream(spark, tmp_path):
    limit = 12_000
    checkpoint = tmp_path / "ck"
    with Receiver(record=True) as receiver:
        path = namespace("restart")
        query = (spark.readStream.format("impulse").option("eventsPerSecond", 2_000).option("numPartitions", 2)
                 .option("limit", limit).load()
                 .writeStream.format("webhook-sink").option("url", receiver.url + path).option("batchSize", 50)
                 .option("maxRetries", 3).option("retryBackoff", "100ms").option("checkpointLocation", str(checkpoint))
                 .trigger(processingTime="500 milliseconds").start())
        try:
            wait_until(lambda: len(accepted(receiver, path)) >= 10, timeout=120)
            receiver.stop()
            time.sleep(2)
            receiver.start()
            wait_until(lambda: len(landed(receiver, path)) >= limit or not query.isActive, timeout=120)
        finally:
            query.stop()
        if len(landed(receiver, path)) < limit:  # the query failed while the receiver was down: restart it
            run(spark, checkpoint, receiver.url + path, limit, batchSize=50)
        assert landed(receiver, path) == expected_events(limit)
        assert any(r.status == 200 for r in receiver.requests)


def test_commit_url_sees_each_batch_once_in_order(spark, http_receiver, tmp_path):
    http_receiver.reset()
    path = namespace("commits")
    query = run(spark, tmp_path / "ck", http_receiver.url + path + "/events", 1_000, per_trigger=200,
                commitUrl=http_receiver.url + path + "/commit", abortUrl=http_receiver.url + path + "/abort")
    commits = accepted(http_receiver, path + "/commit")
    assert [c.json() for c in commits] == [
        {"commitId": str(query.id), "batchId": b, "rows": 200, "partitions": 2} for b in range(5)]
    assert [c.idempotency_key for c in commits] == [f"{query.id}:{b}:commit" for b in range(5)]
    assert not [r for r in http_receiver.requests if r.path == path + "/abort"]
    assert landed(http_receiver, path + "/events") == expected_events(1_000)


@pytest.mark.floor
def test_replay_of_the_last_batch_resends_identical_keys(spark, http_receiver, tmp_path):
    http_receiver.reset()
    path, checkpoint = namespace("replay"), tmp_path / "ck"
    events, commit = http_receiver.url + path, http_receiver.url + path + "/commit"
    query = run(spark, checkpoint, events, 1_000, per_trigger=400, batchSize=64, commitUrl=commit)
    first = {r.idempotency_key: r.body for r in accepted(http_receiver, path)}
    last = uncommit_last_batch(checkpoint)  # as if the driver died before Spark logged the commit
    http_receiver.reset_behaviour()
    again = run(spark, checkpoint, events, 1_000, per_trigger=400, batchSize=64, commitUrl=commit)
    assert again.id == query.id
    replayed = [r for r in http_receiver.requests if r.path == path and r.duplicate]
    expected_keys = {k for k in first if KEY.match(k)["batch"] == str(last)}
    assert expected_keys and {r.idempotency_key for r in replayed} == expected_keys
    assert all(r.body == first[r.idempotency_key] for r in replayed)
    assert landed(http_receiver, path) == expected_events(1_000)
    # commit was called twice for the last batch: the deduping receiver saw it once, in order
    notices = [r for r in http_receiver.requests if r.path == path + "/commit"]
    assert [r.json()["batchId"] for r in notices if r.accepted] == list(range(last + 1))
    assert [r.json()["batchId"] for r in notices if r.duplicate] == [last]


def test_max_requests_per_second_keeps_every_task_under_the_limit_without_a_429(spark, http_receiver, tmp_path):
    """maxRequestsPerSecond=2 per task, with every row there at once (batchSize 1: each task could start its 8
    requests within milliseconds, far above 10x the limit), and a receiver that answers 429 to a task's request
    when that task already had 2 let through in the last second.

    The guarantee is on the sender's start times (at least 1/limit apart); the receiver sees them shifted by a
    one-way delay that varies (threads, the loaded machine), so its window is shortened by a tolerance of half
    an interval. The test then measures that variation: a task always has requests waiting, so its k-th start is
    scheduled at first + k/limit, and `arrival_k - k/limit` varies only by the delay. It must stay within the
    tolerance (what made the shortened window fair), and every window of one second minus it holds <= limit."""
    limit, per_task = 2, 8
    tolerance = 0.5 / limit
    http_receiver.reset()
    path = namespace("paced")
    http_receiver.limit_rate(limit, group=lambda headers: headers["Idempotency-Key"].rsplit(":", 1)[0],
                             window_s=1.0 - tolerance)
    try:
        run(spark, tmp_path / "ck", http_receiver.url + path, 2 * per_task, batchSize=1, maxInFlight=4,
            maxRequestsPerSecond=limit)
    finally:
        http_receiver.reset_behaviour()
    requests = [r for r in http_receiver.requests if r.path == path]
    assert [r.status for r in requests if r.status != 200] == []
    assert landed(http_receiver, path) == expected_events(2 * per_task)
    by_task: dict[str, list[float]] = {}
    for r in requests:
        by_task.setdefault(r.idempotency_key.rsplit(":", 1)[0], []).append(r.time)
    assert len(by_task) == 2
    for task, times in by_task.items():
        times.sort()
        offsets = [t - k / limit for k, t in enumerate(times)]
        jitter = max(offsets) - min(offsets)
        assert jitter < tolerance, f"{task}: arrivals stray {jitter:.3f}s from an even 1/{limit}s spacing"
        spans = [times[k + limit] - times[k] for k in range(len(times) - limit)]
        assert min(spans) >= 1.0 - jitter - 1e-6, (task, spans)  # limit + 1 arrivals never within 1 s - jitter
