"""``--check``'s target read back: what a sink wrote, read independently of the sink (`Readback`).

The reader is the sink's own: its conformance adapter's (`connectors.conformance.adapter.SinkAdapter.reader`, a
`connectors.readback.TargetReader`), found through `connectors.registry`, the same one the conformance suite reads
with; this module keeps no reader of any target but Spark's own: the targets of Spark's file sinks
and table formats (`impulse.loadtest.settings.target.PATH_SINKS`) are read back with Spark (`impulse.loadtest.check.spark_target`). So ``--check`` reads back every target an adapter can read (a
Redis Cluster included) and refuses, before the load (exit 2), one it cannot, saying why (the adapter's words). The
target must hold nothing of the run's kind before it starts (a fresh ``keyPrefix``, an empty topic): checked
before the load (`Readback.prepare`).
"""

from __future__ import annotations

from typing import Mapping

from connectors.errors import OptionError
from connectors.readback import CannotReadBack, TargetReader
from connectors.registry import connector, sinks
from impulse.loadtest.check.spark_target import CheckRead, SparkTarget
from impulse.loadtest.settings.target import PATH_SINKS, table_name
from impulse.loadtest.settings.units import LoadError

__all__ = ["Readback", "AdapterReadback", "readback"]

#: A target read back (`connectors.readback.TargetReader`): ``describe``, ``prepare``, ``values``, ``keeps_state``,
#: ``raw``.
Readback = TargetReader


class AdapterReadback(Readback):
    """A sink adapter's reader, its refusals worded for ``--check`` (`LoadError`)."""

    def __init__(self, reader: TargetReader) -> None:
        self.reader, self.keeps_state, self.raw, self.value_column = (reader, reader.keeps_state, reader.raw,
                                                                      reader.value_column)

    def describe(self) -> str:
        return self.reader.describe()

    def prepare(self) -> None:
        try:
            self.reader.prepare()
        except CannotReadBack as exc:
            raise LoadError(f"--check: {exc}") from exc

    def values(self) -> list[bytes]:
        return self.reader.values()


def readback(sink: str, options: Mapping[str, str], mode: str, receiver=None, *, check_read: str | None = None,
             check_key: tuple[str, ...] = ()) -> Readback:
    """How `sink` with `options` is read back for ``--check``; `LoadError` (before any load) saying why it cannot be.
    `receiver`: the embedded receiver (recording requests) webhook-sink writes to, if any. `check_read`: the user's
    ``--check-read MODULE:FUNCTION`` reads it instead (`check_key`: the target keeps one row per these columns)."""
    if check_read is not None:
        reader = CheckRead(check_read, check_key)
        if mode != "append" and not reader.keeps_state:
            raise LoadError(f"--check of output mode {mode} compares the final state per key: give the target's key "
                            "with --check-key COLS")
        return reader
    if sink in PATH_SINKS or table_name(options) is not None:
        if mode != "append":
            raise LoadError(f"--check of output mode {mode}: --check reads Spark's {sink} target back as appended "
                            "rows (append mode); for a target upserted per key write it with --foreach-batch and "
                            "give --check-read and --check-key")
        return SparkTarget(sink, options)
    readable = [row.name for row in sinks() if row.adapter is not None]
    if sink not in readable:
        raise LoadError(f"--check cannot read {sink} back: it reads the targets of {', '.join(readable)} (through "
                        f"their adapters), of Spark's {', '.join(PATH_SINKS)} sinks and of a table (-o table=NAME); "
                        "a --foreach-batch target through --check-read")
    try:
        reader: Readback = AdapterReadback(connector(sink).adapter_class().reader(options, receiver=receiver))
    except (CannotReadBack, OptionError) as exc:
        raise LoadError(f"--check cannot read {sink}'s target back: {exc}") from exc
    if mode != "append" and not reader.keeps_state:
        raise LoadError(f"--check of output mode {mode} compares the final state per key, which only a target keeping "
                        "one row per key holds: redis-sink with target=string and keyColumn=<the key column>, or "
                        "target=hash and fieldColumn=<the key column>")
    return reader

