"""A driver of its own on a Spark master: ``python -m tests.cluster.job SPEC``, SPEC a JSON object.

The test process already holds a ``local[2,2]`` SparkContext (one per JVM), so the standalone-cluster tests
submit from here. SPEC: ``{"master": URL, "steps": [...]}``, each step one of
``{"write": FORMAT, "options": {...}, "checkpoint": PATH, "limit": N, "per_trigger": M}``,
``{"batch_read": N}``, ``{"uncommit": CHECKPOINT}`` (see `tests.cluster.scenarios`), ``{"harness": [ARG, ...]}``
(``impulse-load`` with these arguments in this application, whose session it takes: its exit code and
what it printed). Prints one line
``RESULT {"executors": N, "steps": [...]}`` with each step's result, and exits non-zero on the first failure.

No data source is registered here: the driver's and executors' Python find them by auto-registration.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time
from pathlib import Path

from pyspark.sql import SparkSession

from impulse.loadtest.cli import main
from tests.cluster.scenarios import batch_read, uncommit_last_batch, write

ROOT = Path(__file__).resolve().parents[2]


def session(master: str, executors: int = 2):
    """A classic session on `master` once `executors` executors have registered (so both take tasks)."""
    spark = (SparkSession.builder.master(master).appName("impulse-cluster-tests")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.executor.memory", "512m").config("spark.executor.cores", "1")
             .config("spark.sql.shuffle.partitions", "2").config("spark.sql.streaming.stopTimeout", "30s")
             # what a user of a shared cluster does: the executors' Python gets this checkout and interpreter
             .config("spark.executorEnv.PYTHONPATH", str(ROOT)).config("spark.pyspark.python", sys.executable)
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    deadline = time.monotonic() + 120
    while spark.sparkContext._jsc.sc().getExecutorIds().size() < executors:
        if time.monotonic() > deadline:
            raise TimeoutError(f"fewer than {executors} executors registered with {master} after 120 s")
        time.sleep(0.2)
    return spark


def harness(args: list[str]) -> dict:
    """``impulse-load ARGS`` on the running session (its executors are warm): ``{"code": N, "stdout": TEXT}``."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(args)
    return {"code": code, "stdout": out.getvalue()}


def run(spec: dict) -> dict:
    spark = session(spec["master"], spec.get("executors", 2))
    results = []
    try:
        for step in spec["steps"]:
            if "write" in step:
                results.append(write(spark, step["write"], step["options"], step["checkpoint"], step["limit"],
                                     step["per_trigger"]))
            elif "batch_read" in step:
                results.append(batch_read(spark, step["batch_read"]))
            elif "uncommit" in step:
                results.append(uncommit_last_batch(step["uncommit"]))
            elif "harness" in step:
                results.append(harness(step["harness"]))
            else:
                raise ValueError(f"unknown step {step}")
        return {"executors": spark.sparkContext._jsc.sc().getExecutorIds().size(), "steps": results}
    finally:
        spark.stop()


if __name__ == "__main__":
    print("RESULT " + json.dumps(run(json.loads(sys.argv[1]))), flush=True)
