"""The load-testing harness: impulse events at a target rate into a sink, measured end to end.

Command line: ``impulse-load`` (or ``python -m impulse.loadtest``), see `impulse.loadtest.cli`.
Python API, e.g. with a session of your own::

    from impulse.loadtest import LoadConfig, RampConfig, run_load, run_ramp, summary_text, write_report

    result = run_load(LoadConfig(sink="redis-sink", options={"url": "redis://localhost:6379"},
                                 rate=50_000, duration_s=60, partitions=4, payload_bytes=256), spark=spark)
    print(summary_text(result)); write_report(result, "out/")
    ramp = run_ramp(LoadConfig(sink="noop"), RampConfig(100_000, 100_000, 2_000_000, 10), spark=spark)
    ramp.highest_sustained_rate

Packages by job, from the bottom up; each imports only those below it:

- `measure`: per-batch measurements, the bound of a sustained rate, what each latency measures;
- `settings`: what a run is asked (`LoadConfig`, `RampConfig`, the values a user writes, the sink, ``rateStages``,
  ``--threshold``, ``--via``), checked before Spark starts;
- `query`: the user's query (``--transform`` / ``--sql``) and the refusals read off its plan;
- `check`: ``--check``, the target read back and compared with the expected answer;
- `load`: running a load: one run, the step mode, the warm-ups, live progress, the embedded receiver;
- `via`: the production topology, ``--via``: impulse → a Kafka topic → the pipeline → the sink;
- `reports`: the summary, report.json, report.html, the PNG, ``--junit``, the verdict, Prometheus, ``compare``.

Above them: `scenario` (the one table of keys: flags and TOML files) and `cli` (``impulse-load [run FILE]``,
signals, exit codes). Some modules' old paths (``impulse.loadtest.run``, ``impulse.loadtest.config``, …) still
import, with a `DeprecationWarning` naming the new one, for one release.
"""

from connectors.servers.receiver import Receiver
from impulse.loadtest.load.display import Display
from impulse.loadtest.load.ramp import RampResult, run_ramp
from impulse.loadtest.load.run import LoadResult, StopRequest, run_load
from impulse.loadtest.measure.bound import Verdict, assess
from impulse.loadtest.reports.report import ramp_text, summary_text, write_report
from impulse.loadtest.settings.config import LoadConfig, LoadError, RampConfig
from impulse.loadtest.settings.target import known_sinks

__all__ = [
    "Display",
    "LoadConfig",
    "LoadError",
    "LoadResult",
    "RampConfig",
    "RampResult",
    "Receiver",
    "StopRequest",
    "Verdict",
    "assess",
    "ramp_text",
    "run_load",
    "run_ramp",
    "known_sinks",
    "summary_text",
    "write_report",
]
