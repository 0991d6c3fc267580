"""The how-to "Test a CDC pipeline" (docs/how-to/cdc-pipeline.md) as written: its Debezium stream written to Kafka,
then its expected table, which must equal what a compacted topic keeps: each live key's last ``after``."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.readme import DOCS, python_block

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

PAGE = DOCS / "how-to" / "cdc-pipeline.md"


def test_the_cdc_howto_blocks_run_and_the_compacted_topic_is_the_expected_table(spark, kafka_broker, tmp_path):
    topic = kafka_broker.create_topic(f"bank.accounts-{uuid.uuid4().hex[:8]}", partitions=2)
    write = (python_block("## Debezium change events to Kafka", page=PAGE)
             .replace("localhost:9092", kafka_broker.bootstrap).replace('"bank.accounts"', f'"{topic}"')
             .replace("/tmp/ck-cdc", str(tmp_path / "ck")))
    namespace: dict = {"spark": spark}
    exec(compile(write, str(PAGE), "exec"), namespace)  # noqa: S102 - the page's own example
    assert namespace["query"].exception() is None
    exec(compile(python_block("## The expected table", page=PAGE), str(PAGE), "exec"), namespace)  # noqa: S102
    expected = {r["id"]: r.asDict() for r in namespace["expected"].collect()}

    compacted: dict[int, dict | None] = {}
    messages = kafka_broker.consume_all(topic)
    for m in messages:  # partition then offset order: each key's records in order (one partition per key)
        key = json.loads(m.key())["payload"]["id"]
        compacted[key] = None if m.value() is None else json.loads(m.value())["payload"]["after"]
    deletes = sum(v is None for v in compacted.values())
    assert len(messages) > 4000 and deletes > 0 and len(expected) > 100
    assert {k: v for k, v in compacted.items() if v is not None} == expected
