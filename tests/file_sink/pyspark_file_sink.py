"""The fourth sink's entry point, as a top-level ``pyspark_file_sink`` module would be (kept here: a test sink is not
offered to every Spark session of the project)."""

from tests.conformance.file_sink import FileSinkDataSource as DefaultSource  # noqa: F401
