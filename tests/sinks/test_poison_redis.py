"""Poison records in Redis, the issue's acceptance: keys of another type, deadLetterKey set, the driver SIGKILLed
while a batch is in flight and the query restarted; read back with redis-cli: every accepted row once, and the
dead-letter stream holds exactly the refused rows once."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

from connectors.conformance import expected_events
from connectors.conformance.suite import kill_tree
from tests.impulse.helpers import checkpoint_offsets, committed_batches, poll
from tests.sinks.poison_driver import LANES, start

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
    args = json.dumps({"format": "redis-sink", "options": options, "rows": ROWS, "perTrigger": PER_TRIGGER,
                       "checkpoint": str(checkpoint)})
    process = subprocess.Popen([sys.executable, "-m", "tests.sinks.poison_driver", args], start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:  # kill it while a batch is planned but not committed, after at least two committed ones
        poll(lambda: process.poll() is not None or (
            len(committed_batches(checkpoint)) >= 2
            and len(checkpoint_offsets(checkpoint)) > len(committed_batches(checkpoint))),
             timeout=240, interval=0.01, what="a batch in flight after two committed")
        assert process.poll() is None, f"the driver ended early: {process.stderr.read().decode()[-2000:]}"
    finally:
        kill_tree(process.pid)
        process.wait(30)
    assert len(committed_batches(checkpoint)) < ROWS // PER_TRIGGER, "the kill came after the last batch"
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
