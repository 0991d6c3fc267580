"""The run's configuration by parts (`impulse.loadtest.settings.config`): every field in exactly one part, each
part refusing its own bad values with the flag, the value and what is allowed; the helpers the run and the via
topology share (the source's options, epoch µs ↔ ISO)."""

from __future__ import annotations

import dataclasses

import pytest

from impulse.loadtest.load.events import impulse_options
from impulse.loadtest.settings.config import (
    PARTS,
    LoadConfig,
    PipelineSettings,
    ReportSettings,
    SinkSettings,
    SourceSettings,
    ViaSettings,
)
from impulse.loadtest.settings.target import sink_option
from impulse.loadtest.settings.units import LoadError, epoch_us, iso_us


def test_every_field_of_the_config_belongs_to_exactly_one_part():
    owners: dict[str, list[str]] = {}
    for part in PARTS:
        for f in dataclasses.fields(part):
            owners.setdefault(f.name, []).append(part.__name__)
    assert {f.name for f in dataclasses.fields(LoadConfig)} == set(owners)
    assert {name: where for name, where in owners.items() if len(where) > 1} == {}


def test_the_parts_of_a_config_carry_its_values():
    config = LoadConfig(sink="noop", rate=500, duration_s=4, partitions=3, trigger="250ms", thresholds=("p99<1s",),
                        via="kafka://localhost:9092/events", decode=True)
    assert config.source_settings.rate == 500 and config.source_settings.partitions == 3
    assert config.pipeline_settings.trigger_s == 0.25
    assert config.sink_settings.sink == "noop"
    assert config.via_settings.decode is True and config.via_settings.via == "kafka://localhost:9092/events"
    assert config.report_settings.thresholds == ("p99<1s",)


@pytest.mark.parametrize(("part", "change", "message"), [
    (SourceSettings, {"rate": 0}, r"--rate must be > 0 events/s, not 0"),
    (SourceSettings, {"partitions": 0}, r"--partitions must be ≥ 1, not 0"),
    (SourceSettings, {"source": "kafka"}, r"--source 'kafka': the sources are impulse, nexmark, replay"),
    (SourceSettings, {"source_options": {"rateStages": "nope"}}, r"--source-option rateStages"),
    (PipelineSettings, {"transform": "m:f", "sql": "SELECT 1"}, r"--transform and --sql .* give one of them"),
    (PipelineSettings, {"output_mode": "upsert"}, r"--output-mode 'upsert': Spark's output modes are append, update"),
    (PipelineSettings, {"trigger": "soon"}, r"--trigger: 'soon' is not a duration"),
    (SinkSettings, {"expect": "m:f"}, r"--expect m:f gives --check its expected rows: add --check"),
    (SinkSettings, {"create_topic": 0}, r"--create-topic must be ≥ 1 partitions, not 0"),
    (ViaSettings, {"decode": True}, r"--decode is for the Kafka topology: give --via"),
    (ViaSettings, {"via": "kafka://localhost:9092/t", "prefill": -1}, r"--prefill must be ≥ 0 events, not -1"),
    (ReportSettings, {"max_latency_s": 0}, r"--max-latency must be > 0, not 0s"),
    (ReportSettings, {"thresholds": ("p99 soon",)}, r"p99 soon"),
])
def test_each_part_refuses_its_own_bad_value_naming_the_flag(part, change, message):
    good = LoadConfig()
    values = {f.name: getattr(good, f.name) for f in dataclasses.fields(part)}
    part(**values)  # the defaults pass
    with pytest.raises(LoadError, match=message):
        part(**{**values, **change})
    with pytest.raises(LoadError, match=message):  # and the whole config says the same
        dataclasses.replace(good, **change).validate()


def test_the_rules_joining_two_parts_are_the_configs():
    via = "kafka://localhost:9092/events"
    for config, message in (
            (LoadConfig(source="nexmark", schema="a INT"), r"--schema shapes impulse events"),
            (LoadConfig(via=via, abort_on_fail=True, thresholds=("p99<1s",)), r"--abort-on-fail watches a direct"),
            (LoadConfig(via=via, source="nexmark"), r"--source nexmark with --via"),
            (LoadConfig(via=via, sink="noop", pipeline_trigger="realTime=5s"), r"real-time mode .* not noop")):
        with pytest.raises(LoadError, match=message):
            config.validate()


def test_the_sources_options_differ_only_where_the_sources_do():
    impulse = impulse_options(LoadConfig(rate=100, duration_s=2, partitions=2, payload_bytes=16))
    nexmark = impulse_options(LoadConfig(rate=100, duration_s=2, partitions=2, payload_bytes=16, source="nexmark"))
    assert impulse == {"numPartitions": "2", "payloadBytes": "16", "limit": "200", "eventsPerSecond": "100.0"}
    assert nexmark == {"numPartitions": "2", "limit": "200", "eventsPerSecond": "100.0"}
    with pytest.raises(LoadError, match=r"--source-option limit: set by the harness from --rate × --duration"):
        impulse_options(LoadConfig(source="nexmark", source_options={"limit": "5"}))


def test_epoch_microseconds_and_iso_times_convert_both_ways():
    assert iso_us(0) == "1970-01-01T00:00:00+00:00"
    assert iso_us(1_764_138_600_123_456) == "2025-11-26T06:30:00.123456+00:00"
    assert epoch_us(iso_us(1_764_138_600_123_456)) == 1_764_138_600_123_456
    assert epoch_us("2025-11-26T07:30:00.000001+01:00") == 1_764_138_600_000_001
    assert epoch_us("2025-11-26T06:30:00.000001Z") == 1_764_138_600_000_001  # Spark progress's form


def test_a_writer_option_is_found_whatever_its_case_as_spark_finds_it():
    options = {"metricsPath": "/tmp/m.jsonl", "kafka.bootstrap.servers": "h:1"}
    assert sink_option(options, "METRICSPATH") == "/tmp/m.jsonl"
    assert sink_option(options, "Kafka.Bootstrap.Servers") == "h:1"
    assert sink_option(options, "topic") is None
