"""The file sink's entry point, as a top-level ``pyspark_file_sink`` module of its installed package would be (kept
inside the package here: a test sink is not offered to every Spark session of the project)."""

from tests.file_sink.sink import FileSinkDataSource as DefaultSource  # noqa: F401 - PySpark's auto-registration looks it up
