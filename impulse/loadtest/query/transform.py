"""The user's query between the source and the sink: ``--transform MODULE:FUNCTION`` or ``--sql "SELECT … FROM events"``.

Contract of a transform: ``FUNCTION(events)`` takes the events DataFrame (streaming in the run, a bounded
batch read of the same events for ``--check``) and returns the DataFrame to write; it must be a function of
its input alone, so that the batch answer is the stream's. ``--sql`` is the same with the events as the
temporary view ``events``. ``nexmark:q0`` … ``nexmark:q22`` are the Nexmark queries of
`impulse.nexmark.queries` (``--source nexmark``), each with its own output mode and finality rule.

When things are checked, every failure being a `LoadError` naming the flag and quoting Python's or Spark's
reason (the CLI exits 2 before any load):

- `resolve`, before Spark starts: MODULE is found (the working directory first, then ``PYTHONPATH``) and binds
  FUNCTION, read without running it; a Nexmark query exists and Spark can stream it;
- `load`, once the session exists (a module's top-level ``F.udf(…)`` needs one): MODULE imports and FUNCTION is
  callable;
- `build`, on the session, before the query starts: the function returns (no exception), returns a DataFrame,
  streaming like its input; the SQL parses and resolves; ``--event-time-column`` names a timestamp column;
- `start`, when the query starts: Spark accepts the output mode for the query (its reason otherwise).

`ship` makes MODULE importable where tasks run: ``SparkContext.addPyFile`` (local workers, a standalone
cluster's executors) or, over Spark Connect, ``spark.addArtifacts(path, pyfile=True)`` (the server's
workers); a package is shipped whole as a zip.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import re
import sys
import tempfile
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from impulse.loadtest.settings.config import LoadConfig
from impulse.loadtest.settings.target import project_sinks
from impulse.loadtest.settings.units import LoadError
from impulse.nexmark.queries import query as nexmark_query

__all__ = ["Transform", "describe", "check_mode", "resolve", "function_of", "load", "locate", "build", "apply", "with_event_time",
           "latency_definition", "start", "ship", "output_mode", "final_after", "reason", "exception_text", "NEXMARK_PREFIX", "EVENTS_VIEW"]

NEXMARK_PREFIX = "nexmark:"   # --transform nexmark:q5: a built-in Nexmark query
EVENTS_VIEW = "events"        # the temporary view --sql reads

_shipped: set[tuple[str, str]] = set()
_CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"


@dataclass(frozen=True)
class Transform:
    """A resolved ``--transform`` / ``--sql``: what the harness calls on the events.

    `flag` names where it came from (for messages); `function` is the user's FUNCTION (None for SQL and
    Nexmark); `nexmark` the built-in query; `module_path` the file or package directory to ship.
    """

    flag: str
    text: str
    function: Callable[[Any], Any] | None = None
    nexmark: Any = None
    module_path: str | None = None
    module_name: str | None = None      # MODULE of ``--transform MODULE:FUNCTION``, imported by `load`
    function_name: str | None = None

    @property
    def label(self) -> str:
        return f"{self.flag} {self.text}"


def reason(exc: BaseException) -> str:
    """The one line of an exception a user needs: Spark's message without its JVM stack, or ``Type: text``."""
    text = str(getattr(exc, "desc", None) or exc)
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("at ")]
    first = lines[0] if lines else ""
    if type(exc).__module__.startswith(("pyspark", "py4j")):
        return first[:500] or type(exc).__name__
    return f"{type(exc).__name__}: {first}"[:500] if first else type(exc).__name__


def exception_text(exc: Any) -> str:
    """The most telling line of a streaming query's exception (the Python error, if there is one)."""
    text = str(getattr(exc, "desc", None) or exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"^([\w.]+\.)?\w*(Error|Exception): ", line)]
    return (errors[-1] if errors else lines[0] if lines else repr(exc))[:500]


@contextmanager
def connect_mode(remote: bool) -> Iterator[None]:
    """With `remote`, PySpark's functions (``F.udf``, ``F.col`` …) build Spark Connect objects meanwhile: they pick
    classic or Connect by the environment variable ``SPARK_CONNECT_MODE_ENABLED``, which a Connect session made in
    a process (the harness's ``--remote``) does not set. The user's module is imported, and called, inside it."""
    if not remote or _CONNECT_MODE in os.environ:
        yield
        return
    os.environ[_CONNECT_MODE] = "1"
    try:
        yield
    finally:
        os.environ.pop(_CONNECT_MODE, None)


def _working_directory_first() -> str:
    """The working directory, put first on ``sys.path`` as `python -m` would; returns it."""
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    return cwd


def _import(module_name: str, flag: str, text: str, remote: bool):
    cwd = _working_directory_first()
    try:
        with connect_mode(remote):
            return importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's module's: quoted
        raise LoadError(f"{flag} {text}: cannot import module {module_name!r} (from the working directory {cwd} or "
                        f"PYTHONPATH): {reason(exc)}") from None


def locate(module_name: str, flag: str, text: str) -> tuple[str | None, str | None]:
    """Where `module_name` is, found without running any of its code (a module commonly creates UDFs at its top
    level, which needs a Spark session): ``(its Python file, the file or package directory to ship)``; the file is
    None where there is no Python source to read (a compiled extension, a namespace package). `LoadError` naming
    `flag` when it is missing."""
    cwd = _working_directory_first()
    top, *rest = module_name.split(".")
    missing = LoadError(f"{flag} {text}: cannot import module {module_name!r} (from the working directory {cwd} or "
                        f"PYTHONPATH): ModuleNotFoundError: No module named {module_name!r}")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise missing
    locations = list(spec.submodule_search_locations or [])
    shipped = locations[0] if locations else spec.origin
    origin = spec.origin if spec.has_location else None
    for part in rest:  # the submodules' files, looked up rather than imported (their packages' code runs on import)
        found = next((path for folder in locations
                      for path in (os.path.join(folder, part, "__init__.py"), os.path.join(folder, f"{part}.py"))
                      if os.path.isfile(path)), None)
        if found is None:
            folders = [os.path.join(folder, part) for folder in locations if os.path.isdir(os.path.join(folder, part))]
            if not folders:
                raise missing
            locations, origin = folders, None   # a namespace package
            continue
        origin = found
        locations = [os.path.dirname(found)] if found.endswith("__init__.py") else []
    return (origin if origin and origin.endswith(".py") else None), shipped


def defines(path: str, name: str) -> bool:
    """Whether the Python file at `path` may bind `name` at its top level: a def, class, assignment or import of it,
    or anything that could bind it unseen (``import *``, a module ``__getattr__``, ``global``, a dunder name)."""
    if name.startswith("__") and name.endswith("__"):
        return True
    try:
        tree = ast.parse(Path(path).read_bytes(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return True  # the import will say what is wrong
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in (name, "__getattr__"):
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                alias.name == "*" or (alias.asname or alias.name.split(".")[0]) == name for alias in node.names):
            return True
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store):
            return True
        if isinstance(node, ast.Global) and name in node.names:
            return True
    return False


def resolve(config: LoadConfig) -> Transform | None:
    """The transform of `config` (None without one), checked before Spark starts: a Nexmark query exists and Spark
    can stream it; MODULE is found and binds FUNCTION, read without running the module (`load` imports it once the
    session exists)."""
    if config.sql is not None:
        if not config.sql.strip():
            raise LoadError("--sql: the query is empty; write e.g. --sql \"SELECT * FROM events WHERE …\"")
        return Transform("--sql", config.sql)
    text = config.transform
    if text is None:
        return None
    module_name, sep, function_name = text.strip().rpartition(":")
    if not sep or not module_name or not function_name:
        raise LoadError(f"--transform {text!r}: write MODULE:FUNCTION (e.g. my_pipeline:enrich), or nexmark:q5")
    if module_name == NEXMARK_PREFIX.rstrip(":"):
        try:
            q = nexmark_query(function_name)
        except KeyError as exc:
            raise LoadError(f"--transform {text}: {exc.args[0]}") from None
        if config.source != "nexmark":
            raise LoadError(f"--transform {text} reads Nexmark events: add --source nexmark")
        if not q.runs:
            raise LoadError(f"--transform {text}: Spark cannot stream this query: {q.unsupported}")
        return Transform("--transform", text, nexmark=q)
    return function_of(text, "--transform")


def function_of(text: str, flag: str, example: str = "my_pipeline:enrich") -> Transform:
    """``MODULE:FUNCTION`` of `flag` (``--transform``, ``--expect``) checked before Spark starts: MODULE is found and
    binds FUNCTION, read without running it (`locate`, `defines`); `load` imports it once the session exists."""
    module_name, sep, function_name = text.strip().rpartition(":")
    if not sep or not module_name or not function_name:
        raise LoadError(f"{flag} {text!r}: write MODULE:FUNCTION (e.g. {example})")
    path, shipped = locate(module_name, flag, text)
    if path is not None and not defines(path, function_name):
        raise LoadError(f"{flag} {text}: module {module_name!r} ({path}) has no {function_name!r}")
    return Transform(flag, text, module_path=shipped, module_name=module_name, function_name=function_name)


def load(spark, transform: Transform | None) -> Transform | None:
    """`transform` with its FUNCTION imported, now that `spark` exists (unchanged for SQL, Nexmark, or a transform
    already loaded); `LoadError` naming its flag when the module fails to import, or FUNCTION is missing or not
    callable."""
    if transform is None or transform.function is not None or transform.module_name is None:
        return transform
    flag, text = transform.flag, transform.text
    module_name, function_name = transform.module_name, transform.function_name
    module = _import(module_name, flag, text, _is_remote(spark))
    function = getattr(module, function_name, None)
    if function is None:
        raise LoadError(f"{flag} {text}: module {module_name!r} ({getattr(module, '__file__', '?')}) has no "
                        f"{function_name!r}")
    if not callable(function):
        raise LoadError(f"{flag} {text}: {module_name}.{function_name} is a {type(function).__name__}, not a "
                        "function of the events DataFrame")
    return replace(transform, function=function)


def describe(config: LoadConfig) -> str:
    """The run's query in a few words, e.g. ``nexmark events → --transform nexmark:q5 (append)``; empty for plain
    impulse events into the sink."""
    query = (f"--sql {config.sql!r}" if config.sql is not None
             else f"--transform {config.transform}" if config.transform is not None else "")
    if not query and config.source == "impulse":
        return ""
    mode = config.output_mode or "append"
    if config.output_mode is None and (config.transform or "").startswith(NEXMARK_PREFIX):
        try:
            mode = nexmark_query(config.transform[len(NEXMARK_PREFIX):]).mode
        except KeyError:
            mode = ""
    return f"{config.source} events" + (f" → {query}" if query else "") + (f" ({mode})" if query and mode else "")


def output_mode(config: LoadConfig, transform: Transform | None) -> str:
    """``--output-mode``, or a Nexmark query's own mode, or ``append``. Into the project's sinks, which take no
    update mode, a Nexmark update stream runs in complete mode when its check does (q4, q17, …), and in append
    mode when each row it emits is its key's new state (`Query.latest_by`: q15, q16), which the check reduces to
    the last row per key."""
    if config.output_mode is not None:
        return config.output_mode
    q = transform.nexmark if transform is not None else None
    if q is None:
        return "append"
    if q.mode == "update" and config.sink in project_sinks():
        if q.check_mode == "complete":
            return "complete"
        if q.latest_by:
            return "append"
    return q.mode


def check_mode(sink: str, mode: str) -> None:
    """Refuse, before Spark starts, an output mode Spark refuses for the sink whatever the query: the project's sinks
    are Python data sources, which Spark writes in append or complete mode only (it fails the first micro-batch
    with "<sink> does not support Update mode")."""
    if mode == "update" and sink in project_sinks():
        raise LoadError(f"--output-mode update: Spark refuses it: {sink} does not support Update mode (Spark writes "
                        "a Python data source in append or complete mode); use complete, or append with a watermark")


def final_after(config: LoadConfig, transform: Transform | None) -> str | None:
    """A SQL expression over the output that makes an appended row final once the watermark passed it:
    ``--event-time-column``, else a Nexmark query's own rule; None: every row is final when written."""
    if config.event_time_column:
        return config.event_time_column
    return transform.nexmark.final_after if transform is not None and transform.nexmark is not None else None


def build(spark, config: LoadConfig, transform: Transform | None, events):
    """The DataFrame to write: `apply`, then `with_event_time`."""
    return with_event_time(config, apply(spark, transform, events), _is_remote(spark))


def latency_definition(config: LoadConfig, output) -> str:
    """How the run's latency is measured for `output` (the transform's result, before `with_event_time`):
    ``end-to-end`` (it keeps ``timestamp``: each event's schedule → the sink's acknowledgement), ``event-time``
    (``--event-time-column`` → the acknowledgement) or ``micro-batch`` (the newest input event's schedule of each
    micro-batch → its commit)."""
    if "timestamp" in output.columns:
        return "end-to-end"
    return "event-time" if config.event_time_column else "micro-batch"


def apply(spark, transform: Transform | None, events):
    """`transform` applied to `events` (streaming or batch), analysed: any problem is a `LoadError` naming the flag."""
    if transform is None:
        out = events
    else:
        try:
            if transform.nexmark is not None:
                with connect_mode(_is_remote(spark)):
                    out = transform.nexmark.build(events, spark)
            elif transform.function is not None:
                with connect_mode(_is_remote(spark)):
                    out = transform.function(events)
            else:
                events.createOrReplaceTempView(EVENTS_VIEW)
                out = spark.sql(transform.text)
        except Exception as exc:  # noqa: BLE001 - the user's code or Spark's analysis: quoted
            what = "Spark cannot run it" if transform.function is None else "the function raised"
            raise LoadError(f"{transform.label}: {what}: {reason(exc)}") from None
        if not isinstance(out, DataFrame):
            raise LoadError(f"{transform.label}: returned {type(out).__name__}, not a DataFrame (return the "
                            "DataFrame to write)")
        try:
            streaming = out.isStreaming
            out.schema  # noqa: B018 - analysis: over Spark Connect errors show here, not at the call
        except Exception as exc:  # noqa: BLE001 - Spark's analysis of the user's output: quoted
            raise LoadError(f"{transform.label}: Spark cannot run it: {reason(exc)}") from None
        if streaming != events.isStreaming:
            raise LoadError(f"{transform.label}: returned a batch DataFrame; derive the result from the events "
                            "passed in (a static table may be joined to them)")
    return out


def with_event_time(config: LoadConfig, out, remote: bool = False):
    """`out`, plus, when it has no ``timestamp``, ``--event-time-column`` names one and the sink is one of the
    project's (which measure latency from each row's ``timestamp``), that column again as ``timestamp``; any other
    target (Spark's sinks, a table, ``--foreach-batch``) gets the user's output as it is. `LoadError` when the
    column is missing or not a timestamp. `remote`: `out` is a Spark Connect DataFrame."""
    column = config.event_time_column
    if not column:
        return out
    with connect_mode(remote):
        try:
            kind = out.select(F.col(column).alias("t")).schema["t"].dataType.typeName()
        except Exception as exc:  # noqa: BLE001 - a column Spark cannot resolve: quoted, naming the flag
            raise LoadError(f"--event-time-column {column}: not a column of the output ({', '.join(out.columns)}): "
                            f"{reason(exc)}") from None
        if kind not in ("timestamp", "timestamp_ntz"):
            raise LoadError(f"--event-time-column {column}: a {kind} column, not a timestamp")
        if "timestamp" in out.columns or config.sink not in project_sinks():
            return out
        return out.withColumn("timestamp", F.col(column))


def start(writer, mode: str, transform: Transform | None, table: str | None = None):
    """`writer.outputMode(mode).start()` (`table`: ``.toTable(table)``); Spark's refusal (an output mode the query
    cannot use, …) as a `LoadError`."""
    try:
        writer = writer.outputMode(mode)
        return writer.toTable(table) if table is not None else writer.start()
    except Exception as exc:  # noqa: BLE001 - Spark's analysis at start: quoted without the JVM stack
        text = reason(exc)
        flag = "--output-mode " + mode if "output mode" in text.lower() or "outputmode" in text.lower() else (
            transform.label if transform is not None else "the query")
        raise LoadError(f"{flag}: Spark refuses to start the query: {text}") from None


def ship(spark, transform: Transform | None) -> None:
    """Make the transform's module importable by the tasks (once per session and file; see the module docstring)."""
    if transform is None or transform.module_path is None:
        return
    path = transform.module_path
    remote = _is_remote(spark)
    session = spark.session_id if remote else spark.sparkContext.applicationId
    if (session, path) in _shipped:
        return
    if os.path.isdir(path):
        path = _zip_package(path)
    if remote:
        spark.addArtifacts(path, pyfile=True)
    else:
        spark.sparkContext.addPyFile(path)
    _shipped.add((session, transform.module_path))


def _is_remote(spark) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _zip_package(directory: str) -> str:
    """A zip of the package at `directory` (its name at the zip's root), in a folder of its own."""
    package = Path(directory)
    folder = tempfile.mkdtemp(prefix="impulse-load-pyfile-")
    target = Path(folder) / f"{package.name}.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in package.rglob("*.py"):
            archive.write(file, Path(package.name) / file.relative_to(package))
    return str(target)

