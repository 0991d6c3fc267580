"""The README's Webhook sink block runs as written, against the project's receiver."""

from __future__ import annotations

import os
import uuid

import pytest

from connectors.servers import wait_until
from tests.readme import DOCS, python_block

pytestmark = [pytest.mark.integration, pytest.mark.webhook]

# The block's `${ENV:HOOK_TOKEN}` is read by the executors' Python workers, which inherit the environment the JVM had
# when the Spark session started: set it at import (collection), before any fixture starts Spark.
TOKEN = "readme-" + uuid.uuid4().hex[:8]
os.environ["HOOK_TOKEN"] = TOKEN


def test_the_readme_webhook_block_runs(spark, http_receiver, tmp_path):
    """The README's Webhook sink block after the block that makes `spark`, with the receiver's address for
    hooks.example.com (paths of the test's own) and its checkpoint filled in: rows arrive with the token the
    header names, each row once, and the commit notice reaches the commit URL."""
    base = f"{http_receiver.url}/readme-{uuid.uuid4().hex[:8]}"
    block = (python_block("## Send a stream to an endpoint", page=DOCS / "how-to" / "webhook-sink.md")
             .replace("https://hooks.example.com", base)
             .replace('"/tmp/ck-webhook"', f'"{tmp_path / "ck"}"'))
    assert base in block and str(tmp_path) in block, "the README's placeholders changed: fill the new ones here"
    namespace: dict = {}
    before = {q.id for q in spark.streams.active}
    register = python_block("## Register the formats", page=DOCS / "how-to" / "install.md")
    exec(compile(register, "README.md", "exec"), namespace)  # noqa: S102
    exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - the README's own example
    [query] = [q for q in spark.streams.active if q.id not in before]  # the block starts one, unassigned

    def received(path: str) -> list:
        return [r for r in http_receiver.requests if r.path == path]

    try:
        wait_until(lambda: received(f"{base}/commits".removeprefix(http_receiver.url)), 120, 0.2,
                   "a commit notice at the README's commitUrl")
    finally:
        query.stop()
    path = f"{base}/events".removeprefix(http_receiver.url)
    events = [r for r in received(path) if r.status == 200]
    assert events and all(r.headers["Authorization"] == f"Bearer {TOKEN}" for r in received(path))
    rows = [(row["subtask_index"], row["counter"]) for r in events for row in r.json()]
    assert len(rows) == len(set(rows))  # each row once
    assert all(len(r.json()) <= 500 for r in events)  # the block's batchSize
