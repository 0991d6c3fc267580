"""The one table of connectors: everything that lists them reads it, and a fourth sink needs one row.

The fourth sink is its module (`tests.conformance.file_sink`: the sink and its adapter), its entry point
(`tests.conformance.pyspark_file_sink`) and one row, added to the table for the duration of a test only;
nothing else in the project is edited for it, yet it is registered, warmed up, pre-flighted by the
load harness, offered by the conformance CLI and passes the conformance suite.
"""

from __future__ import annotations

from importlib import import_module

import pytest

import connectors.registry as registry
from connectors import data_sources, register_all
from connectors.conformance import SinkConformance
from connectors.conformance.__main__ import parse_args
from connectors.registry import Connector
from impulse.loadtest.load.warmup import preload_modules
from impulse.loadtest.settings import target
from impulse.loadtest.settings.config import LoadError
from impulse.loadtest.settings.target import known_sinks, preflight

pytestmark = [pytest.mark.integration]

FILE_SINK = Connector("file-sink", "sink", "tests.conformance.file_sink:FileSinkDataSource",
                      adapter="tests.conformance.file_sink:FileAdapter", preload=("json",))


@pytest.fixture
def with_file_sink(monkeypatch):
    monkeypatch.setattr(registry, "CONNECTORS", registry.CONNECTORS + (FILE_SINK,))
    return FILE_SINK


def test_everything_lists_the_table():
    names = [row.name for row in registry.connectors()]
    sinks = [row.name for row in registry.sinks()]
    assert sorted(data_sources()) == sorted(names)
    assert "impulse" in names and "impulse" not in sinks
    assert list(target.project_sinks()) == sinks
    assert list(target.known_sinks()) == ["noop", *sinks]
    for name in sinks:
        assert parse_args([name, *_required_arguments(name)])[0].sink == name
        modules = preload_modules(name).split(",")
        assert modules[0] == registry.connector(name).module and len(modules) > 1
    assert preload_modules("noop") == ""
    assert {row.kind for row in registry.connectors()} == set(registry.KINDS)
    with pytest.raises(ValueError, match="kind 'thing' is not one of source, sink"):
        Connector("x", "thing", "m:C")


def _required_arguments(name: str) -> list[str]:
    return {"redis-sink": ["--url", "redis://127.0.0.1:1/0"], "kafka-sink": ["--bootstrap", "127.0.0.1:1"]}.get(name, [])


def test_unknown_connector_names_the_known_ones():
    with pytest.raises(KeyError, match="redis-sink, kafka-sink"):
        registry.connector("nope")


def test_a_fourth_sink_is_its_module_and_one_row(with_file_sink, spark, tmp_path, capsys):
    entry_point = import_module("tests.conformance.pyspark_file_sink").DefaultSource
    assert entry_point is FILE_SINK.data_source_class() and entry_point.name() == "file-sink"
    assert "file-sink" in register_all(spark)
    assert "file-sink" in known_sinks()
    assert preload_modules("file-sink") == "tests.conformance.file_sink,json"
    assert preflight("file-sink", {"path": str(tmp_path)}, 0).reports_metrics
    with pytest.raises(LoadError, match="file-sink: .*cannot reach directory .*no-such"):
        preflight("file-sink", {"path": str(tmp_path / "no-such")}, 0)
    args, _ = parse_args(["file-sink", "--dir", str(tmp_path)])
    with registry.connector(args.sink).adapter_class().from_arguments(args) as adapter:
        assert adapter.format == "file-sink" and adapter.root == tmp_path


class TestFileSinkConformance(SinkConformance):
    """The suite against the fourth sink registered through the table alone. Reduced for CI time (the
    real sinks run all of it): no 1M-row batch, no driver kill, two faults of the matrix."""

    test_large_batch = test_driver_killed_mid_stream = None
    fault_cases = (("mid_write", "crash", 0), ("before_commit", "fail", None))

    @pytest.fixture(scope="class")
    @classmethod
    def adapter(cls, spark, tmp_path_factory):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(registry, "CONNECTORS", registry.CONNECTORS + (FILE_SINK,))
            register_all(spark)
            yield FILE_SINK.adapter_class()(str(tmp_path_factory.mktemp("file-sink")))
