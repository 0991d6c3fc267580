"""Batch writes' driver side (`connectors.batch`), with the protocol tests' in-memory sink (no Spark, no server)."""

from __future__ import annotations

import pickle
from importlib import import_module

import pytest

from connectors.batch import BATCH_ID, BatchWriter, batch_writer
from connectors.errors import OptionError, SinkError
from connectors.options import OptionReader
from connectors.protocol import CommitMessage
from tests.connectors.test_protocol import MemorySink


def _writer(options: dict, overwrite: bool = False, sink: MemorySink | None = None) -> BatchWriter:
    sink = sink or MemorySink()

    def build(reader: OptionReader) -> MemorySink:
        reader.string("url")
        return sink

    return batch_writer(options, overwrite, name="memory sink", build=build)


def test_commit_id_option_is_the_identity():
    writer = _writer({"url": "x", "commitId": "backfill-1"})
    assert writer.commit_id == "backfill-1"
    assert writer.protocol.batch_id == BATCH_ID == 0


def test_without_commit_id_each_job_draws_its_own_and_tasks_share_it():
    first, second = _writer({"url": "x"}), _writer({"url": "x"})
    assert first.commit_id.startswith("batch-") and second.commit_id.startswith("batch-")
    assert first.commit_id != second.commit_id
    # what Spark ships to every task (and every retry) is the pickled writer: the same id
    assert pickle.loads(pickle.dumps(first)).commit_id == first.commit_id


def test_commit_and_abort_are_the_protocols_for_batch_zero():
    sink = MemorySink()
    writer = _writer({"url": "x", "commitId": "c"}, sink=sink)
    writer.commit([CommitMessage("c", 0, 0, 0, rows=5)])
    writer.abort([None])
    assert (sink.batches, sink.aborted) == ([("c", 0)], [0])


def test_overwrite_names_the_mode_and_what_is_allowed():
    with pytest.raises(OptionError, match=r"invalid value 'overwrite' for option 'mode': expected one of append.*"
                                          r"\.mode\(\"append\"\)"):
        _writer({"url": "x"}, overwrite=True)


def test_no_options_names_the_catalog_table_limitation():
    with pytest.raises(OptionError, match="option 'OPTIONS'.*CREATE TEMPORARY VIEW"):
        _writer({})


def test_unknown_option_fails_as_for_a_stream():
    with pytest.raises(OptionError, match="noSuchOption"):
        _writer({"url": "x", "noSuchOption": "1"})


def test_create_table_options_are_refused_with_the_working_path():
    reader = OptionReader({"eventsPerSecond": "1", "option.eventsPerSecond": "1", "provider": "impulse",
                           "owner": "root"}, name="impulse source")
    reader.string("eventsPerSecond")
    with pytest.raises(OptionError, match="option 'provider': expected no CREATE TABLE.*CREATE TEMPORARY VIEW"):
        reader.finish()


@pytest.mark.parametrize("module, cls", [("sinks.redis.sink", "RedisSinkDataSource"), ("sinks.kafka.sink", "KafkaSinkDataSource"),
                                         ("sinks.webhook.sink", "WebhookSinkDataSource")])
def test_a_sink_has_no_schema_and_says_how_to_declare_a_view(module, cls):
    source = getattr(import_module(module), cls)({})
    with pytest.raises(SinkError, match=r"CREATE TEMPORARY VIEW <view> \(<column> <type>, …\) USING `"
                                        + source.name() + "`"):
        source.schema()
