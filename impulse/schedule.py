"""When each event of a partition is due: the pure arithmetic of the impulse rate.

Every partition follows the same schedule, relative to an *anchor* (a wall-clock time in epoch
microseconds) and the partition's counter at that anchor. The k-th event after the anchor
(k = 0, 1, …) is due at ``anchor + offset(k)``:

- without ramp-up: ``offset(k) = k × delay``;
- with a ramp-up of T µs the rate grows linearly from 0 to 1/delay over T, so
  ``offset(k) = sqrt(2·T·delay·k)`` while ``k·delay < T/2`` and ``k·delay + T/2`` after.

Offsets are floored to whole microseconds. All of it is deterministic: the same anchor, delay and
k give the same time on every machine (IEEE-754 double arithmetic, no clock involved).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Schedule"]


@dataclass(frozen=True)
class Schedule:
    """The schedule of one partition: `delay_us` between events (> 0), `ramp_us` of linear ramp-up (≥ 0)."""

    anchor_us: int
    delay_us: float
    ramp_us: int = 0

    def due(self, now_us: int) -> int:
        """How many events since the anchor are due at `now_us` (those with ``anchor + offset(k) ≤ now_us``).

        Exactly consistent with `offsets_us`: the closed form is only an estimate (offsets are floored
        to whole µs, and float rounding), corrected against `offsets_us` itself.
        """
        elapsed = now_us - self.anchor_us
        if elapsed < 0:
            return 0
        ramp, delay = self.ramp_us, self.delay_us
        # event k is due when floor(offset(k)) ≤ elapsed, i.e. offset(k) < elapsed + 1
        if ramp and elapsed < ramp:
            k = math.ceil((elapsed + 1) ** 2 / (2.0 * ramp * delay))
        else:
            k = math.ceil((elapsed + 1 - ramp / 2.0) / delay)
        k = max(k, 0)
        while self._offset_us(k) <= elapsed:
            k += 1
        while k > 0 and self._offset_us(k - 1) > elapsed:
            k -= 1
        return k

    def _offset_us(self, k: int) -> int:
        return int(self.offsets_us(np.array([k], dtype=np.int64))[0])

    def offsets_us(self, k: np.ndarray) -> np.ndarray:
        """Microseconds from the anchor to each event in `k` (int64 array of event numbers since the anchor).

        Computed in place in one float64 buffer: fresh temporaries of a record batch's size cost page
        faults that dominated the time (same IEEE-754 operations, same results).
        """
        kd = k.astype(np.float64)
        kd *= self.delay_us
        if self.ramp_us:
            half = self.ramp_us / 2.0
            ramping = kd < half
            if ramping.any():
                kd[ramping] = np.sqrt(2.0 * self.ramp_us * kd[ramping])
                np.add(kd, half, out=kd, where=~ramping)
            else:
                kd += half
        np.floor(kd, out=kd)
        return kd.astype(np.int64)
