"""``impulse-load`` (also ``python -m impulse.loadtest``): the command line of the load harness.

Exit codes: 0 the run completed (a ramp: ran to its end); 1 the query failed, did not deliver every
event in time, or needed task retries (errors > 0); 2 nothing was sent: a bad flag, an unknown sink,
a bad sink option, a bad ``--threshold`` or an unreachable target (one line on stderr, no traceback);
99 a ``--threshold`` failed (k6's code; after the report is written); 130 stopped by Ctrl-C / SIGTERM
(the report still covers what ran).

``impulse-load compare DIR…`` compares the reports of earlier runs (`impulse.loadtest.compare`).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import warnings
from contextlib import ExitStack
from dataclasses import replace
from typing import Sequence

from impulse.loadtest.config import (DEFAULT_DURATION_S, DEFAULT_MASTER, DEFAULT_MAX_LATENCY_S, DEFAULT_PARTITIONS,
                                     DEFAULT_PAYLOAD_BYTES, DEFAULT_RATE, DEFAULT_SINK, DEFAULT_STEP_DURATION_S,
                                     DEFAULT_TRIGGER, LoadConfig, LoadError, RampConfig, parse_option, parse_ramp,
                                     parse_rate, parse_seconds)
from impulse.loadtest.target import KNOWN_SINKS

__all__ = ["main", "build_parser"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_THRESHOLDS, EXIT_INTERRUPTED = 0, 1, 2, 99, 130

_EPILOG = """\
examples:
  impulse-load                                   # embedded default: webhook-sink into a local receiver, 20k events/s, 30s
  impulse-load --sink redis-sink --option url=redis://localhost:6379 --rate 50000 --duration 60s \\
               --partitions 4 --payload-bytes 256
  impulse-load --sink kafka-sink -o kafka.bootstrap.servers=localhost:9092 -o topic=load --rate 100k
  impulse-load --sink noop --ramp 100k:100k:2M --step-duration 10s --output report/
  impulse-load --sink redis-sink -o url=redis://localhost:6379 --rate 10k --trigger 0 \
               --threshold 'p99<1s' --threshold 'rate>=95%' --threshold 'errors==0'   # a CI gate: exit 99 on failure
  impulse-load compare runs/redis runs/kafka                # one table and one overlay plot of earlier --output DIRs

A step (and a run) is sustained when it completed, achieved >= 95% of its target rate in steady
state (the lag did not grow faster than 5% of the rate) and its p99 latency <= --max-latency.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="impulse-load",
        description="Load-test a sink with impulse events through Spark Structured Streaming: live progress, then "
                    "target vs achieved rate, end-to-end latency percentiles and Spark's phase durations.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    target = parser.add_argument_group("target")
    target.add_argument("--sink", default=DEFAULT_SINK, metavar="NAME",
                        help=f"sink format: {', '.join(KNOWN_SINKS)}, or any streaming format Spark can load "
                             f"(default {DEFAULT_SINK}; without a url option it writes to an embedded local "
                             "HTTP receiver)")
    target.add_argument("-o", "--option", action="append", default=[], metavar="KEY=VALUE",
                        help="a sink option, passed through as is (repeatable), e.g. url=redis://localhost:6379")
    load = parser.add_argument_group("load (impulse source)")
    load.add_argument("--rate", default=str(int(DEFAULT_RATE)), metavar="EVENTS_PER_S",
                      help=f"target rate, events/s over all partitions; k/M suffixes (default {DEFAULT_RATE:,.0f})")
    load.add_argument("--duration", default=f"{DEFAULT_DURATION_S:g}s", metavar="DURATION",
                      help=f"time of events to send, e.g. 60s, 2m (default {DEFAULT_DURATION_S:g}s): the run sends "
                           "rate x duration events, then waits until the sink committed the last one")
    load.add_argument("--partitions", type=int, default=DEFAULT_PARTITIONS, metavar="N",
                      help=f"impulse partitions = Spark tasks per micro-batch (default {DEFAULT_PARTITIONS})")
    load.add_argument("--payload-bytes", type=int, default=DEFAULT_PAYLOAD_BYTES, metavar="BYTES",
                      help=f"size of each event's payload column, bytes (default {DEFAULT_PAYLOAD_BYTES})")
    load.add_argument("--trigger", default=DEFAULT_TRIGGER, metavar="INTERVAL",
                      help=f"processing-time trigger interval, e.g. 1s, 500ms; 0 = back to back "
                           f"(default {DEFAULT_TRIGGER})")
    load.add_argument("--schema", default=None, metavar="DDL",
                      help="realistic events: impulse's user schema, e.g. 'user_id BIGINT, amount DOUBLE' (generated "
                           "as --source-option fields.<column>.* says; counter, subtask_index, timestamp and payload "
                           "are added when missing)")
    load.add_argument("--source-option", action="append", default=[], metavar="KEY=VALUE",
                      help="an impulse option, repeatable: fields.<column>.<property>, seed, outOfOrderness, …")
    load.add_argument("--max-events-per-trigger", type=int, default=None, metavar="N",
                      help="admission control: at most N events per micro-batch (default: no limit)")
    load.add_argument("--drain-timeout", default=None, metavar="DURATION",
                      help="how long after the duration to wait for the last events (default max(30s, duration))")
    ramp = parser.add_argument_group("step mode")
    ramp.add_argument("--ramp", default=None, metavar="START:STEP:MAX",
                      help="raise the rate in steps (events/s, e.g. 10000:10000:200000 or 10k:10k:200k) until a step "
                           "is not sustained; reports the highest sustained rate")
    ramp.add_argument("--step-duration", default=f"{DEFAULT_STEP_DURATION_S:g}s", metavar="DURATION",
                      help=f"duration of each step (default {DEFAULT_STEP_DURATION_S:g}s)")
    ramp.add_argument("--max-latency", default=f"{DEFAULT_MAX_LATENCY_S:g}s", metavar="DURATION",
                      help=f"p99 end-to-end latency above which a step (or run) is not sustained "
                           f"(default {DEFAULT_MAX_LATENCY_S:g}s)")
    gate = parser.add_argument_group("thresholds (a CI gate)")
    gate.add_argument("--threshold", action="append", default=[], metavar="EXPR",
                      help="a pass/fail check, repeatable: 'p50|p95|p99|p99.9|p99.99|max <|<= DURATION' (end-to-end "
                           "latency), 'rate >= PERCENT' (achieved / target), 'errors == N', 'lag < EVENTS'; any failure "
                           "exits 99 after the report")
    gate.add_argument("--abort-on-fail", action="store_true",
                      help="stop the run as soon as a threshold has failed for good (e.g. more events above the p99 "
                           "bound than 1%% of the run)")
    gate.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                      help="serve live Prometheus metrics on http://127.0.0.1:PORT/metrics while the run lasts "
                           "(needs prometheus-client, the 'load' extra; 0 = a free port, printed)")
    gate.add_argument("--metrics-host", default="127.0.0.1", metavar="ADDRESS",
                      help="the address the metrics endpoint binds (default 127.0.0.1)")
    run = parser.add_argument_group("run")
    run.add_argument("--master", default=DEFAULT_MASTER, metavar="URL",
                     help=f"Spark master (default {DEFAULT_MASTER})")
    run.add_argument("--remote", default=None, metavar="sc://HOST:PORT",
                     help="run through this Spark Connect server instead of a Spark of our own (--master unused); "
                          "the server needs this package where its Python workers run")
    run.add_argument("--output", default=None, metavar="DIR",
                     help="write report.json, summary.csv, batches.csv and report.png into DIR")
    run.add_argument("--no-warmup", dest="warmup", action="store_false",
                     help="skip the warm-up: a tiny query into a sink that writes nothing, run first so that "
                          "Spark's Python workers are started and the sink's modules imported (default: on)")
    return parser


def _config(args: argparse.Namespace) -> tuple[LoadConfig, RampConfig | None]:
    options = dict(parse_option(text) for text in args.option)
    source_options = dict(parse_option(text, "--source-option", "fields.user_id.kind=zipf") for text in args.source_option)
    config = LoadConfig(
        sink=args.sink.strip(),
        options=options,
        rate=parse_rate(args.rate),
        duration_s=parse_seconds(args.duration, "--duration"),
        partitions=args.partitions,
        payload_bytes=args.payload_bytes,
        trigger=args.trigger,
        max_events_per_trigger=args.max_events_per_trigger,
        max_latency_s=parse_seconds(args.max_latency, "--max-latency"),
        drain_timeout_s=parse_seconds(args.drain_timeout, "--drain-timeout", allow_zero=True)
        if args.drain_timeout is not None else None,
        warmup=args.warmup,
        master=args.master,
        schema=args.schema,
        source_options=source_options,
        thresholds=tuple(args.threshold),
        abort_on_fail=args.abort_on_fail,
        remote=args.remote,
    )
    config.validate()
    if args.abort_on_fail and not args.threshold:
        raise LoadError("--abort-on-fail needs at least one --threshold")
    if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
        raise LoadError(f"--metrics-port must be a TCP port (0-65535), not {args.metrics_port}")
    ramp = None
    if args.ramp is not None:
        if args.threshold:
            raise LoadError("--threshold checks a single run; with --ramp the highest sustained rate is the result "
                            "(bound it with --max-latency)")
        start, step, maximum = parse_ramp(args.ramp)
        ramp = RampConfig(start, step, maximum, parse_seconds(args.step_duration, "--step-duration"))
        ramp.validate()
    return config, ramp


def _error(message: str) -> int:
    print(f"impulse-load: error: {message}", file=sys.stderr, flush=True)
    return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (see the module docstring)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["compare"]:
        from impulse.loadtest.compare import main as compare_main

        return compare_main(argv[1:])
    args = build_parser().parse_args(argv)
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"pyspark\..*")
    from impulse.loadtest.display import Display
    from impulse.loadtest.receiver import Receiver, embedded_options, needs_receiver
    from impulse.loadtest.run import StopRequest, impulse_options
    from impulse.loadtest.target import preflight

    display = Display()
    stop = StopRequest()
    with ExitStack() as stack:
        quiet = logging.getLogger("impulse.connectors")  # the pre-flight's retries: the error says it all
        stack.callback(quiet.setLevel, quiet.level)
        quiet.setLevel(logging.ERROR)
        try:
            config, ramp = _config(args)
            receiver = None
            if needs_receiver(config.sink, config.options):
                receiver = stack.enter_context(Receiver())
                config = replace(config, options=embedded_options(receiver, config.options))
                display.line(f"embedded HTTP receiver at {config.options['url']} (dedupes by Idempotency-Key; sink options "
                             f"format={config.options['format']}, batchSize={config.options['batchSize']})")
            for rate in ([ramp.start, ramp.maximum] if ramp else [config.rate]):
                duration = ramp.step_duration_s if ramp else config.duration_s
                impulse_options(replace(config, rate=rate, duration_s=duration))
            preflight(config.sink, config.options, config.payload_bytes)
            exporter = None
            if args.metrics_port is not None:
                from impulse.loadtest.prometheus import Exporter

                exporter = stack.enter_context(Exporter(args.metrics_port, args.metrics_host))
                display.line(f"Prometheus metrics at {exporter.url}")
        except LoadError as exc:
            return _error(str(exc))

        try:
            display.line(f"starting Spark ({config.remote or config.master})…")
            from pyspark import SparkContext

            from impulse.loadtest.session import make_session

            # main() called in a process with a session: keep it (a Connect client session is always ours)
            owned = config.remote is not None or SparkContext._active_spark_context is None
            spark = make_session(config.master, remote=config.remote)
            if owned:
                stack.callback(spark.stop)
            # after the session: PySpark's SparkContext installs a SIGINT handler of its own (cancel all jobs)
            _install_signals(stop, display, stack)
            return _run(config, ramp, spark, display, stop, receiver, args.output, exporter)
        except LoadError as exc:
            display.finish()
            return _error(str(exc))
        except KeyboardInterrupt:
            display.finish()
            print("impulse-load: interrupted before the load started", file=sys.stderr)
            return EXIT_INTERRUPTED


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


def _run(config, ramp, spark, display, stop, receiver, output, exporter) -> int:
    from impulse.loadtest.ramp import run_ramp
    from impulse.loadtest.report import ramp_text, summary_text, write_report
    from impulse.loadtest.run import run_load

    if ramp is not None:
        result = run_ramp(config, ramp, spark=spark, display=display, stop=stop, receiver=receiver, exporter=exporter)
        display.line("")
        for step in result.steps:
            display.line(summary_text(step))
            display.line("")
        display.line(ramp_text(result))
        interrupted, failed, thresholds_failed = result.interrupted, False, False
    else:
        result = run_load(config, spark=spark, display=display, stop=stop, receiver=receiver, exporter=exporter)
        display.line("")
        display.line(summary_text(result))
        interrupted = result.outcome == "interrupted"
        failed = result.outcome in ("failed", "timed out") or result.errors > 0
        thresholds_failed = result.thresholds_failed
    if output:
        paths = write_report(result, output)
        display.line("")
        display.line("report: " + ", ".join(str(p) for p in paths.values()))
    if interrupted:
        return EXIT_INTERRUPTED
    if thresholds_failed:
        return EXIT_THRESHOLDS
    return EXIT_FAILED if failed else EXIT_OK
