"""A sink's target read back, independently of the sink: the one reader each sink's adapter owns.

A `TargetReader` is built by a sink's conformance adapter from the writer options a run gives the sink
(`connectors.conformance.adapter.SinkAdapter.reader`): the conformance suite reads what landed through it (the
adapter's ``read_back``) and so does ``impulse-load --check`` (`impulse.loadtest.check.readback`), so a target that
one can read the other can too. A target a reader cannot read raises `CannotReadBack` naming the option and what
to do, when the reader is built (before any load); `TargetReader.prepare` raises it for a target that already holds
rows of the run's kind.
"""

from __future__ import annotations

__all__ = ["TargetReader", "CannotReadBack"]


class CannotReadBack(ValueError):
    """The target these writer options name cannot be read back (the message says why and what to do)."""


class TargetReader:
    """What a sink wrote under one set of writer options: `prepare` before the writes (refuses a target that already
    holds rows of the kind), `values` after them (every row that landed and is visible to a reader, duplicates kept,
    as the JSON object bytes the sink wrote)."""

    #: the target keeps one row per key (a later row replaces an earlier one): update / complete output can be checked
    keeps_state = False
    #: `values` are the ``value`` column the sink wrote, not whole rows as JSON objects
    raw = False
    #: a string or binary ``value`` column of the rows is written as is (a Kafka record's value): for rows that have
    #: one, `values` are that column, as with `raw`
    value_column = False

    def describe(self) -> str:
        """What is read, for messages (e.g. ``"Redis list values under 'run:'"``)."""
        raise NotImplementedError

    def prepare(self) -> None:
        """Before the writes: `CannotReadBack` when the target already holds rows `values` would read. Default:
        nothing."""

    def values(self) -> list[bytes]:
        """Every row that landed, each as the bytes of one JSON object (`raw`: of the written ``value``)."""
        raise NotImplementedError
