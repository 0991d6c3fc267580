"""Poison records in Redis: keys of another type, deadLetterKey set, the driver SIGKILLed
while a batch is in flight and the query restarted; read back with redis-cli: every accepted row once, and the
dead-letter stream holds exactly the refused rows once."""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest

from connectors.conformance import expected_events
from tests.sinks.poison_driver import LANES, kill_mid_batch, start

pytestmark = [pytest.mark.integration, pytest.mark.redis]

ROWS, PER_TRIGGER = 20_000, 2_000
REFUSED_LANES = (3, 7)  # their keys hold a string: Redis refuses every row routed there


def redis_cli(url: str, *args: str) -> list[str]:
    return subprocess.run(["redis-cli", "-u", url, *args], check=True, capture_output=True, text=True).stdout.splitlines()


def test_dead_letters_are_exactly_the_refused_rows_across_a_killed_driver(spark, redis_server, tmp_path):
    prefix = "p" + uuid.uuid4().hex[:8]
    for lane in REFUSED_LANES:
        redis_server.client().set(f"{prefix}:{lane}", "a plain string")
    options = {"url": redis_server.url, "target": "list", "keyPrefix": f"{prefix}:", "keyColumn": "lane",
               "deadLetterKey": f"dead:{prefix}", "commitKeyPrefix": f"commit:{prefix}:"}
    checkpoint = tmp_path / "ck"
    kill_mid_batch({"format": "redis-sink", "options": options, "rows": ROWS, "perTrigger": PER_TRIGGER,
                    "checkpoint": str(checkpoint)})
    query = start(spark, "redis-sink", options, ROWS, PER_TRIGGER, str(checkpoint))
    query.awaitTermination(240)
    assert query.exception() is None

    events = expected_events(ROWS)  # (subtask_index, counter) of every row, each once
    landed = sorted((e["subtask_index"], e["counter"]) for lane in set(range(LANES)) - set(REFUSED_LANES)
                    for e in map(json.loads, redis_cli(redis_server.url, "LRANGE", f"{prefix}:{lane}", "0", "-1")))
    assert landed == [e for e in events if e[1] % LANES not in REFUSED_LANES]
    letters = [json.loads(v) for v in _stream_values(redis_server.url, f"dead:{prefix}")]
    assert sorted((e["subtask_index"], e["counter"]) for e in letters) == \
        [e for e in events if e[1] % LANES in REFUSED_LANES]
    for lane in REFUSED_LANES:
        assert redis_cli(redis_server.url, "GET", f"{prefix}:{lane}") == ["a plain string"]


def _stream_values(url: str, key: str) -> list[str]:
    """The ``value`` field of every entry of a stream, read with redis-cli (raw output: id, then field, value...)."""
    lines = redis_cli(url, "XRANGE", key, "-", "+")
    return [lines[i + 1] for i, line in enumerate(lines) if line == "value"]
