"""The load-testing harness: impulse events at a target rate into a sink, measured end to end.

Command line: ``impulse-load`` (or ``python -m impulse.loadtest``), see `impulse.loadtest.cli`.
Python API, e.g. with a session of your own::

    from impulse.loadtest import LoadConfig, RampConfig, run_load, run_ramp, summary_text, write_report

    result = run_load(LoadConfig(sink="redis-sink", options={"url": "redis://localhost:6379"},
                                 rate=50_000, duration_s=60, partitions=4, payload_bytes=256), spark=spark)
    print(summary_text(result)); write_report(result, "out/")
    ramp = run_ramp(LoadConfig(sink="noop"), RampConfig(100_000, 100_000, 2_000_000, 10), spark=spark)
    ramp.highest_sustained_rate

Modules, one job each: `units` (rates, durations, KEY=VALUE: parsed), `config` (what to run),
`scenario` (the one table of keys: flags and TOML files), `stages` (the source's ``rateStages``:
arithmetic and per-stage results), `target` (sink names, pre-flight check, option redaction),
`session` (Spark session, warm-up), `receiver` (embedded HTTP receiver), `metrics` (per-batch
measurements: delivered, lag, latency split into schedule delay and delivery, achieved rate),
`transform` (the user's query: ``--transform`` / ``--sql``, shipped to the executors), `check` (``--check``:
the target read back and compared with the query over a batch read), `bound` (when a rate is sustained), `thresholds` (``--threshold`` pass/fail checks), `run` (one
run), `ramp` (step mode), `display` (live progress), `prometheus` (``--metrics-port``), `report`
(summary table, JSON, CSV), `plot` (PNG), `sections` (the runs of a report.json document),
`htmlreport` (report.html), `junit` (``--junit``), `compare` (``impulse-load compare DIR…``), `via_kafka` (the
production topology, ``--via``: impulse → a Kafka topic → the pipeline → the sink; `via_watch`: its end and
backlog drain), `output_latency` (a pipeline's output topic read back: broker time − scheduled time), `cli`
(``impulse-load [run FILE]``, signals, exit codes).
"""

from impulse.loadtest.bound import Verdict, assess
from impulse.loadtest.config import LoadConfig, LoadError, RampConfig
from impulse.loadtest.display import Display
from impulse.loadtest.ramp import RampResult, run_ramp
from connectors.servers.receiver import Receiver
from impulse.loadtest.report import ramp_text, summary_text, write_report
from impulse.loadtest.run import LoadResult, StopRequest, run_load
from impulse.loadtest.target import known_sinks

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
