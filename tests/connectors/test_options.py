"""`connectors.options`: durations, times, and the typed, case-insensitive `OptionReader` (no Spark)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from connectors.errors import ConnectorError, OptionError
from connectors.options import (OptionReader, OptionSpec, format_duration_us, parse_duration_us, parse_time_us,
                                recording)


# --- durations -------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, us", [
    ("500us", 500), ("500µs", 500), ("7micros", 7),
    ("250ms", 250_000), ("1millis", 1_000), ("0.5ms", 500),
    ("1s", 1_000_000), ("1.5s", 1_500_000), (".25s", 250_000), ("2sec", 2_000_000), ("3 seconds", 3_000_000),
    ("1m", 60_000_000), ("2min", 120_000_000), ("1minutes", 60_000_000),
    ("1h", 3_600_000_000), ("2hours", 7_200_000_000), ("1d", 86_400_000_000),
    ("  10MS ", 10_000), ("10Ms", 10_000), ("0s", 0), ("1.us", 1),
])
def test_duration_parses_to_integer_microseconds(text, us):
    parsed = parse_duration_us(text)
    assert parsed == us and isinstance(parsed, int)


def test_duration_rounds_to_the_nearest_microsecond():
    assert parse_duration_us("1.0004ms") == 1_000
    assert parse_duration_us("1.0006ms") == 1_001


@pytest.mark.parametrize("text", ["fast", "10", "ms", "-5ms", "1e3ms", "1,5s", "", "5 ms s"])
def test_unparsable_duration_names_option_value_and_allowed_form(text):
    with pytest.raises(OptionError) as err:
        parse_duration_us(text, "delay")
    assert err.value.option == "delay" and err.value.value == text
    message = str(err.value)
    assert "'delay'" in message and repr(text) in message and "250ms" in message and "units" in message


@pytest.mark.parametrize("text, unit", [("5parsecs", "parsecs"), ("3weeks", "weeks"), ("1ns", "ns")])
def test_unknown_unit_is_named(text, unit):
    with pytest.raises(OptionError) as err:
        parse_duration_us(text, "interval")
    assert err.value.option == "interval"
    assert repr(unit) in str(err.value) and "us, ms, s, m, h, d" in str(err.value)


@pytest.mark.parametrize("us", [0, 1, 999, 1_000, 1_500_000, 60_000_000, 90_000_000, 3_600_000_000, 86_400_000_000, 123_456_789])
def test_format_duration_round_trips(us):
    text = format_duration_us(us)
    assert parse_duration_us(text) == us
    assert len(text) <= len(f"{us}us")


def test_format_duration_picks_the_largest_exact_unit():
    assert format_duration_us(1_500_000) == "1500ms"
    assert format_duration_us(120_000_000) == "2m"
    assert format_duration_us(7) == "7us"


# --- times -----------------------------------------------------------------------------------------

def _epoch_us(dt: datetime) -> int:
    return round(dt.timestamp() * 1_000_000)


@pytest.mark.parametrize("text, expected", [
    ("0", 0),
    ("1767225600000", _epoch_us(datetime(2026, 1, 1, tzinfo=timezone.utc))),
    ("-1000", -1_000_000),
    ("2026-01-01T00:00:00Z", _epoch_us(datetime(2026, 1, 1, tzinfo=timezone.utc))),
    ("2026-01-01T00:00:00z", _epoch_us(datetime(2026, 1, 1, tzinfo=timezone.utc))),
    ("2026-01-01T00:00:00", _epoch_us(datetime(2026, 1, 1, tzinfo=timezone.utc))),  # no zone = UTC
    ("2026-01-01", _epoch_us(datetime(2026, 1, 1, tzinfo=timezone.utc))),
    ("2026-01-01T02:00:00+02:00", _epoch_us(datetime(2026, 1, 1, tzinfo=timezone.utc))),
    ("1970-01-01T00:00:00.000001Z", 1),
    (" 2026-03-04T05:06:07.123456Z ", 1772600767_123456),
])
def test_time_parses_iso_and_epoch_millis_to_epoch_micros(text, expected):
    assert parse_time_us(text) == expected


def test_iso_and_epoch_millis_agree():
    assert parse_time_us("2026-03-04T05:06:07.123Z") == parse_time_us("1772600767123")


@pytest.mark.parametrize("text", ["yesterday", "2026-13-01", "1.5", "", "12:00"])
def test_unparsable_time_names_option_value_and_allowed_forms(text):
    with pytest.raises(OptionError) as err:
        parse_time_us(text, "startTime")
    message = str(err.value)
    assert err.value.option == "startTime" and "'startTime'" in message and repr(text) in message
    assert "ISO-8601" in message and "epoch milliseconds" in message


# --- OptionReader ----------------------------------------------------------------------------------

def test_lookup_is_case_insensitive_and_values_are_strings():
    reader = OptionReader({"eventspersecond": 10, "NUMPARTITIONS": "4"}, name="test source")
    assert reader.number("eventsPerSecond") == 10.0
    assert reader.integer("numPartitions") == 4
    reader.finish()


def test_missing_options_give_defaults():
    reader = OptionReader({}, name="test source")
    assert reader.integer("n", 3) == 3
    assert reader.number("x", 1.5) == 1.5
    assert reader.string("s", "d") == "d"
    assert reader.boolean("b", True) is True
    assert reader.choice("c", ("a", "b"), "a") == "a"
    assert reader.duration_us("d", 7) == 7
    assert reader.time_us("t") is None
    assert reader.has("h") is False
    reader.finish()


def test_integer_accepts_underscores_and_spaces_and_checks_bounds():
    reader = OptionReader({"a": " 1_000 ", "b": "0", "c": "11"}, name="src")
    assert reader.integer("a") == 1000
    with pytest.raises(OptionError, match=r"invalid value '0' for option 'b': expected an integer ≥ 1"):
        reader.integer("b", minimum=1)
    with pytest.raises(OptionError, match=r"expected an integer from 1 to 10"):
        reader.integer("c", minimum=1, maximum=10)


@pytest.mark.parametrize("value", ["1.5", "ten", ""])
def test_integer_rejects_non_integers(value):
    with pytest.raises(OptionError) as err:
        OptionReader({"limit": value}, name="src").integer("limit", minimum=0)
    assert err.value.option == "limit" and err.value.value == value and "an integer ≥ 0" in str(err.value)


@pytest.mark.parametrize("value, expected", [("0", "> 0"), ("-1", "> 0"), ("nan", "finite"), ("inf", "finite"), ("x", "a number")])
def test_number_bounds_and_finiteness(value, expected):
    with pytest.raises(OptionError) as err:
        OptionReader({"rate": value}, name="src").number("rate", above=0)
    assert expected in str(err.value) and repr(value) in str(err.value)


def test_number_inclusive_minimum():
    reader = OptionReader({"a": "0", "b": "-0.1"}, name="src")
    assert reader.number("a", minimum=0) == 0.0
    with pytest.raises(OptionError, match="≥ 0"):
        reader.number("b", minimum=0)


@pytest.mark.parametrize("value, expected", [("true", True), ("YES", True), ("1", True), ("false", False), ("No", False), ("0", False)])
def test_boolean(value, expected):
    assert OptionReader({"flag": value}, name="src").boolean("flag", not expected) is expected


def test_boolean_rejects_other_words():
    with pytest.raises(OptionError, match="true or false"):
        OptionReader({"flag": "maybe"}, name="src").boolean("flag", False)


def test_choice_returns_canonical_spelling_and_lists_choices():
    reader = OptionReader({"downtime": " CatchUp ", "mode": "sometimes"}, name="src")
    assert reader.choice("downtime", ("skip", "catchup")) == "catchup"
    with pytest.raises(OptionError) as err:
        reader.choice("mode", ("always", "never"))
    assert "one of 'always', 'never'" in str(err.value)


def test_duration_must_be_positive_unless_allowed():
    reader = OptionReader({"delay": "0ms", "ramp": "0s"}, name="src")
    with pytest.raises(OptionError, match="a duration > 0"):
        reader.duration_us("delay")
    assert reader.duration_us("ramp", positive=False) == 0


def test_required_string():
    reader = OptionReader({"empty": ""}, name="kafka sink")
    with pytest.raises(OptionError, match=r"set it with \.option\('topic', \.\.\.\) on the kafka sink"):
        reader.string("topic", required=True)
    with pytest.raises(OptionError):
        reader.string("empty", required=True)
    assert reader.string("empty", "fallback") == "fallback"


def test_prefixed_strips_the_prefix_and_keeps_case():
    reader = OptionReader({"kafka.bootstrap.servers": "b:9092", "Kafka.Acks": "all", "topic": "t"}, name="src")
    assert reader.prefixed("kafka.") == {"bootstrap.servers": "b:9092", "Acks": "all"}
    reader.string("topic")
    reader.finish()  # prefixed options count as known


def test_finish_rejects_an_unknown_option_and_lists_the_known_ones():
    reader = OptionReader({"eventsPerSecnod": "10", "delay": "1s"}, name="impulse source")
    reader.duration_us("delay")
    reader.number("eventsPerSecond")
    with pytest.raises(OptionError) as err:
        reader.finish()
    message = str(err.value)
    assert err.value.option == "eventsPerSecnod" and err.value.value == "10"
    assert "unknown option 'eventsPerSecnod'" in message and "impulse source" in message
    assert "known: delay, eventsPerSecond" in message


def test_finish_ignores_keys_spark_adds():
    reader = OptionReader({"path": "/x", "checkpointLocation": "/c", "queryName": "q"}, name="src")
    reader.finish()


def test_option_error_is_a_value_error_and_a_connector_error():
    err = OptionError("limit", "-1", "an integer ≥ 0")
    assert isinstance(err, ValueError) and isinstance(err, ConnectorError)
    assert str(err) == "invalid value '-1' for option 'limit': expected an integer ≥ 0"


# --- recording what the getters ask (the documentation's option tables) -----------------------------

def test_recording_lists_each_getter_with_its_type_default_and_allowed_values():
    reader = OptionReader({"target": "LIST"}, name="redis sink")
    with recording() as asked:
        assert reader.choice("target", ("string", "list"), "string") == "list"  # parsing is unchanged
        reader.string("keyPrefix", "")
        reader.integer("numPartitions", 4, minimum=1, documented_default="the driver's CPU count")
        reader.duration_us("rampUpTime", 0, positive=False)
        reader.duration_us("timeout", 10_000_000)
        reader.number("lateRate", 0.0, minimum=0.0)
        reader.boolean("decode", False)
        reader.prefixed("kafka.")
        reader.has("value.schema")
    assert asked == [
        OptionSpec("target", "choice", "one of 'string', 'list'", "string", choices=("string", "list"),
                   reader="redis sink"),
        OptionSpec("keyPrefix", "string", "a string", "", reader="redis sink"),
        OptionSpec("numPartitions", "integer", "an integer ≥ 1", "4", "the driver's CPU count", reader="redis sink"),
        OptionSpec("rampUpTime", "duration", "a duration ≥ 0, e.g. '250ms', '1.5s', '1m'", "0s", reader="redis sink"),
        OptionSpec("timeout", "duration", "a duration > 0, e.g. '250ms', '1.5s', '1m'", "10s", reader="redis sink"),
        OptionSpec("lateRate", "number", "a number ≥ 0", "0", reader="redis sink"),
        OptionSpec("decode", "boolean", "true or false", "false", reader="redis sink"),
        OptionSpec("kafka.*", "prefix", "any option starting with 'kafka.'", reader="redis sink"),
        OptionSpec("value.schema", "known", reader="redis sink"),
    ]


def test_a_required_option_is_recorded_before_its_error_and_nothing_is_recorded_outside_the_block():
    reader = OptionReader({}, name="webhook sink")
    with recording() as asked, pytest.raises(OptionError):
        reader.string("url", required=True)
    assert asked == [OptionSpec("url", "string", "a string", required=True, reader="webhook sink")]
    reader.integer("batchSize", 100)
    assert len(asked) == 1
