"""The harness's parts that need no Spark: flag parsing, the embedded receiver, option redaction, the display."""

from __future__ import annotations

import ast
import io
import json
import socket
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest

import impulse.loadtest.settings.config as config
import impulse.loadtest.settings.thresholds as thresholds
import impulse.loadtest.settings.units as units
from connectors.redact import redact_options
from impulse.loadtest.load.display import Display
from impulse.loadtest.load.receiver import Receiver, count_rows, embedded_options, needs_receiver
from impulse.loadtest.settings.units import LoadError, parse_option, parse_ramp, parse_rate, parse_seconds


def test_rates_durations_and_ramps_parse_with_units():
    assert parse_rate("50000") == parse_rate("50_000") == parse_rate("50k") == parse_rate("5e4") == 50_000
    assert parse_rate("1.5M") == 1_500_000
    assert parse_seconds("30s", "--duration") == parse_seconds("30", "--duration") == 30
    assert parse_seconds("500ms", "--trigger") == 0.5 and parse_seconds("2m", "--duration") == 120
    assert parse_seconds("1 second", "--trigger") == 1
    assert parse_seconds("0", "--trigger", allow_zero=True) == 0
    assert parse_ramp("10k:10k:200k") == (10_000, 10_000, 200_000)
    assert parse_option("url=redis://h:1/0?a=b") == ("url", "redis://h:1/0?a=b")
    for bad in (lambda: parse_rate("fast"), lambda: parse_seconds("soon", "--duration"),
                lambda: parse_seconds("0", "--duration"), lambda: parse_ramp("1:2"), lambda: parse_option("url")):
        with pytest.raises(LoadError):
            bad()


def _post(url: str, body: bytes, key: str | None, content_type: str) -> dict:
    headers = {"Content-Type": content_type, **({"Idempotency-Key": key} if key else {})}
    with urllib.request.urlopen(urllib.request.Request(url, body, headers, method="POST"), timeout=10) as response:
        assert response.status == 200
        return json.loads(response.read())


def test_the_embedded_receiver_counts_rows_and_ignores_repeated_keys():
    with Receiver() as receiver:
        assert _post(receiver.url, b'{"a":1}\n{"a":2}\n', "k1", "application/x-ndjson") == {"ok": True}
        assert _post(receiver.url, b'{"a":1}\n{"a":2}\n', "k1", "application/x-ndjson")["duplicate"] is True
        _post(receiver.url, b'[{"a":1},{"a":2},{"a":3}]', "k2", "application/json")
        _post(receiver.url, b'{"a":1}', None, "application/json")
        counts = receiver.counts()
    assert (counts.requests, counts.rows, counts.duplicates) == (3, 6, 1)


def test_a_request_cut_mid_body_is_not_accepted_and_its_key_stays_free():
    """A sender killed mid-request (a crashed task) must not claim the key its retry will send."""
    with Receiver(record=True) as receiver:
        address = urlsplit(receiver.url)
        with socket.create_connection((address.hostname, address.port)) as cut:
            cut.sendall(b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        b"Idempotency-Key: k1\r\nContent-Length: 100\r\n\r\n")  # killed before its body
        assert _post(receiver.url, b'[{"a":1}]', "k1", "application/json") == {"ok": True}
        assert [r.body for r in receiver.accepted_requests] == [b'[{"a":1}]']
        assert receiver.counts().rows == 1


def test_row_counting_and_the_embedded_webhook_options():
    assert count_rows(b"", "application/x-ndjson") == 0
    assert count_rows(b'{"a":1}\n{"a":2}', "application/x-ndjson") == 2
    assert count_rows(b"[]", "application/json") == 0
    assert needs_receiver("webhook-sink", {}) and not needs_receiver("webhook-sink", {"URL": "http://x"})
    assert not needs_receiver("redis-sink", {})

    class _R:
        url = "http://127.0.0.1:1/events"

    assert embedded_options(_R(), {"batchSize": "10"}) == {"url": f"{_R.url}/events", "format": "ndjson",
                                                           "batchSize": "10"}


def test_reports_hide_secrets():
    hidden = redact_options({"url": "redis://user:pw@host:6379/0", "kafka.sasl.password": "pw",
                             "header.Authorization": "Bearer x", "topic": "t"})
    assert hidden == {"url": "redis://host:6379/0", "kafka.sasl.password": "<hidden>",
                      "header.Authorization": "<hidden>", "topic": "t"}


def test_the_live_line_is_rewritten_on_a_terminal_and_printed_as_lines_otherwise():
    class _Collector:
        batches: list = []
        schedule_start_us = None
        delivered = 0

    for tty, expected in ((True, "\r\x1b[K"), (False, "\n")):
        out = io.StringIO()
        display = Display(out, tty=tty)
        display.start("label", 1000, 10)
        display.update(_Collector(), 0, waiting="starting")
        display.line("done")
        text = out.getvalue()
        assert text.startswith("label\n") and "starting" in text and text.endswith("done\n")
        assert (expected + "done") in text if tty else "starting…\n" in text


def test_the_parsing_helpers_have_one_home_and_thresholds_does_not_import_config():
    def imports(module) -> set[str]:
        tree = ast.parse(Path(module.__file__).read_text())
        return {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}

    assert config.__name__ not in imports(thresholds)  # config → thresholds → units: no circle
    assert units.__name__ in imports(thresholds) and units.__name__ in imports(config)
    assert config.parse_rate is units.parse_rate and config.LoadError is units.LoadError  # re-exported as before
