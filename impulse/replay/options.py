"""The options of the replay source, parsed once into `ReplayOptions` (raises `OptionError` naming the option)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from connectors.errors import OptionError
from connectors.options import OptionReader

__all__ = ["ReplayOptions", "FORMATS"]

#: the recording formats pyarrow reads on every executor (a Python data source has no Spark session to read with)
FORMATS = ("parquet", "csv", "json", "orc", "arrow", "feather")


@dataclass(frozen=True)
class ReplayOptions:
    """Validated replay options (see `impulse.replay.source.ReplayDataSource` for their meaning)."""

    path: str
    source_format: str
    time_column: str | None
    speed: float
    events_per_second: float | None
    loop: bool
    num_partitions: int
    max_events_per_trigger: int | None
    limit: int | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, object]) -> "ReplayOptions":
        reader = OptionReader(options, name="replay source")
        if reader.has("table"):
            raise OptionError("table", reader.string("table"), "a path: .load(PATH) of the table's files (a Python "
                              "data source reads files on the executors and has no catalog; replay a table by its "
                              "location, or write it to files first)")
        path = reader.string("path")
        if not path:
            raise OptionError("path", None, "the recording to replay: .load(PATH), a file or folder")
        source_format = reader.choice("sourceFormat", FORMATS, "parquet")
        time_column = reader.string("timeColumn")
        rate = reader.number("eventsPerSecond", None, above=0.0)
        speed = reader.number("speed", None, above=0.0)
        if rate is not None and speed is not None:
            raise OptionError("speed/eventsPerSecond", {"speed": speed, "eventsPerSecond": rate},
                              "at most one: the recording's own pace × speed, or a fixed eventsPerSecond")
        if rate is None and time_column is None:
            raise OptionError("timeColumn", None, "the column whose times pace the replay (a TIMESTAMP), or a fixed "
                              "'eventsPerSecond' instead (the rows then come in file order)")
        loop = reader.boolean("loop", False)
        partitions = reader.integer("numPartitions", os.cpu_count() or 1, minimum=1, maximum=10_000)
        max_rows = reader.integer("maxEventsPerTrigger", None, minimum=1)
        limit = reader.integer("limit", None, minimum=0)
        reader.finish()
        return cls(path, source_format, time_column, 1.0 if speed is None else speed, rate, loop, partitions, max_rows,
                   limit)
