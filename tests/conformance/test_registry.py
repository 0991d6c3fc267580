"""The one table of connectors: everything that lists them reads it, and a fourth sink is its own package.

The fourth sink is the package `tests.file_sink` (the sink, its adapter with the reader of its target, its PySpark
entry point, its one row), installed for the duration of a test only as a package is: a ``.dist-info`` folder on
``sys.path`` whose ``entry_points.txt`` declares the row under ``impulse.connectors``. Nothing else in the project
is edited for it, yet it is registered, warmed up, pre-flighted by the load harness, offered by the conformance CLI,
passes the conformance suite and ``impulse-load --check`` reads its target back.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path

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
from tests.file_sink import CONNECTOR as FILE_SINK
from tests.file_sink import ENTRY_POINT
from tests.loadtest.helpers import run_cli

pytestmark = [pytest.mark.integration]

def install_file_sink(patch: pytest.MonkeyPatch, site: Path) -> None:
    """Install `tests.file_sink` as pip would for `patch`'s lifetime: its metadata, with the entry point that
    declares its row, in a folder put on ``sys.path`` (the code itself is importable from the checkout)."""
    info = site / "impulse_file_sink-0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: impulse-file-sink\nVersion: 0\n")
    (info / "entry_points.txt").write_text(f"[{registry.ENTRY_POINT_GROUP}]\n{ENTRY_POINT}\n")
    patch.syspath_prepend(str(site))


@pytest.fixture
def with_file_sink(monkeypatch, tmp_path):
    assert "file-sink" not in [row.name for row in registry.connectors()]
    install_file_sink(monkeypatch, tmp_path / "site")
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


def test_an_installed_package_adds_its_rows_after_the_table_s_and_may_not_take_a_name(monkeypatch, tmp_path):
    before = registry.connectors()
    install_file_sink(monkeypatch, tmp_path / "site")
    assert registry.connectors() == (*before, FILE_SINK) and registry.sinks()[-1] is FILE_SINK
    clash = tmp_path / "clash" / "clash-0.dist-info"
    clash.mkdir(parents=True)
    (clash / "METADATA").write_text("Metadata-Version: 2.1\nName: clash\nVersion: 0\n")
    (clash / "entry_points.txt").write_text(f"[{registry.ENTRY_POINT_GROUP}]\nagain = tests.file_sink:CONNECTOR\n")
    monkeypatch.syspath_prepend(str(clash.parent))
    with pytest.raises(ValueError, match="two connectors are named 'file-sink'"):
        registry.connectors()


def test_a_fourth_sink_is_its_package_and_one_row(with_file_sink, spark, tmp_path, capsys):
    entry_point = import_module("tests.file_sink.pyspark_file_sink").DefaultSource
    assert entry_point is FILE_SINK.data_source_class() and entry_point.name() == "file-sink"
    assert "file-sink" in register_all(spark)
    assert "file-sink" in known_sinks()
    assert preload_modules("file-sink") == "tests.file_sink.sink,json"
    assert preflight("file-sink", {"path": str(tmp_path)}, 0).reports_metrics
    with pytest.raises(LoadError, match="file-sink: .*cannot reach directory .*no-such"):
        preflight("file-sink", {"path": str(tmp_path / "no-such")}, 0)
    args, _ = parse_args(["file-sink", "--dir", str(tmp_path)])
    with registry.connector(args.sink).adapter_class().from_arguments(args) as adapter:
        assert adapter.format == "file-sink" and adapter.root == tmp_path


def test_impulse_load_checks_the_fourth_sink_through_its_adapter_s_reader(with_file_sink, spark, tmp_path, capsys):
    target = tmp_path / "rows"
    target.mkdir()
    run = ["--rate", "400", "--duration", "3s", "--partitions", "2", "--trigger", "500ms", "--sink", "file-sink",
           "-o", f"path={target}", "--check"]
    code, out, report = run_cli(capsys, tmp_path, *run)
    assert code == 0, out
    assert report["check"] == {"passed": True, "expected": 1_200, "delivered": 1_200, "lost": 0, "duplicated": 0,
                               "unexpected": 0}
    code, out, _ = run_cli(capsys, tmp_path, *run)  # the same directory again: refused before any load
    assert code == 2 and f"file-sink's directory '{target}' already holds" in out, out
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    code, out, report = run_cli(capsys, tmp_path, *run[:-3], "--transform", "tests.loadtest.pipelines:loses_and_duplicates",
                                "-o", f"path={wrong}", "--check")
    # 1,200 events, counter % 50: 7 dropped (24), 11 written twice (24), 13 with a wrong counter (24)
    assert code == 99, out
    assert report["check"] == {"passed": False, "expected": 1_200, "delivered": 1_200, "lost": 48, "duplicated": 24,
                               "unexpected": 24}


class TestFileSinkConformance(SinkConformance):
    """The suite against the fourth sink registered through the table alone. Reduced for CI time (the
    real sinks run all of it): no 1M-row batch, no driver kill, two faults of the matrix."""

    test_large_batch = test_driver_killed_mid_stream = None
    fault_cases = (("mid_write", "crash", 0), ("before_commit", "fail", None))

    @pytest.fixture(scope="class")
    @classmethod
    def adapter(cls, spark, tmp_path_factory):
        with pytest.MonkeyPatch.context() as patch:
            install_file_sink(patch, tmp_path_factory.mktemp("site"))
            register_all(spark)
            yield FILE_SINK.adapter_class()(str(tmp_path_factory.mktemp("file-sink")))
