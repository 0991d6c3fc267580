"""A fourth sink in a package of its own, written only to prove that a sink is its package: JSON lines in a
directory (`tests.file_sink.sink`), its conformance adapter with the one reader of its target
(`tests.file_sink.adapter`), its PySpark entry point (`tests.file_sink.pyspark_file_sink`) and its one registry row
(`CONNECTOR`, here), which it declares under the ``impulse.connectors`` entry-point group as an installed package
would (``tests/conformance/test_registry.py`` installs it that way). Nothing in ``connectors/``, ``sinks/``,
``impulse/`` or ``setup.cfg`` names it.

This module is what the entry point loads whenever the rows are listed: it holds the row alone.
"""

from connectors.registry import Connector

__all__ = ["CONNECTOR", "ENTRY_POINT"]

CONNECTOR = Connector("file-sink", "sink", "tests.file_sink.sink:FileSinkDataSource",
                      adapter="tests.file_sink.adapter:FileAdapter", preload=("json",))

#: the line of an ``entry_points.txt`` (what ``[options.entry_points]`` in a setup.cfg installs) declaring the row
ENTRY_POINT = "file-sink = tests.file_sink:CONNECTOR"
