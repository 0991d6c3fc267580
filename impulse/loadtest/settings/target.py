"""The sink under load: which names are valid, the pre-flight check, and the options the harness adds.

Pre-flight (before any load, before Spark even starts for the project's sinks): the sink's writer is
built on the driver exactly as Spark will build it, ``data_sources()[name](options).streamWriter(schema,
False)``, so a bad option raises the sink's own `OptionError` and an unreachable target its `SinkError`
(Redis PING, Kafka metadata, webhook TCP connect). Both become a one-line `LoadError`.

The project's sinks also get ``metricsPath``: their driver appends one JSON line per committed batch
(rows, bytes, ack time, latency histogram; see `connectors.protocol`), which the harness reads. Other
sinks (Spark's ``noop``, any format Spark can load) are measured from the impulse offsets alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from pyspark.sql.types import BinaryType, LongType, StructField, StructType, TimestampType

from connectors import data_sources
from connectors.errors import ConnectorError, OptionError
from connectors.redact import redact_options
from connectors.registry import connector, sinks
from impulse.loadtest.settings import delta
from impulse.loadtest.settings.units import LoadError
from sinks.kafka.sink import create_topic as create

__all__ = ["SPARK_SINKS", "FILE_SINKS", "TABLE_FORMATS", "PATH_SINKS", "TABLE_OPTION", "table_name", "sink_option", "project_sinks", "known_sinks", "Target", "preflight", "check_format", "impulse_schema",
           "redact_options"]

SPARK_SINKS = ("noop",)
#: Spark's file sinks: written to ``-o path=DIR`` (or ``-o table=NAME``), read back by ``--check`` with ``spark.read``
FILE_SINKS = ("parquet", "json", "csv", "orc")
#: table formats whose jars the user gives (``--packages``): written and read back like the file sinks
TABLE_FORMATS = ("delta",)
#: the sinks written to ``-o path=DIR`` (or ``-o table=NAME``) and read back by ``--check`` with Spark
PATH_SINKS = FILE_SINKS + TABLE_FORMATS
#: the writer option naming a table: the query is started with ``toTable(NAME)``, the option not passed to the writer
TABLE_OPTION = "table"


def sink_option(options: Mapping[str, str], name: str) -> str | None:
    """The value of writer option `name` in `options`, its case ignored as Spark's options ignore it; None if unset."""
    return next((value for key, value in options.items() if key.lower() == name.lower()), None)


def project_sinks() -> tuple[str, ...]:
    """The project's sinks: the sink rows of `connectors.registry` (read at call time)."""
    return tuple(row.name for row in sinks())


def known_sinks() -> tuple[str, ...]:
    """``noop`` and the project's sinks."""
    return SPARK_SINKS + project_sinks()


@dataclass(frozen=True)
class Target:
    """A validated sink: its format name, whether it is one of ours (it reports metrics), its options."""

    sink: str
    options: Mapping[str, str]

    @property
    def reports_metrics(self) -> bool:
        return self.sink in project_sinks()


def impulse_schema(payload_bytes: int):
    """The Spark schema of the impulse rows the sink receives (`impulse.events.spark_schema`: NOT NULL columns)."""
    fields = [StructField("counter", LongType(), False), StructField("subtask_index", LongType(), False),
              StructField("timestamp", TimestampType(), False)]
    if payload_bytes > 0:
        fields.append(StructField("payload", BinaryType(), False))
    return StructType(fields)


def _valid_names() -> str:
    return ", ".join(known_sinks())


def preflight(sink: str, options: Mapping[str, str], payload_bytes: int, create_topic: int | None = None, *,
              schema=None, output_known: bool = True) -> Target:
    """Check a sink before the load: raise `LoadError` (one line) for a bad option or an unreachable target.

    With `create_topic` (partitions; kafka-sink only) the sink's topic is created first when it does not exist.
    Names other than ``noop`` and the project's sinks are returned unchecked: `check_format` needs a
    Spark session to look them up. `schema`: the Spark schema of the rows the sink receives (default: impulse's,
    `impulse_schema`). `output_known` False: the rows are a transform's output, not known before Spark analyses
    it, so an option naming a column impulse's rows lack is not refused here (check again with its `schema`).
    """
    if not sink or sink != sink.strip():
        raise LoadError(f"unknown sink {sink!r}: valid sinks are {_valid_names()}")
    if create_topic is not None:
        if sink != "kafka-sink":
            raise LoadError(f"--create-topic is for kafka-sink, not {sink}")
        try:
            create(options, create_topic)
        except ConnectorError as exc:
            raise LoadError(f"{sink}: {_one_line(exc)}") from exc
    if sink in PATH_SINKS:
        _check_file_sink(sink, options)
    if sink_option(options, TABLE_OPTION) is not None and sink in project_sinks():
        raise LoadError(f"-o {TABLE_OPTION}=NAME writes a Spark table (toTable): {sink} is a sink, not a table format; "
                        f"use e.g. --sink parquet")
    if sink in project_sinks():
        check_options = dict(options)
        if not any(k.lower() == "writeretries" for k in check_options):
            check_options["writeRetries"] = "0"  # the protocol retries a failed check: a pre-flight fails at once
        try:
            source_cls = data_sources()[sink]
            rows = schema if schema is not None else impulse_schema(payload_bytes)
            writer = source_cls(check_options).streamWriter(rows, False)
            if writer.refused is not None:  # the target's check failed (`connectors.protocol.stream_writer`)
                raise writer.refused
        except OptionError as exc:
            if output_known or not exc.expected.startswith("a column of the input"):
                text = _one_line(exc)
                raise LoadError(text if text.startswith(sink) else f"{sink}: {text}") from exc
        except ConnectorError as exc:
            text = _one_line(exc)
            raise LoadError(text if text.startswith(sink) else f"{sink}: {text}") from exc
        except ImportError as exc:  # a sink module whose client library is missing

            raise LoadError(f"{sink}: {exc}; install it with {connector(sink).install_hint()}") from exc
    return Target(sink, dict(options))


def table_name(options: Mapping[str, str]) -> str | None:
    """``-o table=NAME``: the table the run writes with ``toTable`` (None: none, the sink's own target)."""
    name = sink_option(options, TABLE_OPTION)
    return name.strip() if name is not None and name.strip() else None


def _check_file_sink(sink: str, options: Mapping[str, str]) -> None:
    """A file sink or table format needs ``path`` (or ``table``); its ``checkpointLocation`` is the harness's (a new one each run)."""
    if sink_option(options, TABLE_OPTION) is not None and table_name(options) is None:
        raise LoadError(f"--sink {sink}: -o {TABLE_OPTION}= is empty: give the table's name, -o {TABLE_OPTION}=NAME")
    if not (sink_option(options, "path") or "").strip() and table_name(options) is None:
        raise LoadError(f"--sink {sink} writes files to a directory: give it with -o path=DIR (or a table: "
                        f"-o {TABLE_OPTION}=NAME)")
    if sink_option(options, "checkpointLocation") is not None:
        raise LoadError(f"--sink {sink}: -o checkpointLocation is the harness's (a new one each run): drop the option")


def check_format(spark, sink: str) -> None:
    """Raise `LoadError` unless Spark can write a stream to format `sink` (JVM or Python data source); for
    ``delta``, unless a probe table can be written and read (`impulse.loadtest.settings.delta.probe`)."""
    if sink in known_sinks() or type(spark).__module__.startswith("pyspark.sql.connect"):
        return  # over Spark Connect there is no JVM here: the server looks the format up when the query starts
    if sink == delta.FORMAT:
        delta.probe(spark)
        return
    jvm = spark._jvm
    try:
        if spark._jsparkSession.sessionState().dataSourceManager().dataSourceExists(sink):
            return
        jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            sink, spark._jsparkSession.sessionState().conf())
    except Exception as exc:  # py4j error: the format is not found
        detail = str(exc).splitlines()[0] if "KAFKA_DATA_SOURCE_NOT_ENABLED" in str(exc) else ""
        raise LoadError(f"unknown sink {sink!r}: valid sinks are {_valid_names()} (or any streaming format this "
                        f"Spark can load: a format from a connector needs its jars, --packages GROUP:ARTIFACT:VERSION)"
                        f"{'; ' + detail if detail else ''}") from None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    notes = [" ".join(n.split()) for n in getattr(exc, "__notes__", ())]
    return "; ".join([text, *notes])
