"""Auto-registration: after the project's install, a fresh session finds ``impulse`` with no register call.

PySpark imports every top-level ``pyspark_*`` module defining ``DefaultSource`` the first time a format
is not found. Needs ``pip install --config-settings editable_mode=compat -e .`` (or a regular install):
a plain editable install hides the module from that lookup. The subprocess gets no PYTHONPATH and runs
in an empty directory, so only the installed package can be found.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.integration

SCRIPT = textwrap.dedent('''
    import json
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[1]").appName("impulse-registration")
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")  # a failed lookup is a warning ("Skipping the lookup of Python Data Sources")
    options = {"delay": "1ms", "numPartitions": "2", "limit": "10", "startTime": "0", "interval": "1s"}
    query = (spark.readStream.format("impulse").options(**options).load()
             .writeStream.format("memory").queryName("registered").trigger(availableNow=True).start())
    query.awaitTermination()
    streamed = sorted(tuple(r) for r in spark.sql("SELECT counter, subtask_index, unix_micros(timestamp) FROM registered").collect())
    batch = spark.read.format("impulse").options(**options).load().count()
    nexmark = spark.read.format("nexmark").option("limit", "50").load().count()
    print("RESULT " + json.dumps({"streamed": streamed, "batch": batch, "nexmark": nexmark}))
    spark.stop()
''')

#: Spark gives the Python process that looks the sources up 10 s (a constant of its PythonWorkerFactory) to connect
#: back, and skips the lookup with a warning when it does not: on a machine whose cores are all busy, a start-up's
#: timeout that says nothing about the modules it would have imported
CONNECT_BACK = "waiting for the Python worker to connect back"


def test_fresh_session_finds_impulse_without_register_all(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    def fresh_session() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=300)

    done = fresh_session()
    if done.returncode != 0 and CONNECT_BACK in done.stderr:  # the machine, not the lookup: once more
        done = fresh_session()
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    said = "\n".join(line for line in done.stderr.splitlines() if not line.lstrip().startswith(("at ", "...")))
    assert done.returncode == 0 and lines, (
        "a fresh session did not find format 'impulse'; is the project installed with "
        f"`pip install --config-settings editable_mode=compat -e .`?\n{done.stdout[-2000:]}\n{said[:6000]}")
    result = json.loads(lines[-1][len("RESULT "):])
    assert result["streamed"] == sorted([c, i, c * 1_000_000] for i in range(2) for c in range(5))
    assert result["batch"] == 10
    assert result["nexmark"] == 50  # pyspark_nexmark registers the Nexmark source the same way
