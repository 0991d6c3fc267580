"""What ``impulse-load`` runs, from flags or from a TOML file: one table of keys (`KEYS`), one parser.

Every key of a file is a flag of the command line and every flag a key (``payload-bytes`` is
``--payload-bytes``; the repeatable flags ``--option``, ``--source-option`` and ``--threshold`` are the
keys ``options``, ``source`` and ``thresholds``). The argparse flags and the file's schema are both
derived from `KEYS`, so they cannot drift apart.

A file (``impulse-load run FILE.toml``) holds keys at its top level and any number of ``[[scenario]]``
tables; without a ``[[scenario]]`` the top level is the one scenario. Precedence, lowest first:

1. the defaults (`KEYS`, the same as `LoadConfig`'s);
2. the file's top-level keys (defaults for every scenario);
3. a scenario's keys (the tables ``options`` and ``source`` merge with the top level's, key by key;
   every other key replaces);
4. ``--set KEY=VALUE``, which edits one value of the file before it is read: ``rate=10k`` (top level),
   ``scenario.NAME.rate=10k``, ``scenario.NAME.options.url=…``; the value is read as TOML (``4``,
   ``true``, ``"x"``) or else as a string;
5. the flags, which apply to every scenario (``--option`` and ``--source-option`` override their key).

Some keys belong to the whole run (scope ``file``: one Spark session, one metrics endpoint, one report
directory): ``master``, ``remote``, ``warmup``, ``metrics-port``, ``metrics-host``, ``output``, ``junit``; a
scenario that sets one is refused.

Secrets never sit in a file: a string may name an environment variable, ``"${ENV:NAME}"``, replaced by
its value when the file is read (unset: refused); a literal value of a secret-looking option
(password, token, SASL, API key, an ``Authorization`` header) or a URL with a password is refused.

Every problem raises `LoadError` before Spark starts, naming the file, the scenario, the key and what is
allowed (the CLI exits 2).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence
from urllib.parse import urlsplit

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, as a package
    import tomli as tomllib

from connectors.redact import is_secret
from impulse.loadtest.settings.config import FOREACH_BATCH, LoadConfig, RampConfig
from impulse.loadtest.settings.curve import CURVE_OPTIONS
from impulse.loadtest.settings.stages import STAGES_OPTION
from impulse.loadtest.settings.target import known_sinks
from impulse.loadtest.settings.units import (
    LoadError,
    parse_option,
    parse_ramp,
    parse_rate,
    parse_search,
    parse_seconds,
    parse_share,
)

__all__ = ["Key", "KEYS", "Scenario", "Plan", "build_parser", "plan_from_args", "load_plan", "SCENARIO_TABLE"]

SCENARIO_TABLE = "scenario"   # the name of the file's array of scenario tables


@dataclass(frozen=True)
class Key:
    """One setting: its file key, its flag, how its value is read and checked, and its help.

    `kind`: ``text``; ``rate`` (events/s: a number or ``"50k"``); ``duration`` (seconds: a number or
    ``"30s"``; `zero` allows 0); ``interval`` (a duration kept as written, e.g. the trigger); ``int``
    (≥ `minimum`); ``bool``; ``ramp`` (``"START:STEP:MAX"`` or ``"search:LO:HI"``); ``share`` (a number
    between 0 and 1 or ``"5%"``); ``map`` (a table of KEY = VALUE, values
    as strings; flag ``KEY=VALUE``, repeatable); ``list`` (strings; flag repeatable).
    """

    name: str
    kind: str
    default: Any
    help: str
    group: str
    metavar: str = ""
    flag: str = ""                 # default: --NAME
    short: str | None = None
    scope: str = "scenario"        # or "file": one value for the whole run
    minimum: int | None = None
    zero: bool = False             # a duration of 0 is allowed
    example: str = ""

    @property
    def option(self) -> str:
        return self.flag or f"--{self.name}"

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")

    @property
    def allowed(self) -> str:
        """What a file may hold for this key, for error messages."""
        return {
            "text": "a string", "rate": "events/s: a number or a string like \"50k\"",
            "duration": "a duration: a string like \"30s\", \"500ms\", \"2m\" or a number of seconds",
            "interval": "a duration: a string like \"1s\", \"500ms\" or a number of seconds",
            "int": f"a whole number{f' ≥ {self.minimum}' if self.minimum is not None else ''}",
            "bool": "true or false", "ramp": "a string \"START:STEP:MAX\" or \"search:LO:HI\" in events/s, e.g. "
                                             "\"10k:10k:200k\"", "share": "a share: 0.05 or \"5%\"",
            "map": "a table of KEY = VALUE (strings, numbers or booleans)", "list": "a list of strings",
        }[self.kind]

    def read(self, raw: Any, where: str) -> Any:
        """The value of `raw` (from a file, ``--set`` or a flag), checked; `LoadError` naming `where` otherwise."""
        kind = self.kind
        if kind in ("text", "ramp", "interval") and isinstance(raw, str):
            if kind == "ramp" and parse_search(raw, where) is None:
                parse_ramp(raw, where)
            if kind == "interval":
                parse_seconds(raw, where, allow_zero=True)
            return raw
        if kind == "interval" and _is_number(raw):
            parse_seconds(raw, where, allow_zero=True)
            return f"{raw}s"
        if kind == "rate" and (isinstance(raw, str) or _is_number(raw)):
            return parse_rate(raw, where)
        if kind == "duration" and (isinstance(raw, str) or _is_number(raw)):
            return parse_seconds(raw, where, allow_zero=self.zero)
        if kind == "share" and (isinstance(raw, str) or _is_number(raw)):
            return parse_share(raw, where)
        if kind == "int" and isinstance(raw, int) and not isinstance(raw, bool):
            if self.minimum is not None and raw < self.minimum:
                raise LoadError(f"{where}: must be ≥ {self.minimum}, not {raw}")
            return raw
        if kind == "bool" and isinstance(raw, bool):
            return raw
        if kind == "list" and isinstance(raw, str):
            return (raw,)
        if kind == "list" and isinstance(raw, list) and all(isinstance(v, str) for v in raw):
            return tuple(raw)
        if kind == "map" and isinstance(raw, dict):
            out = {}
            for key, value in raw.items():
                if isinstance(value, bool):
                    value = "true" if value else "false"
                if not isinstance(value, (str, int, float)):
                    raise LoadError(f"{where}.{key}: {value!r} is not a string, number or boolean")
                out[str(key)] = str(value)
            return out
        raise LoadError(f"{where}: {raw!r} is not {self.allowed}")

    def describe_default(self) -> str:
        """The default as the README and --help show it."""
        value = self.default
        if value is None or value == {} or value == ():
            return "none"
        if self.kind == "rate":
            return f"{value:,.0f}"
        if self.kind == "duration":
            return f"{value:g}s"
        if self.kind == "bool":
            return "true" if value else "false"
        if self.kind == "share":
            return f"{value:g}"
        return str(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_D = LoadConfig()   # the defaults of a run: the table reads them, so there is one list of them

KEYS: tuple[Key, ...] = (
    # -- target
    Key("sink", "text", _D.sink, "sink format: {sinks}, Spark's file sinks parquet, json, csv, orc and delta (with "
        "-o path=DIR, or -o table=NAME: written with toTable; delta with its jars, --packages, and its session "
        "settings set by the harness), or any streaming format Spark can load (without a url option, "
        "webhook-sink writes to an embedded local HTTP receiver)", "target", "NAME"),
    Key("options", "map", {}, "a sink option, passed through as is (repeatable), e.g. url=redis://localhost:6379",
        "target", "KEY=VALUE", flag="--option", short="-o", example="url=redis://localhost:6379"),
    Key("create-topic", "int", _D.create_topic, "kafka-sink: create the sink's topic with N partitions (the broker's "
        "default replication) before the run when it does not exist; default: off, a missing topic fails the "
        "pre-flight", "target", "N", minimum=1),
    # -- load
    Key("rate", "rate", _D.rate, "target rate, events/s over all partitions; k/M suffixes", "load", "EVENTS_PER_S"),
    Key("duration", "duration", _D.duration_s, "time of events to send, e.g. 60s, 2m: the run sends rate x "
        "duration events, then waits until the sink committed the last one", "load", "DURATION"),
    Key("partitions", "int", _D.partitions, "impulse partitions = Spark tasks per micro-batch", "load", "N",
        minimum=1),
    Key("payload-bytes", "int", _D.payload_bytes, "size of each event's payload column, bytes", "load", "BYTES",
        minimum=0),
    Key("trigger", "interval", _D.trigger, "processing-time trigger interval, e.g. 1s, 500ms; 0 = back to back",
        "load", "INTERVAL"),
    Key("checkpoint", "text", _D.checkpoint_dir, "the query's checkpoint directory, kept after the run (default: a "
        "new temporary one, deleted): a rerun of the same command on it resumes the query where the last committed "
        "micro-batch left it, the source's schedule kept (events due while it was down come at once), and its --check "
        "covers the events of every run on it", "load", "DIR"),
    Key("schema", "text", _D.schema, "realistic events: impulse's user schema, e.g. 'user_id BIGINT, amount "
        "DOUBLE' (generated as the source options fields.<column>.* say; counter, subtask_index, timestamp and "
        "payload are added when missing)", "load", "DDL"),
    Key("source", "map", {}, "an impulse option, repeatable: fields.<column>.<property>, seed, outOfOrderness, "
        f"{STAGES_OPTION} (e.g. 30s:1000,1m:1000: the rate and duration then come from the stages), "
        f"{CURVE_OPTIONS[0]} (e.g. daily:min=200,max=2000,peak=12:00 with {CURVE_OPTIONS[1]}=2m: the rate then follows "
        "the curve over --duration), …", "load",
        "KEY=VALUE", flag="--source-option", example="fields.user_id.kind=zipf"),
    Key("max-events-per-trigger", "int", _D.max_events_per_trigger, "admission control: at most N events per "
        "micro-batch (default: no limit)", "load", "N", minimum=1),
    Key("drain-timeout", "duration", _D.drain_timeout_s, "how long after the duration to wait for the last events "
        "(default max(30s, duration))", "load", "DURATION", zero=True),
    # -- your own query
    Key("source-format", "text", _D.source, "the events: impulse, nexmark (the Nexmark auction stream) or "
        "replay (a recording at --rate: --source-option path=…); --source-option then sets that source's options",
        "your own query", "NAME", flag="--source"),
    Key("transform", "text", _D.transform, "your query between source and sink: MODULE:FUNCTION, called with the "
        "events DataFrame, returning the DataFrame to write (MODULE from the working directory or PYTHONPATH, "
        "shipped to the executors); nexmark:q0 … nexmark:q22 are the Nexmark queries", "your own query",
        "MODULE:FUNCTION"),
    Key("sql", "text", _D.sql, "your query as SQL over the temporary view events, e.g. \"SELECT … FROM events\"",
        "your own query", "QUERY"),
    Key("output-mode", "text", _D.output_mode, "append, update or complete (default append; a Nexmark query: its "
        "own)", "your own query", "MODE"),
    Key("event-time-column", "text", _D.event_time_column, "the output's event time (e.g. window.end): latency from "
        "it to the sink's acknowledgement, and in append mode the rows --check counts are those final under the "
        "last watermark (this column <= it)", "your own query", "COLUMN"),
    Key("check", "bool", _D.check, "after the run read the target back and compare it with the query applied to a "
        "batch read of the same events (run as one micro-batch when Spark runs an operator of it on streams only), "
        "or with --expect's rows; a difference exits 99", "your own query"),
    Key("expect", "text", _D.expect, "with --check, your reference implementation: MODULE:FUNCTION, called with a "
        "batch read of the run's events, returning the rows the query should write (a DataFrame, a pandas DataFrame "
        "or a list of dicts or tuples); the check then compares the target with them, which also catches a bug the "
        "query has in both its stream and its batch run", "your own query", "MODULE:FUNCTION"),
    Key("check-unique", "text", _D.check_unique, "with --check, the target must also hold each value of these "
        "columns (comma-separated) once, as a dedup stage promises: the rows repeating a key are counted and fail "
        "the check (exit 99)", "your own query", "COLS", example="subtask_index,counter"),
    Key("foreach-batch", "text", _D.foreach_batch, "in place of --sink, your own writer: MODULE:FUNCTION, called "
        "as FUNCTION(batch_df, batch_id) for each micro-batch (a MERGE upsert, a JDBC write; MODULE found and shipped "
        "as --transform's); with --check give --check-read", "your own query", "MODULE:FUNCTION"),
    Key("check-read", "text", _D.check_read, "with --check, how to read the target back: MODULE:FUNCTION, called as "
        "FUNCTION(spark), returning the target's rows as a DataFrame (the columns of the query's output)",
        "your own query", "MODULE:FUNCTION"),
    Key("check-key", "list", _D.check_key, "with --check, the target keeps one row per these columns (an upsert or "
        "MERGE target): its rows are compared with the expected answer's final state per key; repeatable or "
        "comma-separated", "your own query", "COLS"),
    # -- through Kafka (the production topology, `impulse.loadtest.via.kafka`)
    Key("via", "text", _D.via, "run the production topology: impulse writes the events into this Kafka topic "
        "(kafka-sink, exactly once, each record's timestamp = the event's scheduled time) and a second query, the "
        "pipeline, reads it with Spark's Kafka source and writes to --sink; --create-topic then creates this topic "
        "(and a Kafka sink's topic, with LogAppendTime)", "through Kafka", "kafka://HOST:PORT/TOPIC"),
    Key("via-options", "map", {}, "with --via, repeatable: kafka.<setting> is a Kafka client setting of the "
        "producer, the Kafka source and the harness (e.g. kafka.security.protocol=SASL_SSL); any other key a Spark "
        "Kafka source option (e.g. maxOffsetsPerTrigger=50000)", "through Kafka", "KEY=VALUE", flag="--via-option",
        example="kafka.security.protocol=SASL_SSL"),
    Key("decode", "bool", _D.decode, "with --via, the pipeline sees the events parsed back from the records' JSON "
        "values (the columns a direct run gives) instead of the Kafka source's columns", "through Kafka"),
    Key("pipeline-trigger", "text", _D.pipeline_trigger, "with --via, the pipeline's trigger: an interval (1s, "
        "500ms), 0 (back to back), availableNow (started once the producer is done) or realTime=DURATION (Spark's "
        "real-time mode, e.g. realTime=5s; --sink kafka only) (default: --trigger)", "through Kafka", "TRIGGER"),
    Key("prefill", "int", _D.prefill, "with --via, write N events into the topic before the pipeline starts and "
        "report how fast the pipeline drains that backlog while the producer keeps the rate", "through Kafka", "N",
        minimum=0),
    # -- step mode
    Key("ramp", "ramp", None, "raise the rate in steps (events/s, e.g. 10000:10000:200000 or 10k:10k:200k) until a "
        "step is not sustained; reports the highest sustained rate. search:LO:HI (e.g. search:10k:200k) searches "
        "instead: LO, HI, a bisection to within --ramp-precision, then the rate found again for twice the step "
        "duration (its confirming run)", "step mode", "START:STEP:MAX"),
    Key("ramp-precision", "share", RampConfig.precision, "with --ramp search:LO:HI, the bisection stops when the "
        "bracket is within this share of its lower end (e.g. 0.05 for 5 percent)", "step mode", "SHARE"),
    Key("step-duration", "duration", RampConfig.step_duration_s, "duration of each step", "step mode", "DURATION"),
    Key("min-sustained", "rate", RampConfig.min_sustained, "with --ramp, a CI gate: the ramp fails (exit 99) when "
        "its highest sustained rate is below this one (k/M suffixes); without it a ramp fails only when no step is "
        "sustained", "step mode", "EVENTS_PER_S"),
    Key("max-latency", "duration", _D.max_latency_s, "p99 end-to-end latency above which a step (or run, or "
        "stage) is not sustained", "step mode", "DURATION"),
    # -- thresholds
    Key("thresholds", "list", (), "a pass/fail check, repeatable: 'p50|p95|p99|p99.9|p99.99|max <|<= DURATION' "
        "(end-to-end latency), 'rate >= PERCENT' (achieved / target), 'errors == N', 'deadLettered == N', 'lag < EVENTS'; any failure "
        "exits 99 after the report", "thresholds (a CI gate)", "EXPR", flag="--threshold", example="'p99<1s'"),
    Key("abort-on-fail", "bool", _D.abort_on_fail, "stop the run as soon as a threshold has failed for good (e.g. "
        "more events above the p99 bound than 1%% of the run)", "thresholds (a CI gate)"),
    Key("junit", "text", None, "write the thresholds (and --check) as JUnit XML to FILE, one test case each, one "
        "suite per scenario or ramp step, for CI (Jenkins, GitLab, Azure DevOps)", "thresholds (a CI gate)", "FILE",
        scope="file"),
    Key("metrics-port", "int", None, "serve live Prometheus metrics on http://127.0.0.1:PORT/metrics while the run "
        "lasts (needs prometheus-client, the 'load' extra; 0 = a free port, printed)", "thresholds (a CI gate)",
        "PORT", scope="file", minimum=0),
    Key("metrics-host", "text", "127.0.0.1", "the address the metrics endpoint binds", "thresholds (a CI gate)",
        "ADDRESS", scope="file"),
    # -- run
    Key("name", "text", None, "the run's name in the report (a file's scenarios: their names, default the file's "
        "name and the scenario's number)", "run", "NAME"),
    Key("master", "text", _D.master, "Spark master", "run", "URL", scope="file"),
    Key("spark-conf", "map", {}, "a Spark setting of the session the harness makes (repeatable), e.g. "
        "spark.sql.shuffle.partitions=4; a session already running that does not hold it is refused", "run",
        "KEY=VALUE", flag="--conf", scope="file", example="spark.sql.shuffle.partitions=4"),
    Key("packages", "list", (), "Maven coordinates the session loads (repeatable or comma-separated; joined into "
        "spark.jars.packages), e.g. a sink's connector", "run", "COORDINATES", scope="file",
        example="org.example:connector_2.13:1.0"),
    Key("remote", "text", _D.remote, "run through this Spark Connect server instead of a Spark of our own (master "
        "unused); the server needs this package where its Python workers run", "run", "sc://HOST:PORT",
        scope="file"),
    Key("output", "text", None, "write report.json, summary.csv, batches.csv, report.png and report.html into DIR", "run", "DIR",
        scope="file"),
    Key("warmup", "bool", _D.warmup, "the warm-up: a tiny query into a sink that writes nothing, run first so that "
        "Spark's Python workers are started and the sink's modules imported, then your pipeline on a short slice of "
        "events into noop before each run and ramp step (UDF workers, generated code, state stores)", "run", flag="--no-warmup",
        scope="file"),
)
_BY_NAME = {key.name: key for key in KEYS}
_BY_FLAG = {key.option: key for key in KEYS}


@dataclass(frozen=True)
class Scenario:
    """One run of a plan: a single run (`ramp` None) or a ramp of steps. `name`: None for flags without ``--name``."""

    name: str | None
    config: LoadConfig
    ramp: RampConfig | None = None


@dataclass(frozen=True)
class Plan:
    """Everything ``impulse-load`` runs: the scenarios, one after another, and the run's file-scope settings."""

    scenarios: tuple[Scenario, ...]
    file: str | None = None              # the TOML file, None for flags alone
    output: str | None = None
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    junit: str | None = None             # --junit FILE


# ----------------------------------------------------------------------------------------------- flags


def build_parser(prog: str = "impulse-load", *, description: str = "", epilog: str = "",
                 with_file: bool = False) -> argparse.ArgumentParser:
    """The argparse parser of `KEYS` (and ``--set``); every flag's default is "not given" (the file or `KEYS` fill
    it in), prefixes of flags are refused (``--rat`` is not ``--rate``)."""
    parser = argparse.ArgumentParser(prog=prog, description=description, epilog=epilog, allow_abbrev=False,
                                     argument_default=argparse.SUPPRESS,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    if with_file:
        parser.add_argument("file", metavar="FILE.toml", help="the load test: scenarios, their sinks, thresholds")
    groups: dict[str, Any] = {}
    for key in KEYS:
        group = groups.get(key.group) or groups.setdefault(key.group, parser.add_argument_group(key.group))
        names = [key.short, key.option] if key.short else [key.option]
        text = key.help.replace("{sinks}", ", ".join(known_sinks()))
        if key.kind == "bool":
            action = "store_false" if key.option.startswith("--no-") else "store_true"
            group.add_argument(*names, dest=key.dest, action=action,
                               help=f"{'skip ' if action == 'store_false' else ''}{text} (file key {key.name})")
            continue
        default = "" if "(default" in text or key.kind in ("map", "list") else f" (default {key.describe_default()})"
        group.add_argument(*names, dest=key.dest, metavar=key.metavar,
                           action="append" if key.kind in ("map", "list") else "store",
                           type=int if key.kind == "int" else str,
                           help=f"{text}{default}; file key {key.name}")
    parser.add_argument("--set", dest="set", action="append", metavar="KEY=VALUE",
                        help="change one value of the file before it is read, e.g. --set rate=10k, --set "
                             "scenario.spike.options.url=redis://host:6379 (repeatable)")
    return parser


def _flag_values(args: argparse.Namespace) -> dict[str, Any]:
    """The flags given on the command line, read like file values (a repeated flag: one map or list)."""
    values: dict[str, Any] = {}
    for key in KEYS:
        if not hasattr(args, key.dest):
            continue
        raw = getattr(args, key.dest)
        if key.kind == "map":
            raw = dict(parse_option(text, key.option, key.example) for text in raw)
        values[key.name] = key.read(raw, key.option)
    return values


# ------------------------------------------------------------------------------------------------ files

_ENV = re.compile(r"\$\{ENV:([A-Za-z_][A-Za-z0-9_]*)\}")


def _expand(value: Any, where: str, environ: Mapping[str, str]) -> Any:
    """``${ENV:NAME}`` in a string (or in the strings of a table or list) replaced by the variable's value."""
    if isinstance(value, dict):
        return {k: _expand(v, f"{where}: {k!r}", environ) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, where, environ) for v in value]
    if not isinstance(value, str):
        return value

    def variable(match: re.Match) -> str:
        name = match.group(1)
        if name not in environ:
            raise LoadError(f"{where}: environment variable {name} is not set (the file asks for ${{ENV:{name}}})")
        return environ[name]

    return _ENV.sub(variable, value)


def _expand_document(document: Mapping[str, Any], source: str, environ: Mapping[str, str]) -> dict:
    """`_expand` over a file's top level and its scenarios, each value labelled by its table and key."""
    def table(values: Mapping[str, Any], where: str) -> dict:
        return {k: _expand(v, f"{where}: key {k!r}", environ) for k, v in values.items() if k != SCENARIO_TABLE}

    out = table(document, source)
    scenarios = document.get(SCENARIO_TABLE)
    if isinstance(scenarios, list):
        out[SCENARIO_TABLE] = [table(s, f"{source}: scenario {s.get('name', f'#{i}')!r}") if isinstance(s, dict) else s
                               for i, s in enumerate(scenarios, 1)]
    elif SCENARIO_TABLE in document:
        out[SCENARIO_TABLE] = scenarios   # not a list: refused with its reason when the scenarios are read
    return out


def _refuse_literal_secrets(table: Mapping[str, Any], where: str, nested: bool = False) -> None:
    """A secret-looking option, or a URL with a password, written in the file itself (without ``${ENV:NAME}``)."""
    for key, value in table.items():
        if isinstance(value, dict) and not nested and key in _BY_NAME and _BY_NAME[key].kind == "map":
            _refuse_literal_secrets(value, f"{where}: key '{key}'", nested=True)
            continue
        if not isinstance(value, str) or _ENV.search(value):
            continue
        label = f"{where}: {key!r}" if nested else f"{where}: key {key!r}"
        if is_secret(key):
            raise LoadError(f"{label}: a secret is not written in the file; put it in the environment and "
                            f"write {key} = \"${{ENV:NAME}}\"")
        if "://" in value:
            try:
                password = urlsplit(value).password
            except ValueError:
                password = None
            if password:
                raise LoadError(f"{label}: the URL holds a password; put it in the environment and write "
                                f"{key} = \"${{ENV:NAME}}\" (the whole URL) or use ${{ENV:NAME}} for the password")


def _read_toml(path: Path) -> dict:
    try:
        with open(path, "rb") as source:
            return tomllib.load(source)
    except FileNotFoundError:
        raise LoadError(f"{path}: no such file") from None
    except OSError as exc:
        raise LoadError(f"{path}: cannot read it: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise LoadError(f"{path}: not valid TOML: {exc}") from None


def _toml_value(text: str) -> Any:
    """A ``--set`` value: TOML if it reads as one (``4``, ``true``, ``"x"``, ``[…]``), else the string itself."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _apply_set(document: dict, assignment: str, source: str) -> None:
    """Edit `document` by one ``--set PATH=VALUE`` (path: ``key``, ``key.sub``, ``scenario.NAME.key[.sub]``)."""
    path, value = parse_option(assignment, "--set", "scenario.spike.rate=10k")
    parts = path.split(".")
    target = document
    if parts[0] == SCENARIO_TABLE and len(parts) >= 3:
        names = [s.get("name") for s in document.get(SCENARIO_TABLE, []) if isinstance(s, dict)]
        if parts[1] not in names:
            raise LoadError(f"{source}: --set {path}: no scenario named {parts[1]!r}"
                            + (f" (its scenarios: {', '.join(map(str, names))})" if names else ""))
        target, parts = document[SCENARIO_TABLE][names.index(parts[1])], parts[2:]
    key = _BY_NAME.get(parts[0])
    if key is None:
        raise LoadError(f"{source}: --set {path}: unknown key {parts[0]!r}; the keys are {', '.join(_BY_NAME)}")
    if key.kind == "map":
        if len(parts) < 2:
            raise LoadError(f"{source}: --set {path}: {key.name} is a table; set one of its values, e.g. --set "
                            f"{path}.{key.example}")
        table = target.setdefault(key.name, {})
        if not isinstance(table, dict):
            raise LoadError(f"{source}: --set {path}: {key.name} is not a table")
        table[".".join(parts[1:])] = value   # an option's value is a string: kept as written
    elif len(parts) > 1:
        raise LoadError(f"{source}: --set {path}: {key.name} is not a table")
    else:
        target[key.name] = _toml_value(value)


def _read_table(table: Mapping[str, Any], where: str, scope: str) -> dict[str, Any]:
    """The keys of one file table (the top level or a scenario), each read and checked."""
    values: dict[str, Any] = {}
    for name, raw in table.items():
        if scope == "top" and name == SCENARIO_TABLE:
            continue
        key = _BY_NAME.get(name)
        if key is None:
            flag = _BY_FLAG.get(f"--{name}")
            flag_hint = f" (the flag {flag.option} is the key {flag.name!r})" if flag else ""
            close = [k for k in _BY_NAME if k.replace("-", "") == name.replace("-", "").replace("_", "").lower()]
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise LoadError(f"{where}: unknown key {name!r}{flag_hint}{hint}; the keys are {', '.join(_BY_NAME)}")
        if scope == "scenario" and key.scope == "file":
            raise LoadError(f"{where}: key {name!r} applies to the whole run (one Spark session, one endpoint, one "
                            "report): set it at the top of the file")
        values[name] = key.read(raw, f"{where}: key {name!r}")
    return values


def _merge(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """Later layers win; maps merge key by key."""
    out: dict[str, Any] = {}
    for layer in layers:
        for name, value in layer.items():
            if _BY_NAME[name].kind == "map" and name in out:
                out[name] = {**out[name], **value}
            else:
                out[name] = value
    return out


def load_plan(path: str | Path, flags: Mapping[str, Any] | None = None, sets: Sequence[str] = (),
              environ: Mapping[str, str] | None = None) -> Plan:
    """Read a TOML file (with ``--set`` edits and flag values on top, see the module docstring) into a `Plan`."""
    path = Path(path)
    source = str(path)
    document = _read_toml(path)
    _refuse_literal_secrets(document, source)
    for table in document.get(SCENARIO_TABLE, []) if isinstance(document.get(SCENARIO_TABLE), list) else []:
        if isinstance(table, dict):
            _refuse_literal_secrets(table, f"{source}: scenario {table.get('name', '?')!r}")
    for assignment in sets:  # after the check: a CI job's --set may carry a secret from its own environment
        _apply_set(document, assignment, source)
    document = _expand_document(document, source, os.environ if environ is None else environ)
    top = _read_table(document, source, "top")
    scenarios = document.get(SCENARIO_TABLE, [{}])
    if not isinstance(scenarios, list) or not all(isinstance(s, dict) for s in scenarios) or not scenarios:
        raise LoadError(f"{source}: {SCENARIO_TABLE} must be an array of tables: [[{SCENARIO_TABLE}]] sections")
    layers = []
    for index, table in enumerate(scenarios, 1):
        label = table.get("name") if isinstance(table.get("name"), str) else f"#{index}"
        where = f"{source}: scenario {label!r}" if SCENARIO_TABLE in document else source
        values = _read_table(table, where, "scenario")
        if "name" not in values and "name" not in top and "name" not in (flags or {}):
            values["name"] = path.stem if len(scenarios) == 1 else f"{path.stem}-{index}"
        layers.append((where, _merge(top, values, flags or {})))
    names = [values["name"] for _, values in layers]
    if len(set(names)) != len(names):
        raise LoadError(f"{source}: two scenarios are named {next(n for n in names if names.count(n) > 1)!r}; "
                        "give each its own name")
    return _plan(layers, source)


def plan_from_args(argv: Sequence[str], *, description: str = "", epilog: str = "") -> Plan:
    """The `Plan` of a command line: ``[FLAGS…]`` (one run) or ``run FILE.toml [FLAGS…]``; argparse exits 2 on an
    unknown flag."""
    with_file = argv[:1] == ["run"]
    parser = build_parser("impulse-load run" if with_file else "impulse-load", description=description,
                          epilog=epilog, with_file=with_file)
    args = parser.parse_args(list(argv[1:] if with_file else argv))
    flags = _flag_values(args)
    sets = getattr(args, "set", [])
    if with_file:
        return load_plan(args.file, flags, sets)
    document: dict = {}
    for assignment in sets:
        _apply_set(document, assignment, "the command line")
    return _plan([(None, _merge(_read_table(document, "--set", "top"), flags))], None)


# ------------------------------------------------------------------------------------------------ build


def _value(values: Mapping[str, Any], name: str) -> Any:
    return values[name] if name in values else _BY_NAME[name].default


def _in_file_terms(message: str) -> str:
    """A message naming flags (``--rate``), as a file's reader says it (``key 'rate'``)."""
    return re.sub(r"--[a-z][a-z-]*", lambda m: f"key '{_BY_FLAG[m.group(0)].name}'" if m.group(0) in _BY_FLAG
                  else m.group(0), message)


def _scenario(values: Mapping[str, Any], name: str | None) -> Scenario:
    """One scenario from its values (flag terms in the messages)."""
    get: Callable[[str], Any] = lambda key: _value(values, key)  # noqa: E731 - a one-line getter over `values`
    source = dict(get("source"))
    stages_key = next((k for k in source if k.lower() == STAGES_OPTION.lower()), None)
    if stages_key is not None:  # LoadConfig takes the rate and the duration from the stages
        given = [f"--{k}" for k in ("rate", "duration", "ramp") if k in values]
        if given:
            raise LoadError(f"--source-option {STAGES_OPTION} sets the rate and the duration: leave out "
                            f"{' and '.join(given)}")
    curve_keys = [k for k in source if k.lower() in {o.lower() for o in CURVE_OPTIONS}]
    if curve_keys and stages_key is None:  # LoadConfig takes the rate from the curve (its mean over --duration)
        given = [f"--{k}" for k in ("rate", "ramp") if k in values]
        if given:
            raise LoadError(f"--source-option {curve_keys[0]} sets the rate (the curve's, over --duration): leave "
                            f"out {' and '.join(given)}")
    if "foreach-batch" in values and "sink" in values:
        raise LoadError(f"--foreach-batch {get('foreach-batch')} writes the output itself, in place of a sink: leave "
                        f"out --sink {get('sink')}")
    config = LoadConfig(
        sink=FOREACH_BATCH if "foreach-batch" in values else get("sink").strip(), options=dict(get("options")), rate=get("rate"), duration_s=get("duration"),
        partitions=get("partitions"), payload_bytes=get("payload-bytes"), trigger=get("trigger"),
        max_events_per_trigger=get("max-events-per-trigger"), max_latency_s=get("max-latency"),
        checkpoint_dir=get("checkpoint"),
        drain_timeout_s=get("drain-timeout"), warmup=get("warmup"), master=get("master"), schema=get("schema"),
        source_options=source, thresholds=tuple(get("thresholds")), abort_on_fail=get("abort-on-fail"),
        remote=get("remote"), create_topic=get("create-topic"), source=get("source-format"),
        transform=get("transform"), sql=get("sql"), output_mode=get("output-mode"),
        event_time_column=get("event-time-column"), check=get("check"), expect=get("expect"),
        check_unique=get("check-unique"),
        foreach_batch=get("foreach-batch"), check_read=get("check-read"),
        spark_conf=dict(get("spark-conf")), packages=tuple(get("packages")),
        check_key=tuple(c.strip() for v in get("check-key") for c in v.split(",") if c.strip()),
        via=get("via"), via_options=dict(get("via-options")), decode=get("decode"),
        pipeline_trigger=get("pipeline-trigger"), prefill=get("prefill"))
    config.validate()
    if config.abort_on_fail and not config.thresholds:
        raise LoadError("--abort-on-fail needs at least one --threshold")
    ramp = None
    if get("min-sustained") is not None and get("ramp") is None:
        raise LoadError("--min-sustained gates a ramp's highest sustained rate: give --ramp START:STEP:MAX (a single "
                        "run's achieved rate is gated by --threshold 'rate>=95%')")
    if get("ramp") is not None and config.via is not None:
        raise LoadError("--ramp runs impulse into the sink directly; with --via run one rate at a time")
    if get("ramp") is not None:
        if config.checkpoint_dir is not None:
            raise LoadError(f"--checkpoint {config.checkpoint_dir} resumes one query; with --ramp each step is a new "
                            "query on a new checkpoint: leave out --checkpoint")
        if config.thresholds:
            raise LoadError("--threshold checks a single run; with --ramp the highest sustained rate is the result "
                            "(bound it with --max-latency)")
        if config.check:
            raise LoadError("--check reads back a single run; with --ramp each step is a new query into the same "
                            "target (check one rate without --ramp)")
        search = parse_search(get("ramp"))
        if search is not None:
            ramp = RampConfig(search[0], search[1] - search[0], search[1], get("step-duration"), get("min-sustained"),
                              search=True, precision=get("ramp-precision"))
        else:
            start, step, maximum = parse_ramp(get("ramp"))
            ramp = RampConfig(start, step, maximum, get("step-duration"), get("min-sustained"))
        ramp.validate()
    if "ramp-precision" in values and (ramp is None or not ramp.search):
        raise LoadError("--ramp-precision applies to a search: give --ramp search:LO:HI")
    return Scenario(name, config, ramp)


def _plan(layers: Sequence[tuple[str | None, Mapping[str, Any]]], source: str | None) -> Plan:
    scenarios = []
    for where, values in layers:
        name = _value(values, "name")
        try:
            scenarios.append(_scenario(values, name))
        except LoadError as exc:
            if where is None:
                raise
            raise LoadError(f"{where}: {_in_file_terms(str(exc))}") from None
    first = layers[0][1]
    port = _value(first, "metrics-port")
    if port is not None and port > 65535:
        raise LoadError(f"{source + ': key metrics-port' if source else '--metrics-port'} must be a TCP port "
                        f"(0-65535), not {port}")
    return Plan(tuple(scenarios), source, _value(first, "output"), port, _value(first, "metrics-host"),
                _value(first, "junit"))


def keys_table() -> str:
    """The README's table of keys (Markdown): key, flag, default, what it is."""
    rows = ["| key | flag | default | scope | what |", "|---|---|---|---|---|"]
    for key in KEYS:
        text = key.help.replace("{sinks}", ", ".join(known_sinks())).replace("%%", "%").replace("|", "\\|")
        rows.append(f"| `{key.name}` | `{key.option}` | {key.describe_default()} | {key.scope} | {text} |")
    return "\n".join(rows)


if __name__ == "__main__":  # python -m impulse.loadtest.scenario: print the README's table of keys
    sys.stdout.write(keys_table() + "\n")
