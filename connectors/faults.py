"""Fault injection for testing the commit protocol: off unless the `faultInjection` option is set.

A testing aid, never for production. The option names one point, one action and, optionally, which
batch, partition and task attempt it applies to::

    .option("faultInjection", "point=mid_write,action=crash,batch=1,partition=0,attempt=0")

Points, in the order of the protocol (`connectors.protocol`):

- ``before_write``  executor: before anything of the partition is sent to the target;
- ``mid_write``     executor: after part of the partition was sent (the first record batch is split
                    in two if needed, and the fault fires when the sink asks for the second half);
- ``after_write``   executor: the partition is written and committed, before the task returns;
- ``before_commit`` driver: in ``commit()``, before the batch's durable record is written;
- ``after_commit``  driver: in ``commit()``, after the durable record, before returning.

Actions: ``fail`` raises `InjectedFault` (Spark fails the task, or the batch for driver points);
``crash`` kills the Python process at once with SIGKILL (an executor's Python worker, or the driver's
commit process), as a machine failure would; ``stall`` renames the process ``impulse-stall`` (Linux
``/proc/self/comm``) and sleeps up to 10 minutes, so that a test can find it and kill what it chooses
(the executor JVM above it, say) in the middle of the write — or send it SIGUSR1, which ends the
stall and lets the write go on (to restart the target under a write); ``delay`` sleeps ``ms``
milliseconds (``action=delay,ms=200``) and goes on: a slow target, at every matching point.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from connectors.errors import ConnectorError, OptionError

__all__ = ["FaultPlan", "InjectedFault", "POINTS", "ACTIONS", "stalled_among"]

POINTS = ("before_write", "mid_write", "after_write", "before_commit", "after_commit")
ACTIONS = ("fail", "crash", "stall", "delay")
STALL_NAME = "impulse-stall"
_EXPECTED = ("'point=<" + "|".join(POINTS) + ">,action=<" + "|".join(ACTIONS)
             + ">[,batch=N][,partition=N][,attempt=N][,ms=N (delay only)]'")


class InjectedFault(ConnectorError):
    """Raised at a fault-injection point whose action is ``fail``."""


def _stall(limit_s: float = 600.0) -> bool:
    """Rename this process `STALL_NAME` and sleep until SIGUSR1 (True: go on) or `limit_s` seconds (False)."""
    resumed = threading.Event()
    try:
        previous = signal.signal(signal.SIGUSR1, lambda *_: resumed.set())
    except ValueError:  # not the main thread: no handler, only the time limit
        previous = None
    name = None
    with contextlib.suppress(OSError):
        with open("/proc/self/comm", "r+") as comm:
            name = comm.read().strip()
            comm.seek(0)
            comm.write(STALL_NAME)
    try:
        deadline = time.monotonic() + limit_s
        while not resumed.is_set() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        if previous is not None:
            signal.signal(signal.SIGUSR1, previous)
        if name:
            with contextlib.suppress(OSError):
                with open("/proc/self/comm", "w") as comm:
                    comm.write(name)
    return resumed.is_set()


def stalled_among(pids: Iterable[int]) -> int | None:
    """The first of `pids` stalled by the ``stall`` action (named `STALL_NAME`), or None (Linux ``/proc``)."""
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == STALL_NAME:
                return pid
        except OSError:  # gone meanwhile
            continue
    return None


@dataclass(frozen=True)
class FaultPlan:
    """Where to inject a fault; `None` fields match anything."""

    point: str
    action: str
    batch: int | None = None
    partition: int | None = None
    attempt: int | None = None
    ms: int | None = None            # the ``delay`` action's sleep

    @classmethod
    def parse(cls, text: str | None, option: str = "faultInjection") -> "FaultPlan | None":
        if not text:
            return None
        fields: dict[str, str] = {}
        for part in text.split(","):
            key, sep, value = part.partition("=")
            if not sep:
                raise OptionError(option, text, _EXPECTED)
            fields[key.strip().lower()] = value.strip()
        unknown = set(fields) - {"point", "action", "batch", "partition", "attempt", "ms"}
        if unknown or fields.get("point") not in POINTS or fields.get("action") not in ACTIONS:
            raise OptionError(option, text, _EXPECTED)
        try:
            numbers = {k: int(fields[k]) for k in ("batch", "partition", "attempt", "ms") if k in fields}
        except ValueError:
            raise OptionError(option, text, _EXPECTED) from None
        if ("ms" in numbers) != (fields["action"] == "delay") or numbers.get("ms", 0) < 0:
            raise OptionError(option, text, _EXPECTED)
        return cls(fields["point"], fields["action"], **numbers)

    def matches(self, point: str, batch: int, partition: int | None = None, attempt: int | None = None) -> bool:
        return (point == self.point and self.batch in (None, batch)
                and (partition is None or self.partition in (None, partition))
                and (attempt is None or self.attempt in (None, attempt)))

    def hit(self, point: str, batch: int, partition: int | None = None, attempt: int | None = None) -> None:
        """Fire the fault if this point matches: raise `InjectedFault`, SIGKILL this process, stall it (until
        SIGUSR1, then go on) or delay it (then go on)."""
        if not self.matches(point, batch, partition, attempt):
            return
        if self.action == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        if self.action == "delay":
            time.sleep(self.ms / 1000)
            return
        if self.action == "stall":
            if _stall():
                return
        raise InjectedFault(f"injected fault at {point} (batch {batch}, partition {partition}, attempt {attempt})")
