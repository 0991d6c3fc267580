"""End to end through a Spark Connect server: the client in this process (beside the classic test session),
the queries, the data sources and their Python workers on the server.

The server finds ``impulse`` and the sinks by auto-registration (its Python workers import this checkout
through ``PYTHONPATH``); nothing is registered from the client unless a test says so.
"""

from __future__ import annotations

import json
import uuid

import pytest

from connectors import register_all
from connectors.registry import connectors
from impulse.loadtest.cli import main
from tests.cluster.scenarios import batch_read, expected, uncommit_last_batch, write
from tests.conftest import sink_names

pytestmark = [pytest.mark.integration, pytest.mark.connect]

SINKS = sink_names()  # every sink of connectors.registry


@pytest.fixture
def namespace():
    return f"c{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("sink", SINKS)
def test_impulse_to_each_sink_lands_every_event_once(connect_session, sink_adapters, sink, namespace, tmp_path):
    adapter = sink_adapters[sink]
    adapter.prepare(namespace)
    try:
        write(connect_session, adapter.format, adapter.options(namespace), tmp_path / "ck", limit=400, per_trigger=400)
        assert sorted(adapter.read_back(namespace)) == expected(400)
    finally:
        adapter.cleanup(namespace)


def test_bounded_batch_read(connect_session):
    assert batch_read(connect_session, 301) == expected(301)


def test_restart_from_checkpoint_replays_the_uncommitted_batch_without_duplicates(connect_session, sink_adapters,
                                                                                   namespace, tmp_path):
    adapter = sink_adapters["redis-sink"]  # a list target: a replayed batch written twice would show as duplicates
    checkpoint = tmp_path / "ck"
    try:
        last = write(connect_session, adapter.format, adapter.options(namespace), checkpoint, limit=200, per_trigger=100)
        assert last == 1 and uncommit_last_batch(checkpoint) == last
        write(connect_session, adapter.format, adapter.options(namespace), checkpoint, limit=300, per_trigger=100)
        assert sorted(adapter.read_back(namespace)) == expected(300)
    finally:
        adapter.cleanup(namespace)


def test_a_bad_option_reaches_the_client_intact(connect_session):
    with pytest.raises(Exception) as caught:
        connect_session.read.format("impulse").option("eventsPerSecond", "-5").option("limit", 10).load().count()
    text = str(caught.value)
    assert "OptionError" in text and "eventsPerSecond" in text and "-5" in text


def test_explicit_registration_from_the_client(connect_session):
    assert register_all(connect_session) == sorted(row.name for row in connectors())
    assert batch_read(connect_session, 10) == expected(10)


def test_load_harness_runs_through_the_server_and_names_it(spark_connect, connect_session, tmp_path, capsys):
    code = main(["--remote", spark_connect.url, "--rate", "200", "--duration", "2s", "--partitions", "2",
                 "--drain-timeout", "5m", "--output", str(tmp_path / "report")])
    out = capsys.readouterr().out
    assert code == 0, out
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["summary"]["events"] == 400 and report["summary"]["outcome"] == "completed"
    master = connect_session.conf.get("spark.master")  # the server's (local[2,2] unless SPARK_REMOTE)
    assert report["deployment"] == {"remote": spark_connect.url, "master": master, "executors": None, "cores": None}
    assert f"on Spark Connect {spark_connect.url} (server master {master})" in out


GENERATED = "id BIGINT, user_id BIGINT, amount DOUBLE, country STRING, session STRING, coupon STRING"
FIELDS = {"fields.id.kind": "sequence", "fields.user_id.kind": "zipf", "fields.user_id.cardinality": "1000",
          "fields.amount.kind": "normal", "fields.amount.mean": "50", "fields.amount.stddev": "15",
          "fields.country.kind": "values", "fields.country.values": "US,DE,FR", "fields.session.kind": "uuid",
          "fields.coupon.length": "8", "fields.coupon.nullRate": "0.5", "seed": "7", "outOfOrderness": "5s"}


def test_generated_columns_over_connect_equal_the_classic_session(spark, connect_session):
    """A user schema and its fields.* options through the server: the stream, the batch read and the classic
    session's batch read are the same rows (values depend on seed, options and identity, not the session)."""
    options = {"delay": "1ms", "limit": "600", "numPartitions": "2", "startTime": "0", **FIELDS}
    rows = sorted(map(tuple, connect_session.read.format("impulse").schema(GENERATED).options(**options).load().collect()))
    name = f"generated_{uuid.uuid4().hex[:8]}"
    query = (connect_session.readStream.format("impulse").schema(GENERATED).options(**options).load()
             .writeStream.format("memory").queryName(name).trigger(availableNow=True).start())
    assert query.awaitTermination(120), "the AvailableNow query did not finish"
    assert sorted(map(tuple, connect_session.sql(f"SELECT * FROM {name}").collect())) == rows
    assert sorted(map(tuple, spark.read.format("impulse").schema(GENERATED).options(**options).load().collect())) == rows
    assert len(rows) == 600 and {r[0] for r in rows} == set(range(600))


def test_a_bad_field_option_of_a_stream_reaches_the_client_intact(connect_session):
    options = {"delay": "1ms", **FIELDS, "fields.user_id.kind": "uuid"}
    frame = connect_session.readStream.format("impulse").schema(GENERATED).options(**options).load()
    with pytest.raises(Exception) as caught:
        query = frame.writeStream.format("noop").start()
        query.awaitTermination(120)
    text = str(caught.value)
    assert "OptionError" in text and "'fields.user_id.kind'" in text and "'uuid'" in text and "BIGINT" in text


def test_load_harness_ships_a_user_module_to_the_server_and_checks_it(spark_connect, connect_session, tmp_path,
                                                                       capsys, monkeypatch):
    """A module in the client's working directory only, with a Python UDF: the server's workers import it because
    the harness adds it as a pyfile artifact."""
    name = f"connect_pipeline_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        "from pyspark.sql import functions as F\n\n\n"
        "@F.udf('string')\ndef parity(counter):\n    return 'even' if counter % 2 == 0 else 'odd'\n\n\n"
        "def labelled(events):\n    return events.select('subtask_index', 'counter', parity('counter').alias('parity'))\n")
    monkeypatch.chdir(tmp_path)
    from impulse.loadtest.cli import main

    code = main(["--remote", spark_connect.url, "--transform", f"{name}:labelled", "--check", "--rate", "200",
                 "--duration", "2s", "--partitions", "2", "--drain-timeout", "5m", "--output", str(tmp_path / "out")])
    captured = capsys.readouterr()
    out = captured.out
    assert code == 0, out + captured.err[-3000:]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["check"] == {"passed": True, "expected": 400, "delivered": 400, "lost": 0, "duplicated": 0,
                               "unexpected": 0}
    assert "check: pass" in out
