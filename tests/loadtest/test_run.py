"""End-to-end load runs through the Python API, on the shared Spark session, against the real local targets.

Each run is small (2 000 events/s for 3 s); the report's event count must equal what landed in the
target, read back from Redis, Kafka or the HTTP receiver.
"""

from __future__ import annotations

import json
import re
import uuid

import pytest

from impulse.loadtest import LoadConfig, LoadError, run_load, summary_text, write_report
from tests.conftest import sink_names
from tests.loadtest.helpers import assert_latency_plausible, assert_report_files, assert_result_plausible
from connectors.servers import free_port

pytestmark = [pytest.mark.integration]

RATE, SECONDS = 2_000, 3


def _config(sink: str, options: dict, **overrides) -> LoadConfig:
    return LoadConfig(sink=sink, options=options, rate=RATE, duration_s=SECONDS, partitions=2, payload_bytes=32,
                      **overrides)


@pytest.mark.redis
def test_redis_run_counts_equal_the_keys_in_redis(spark, redis_server, tmp_path):
    prefix = f"load-{uuid.uuid4().hex[:8]}:"
    result = run_load(_config("redis-sink", {"url": redis_server.url, "keyPrefix": prefix}), spark=spark)

    assert_result_plausible(result)
    client = redis_server.client()
    landed = sum(1 for _ in client.scan_iter(match=f"{prefix}*", count=10_000))
    assert landed == result.events == RATE * SECONDS
    assert result.bytes > 0  # from the sink's own metrics lines
    report = assert_report_files_of(result, tmp_path)
    assert report["summary"]["sink"] == "redis-sink" and report["summary"]["errors"] == 0
    assert set(report["phasesMs"]) >= {"latestOffset", "addBatch", "walCommit", "commitOffsets", "queryPlanning",
                                       "triggerExecution"}


@pytest.mark.kafka
def test_kafka_run_counts_equal_the_records_in_the_topic(spark, kafka_broker, tmp_path):
    topic = f"load-{uuid.uuid4().hex[:8]}"  # created by the run (create-topic): the broker does not on first use
    options = {"kafka.bootstrap.servers": kafka_broker.bootstrap, "topic": topic}
    with pytest.raises(LoadError, match=f"'{topic}'.*create it first"):
        run_load(_config("kafka-sink", options))  # no session made
    with pytest.raises(LoadError, match="--create-topic is for kafka-sink, not redis-sink"):
        run_load(_config("redis-sink", {"url": "redis://127.0.0.1:1"}, create_topic=2))
    result = run_load(_config("kafka-sink", options, create_topic=2), spark=spark)
    assert len(kafka_broker.end_offsets(topic)) == 2

    assert_result_plausible(result)
    messages = kafka_broker.consume_all(topic)
    assert len(messages) == result.events
    events = {(row["subtask_index"], row["counter"]) for row in (json.loads(m.value()) for m in messages)}
    assert len(events) == result.events  # no duplicate
    assert_report_files_of(result, tmp_path)


@pytest.mark.kafka
@pytest.mark.schema_registry
def test_kafka_avro_run_counts_equal_the_records_decoded(spark, kafka_broker, schema_registry, tmp_path):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = f"load-{uuid.uuid4().hex[:8]}"
    options = {"kafka.bootstrap.servers": kafka_broker.bootstrap, "topic": topic, "value.format": "avro",
               "schema.registry.url": schema_registry.url}
    result = run_load(_config("kafka-sink", options, create_topic=2), spark=spark)

    assert_result_plausible(result)
    reader = AvroDeserializer(SchemaRegistryClient({"url": schema_registry.url}))
    context = SerializationContext(topic, MessageField.VALUE)
    rows = [reader(m.value(), context) for m in kafka_broker.consume_all(topic)]
    assert len({(row["subtask_index"], row["counter"]) for row in rows}) == len(rows) == result.events


@pytest.mark.webhook
def test_webhook_run_counts_equal_the_rows_the_receiver_accepted(spark, http_receiver, tmp_path):
    path = f"/load-{uuid.uuid4().hex[:8]}"
    result = run_load(_config("webhook-sink", {"url": http_receiver.url + path, "batchSize": 250}), spark=spark)

    assert_result_plausible(result)
    rows = [row for r in http_receiver.accepted_requests if r.path == path for row in r.json()]
    assert len(rows) == result.events
    assert len({(row["subtask_index"], row["counter"]) for row in rows}) == result.events
    assert_report_files_of(result, tmp_path)


@pytest.mark.webhook
def test_realistic_events_reach_the_sink_and_the_report_states_the_schema(spark, http_receiver, tmp_path):
    """--schema / --source-option: generated columns, plus the built-ins the harness adds; the report names it."""
    path = f"/load-{uuid.uuid4().hex[:8]}"
    schema = "user_id BIGINT, country STRING, amount DOUBLE"
    source = {"fields.user_id.kind": "zipf", "fields.user_id.cardinality": "100", "seed": "7",
              "fields.country.kind": "values", "fields.country.values": "US,DE", "outOfOrderness": "1s"}
    result = run_load(_config("webhook-sink", {"url": http_receiver.url + path, "batchSize": 250}, schema=schema,
                              source_options=source), spark=spark)
    assert_result_plausible(result)
    rows = [row for r in http_receiver.accepted_requests if r.path == path for row in r.json()]
    assert len(rows) == result.events == len({(row["subtask_index"], row["counter"]) for row in rows})
    assert {row["country"] for row in rows} == {"US", "DE"} and all(0 <= row["user_id"] < 100 for row in rows)
    assert set(rows[0]) == {"user_id", "country", "amount", "counter", "subtask_index", "timestamp", "payload"}
    assert f"schema: {schema}; {len(source)} source options" in summary_text(result)
    report = assert_report_files_of(result, tmp_path)
    assert report["config"]["schema"] == schema and report["config"]["source_options"] == source


def test_source_options_the_harness_sets_and_bad_schemas_are_refused(spark):
    with pytest.raises(LoadError, match=r"--source-option eventsPerSecond: set by the harness from --rate"):
        run_load(_config("noop", {}, source_options={"eventsPerSecond": "5"}))  # before any session
    with pytest.raises(LoadError, match=r"impulse: invalid value 'gauss' for option 'fields.a.kind'"):
        run_load(_config("noop", {}, schema="a DOUBLE", source_options={"fields.a.kind": "gauss"}))
    with pytest.raises(LoadError, match=r"impulse: .*'fields.a.kind': expected a kind for a BOOLEAN column"):
        run_load(_config("noop", {}, schema="a BOOLEAN", source_options={"fields.a.kind": "zipf"}), spark=spark)
    with pytest.raises(LoadError, match=r"--schema: 'a BIGIN' is not a Spark DDL schema"):
        run_load(_config("noop", {}, schema="a BIGIN"), spark=spark)


def test_noop_latency_is_computed_from_the_offsets_and_admission_control_shows_as_lag(spark, tmp_path):
    # at most 1 000 events per trigger (≥ 1 s apart) of the 2 000 due each second: this run cannot keep up
    result = run_load(_config("noop", {}, max_events_per_trigger=1_000), spark=spark)

    assert_result_plausible(result)
    # no metrics file: every batch's ack is its end (progress timestamp + triggerExecution)
    assert all(b.ack_us == b.end_us for b in result.batches)
    assert all(b.latency.count == b.rows for b in result.batches)
    assert max(b.rows for b in result.batches) <= 1_000
    assert any(b.held_back > 0 for b in result.batches)  # Spark's latestOffset ahead of endOffset
    assert max(b.lag for b in result.batches) > 1_000
    assert result.achieved_rate < 0.95 * RATE
    assert not result.verdict.sustained and "< 95% of the target 2,000" in result.verdict.reasons[0]
    text = summary_text(result)
    for word in ("target", "achieved", "p99.9", "triggerExecution", "addBatch", "errors", "sustained: no"):
        assert word in text
    assert_report_files_of(result, tmp_path)


def assert_report_files_of(result, tmp_path) -> dict:
    write_report(result, tmp_path / "report")
    report = assert_report_files(tmp_path / "report", result.events)
    assert_latency_plausible(report["latencyMs"], result.duration_s)
    assert len(report["batches"]) == len(result.batches)
    return report


# --------------------------------------------------------------------------- errors before any load is sent


def test_unknown_sink_lists_the_valid_ones(spark):
    with pytest.raises(LoadError, match=r"unknown sink 'redis'.*" + re.escape(", ".join(["noop", *sink_names()]))):
        run_load(_config("redis", {}), spark=spark)
    assert not [q for q in spark.streams.active if (q.name or "").startswith("impulse-load")]


def test_bad_sink_option_is_refused_before_spark_is_needed():
    with pytest.raises(LoadError, match=r"redis-sink: .*'keyPrefx'.*known: .*keyPrefix"):
        run_load(_config("redis-sink", {"url": "redis://127.0.0.1:6379", "keyPrefx": "x"}))  # no session made


def test_unreachable_targets_are_refused_before_spark_is_needed():
    port = free_port()
    with pytest.raises(LoadError, match=rf"redis-sink: cannot reach Redis at redis://127.0.0.1:{port}"):
        run_load(_config("redis-sink", {"url": f"redis://127.0.0.1:{port}"}))
    with pytest.raises(LoadError, match=rf"webhook-sink: cannot reach http://127.0.0.1:{port}/x"):
        run_load(_config("webhook-sink", {"url": f"http://127.0.0.1:{port}/x"}))


def test_bad_run_values_are_refused():
    with pytest.raises(LoadError, match="--rate must be > 0"):
        run_load(LoadConfig(sink="noop", rate=0))
    with pytest.raises(LoadError, match="--partitions must be ≥ 1"):
        run_load(LoadConfig(sink="noop", partitions=0))
    with pytest.raises(LoadError, match="--trigger"):
        run_load(LoadConfig(sink="noop", trigger="soon"))
