"""Redelivered duplicates without Spark: each copy is its event's row arriving 1 to D events later, the share of
copies follows duplicateRate, the rows (copies included, in order) do not depend on batch boundaries, bad options
are refused naming them."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType, TimestampType

from connectors.errors import OptionError
from impulse.duplicates import Duplicates
from impulse.events import Disorder, EventLayout, event_batches
from impulse.options import ImpulseOptions
from impulse.schedule import Schedule
from impulse.schema import row_spec

SCHEMA = StructType([StructField("counter", LongType()), StructField("subtask_index", LongType()),
                     StructField("timestamp", TimestampType()), StructField("name", StringType()),
                     StructField("amount", DoubleType())])
BASE = {"eventsPerSecond": "1000", "numPartitions": "1", "duplicateRate": "0.2", "duplicateDelay": "50ms",
        "outOfOrderness": "20ms", "seed": "9"}


def read(options: dict, per_partition: int, batch: int = 131_072, partitions: int = 1) -> pa.Table:
    opts = ImpulseOptions.from_options({**BASE, "numPartitions": str(partitions), **options})
    rows = row_spec(SCHEMA, opts.fields, seed=opts.seed, payload_bytes=0)
    layout = EventLayout(0, Schedule(0, opts.delay_us), 0, None, 0, rows, partitions,
                         Disorder(opts.out_of_orderness_us, 0.0, 0, opts.seed), opts.duplicates)
    return pa.Table.from_batches([b for p in range(partitions) for b in event_batches(p, 0, per_partition, layout, batch)])


def test_each_copy_is_its_events_row_arriving_up_to_d_events_later():
    table = read({}, 20_000)
    rows = table.to_pylist()
    counters = table.column("counter").to_numpy()
    originals: dict[int, dict] = {}
    copies = 0
    for position, row in enumerate(rows):
        c = row["counter"]
        if c in originals:  # a copy: the very same row, 1 to 50 events after the original
            assert row == originals[c]
            delay = int(counters[:position].max()) - c  # the last original before it
            assert 1 <= delay <= 50
            copies += 1
        else:
            assert c == len(originals)  # the originals keep their order
            originals[c] = row
    assert len(originals) == 20_000
    assert copies == len(rows) - 20_000
    assert abs(copies / 20_000 - 0.2) < 5 * np.sqrt(0.2 * 0.8 / 20_000)  # the share within 5σ
    assert len(set(counters.tolist())) == 20_000 and copies > 0


@pytest.mark.parametrize("batch", [1, 7, 1000])
def test_rows_do_not_depend_on_batches(batch):
    assert read({}, 3_000, batch=batch).equals(read({}, 3_000))


def test_copies_arriving_after_the_last_event_are_not_delivered():
    duplicates = Duplicates(1.0, 10, seed=1)
    sources, arrivals = duplicates.copies(0, 0, 100)
    assert (arrivals < 100).all() and (arrivals > sources).all() and (arrivals - sources <= 10).all()
    later, _ = duplicates.copies(0, 100, 200)
    assert set(sources.tolist()) | set(later.tolist()) >= set(range(90))  # every event once copied, in one range
    assert not set(sources.tolist()) & set(later.tolist())


@pytest.mark.parametrize("options, option", [
    ({"duplicateDelay": None}, "duplicateRate/duplicateDelay"),
    ({"duplicateRate": "1.5"}, "duplicateRate"),
    ({"limit": "100"}, "duplicateDelay"),  # 50 ms at 1000/s is 50 events: fine; 1 s is longer than the run
])
def test_bad_duplicate_options_are_refused(options, option):
    given = {k: v for k, v in {**BASE, **options}.items() if v is not None}
    if option == "duplicateDelay":
        given["duplicateDelay"] = "1s"
    with pytest.raises(OptionError, match=rf"option '{option}'"):
        ImpulseOptions.from_options(given)
