"""Refusals read off the pipeline's plan, on the session but before any event is produced.

Spark analyses a streaming DataFrame when it is built and plans it (``explain``) without running it, so two
setups that could only fail during the load are refused here, each as a `LoadError` (the CLI exits 2):

- ``--check`` on an append query that aggregates (a windowed count, …) without a finality rule
  (``--event-time-column``): Spark appends a window only once the watermark has passed it, so the windows still
  open when the run stops would be counted as lost. The message suggests the output's window columns.
- real-time mode (``--pipeline-trigger realTime=…``) with an operator its allowlist refuses: Spark's real-time mode
  runs no Python worker (a Python UDF, ``mapInPandas``, ``applyInPandas``, …); Spark would fail the query's first
  batch with ``STREAMING_REAL_TIME_MODE.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST`` while the load runs.
"""

from __future__ import annotations

import re

from impulse.loadtest.settings.units import LoadError

__all__ = ["plan_text", "aggregates", "python_operators", "refuse_unfinal_check", "refuse_real_time",
           "PYTHON_OPERATORS", "ALLOWLIST_CHECK"]

# physical operators that run Python workers: none is on real-time mode's operator allowlist
PYTHON_OPERATORS = ("ArrowEvalPython", "BatchEvalPython", "ArrowEvalPythonUDTF", "BatchEvalPythonUDTF",
                    "MapInPandas", "MapInArrow", "PythonMapInArrow", "FlatMapGroupsInPandas", "FlatMapGroupsInArrow",
                    "FlatMapCoGroupsInPandas", "FlatMapCoGroupsInArrow", "FlatMapGroupsInPandasWithState",
                    "TransformWithStateInPandas", "TransformWithStateInPySpark", "AggregateInPandas",
                    "ArrowAggregatePython", "WindowInPandas", "ArrowWindowPython")
ALLOWLIST_CHECK = "spark.sql.streaming.realTimeMode.allowlistCheck"   # Spark's switch for that check


def plan_text(frame) -> str:
    """Spark's ``explain(extended)`` of `frame` (parsed, analysed, optimised and physical plans) as text; works on a
    streaming DataFrame, classic or Spark Connect, without running it."""
    if type(frame).__module__.startswith("pyspark.sql.connect"):
        return frame._explain_string(mode="extended")
    return frame.sparkSession._jvm.PythonSQLUtils.explainString(frame._jdf.queryExecution(), "extended")


def _section(text: str, title: str) -> str:
    match = re.search(rf"== {title} ==\n(.*?)(?:\n== |\Z)", text, re.S)
    return match.group(1) if match else ""


def aggregates(text: str) -> bool:
    """Whether the analysed plan in `text` (`plan_text`) holds an aggregation."""
    return re.search(r"^[\s+\-:]*~?Aggregate\b", _section(text, "Analyzed Logical Plan"), re.M) is not None


def python_operators(text: str) -> list[str]:
    """The Python operators (`PYTHON_OPERATORS`) of the physical plan in `text`, in plan order, each once."""
    found = re.findall(r"^[\s+\-:*()\d]*(\w+)", _section(text, "Physical Plan"), re.M)
    return list(dict.fromkeys(name for name in found if name in PYTHON_OPERATORS))


def _window_columns(frame) -> list[str]:
    """The output's columns that could be a window's end: a timestamp, or a struct's ``end`` field."""
    out = []
    for field in frame.schema.fields:
        kind = field.dataType.typeName()
        if kind in ("timestamp", "timestamp_ntz"):
            out.append(field.name)
        elif kind == "struct" and "end" in getattr(field.dataType, "names", ()):
            out.append(f"{field.name}.end")
    return sorted(out, key=lambda name: (not name.endswith("end"), name))


def refuse_unfinal_check(frame, mode: str, rule: str | None, label: str) -> None:
    """``--check`` of an append `frame` that aggregates needs a finality `rule` (``--event-time-column``): refused
    without one, naming the output's window columns."""
    if mode != "append" or rule is not None or not aggregates(plan_text(frame)):
        return
    columns = _window_columns(frame)
    hint = (f"add --event-time-column {columns[0]}" + (f" (the output's time columns: {', '.join(columns)})"
                                                       if len(columns) > 1 else "")
            if columns else "write the window's end into the output and name it with --event-time-column")
    raise LoadError(f"--check: {label} aggregates in append mode, so Spark writes a window only once the watermark "
                    "has passed its end, and the windows still open when the run stops would count as lost; tell the "
                    f"check which output column closes a row: {hint}")


def refuse_real_time(spark, frame, flag: str) -> None:
    """Real-time mode refuses Python operators (`PYTHON_OPERATORS`) unless Spark's `ALLOWLIST_CHECK` is off:
    refused naming them, with Spark's reason."""
    if str(spark.conf.get(ALLOWLIST_CHECK, "true")).lower() == "false":
        return
    found = python_operators(plan_text(frame))
    if found:
        execs = ", ".join(f"{name}Exec" for name in found)
        raise LoadError(f"{flag}: Spark's real-time mode refuses this pipeline: the operator(s) {execs} are not in "
                        "its operator allowlist (STREAMING_REAL_TIME_MODE.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST: real-time "
                        "mode runs no Python worker, so no Python UDF or pandas function); run it with a processing-"
                        "time trigger, or express the step with Spark's built-in functions")
