"""``kind=ref`` without Spark: on over a million events, every value names an entity created at or before the
event's scheduled time, in each pick mode; the recent pick's shares follow their Zipf formula; bad options
are refused (the Spark join is in `test_ref_join.py`)."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from connectors.errors import OptionError
from impulse import draws
from impulse.events import Disorder, EventLayout, event_batches
from impulse.fields import generated_column
from impulse.options import ImpulseOptions
from impulse.schedule import Schedule
from impulse.schema import row_spec

START = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z, µs
PARTITIONS = 3
EVENTS = 1_050_000  # over the partitions
REF = {"kind": "ref", "refeventspersecond": "100", "refnumpartitions": "2"}
PICKS = {
    "uniform": {},
    "recent": {"pick": "recent", "cardinality": "50", "exponent": "1.2"},
    "window": {"pick": "window", "window": "3s"},
}


def refs(properties: dict, events_per_second: float = 5000, *, partitions: int = PARTITIONS,
         events: int = EVENTS, disorder: Disorder | None = None, data_type=LongType()) -> tuple[np.ndarray, np.ndarray]:
    """(ids, scheduled times µs) of every event of a stream at `events_per_second` with one ``ref`` column."""
    rows = row_spec(StructType([StructField("customer_id", data_type)]), {"customer_id": properties}, seed=5,
                    payload_bytes=0)
    schedule = Schedule(START, partitions * 1e6 / events_per_second)
    layout = EventLayout(START, schedule, 0, None, 0, rows, partitions, disorder)
    ids, times = [], []
    for subtask in range(partitions):
        n = events // partitions
        ids.append(pa.Table.from_batches(list(event_batches(subtask, 0, n, layout))).column(0).to_numpy())
        times.append(layout.scheduled_us(np.arange(n, dtype=np.int64)))
    return np.concatenate(ids), np.concatenate(times)


def created_us(ids: np.ndarray, rate: float = 100, partitions: int = 2) -> np.ndarray:
    """When the referenced stream (a sequence key at `rate` over `partitions`) creates each id: the schedule of
    partition ``id % p``, counter ``id // p`` (README: the global index)."""
    return START + Schedule(0, partitions * 1e6 / rate).offsets_us(ids // partitions)


def existing(times: np.ndarray, rate: float = 100, partitions: int = 2) -> np.ndarray:
    """How many entities exist at each time, counted from the creation times (no shared code with `_ref`)."""
    per_partition = np.floor((times - START) / (partitions * 1e6 / rate)).astype(np.int64) + 1
    return per_partition * partitions


@pytest.mark.parametrize("pick", PICKS)
def test_every_ref_names_an_entity_created_by_the_events_scheduled_time(pick):
    ids, times = refs({**REF, **PICKS[pick]})
    assert len(ids) >= 1_000_000 and ids.min() >= 0
    assert (created_us(ids) <= times).all()
    span = times.max() - START
    assert ids.max() >= existing(np.array([START + span * 9 // 10]))[0]  # late events reach late entities
    if pick == "window":
        newest = created_us(existing(times) - 1)
        inside = created_us(ids) >= times - 3_000_000
        assert (inside | (ids == existing(times) - 1)).all() and (newest >= times - 3_000_000).all()
        assert inside.all()  # 100 entities/s: a 3 s window always holds some


def test_disorder_moves_the_timestamp_only():
    ordered, _ = refs({**REF, **PICKS["uniform"]}, events=30_000)
    disordered, _ = refs({**REF, **PICKS["uniform"]}, events=30_000,
                         disorder=Disorder(max_delay_us=10_000_000, late_rate=0.1, late_by_us=60_000_000, seed=5))
    assert np.array_equal(ordered, disordered)


def test_ref_limit_caps_the_entities():
    ids, times = refs({**REF, "reflimit": "777"}, events=300_000)
    assert ids.max() == 776 and (created_us(ids) <= times).all()


def test_ref_start_and_step_write_the_referenced_sequences_keys():
    ids, _ = refs({**REF, "reflimit": "777"}, events=30_000)
    keys, _ = refs({**REF, "reflimit": "777", "refstart": "1956", "refstep": "3"}, events=30_000)
    assert np.array_equal(keys, 1956 + 3 * ids)              # the same entities, named by their sequence keys


def test_uniform_pick_is_uniform_over_the_existing_entities():
    ids, times = refs({**REF, **PICKS["uniform"]})
    share = (ids + 0.5) / existing(times)
    assert abs(share.mean() - 0.5) < 4 * math.sqrt(1 / 12 / len(ids))


def test_recent_pick_shares_follow_zipf_over_the_newest():
    ids, times = refs({**REF, **PICKS["recent"]})
    ranks = existing(times) - 1 - ids
    full = existing(times) >= 50  # once 50 entities exist, rank r has probability (r+1)^-1.2 / H(50, 1.2)
    ranks = ranks[full]
    assert len(ranks) > 1_000_000 * 0.9 and ranks.min() >= 0 and ranks.max() < 50
    weights = np.arange(1, 51, dtype=np.float64) ** -1.2
    expected = weights / weights.sum() * len(ranks)
    observed = np.bincount(ranks, minlength=50)
    chi2 = ((observed - expected) ** 2 / expected).sum()
    assert chi2 < 49 * (1 - 2 / (9 * 49) + 3.09 * math.sqrt(2 / (9 * 49))) ** 3  # p = 0.001
    assert abs(observed[0] / len(ranks) - 1 / weights.sum()) < 0.002


def test_recent_pick_wraps_ranks_when_fewer_entities_exist():
    ids, times = refs({**REF, **PICKS["recent"]}, events=3_000)
    early = existing(times) < 50
    assert early.any() and (ids[early] < existing(times)[early]).all()
    word_ranks = draws.zipf(50, 1.2).ranks(draws.words(draws.stream_key(5, "customer_id", "value"), 0, 0, 1000))
    assert np.array_equal(ids[:1000], existing(times[:1000]) - 1 - word_ranks % existing(times[:1000]))


@pytest.mark.parametrize("options,option,words", [
    ({"eventsPerSecond": "10"}, "fields.customer_id.kind", "a pinned timeline for kind=ref: set 'refStartTime'"),
    ({"eventsPerSecond": "10", "startTime": "0", "downtime": "skip"}, "fields.customer_id.kind", "no downtime=skip"),
])
def test_ref_needs_a_pinned_timeline(options, option, words):
    with pytest.raises(OptionError) as err:
        ImpulseOptions.from_options({**options, "fields.customer_id.kind": "ref",
                                     "fields.customer_id.refEventsPerSecond": "100"})
    assert err.value.option == option and words in str(err.value), str(err.value)


def test_ref_start_time_keeps_the_referenced_timeline_whatever_the_stream_starts_at():
    """A stream starting an hour after the referenced one, with ``refStartTime`` = the referenced stream's start,
    writes the ids that stream's own events would on the shared timeline: each event picks among the entities
    created by its scheduled time counted from ``refStartTime``, not from its own start (no startTime needed)."""
    options = ImpulseOptions.from_options({"eventsPerSecond": "500", "refStartTime": "2026-01-01T00:00:00Z",
                                           "fields.customer_id.kind": "ref",
                                           "fields.customer_id.refEventsPerSecond": "100"})
    assert options.ref_start_time_us == START and options.start_time_us is None
    rows = row_spec(StructType([StructField("customer_id", LongType())]), {"customer_id": {**REF}}, seed=5,
                    payload_bytes=0)
    later = START + 3_600_000_000
    shifted = EventLayout(later, Schedule(later, 1e6 / 500), 0, None, 0, rows, ref_start_us=START)
    ids = pa.Table.from_batches(list(event_batches(0, 0, 5000, shifted))).column(0).to_numpy()
    times = shifted.scheduled_us(np.arange(5000, dtype=np.int64))
    assert (created_us(ids) <= times).all() and existing(times).min() >= 360_000
    assert ids.mean() > 150_000  # uniform over the hour's entities, not over the 10 s since the stream's start
    own = EventLayout(later, Schedule(later, 1e6 / 500), 0, None, 0, rows)  # refStartTime left out: its own start
    own_ids = pa.Table.from_batches(list(event_batches(0, 0, 5000, own))).column(0).to_numpy()
    assert (own_ids < existing(times - 3_600_000_000)).all()


def test_a_string_ref_writes_the_referenced_key_with_its_format():
    """A STRING reference writes ``refStart + refStep × id`` with its ``format``, as the referenced STRING key (a
    ``sequence`` with that format) writes its entities: the same ids as a BIGINT reference, formatted."""
    props = {**REF, "refstart": "1", "refstep": "2"}
    ids, _ = refs(props, events=3000, partitions=1)
    texts, _ = refs({**props, "format": "C-{:05d}"}, events=3000, partitions=1, data_type=StringType())
    assert list(texts) == [f"C-{i:05d}" for i in ids] and (ids % 2 == 1).all()


def test_ref_start_time_needs_a_ref_column():
    with pytest.raises(OptionError) as err:
        ImpulseOptions.from_options({"eventsPerSecond": "10", "refStartTime": "0"})
    assert err.value.option == "refStartTime" and "only with a kind=ref column" in str(err.value)


@pytest.mark.parametrize("data_type,props,option,words", [
    (LongType(), {"kind": "ref"}, "fields.c.refEventsPerSecond", "the eventsPerSecond of the referenced stream"),
    (LongType(), {**REF, "pick": "recent"}, "fields.c.cardinality", "how many of the newest"),
    (LongType(), {**REF, "pick": "window"}, "fields.c.window", "a duration for pick=window"),
    (LongType(), {**REF, "pick": "oldest"}, "fields.c.pick", "'uniform', 'recent', 'window'"),
    (LongType(), {**REF, "refnumpartitions": "0"}, "fields.c.refNumPartitions", "an integer from 1"),
    (LongType(), {**REF, "refstep": "0"}, "fields.c.refStep", "an integer from 1"),
])
def test_bad_ref_properties_are_refused(data_type, props, option, words):
    with pytest.raises(OptionError) as err:
        generated_column("c", data_type, True, props, 0)
    assert err.value.option == option and words in str(err.value), str(err.value)
