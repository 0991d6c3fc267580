"""`ImpulseOptions.from_options`: every option, its default, and a clear error for each bad value (no Spark)."""

from __future__ import annotations

import os

import pytest

from connectors.errors import OptionError
from impulse.options import DOWNTIME_CATCHUP, DOWNTIME_SKIP, ImpulseOptions


def parse(**options) -> ImpulseOptions:
    return ImpulseOptions.from_options({k: str(v) for k, v in options.items()})


def test_defaults():
    opts = parse(eventsPerSecond=100)
    assert opts.num_partitions == (os.cpu_count() or 1)
    assert opts.limits is None and opts.interval_us is None and opts.start_time_us is None
    assert opts.alignment_us is None and opts.max_events_per_trigger is None
    assert opts.ramp_up_us == 0 and opts.payload_bytes == 0 and opts.downtime == DOWNTIME_SKIP


@pytest.mark.parametrize("pin", [{"startTime": "2020-01-01T00:00:00Z"}, {"interval": "1ms"}])
def test_a_pinned_timeline_catches_up_by_default_and_an_explicit_skip_is_honoured(pin):
    """startTime or interval pins the timeline: a restart must not move it, so the default is catchup."""
    assert parse(eventsPerSecond=100, **pin).downtime == DOWNTIME_CATCHUP
    assert parse(eventsPerSecond=100, downtime="skip", **pin).downtime == DOWNTIME_SKIP


def test_rate_is_split_over_partitions_as_a_float():
    opts = parse(eventsPerSecond=1000, numPartitions=3)
    assert opts.delay_us == pytest.approx(3 * 1e6 / 1000)
    assert opts.events_per_second == pytest.approx(1000)


def test_delay_sets_the_rate_per_partition():
    opts = parse(delay="250ms", numPartitions=4)
    assert opts.delay_us == 250_000
    assert opts.events_per_second == pytest.approx(16)


def test_option_names_are_case_insensitive():
    opts = ImpulseOptions.from_options({"eventspersecond": "10", "NUMPARTITIONS": "2", "PayloadBytes": "8"})
    assert (opts.num_partitions, opts.payload_bytes) == (2, 8)


@pytest.mark.parametrize("limit, partitions, expected", [
    (10, 4, (3, 3, 2, 2)), (8, 4, (2, 2, 2, 2)), (3, 4, (1, 1, 1, 0)), (0, 3, (0, 0, 0)), (1_000_003, 2, (500_002, 500_001)),
])
def test_limit_is_split_with_the_remainder_to_the_lowest_partitions(limit, partitions, expected):
    limits = parse(delay="1ms", numPartitions=partitions, limit=limit).limits
    assert limits == expected and sum(limits) == limit


def test_limit_per_partition():
    assert parse(delay="1ms", numPartitions=3, limitPerPartition=7).limits == (7, 7, 7)


def test_durations_times_and_choices():
    opts = parse(delay="1ms", interval="10ms", startTime="2026-01-01T00:00:00Z", alignment="1m",
                 maxEventsPerTrigger=500, rampUpTime="5s", payloadBytes=100, downtime="CATCHUP")
    assert opts.interval_us == 10_000 and opts.start_time_us == 1_767_225_600_000_000
    assert opts.alignment_us == 60_000_000 and opts.max_events_per_trigger == 500 and opts.ramp_up_us == 5_000_000
    assert opts.payload_bytes == 100 and opts.downtime == DOWNTIME_CATCHUP


def test_start_time_in_epoch_millis_equals_iso():
    assert parse(delay="1ms", startTime="1767225600000").start_time_us == parse(delay="1ms", startTime="2026-01-01T00:00:00Z").start_time_us


@pytest.mark.parametrize("start, alignment, expected", [
    ("2026-01-01T00:00:37.5Z", "1m", "2026-01-01T00:00:00Z"),
    ("2026-01-01T00:00:37.5Z", "10s", "2026-01-01T00:00:30Z"),
    ("2026-01-01T00:01:00Z", "1m", "2026-01-01T00:01:00Z"),  # already aligned: unchanged
    ("2026-01-01T13:59:59.999999Z", "1h", "2026-01-01T13:00:00Z"),
])
def test_alignment_rounds_the_start_down(start, alignment, expected):
    opts = parse(delay="1ms", startTime=start, alignment=alignment)
    assert opts.aligned_start(now_us=0) == parse(delay="1ms", startTime=expected).start_time_us


def test_alignment_of_the_current_time():
    opts = parse(delay="1ms", alignment="1s")
    assert opts.aligned_start(now_us=1_767_225_600_123_456) == 1_767_225_600_000_000
    assert parse(delay="1ms").aligned_start(now_us=1_767_225_600_123_456) == 1_767_225_600_123_456


def test_alignment_rounds_down_before_the_epoch_too():
    assert parse(delay="1ms", startTime="-1500", alignment="1s").aligned_start(0) == -2_000_000


# --- bad options: the error names the option, the value and what is allowed -------------------------

BAD = [
    # (options, option named, value shown, words of what is allowed)
    ({"eventsPerSecond": "10", "delay": "1s"}, "eventsPerSecond/delay/rateStages/rateCurve", "'10'", "exactly one of"),
    ({}, "eventsPerSecond/delay/rateStages/rateCurve", "None", "exactly one of"),
    ({"eventsPerSecond": "0"}, "eventsPerSecond", "'0'", "a number > 0"),
    ({"eventsPerSecond": "-5"}, "eventsPerSecond", "'-5'", "a number > 0"),
    ({"eventsPerSecond": "lots"}, "eventsPerSecond", "'lots'", "a number > 0"),
    ({"delay": "0ms"}, "delay", "'0ms'", "a duration > 0"),
    ({"delay": "fast"}, "delay", "'fast'", "a duration with a unit"),
    ({"delay": "5parsecs"}, "delay", "'5parsecs'", "a known unit, not 'parsecs'"),
    ({"delay": "10"}, "delay", "'10'", "a duration with a unit"),
    ({"delay": "1ms", "limit": "-1"}, "limit", "'-1'", "an integer ≥ 0"),
    ({"delay": "1ms", "limitPerPartition": "-3"}, "limitPerPartition", "'-3'", "an integer ≥ 0"),
    ({"delay": "1ms", "limit": "10", "limitPerPartition": "5"}, "limit/limitPerPartition", "10", "at most one of"),
    ({"delay": "1ms", "numPartitions": "0"}, "numPartitions", "'0'", "an integer from 1 to"),
    ({"delay": "1ms", "numPartitions": "two"}, "numPartitions", "'two'", "an integer from 1 to"),
    ({"delay": "1ms", "interval": "soon"}, "interval", "'soon'", "a duration with a unit"),
    ({"delay": "1ms", "interval": "1fortnight"}, "interval", "'1fortnight'", "a known unit"),
    ({"delay": "1ms", "startTime": "yesterday"}, "startTime", "'yesterday'", "ISO-8601"),
    ({"delay": "1ms", "alignment": "0s"}, "alignment", "'0s'", "a duration > 0"),
    ({"delay": "1ms", "maxEventsPerTrigger": "0"}, "maxEventsPerTrigger", "'0'", "an integer ≥ 1"),
    ({"delay": "1ms", "rampUpTime": "-1s"}, "rampUpTime", "'-1s'", "a duration with a unit"),
    ({"delay": "1ms", "payloadBytes": "-1"}, "payloadBytes", "'-1'", "an integer from 0 to"),
    ({"delay": "1ms", "downtime": "replay"}, "downtime", "'replay'", "one of 'skip', 'catchup'"),
    ({"delay": "1ms", "eventsPerSecnod": "10"}, "eventsPerSecnod", "'10'",
     "unknown option 'eventsPerSecnod' (did you mean 'eventsPerSecond'?"),
    # a misspelt rate key is named, not only the missing rate
    ({"eventsPerSecnd": "10"}, "eventsPerSecnd", "'10'", "unknown option 'eventsPerSecnd' (did you mean 'eventsPerSecond'?"),
    ({"dealy": "1ms"}, "dealy", "'1ms'", "unknown option 'dealy' (did you mean 'delay'?"),
]


@pytest.mark.parametrize("options, option, value, allowed", BAD, ids=[f"{b[1]}={b[2]}" for b in BAD])
def test_bad_option_names_option_value_and_what_is_allowed(options, option, value, allowed):
    with pytest.raises(OptionError) as err:
        ImpulseOptions.from_options(options)
    message = str(err.value)
    assert err.value.option == option
    assert f"option '{option}'" in message and value in message and allowed in message


def test_unknown_option_lists_the_known_names():
    with pytest.raises(OptionError) as err:
        parse(delay="1ms", colour="red")
    for name in ("eventsPerSecond", "delay", "numPartitions", "limit", "limitPerPartition", "interval", "startTime",
                 "alignment", "maxEventsPerTrigger", "rampUpTime", "payloadBytes", "downtime"):
        assert name in str(err.value)


def test_options_are_frozen():
    opts = parse(delay="1ms")
    with pytest.raises(AttributeError):
        opts.delay_us = 5  # type: ignore[misc]
