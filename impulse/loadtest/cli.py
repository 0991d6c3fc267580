"""``impulse-load`` (also ``python -m impulse.loadtest``): the command line of the load harness.

Exit codes: `EXIT_CODES`, which ``--help`` and the documentation's reference page print; each run's code is its
PASS/FAIL (`impulse.loadtest.reports.verdict`), which the summary's first line states.

``impulse-load run FILE.toml [FLAGS…] [--set KEY=VALUE…]`` runs the scenarios of a file one after
another (`impulse.loadtest.scenario`: the flags and the file's keys are one table); a bad file exits 2
before Spark starts. ``impulse-load compare DIR…`` compares the reports of earlier runs
(`impulse.loadtest.reports.compare`).
"""

from __future__ import annotations

import logging
import signal
import sys
import textwrap
import warnings
from contextlib import ExitStack
from dataclasses import replace
from typing import Sequence

from pyspark import SparkContext
from pyspark.sql import SparkSession

from impulse.loadtest.check.expect import locate as locate_oracle
from impulse.loadtest.load.display import Display
from impulse.loadtest.load.orchestrate import orchestrate, prepare
from impulse.loadtest.load.ramp import run_ramp
from impulse.loadtest.load.receiver import Receiver, embedded_options, needs_receiver
from impulse.loadtest.load.run import Direct, StopRequest, describe_run, impulse_options
from impulse.loadtest.reports.compare import main as compare_main
from impulse.loadtest.reports.junit import write_junit
from impulse.loadtest.reports.prometheus import Exporter
from impulse.loadtest.reports.report import ramp_text, report_document, summary_text, write_report
from impulse.loadtest.reports.verdict import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_THRESHOLDS, decide_all
from impulse.loadtest.scenario import Plan, Scenario, plan_from_args
from impulse.loadtest.settings import delta
from impulse.loadtest.settings.spark_conf import refuse_unapplied, session_conf
from impulse.loadtest.settings.units import LoadError
from impulse.loadtest.via.kafka import ThroughKafka, session_master
from impulse.session import make_session

__all__ = ["main"]

EXIT_USAGE = 2   # the others are a run's PASS/FAIL: impulse.loadtest.reports.verdict

#: What each exit code means: the one list, printed by ``--help`` and the documentation's reference page.
EXIT_CODES: dict[int, str] = {
    EXIT_OK: "the run completed (a ramp: ran to its end and passed as a gate)",
    EXIT_FAILED: "the query failed, did not deliver every event in time, or needed task retries (errors > 0)",
    EXIT_USAGE: "nothing was sent: a bad flag or file, an unknown sink, a bad sink option, a bad --threshold or an "
                "unreachable target (one line on stderr, no traceback)",
    EXIT_THRESHOLDS: "a --threshold or --check failed, or a ramp did (no step sustained, or its highest sustained "
                     "rate below --min-sustained) (k6's code; after the report is written)",
    EXIT_INTERRUPTED: "stopped by Ctrl-C / SIGTERM (the report still covers what ran)",
}

_EPILOG = """\
examples:
  impulse-load                                   # embedded default: webhook-sink into a local receiver, 20k events/s, 30s
  impulse-load --sink redis-sink --option url=redis://localhost:6379 --rate 50000 --duration 60s \\
               --partitions 4 --payload-bytes 256
  impulse-load --sink kafka-sink -o kafka.bootstrap.servers=localhost:9092 -o topic=load --create-topic 2 \\
               --rate 100k
  impulse-load --via kafka://localhost:9092/events --create-topic 2 --sink kafka \
               -o kafka.bootstrap.servers=localhost:9092 -o topic=out --pipeline-trigger realTime=5s --rate 10k
                                                 # through Kafka: a producer fills the topic, the pipeline reads it
  impulse-load --sink noop --ramp 100k:100k:2M --step-duration 10s --output report/
  impulse-load --sink noop --ramp 100k:100k:2M --min-sustained 1M   # a CI gate: exit 99 below 1M events/s
  impulse-load --sink redis-sink -o url=redis://localhost:6379 --rate 10k --trigger 0 \\
               --threshold 'p99<1s' --threshold 'rate>=95%' --threshold 'errors==0'   # a CI gate: exit 99 on failure
  impulse-load run examples/spike-redis.toml --set options.url=redis://localhost:6379   # a load test as a file
  impulse-load --sink noop --rate 10k --threshold 'p99<1s' --junit results.xml   # thresholds as JUnit XML for CI
  impulse-load compare runs/redis runs/kafka     # earlier --output DIRs: one table, an overlay plot, one HTML page

A step (and a run) is sustained when it completed, achieved >= 95% of its target rate in steady
state (the lag did not grow faster than 5% of the rate) and its p99 latency <= --max-latency.
"""


_DESCRIPTION = ("Load-test a sink with impulse events through Spark Structured Streaming: live progress, then target "
                "vs achieved rate, end-to-end latency percentiles and Spark's phase durations.")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (see the module docstring)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["compare"]:
        return compare_main(argv[1:])
    try:
        plan = plan_from_args(argv, description=_DESCRIPTION, epilog=_EPILOG + _exit_codes_help())
    except LoadError as exc:
        return _error(str(exc))
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"pyspark\..*")

    display = Display()
    stop = StopRequest()
    with ExitStack() as stack:
        quiet = logging.getLogger("impulse.connectors")  # the pre-flight's retries: the error says it all
        stack.callback(quiet.setLevel, quiet.level)
        quiet.setLevel(logging.ERROR)
        for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):  # PySpark logs, with the JVM's stack,
            logger = logging.getLogger(name)                                  # an analysis error we report
            stack.callback(logger.setLevel, logger.level)
            logger.setLevel(logging.CRITICAL)
        try:
            scenarios, receiver = _prepare(plan, display, stack)
            exporter = None
            if plan.metrics_port is not None:
                exporter = stack.enter_context(Exporter(plan.metrics_port, plan.metrics_host))
                display.line(f"Prometheus metrics at {exporter.url}")
        except LoadError as exc:
            return _error(str(exc))

        config = scenarios[0].config
        try:

            masters = {session_master(s.config) for s in scenarios} - {config.master}  # real-time mode's slots
            master = max(masters, key=_slots) if masters else config.master
            display.line(f"starting Spark ({config.remote or master})…")

            # main() called in a process with a session: keep it (a Connect client session is always ours)
            owned = config.remote is not None or SparkContext._active_spark_context is None
            spark_conf = delta.session_settings((s.config.sink for s in scenarios), config.spark_conf,
                                                (config.spark_conf.get("spark.jars.packages", ""), *config.packages))
            delta_conf = {k: v for k, v in spark_conf.items() if config.spark_conf.get(k) != v}
            if not owned and delta_conf:  # before the builder sets Delta's catalog on a running session lacking Delta
                delta.refuse_unapplied(SparkSession.builder.getOrCreate(), delta_conf)
            spark = make_session(master, remote=config.remote, kafka=any(s.config.via is not None for s in scenarios),
                                 settings=session_conf(spark_conf, config.packages))
            if owned:
                stack.callback(spark.stop)
            refuse_unapplied(spark, config.spark_conf, config.packages)
            delta.refuse_unapplied(spark, delta_conf)
            # after the session: PySpark's SparkContext installs a SIGINT handler of its own (cancel all jobs)
            _install_signals(stop, display, stack)
            return _run(plan, scenarios, spark, display, stop, receiver, exporter)
        except LoadError as exc:
            display.finish()
            return _error(str(exc))
        except KeyboardInterrupt:
            display.finish()
            print("impulse-load: interrupted before the load started", file=sys.stderr)
            return EXIT_INTERRUPTED


def _exit_codes_help() -> str:
    """`EXIT_CODES` as the end of ``--help``."""
    return "\nexit codes:\n" + "".join(textwrap.fill(meaning, 110, initial_indent=f"  {code:<5}",
                                                      subsequent_indent=" " * 7) + "\n"
                                        for code, meaning in EXIT_CODES.items())


def _slots(master: str) -> int:
    """The task slots of a ``local[N]`` master (0 for any other)."""
    digits = master[len("local["):-1] if master.startswith("local[") else ""
    return int(digits) if digits.isdigit() else 0


def _error(message: str) -> int:
    print(f"impulse-load: error: {message}", file=sys.stderr, flush=True)
    return EXIT_USAGE


def _prepare(plan: Plan, display, stack: ExitStack) -> tuple[list[Scenario], object]:
    """Every scenario checked before Spark starts (impulse options, the sink's pre-flight), with the embedded
    receiver's options where a webhook sink has no url; `LoadError` names the file and scenario of a problem."""
    receiver = None
    ready = []
    for scenario in plan.scenarios:
        config, ramp = scenario.config, scenario.ramp
        try:
            if needs_receiver(config.sink, config.options):
                if receiver is None:  # with --check it keeps the rows, to be read back
                    receiver = stack.enter_context(Receiver(record=any(s.config.check for s in plan.scenarios)))
                config = replace(config, options=embedded_options(receiver, config.options))
                display.line(f"embedded HTTP receiver at {config.options['url']} (dedupes by Idempotency-Key; sink "
                             f"options format={config.options['format']}, batchSize={config.options['batchSize']})")
            for rate in ([ramp.start, ramp.maximum] if ramp else [config.rate]):
                duration = ramp.step_duration_s if ramp else config.duration_s
                impulse_options(replace(config, rate=rate, duration_s=duration))
            if config.expect is not None:
                locate_oracle(config.expect)
            if config.via is not None and ramp is not None:
                raise LoadError("--ramp runs impulse into the sink directly; with --via run one rate at a time")
            prepare(config, _topology(config), receiver)  # the run's own pre-flight: target, topics, --check's reader
        except LoadError as exc:
            if plan.file is None:
                raise
            raise LoadError(f"{plan.file}: scenario {scenario.name!r}: {exc}") from None
        ready.append(replace(scenario, config=config))
    return ready, receiver


def _topology(config) -> Direct | ThroughKafka:
    """Where the run's events enter the pipeline: through Kafka with ``--via`` (the production topology, impulse →
    a topic → the pipeline → the sink), else the source feeds the sink's query directly."""
    return ThroughKafka() if config.via is not None else Direct()


def _install_signals(stop, display, stack: ExitStack) -> None:
    """SIGINT/SIGTERM: the first asks the run to stop between batches, the second to stop now.

    The previous handlers come back when `stack` closes (main() may be called in-process, e.g. by tests).
    """

    def handler(signum, frame) -> None:
        stop.request()
        if stop.forced:
            display.line("impulse-load: stopping now")
        else:
            display.line("impulse-load: stopping after the running micro-batch (Ctrl-C again to stop now)")

    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            previous = signal.signal(signum, handler)
        except ValueError:  # not the main thread: no signal handling
            continue
        stack.callback(signal.signal, signum, previous)


def _run(plan: Plan, scenarios: Sequence[Scenario], spark, display, stop, receiver, exporter) -> int:
    """The scenarios one after another (a stop request ends the plan), their summaries, the report, the exit code of
    their PASS/FAIL (`impulse.loadtest.reports.verdict`): 130 interrupted, else 99 a threshold, check or ramp failed,
    else 1 a run failed, else 0."""
    results: list[tuple[str, object]] = []
    interrupted = False
    for index, scenario in enumerate(scenarios):
        config, ramp = scenario.config, scenario.ramp
        if len(scenarios) > 1:
            display.line(f"scenario {index + 1}/{len(scenarios)}: {scenario.name}")
        if ramp is not None:
            result = run_ramp(config, ramp, spark=spark, display=display, stop=stop, receiver=receiver,
                              exporter=exporter)
            display.line("")
            for step in result.steps:
                display.line(summary_text(step))
                display.line("")
            display.line(ramp_text(result))
            interrupted = interrupted or result.interrupted
        else:
            result = orchestrate(config, _topology(config), spark=spark, display=display, stop=stop,
                                 receiver=receiver, exporter=exporter,
                                 label=f"{scenario.name}: {describe_run(config)}" if scenario.name else None)
            display.line("")
            display.line(summary_text(result, scenario.name))
            interrupted = interrupted or result.outcome == "interrupted"
        results.append((scenario.name, result))
        display.line("")
        if interrupted or stop.is_set():
            break
    if plan.output:
        paths = write_report(results if plan.file else results[0][1], plan.output, file=plan.file,
                             name=scenarios[0].name)
        display.line("report: " + ", ".join(str(p) for p in paths.values()))
    if plan.junit:
        document, _, _ = report_document(results if plan.file else results[0][1], file=plan.file,
                                         name=scenarios[0].name)
        display.line(f"JUnit XML: {write_junit(document, plan.junit)}")
    return decide_all(results).exit_code   # PASS/FAIL and its reasons, as the summary and the reports say

