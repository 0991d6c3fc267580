"""The options of the impulse source, parsed once on the driver into `ImpulseOptions`."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping

from connectors.errors import OptionError
from connectors.options import OptionReader
from connectors.partitions import split_limit
from impulse.changelog import Changelog
from impulse.curve import BURSTS, CURVE, periodic_rate
from impulse.debezium import DEBEZIUM, ENVELOPES, Debezium
from impulse.duplicates import Duplicates
from impulse.fields import KINDS, PROPERTIES
from impulse.history import HISTORIES, SCD2
from impulse.schedule import ARRIVALS, PeriodicRate, RateStages

__all__ = ["ImpulseOptions", "DOWNTIME_SKIP", "DOWNTIME_CATCHUP", "split_limit"]

DOWNTIME_SKIP = "skip"
DOWNTIME_CATCHUP = "catchup"


@dataclass(frozen=True)
class ImpulseOptions:
    """Validated impulse options; every time is in integer microseconds unless the name says otherwise.

    `delay_us` is the time between two events of one partition, whichever of ``eventsPerSecond``
    (``numPartitions × 1e6 / eventsPerSecond``) or ``delay`` set it; it may be fractional.

    `downtime` defaults to ``catchup`` when the timeline is pinned (``startTime`` or ``interval``
    given) and to ``skip`` otherwise: a restart must not move a pinned timeline.

    With ``rateStages`` (`rate_stages`, one partition's share), `delay_us` is that of the peak target
    and `limits` hold at most the profile's events per partition: the stream ends after the last stage.
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
    seed: int = 0
    out_of_orderness_us: int = 0
    late_rate: float = 0.0
    late_by_us: int = 0
    fields: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # column -> property -> text
    rate_stages: RateStages | PeriodicRate | None = None  # with rateCurve or bursts: the periodic rate
    changelog: Changelog | None = None
    debezium: Debezium | None = None  # changelog.envelope=debezium: the envelope's options
    duplicate_rate: float = 0.0      # share of events delivered twice (`impulse.duplicates`)
    duplicate_delay_us: int = 0      # at most how much later the copy arrives
    poisson: bool = False            # arrival=poisson (`impulse.schedule`)
    scd2: bool = False               # changelog.history=scd2: the changelog's SCD2 history (`impulse.history`)
    changelog_image: str | None = None  # changelog.image: the row image's DDL (envelope or history)
    ref_start_time_us: int | None = None  # refStartTime: the timeline kind=ref columns refer on (default startTime)

    @classmethod
    def from_options(cls, options: Mapping[str, object]) -> "ImpulseOptions":
        """Parse and validate; raises `OptionError` naming the option, the value and what is allowed."""
        reader = OptionReader(options, name="impulse source")
        rate = reader.number("eventsPerSecond", above=0)
        delay = reader.duration_us("delay")
        stages_text = reader.string("rateStages")
        curve_text = reader.string(CURVE)
        if (rate is None) + (delay is None) + (stages_text is None) + (curve_text is None) != 3:
            typo = reader.misspelt("eventsPerSecond", "delay", "rateStages", CURVE)
            if typo is not None and (rate, delay, stages_text, curve_text) == (None, None, None, None):
                given, value, meant = typo
                raise OptionError(given, value, f"a known option of the impulse source; unknown option '{given}' "
                                                f"(did you mean '{meant}'? the rate is set by exactly one of "
                                                "'eventsPerSecond', 'delay', 'rateStages' or 'rateCurve')")
            given = {"eventsPerSecond": options.get("eventsPerSecond"), "delay": options.get("delay"),
                     "rateStages": stages_text, CURVE: curve_text}
            raise OptionError("eventsPerSecond/delay/rateStages/rateCurve",
                              {k: v for k, v in given.items() if v is not None} or None,
                              "exactly one of 'eventsPerSecond' (events/s over all partitions, > 0), "
                              "'delay' (time between events of one partition, e.g. '250ms'), 'rateStages' "
                              "(e.g. '30s:1000,1m:1000,30s:5000') or 'rateCurve' "
                              "(e.g. 'daily:min=2000,max=20000,peak=14:00')")
        partitions = reader.integer("numPartitions", os.cpu_count() or 1, minimum=1, maximum=100_000,
                                    documented_default="the driver's CPU count")
        stages = None if stages_text is None else RateStages.parse(stages_text, partitions)
        if stages is not None and reader.has(BURSTS[0]):
            raise OptionError(BURSTS[0], options.get(BURSTS[0]), "no bursts with 'rateStages' (bursts repeat over "
                              "'rateCurve' or a constant 'eventsPerSecond' or 'delay')")
        periodic = periodic_rate(reader, partitions, rate if rate is not None else
                                 None if delay is None else partitions * 1e6 / delay)
        if periodic is not None:
            stages, delay = periodic, None
        if stages is not None:
            rate = stages.peak * partitions
            setter = "rateStages" if stages_text is not None else CURVE if curve_text is not None else "bursts.every"
            for other in ("rampUpTime", "interval"):
                if reader.has(other):
                    raise OptionError(other, options.get(other), f"no '{other}' with '{setter}': it sets "
                                      "every event's time")
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
        if stages is not None and stages.total is not None:
            limits = tuple(min(cap, stages.total) for cap in limits or (stages.total,) * partitions)
        late_rate = reader.number("lateRate", 0.0, minimum=0.0)
        late_by = reader.duration_us("lateBy")
        if late_rate > 1:
            raise OptionError("lateRate", options.get("lateRate"), "a fraction from 0 to 1")
        if (late_rate > 0) != (late_by is not None):
            raise OptionError("lateRate/lateBy", {"lateRate": options.get("lateRate"), "lateBy": options.get("lateBy")},
                              "both or neither: 'lateRate' (the share of late events, 0..1) and 'lateBy' "
                              "(how much later than out-of-order they are, e.g. '1m')")
        duplicate_rate = reader.number("duplicateRate", 0.0, minimum=0.0)
        duplicate_delay = reader.duration_us("duplicateDelay")
        if duplicate_rate > 1:
            raise OptionError("duplicateRate", options.get("duplicateRate"), "a fraction from 0 to 1")
        if (duplicate_rate > 0) != (duplicate_delay is not None):
            raise OptionError("duplicateRate/duplicateDelay", {"duplicateRate": options.get("duplicateRate"),
                                                               "duplicateDelay": options.get("duplicateDelay")},
                              "both or neither: 'duplicateRate' (the share of events delivered twice, 0..1) and "
                              "'duplicateDelay' (at most how much later the copy arrives, e.g. '5s')")
        if duplicate_delay is not None and limits is not None and duplicate_delay > max(limits) * delay_us:
            raise OptionError("duplicateDelay", options.get("duplicateDelay"),
                              f"at most the run's length, {max(limits) * delay_us / 1e6:g} s (limit events per "
                              "partition at the rate): a copy later than that is never delivered")
        start_time_us = reader.time_us("startTime")
        ref_start_time_us = reader.time_us("refStartTime")
        interval_us = reader.duration_us("interval")
        pinned = start_time_us is not None or interval_us is not None
        seed = reader.integer("seed", 0, minimum=-2 ** 63, maximum=2 ** 64 - 1)
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
                                   DOWNTIME_CATCHUP if pinned else DOWNTIME_SKIP,
                                   documented_default=f"{DOWNTIME_CATCHUP} with startTime or interval, else "
                                                      f"{DOWNTIME_SKIP}"),
            seed=seed,
            out_of_orderness_us=reader.duration_us("outOfOrderness", 0, positive=False),
            late_rate=late_rate,
            late_by_us=late_by or 0,
            fields=_fields(reader.prefixed("fields.")),
            rate_stages=stages,
            changelog=_changelog(reader, seed),
            debezium=_debezium(reader),
            duplicate_rate=duplicate_rate,
            duplicate_delay_us=duplicate_delay or 0,
            poisson=reader.choice("arrival", ARRIVALS, "uniform") == "poisson",
            scd2=reader.choice("changelog.history", HISTORIES, "none") == SCD2,
            changelog_image=reader.string("changelog.image"),
            ref_start_time_us=ref_start_time_us,
        )
        if parsed.changelog_image is not None and parsed.debezium is None and not parsed.scd2:
            raise OptionError("changelog.image", parsed.changelog_image, "no row image without 'changelog.envelope' "
                              "set to 'debezium' or 'changelog.history' set to 'scd2'")
        if parsed.scd2 and (parsed.changelog is None or parsed.debezium is not None or parsed.duplicate_rate):
            raise OptionError("changelog.history", SCD2, "with 'changelog.key' (the changelog whose history it is), "
                              "without 'changelog.envelope' and without duplicates: the history is a table of versions")
        if parsed.poisson and interval_us is not None:
            raise OptionError("arrival", "poisson", "uniform with 'interval' (event time = startTime + interval × "
                              "counter, evenly spaced); leave 'interval' out for Poisson event times")
        reader.finish()
        for column, properties in parsed.fields.items():
            if properties.get("kind", "").strip().lower() == "ref" and ref_start_time_us is None:
                if start_time_us is None or parsed.downtime == DOWNTIME_SKIP:
                    given = {"startTime": options.get("startTime"), "downtime": options.get("downtime")}
                    raise OptionError(f"fields.{column}.kind", "ref",
                                      "a pinned timeline for kind=ref: set 'refStartTime' (the referenced stream's "
                                      "startTime), or 'startTime' (the same as the referenced stream's) and no "
                                      "downtime=skip, so that events and entities keep their scheduled times "
                                      f"(given: {given})")
        if ref_start_time_us is not None and not any(p.get("kind", "").strip().lower() == "ref"
                                                     for p in parsed.fields.values()):
            raise OptionError("refStartTime", options.get("refStartTime"), "only with a kind=ref column (the "
                              "timeline its references are on); leave it out")
        return parsed

    @property
    def disordered(self) -> bool:
        """Whether event time is out of order (``outOfOrderness`` or ``lateRate``)."""
        return bool(self.out_of_orderness_us or self.late_rate)

    @property
    def duplicates(self) -> Duplicates | None:
        """The redelivered copies (``duplicateRate``), their delay in events at the partition's rate; None without."""
        if not self.duplicate_rate:
            return None
        return Duplicates(self.duplicate_rate, max(1, int(self.duplicate_delay_us // self.delay_us)), self.seed)

    def aligned_start(self, now_us: int) -> int:
        """The start time: `startTime` (or `now_us`), rounded down to a multiple of `alignment`."""
        start = self.start_time_us if self.start_time_us is not None else now_us
        if self.alignment_us:
            start -= start % self.alignment_us
        return start


def _changelog(reader: OptionReader, seed: int) -> Changelog | None:
    key = reader.string("changelog.key")
    weights = reader.string("changelog.weights")
    live = reader.integer("changelog.liveKeys", 1024, minimum=1, maximum=1 << 24)
    snapshot = reader.boolean("changelog.snapshot", False)
    if key is None:
        for option in ("changelog.weights", "changelog.liveKeys", "changelog.snapshot", *_ENVELOPE_OPTIONS):
            if reader.has(option):
                raise OptionError(option, reader.string(option),
                                  "no changelog option without 'changelog.key' (the BIGINT key column)")
        return None
    return Changelog.parse(key.strip().lower(), weights, live, seed, snapshot)


_ENVELOPE_OPTIONS = ("changelog.envelope", "changelog.image", "changelog.name", "changelog.table", "changelog.history")


def _debezium(reader: OptionReader) -> Debezium | None:
    """``changelog.envelope`` and the options of its Debezium envelope (`impulse.debezium`)."""
    envelope = reader.choice("changelog.envelope", ENVELOPES, "none")
    image = reader.string("changelog.image")
    name = reader.string("changelog.name", "impulse")
    table = reader.string("changelog.table", "events")
    if envelope != DEBEZIUM:
        for option in ("changelog.name", "changelog.table"):
            if reader.has(option):
                raise OptionError(option, reader.string(option), "no envelope option without "
                                  "'changelog.envelope' set to 'debezium'")
        return None
    if image is not None and not image.strip():
        raise OptionError("changelog.image", image, "the row image's columns as DDL, e.g. 'id BIGINT, name STRING'")
    return Debezium(image, name, table)


def _fields(given: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """``fields.<column>.<property>`` options by column (lower case); property names and kinds checked here,
    so that a typo fails when the DataFrame is defined. The rest is checked against the schema (`impulse.schema`)."""
    known = {p.lower(): p for p in PROPERTIES}
    out: dict[str, dict[str, str]] = {}
    for key, value in given.items():
        column, dot, prop = key.rpartition(".")
        option = "fields." + key
        if not dot or not column:
            raise OptionError(option, value, "an option named fields.<column>.<property>, e.g. fields.user_id.kind")
        if prop.lower() not in known:
            raise OptionError(option, value, f"a property of a generated column; unknown property '{prop}' "
                                             f"(known: {', '.join(PROPERTIES)}; a nested field takes its own: "
                                             f"fields.{key}.kind)")
        if prop.lower() == "kind" and value.strip().lower() not in KINDS:
            raise OptionError(option, value, "one of " + ", ".join(repr(k) for k in KINDS))
        out.setdefault(column.lower(), {})[prop.lower()] = value
    return out
