"""The options of the impulse source, parsed once on the driver into `ImpulseOptions`."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from connectors.errors import OptionError
from connectors.options import OptionReader

__all__ = ["ImpulseOptions", "DOWNTIME_SKIP", "DOWNTIME_CATCHUP", "split_limit"]

DOWNTIME_SKIP = "skip"
DOWNTIME_CATCHUP = "catchup"


def split_limit(total: int, partitions: int) -> tuple[int, ...]:
    """How a total `limit` is shared: partition i gets ``total // partitions``, plus one if ``i < total % partitions``."""
    return tuple(total // partitions + (1 if i < total % partitions else 0) for i in range(partitions))


@dataclass(frozen=True)
class ImpulseOptions:
    """Validated impulse options; every time is in integer microseconds unless the name says otherwise.

    `delay_us` is the time between two events of one partition, whichever of ``eventsPerSecond``
    (``numPartitions × 1e6 / eventsPerSecond``) or ``delay`` set it; it may be fractional.

    `downtime` defaults to ``catchup`` when the timeline is pinned (``startTime`` or ``interval``
    given) and to ``skip`` otherwise: a restart must not move a pinned timeline.
    """

    num_partitions: int
    delay_us: float
    events_per_second: float
    limits: tuple[int, ...] | None
    interval_us: int | None
    start_time_us: int | None
    alignment_us: int | None
    max_events_per_trigger: int | None
    ramp_up_us: int
    payload_bytes: int
    downtime: str

    @classmethod
    def from_options(cls, options: Mapping[str, object]) -> "ImpulseOptions":
        """Parse and validate; raises `OptionError` naming the option, the value and what is allowed."""
        reader = OptionReader(options, name="impulse source")
        rate = reader.number("eventsPerSecond", above=0)
        delay = reader.duration_us("delay")
        if (rate is None) == (delay is None):
            given = {"eventsPerSecond": options.get("eventsPerSecond"), "delay": options.get("delay")}
            raise OptionError("eventsPerSecond/delay", given,
                              "exactly one of 'eventsPerSecond' (events/s over all partitions, > 0) "
                              "or 'delay' (time between events of one partition, e.g. '250ms')")
        partitions = reader.integer("numPartitions", os.cpu_count() or 1, minimum=1, maximum=100_000)
        delay_us = float(delay) if delay is not None else partitions * 1e6 / rate
        limit = reader.integer("limit", minimum=0)
        per_partition = reader.integer("limitPerPartition", minimum=0)
        if limit is not None and per_partition is not None:
            raise OptionError("limit/limitPerPartition", {"limit": limit, "limitPerPartition": per_partition},
                              "at most one of 'limit' (total over all partitions) or 'limitPerPartition'")
        limits = None
        if limit is not None:
            limits = split_limit(limit, partitions)
        elif per_partition is not None:
            limits = (per_partition,) * partitions
        start_time_us = reader.time_us("startTime")
        interval_us = reader.duration_us("interval")
        pinned = start_time_us is not None or interval_us is not None
        parsed = cls(
            num_partitions=partitions,
            delay_us=delay_us,
            events_per_second=partitions * 1e6 / delay_us,
            limits=limits,
            interval_us=interval_us,
            start_time_us=start_time_us,
            alignment_us=reader.duration_us("alignment"),
            max_events_per_trigger=reader.integer("maxEventsPerTrigger", minimum=1),
            ramp_up_us=reader.duration_us("rampUpTime", 0, positive=False),
            payload_bytes=reader.integer("payloadBytes", 0, minimum=0, maximum=64 * 1024 * 1024),
            downtime=reader.choice("downtime", (DOWNTIME_SKIP, DOWNTIME_CATCHUP),
                                   DOWNTIME_CATCHUP if pinned else DOWNTIME_SKIP),
        )
        reader.finish()
        return parsed

    def aligned_start(self, now_us: int) -> int:
        """The start time: `startTime` (or `now_us`), rounded down to a multiple of `alignment`."""
        start = self.start_time_us if self.start_time_us is not None else now_us
        if self.alignment_us:
            start -= start % self.alignment_us
        return start
