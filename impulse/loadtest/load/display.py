"""What a run prints while it runs: a live progress line and, every 5 s, a kafka-producer-perf-test line.

On a terminal the live line is rewritten in place (``\\r``) once a second; on a pipe or file it is
printed as a plain line every 5 s, just before the perf line. The perf line covers the batches
acknowledged since the previous one (rates between acknowledgements, so a window never splits a
micro-batch)::

    95,000 events sent, 19,000.0 events/sec (4.64 MB/sec), 512.3 ms avg latency, 1,200.0 ms max latency.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from impulse.loadtest.measure.metrics import Collector, merged_latency, recent_rate

__all__ = ["Display"]

_CLEAR = "\r\x1b[K"


class Display:
    """Progress of runs on `out` (default stdout); `tty` defaults to ``out.isatty()``."""

    def __init__(self, out: TextIO | None = None, *, tty: bool | None = None, live_every: float = 1.0,
                 perf_every: float = 5.0) -> None:
        self.out = out or sys.stdout
        self.tty = self.out.isatty() if tty is None else tty
        self.live_every = live_every if self.tty else perf_every
        self.perf_every = perf_every
        self._live_shown = False
        self._reset(0.0, 0)

    def _reset(self, target_rate: float, total: int) -> None:
        self.target_rate = target_rate
        self.total = total
        self._next_live = 0.0
        self._next_perf = time.monotonic() + self.perf_every
        self._reported = 0          # batches already in a perf line
        self._ref_ack_us: int | None = None
        self._ref_delivered = 0
        self._waiting_since: float | None = None

    # -- output ---------------------------------------------------------------------------------------
    def line(self, text: str) -> None:
        """Print a whole line (clearing the live line first on a terminal)."""
        if self._live_shown:
            self.out.write(_CLEAR)
            self._live_shown = False
        self.out.write(text + "\n")
        self.out.flush()

    def _live(self, text: str) -> None:
        if self.tty:
            self.out.write(_CLEAR + text)
            self._live_shown = True
            self.out.flush()
        else:
            self.line(text)

    def finish(self) -> None:
        """End the live line (call before printing anything else)."""
        if self._live_shown:
            self.out.write("\n" if not self.tty else _CLEAR)
            self._live_shown = False
            self.out.flush()

    # -- a run --------------------------------------------------------------------------------------------
    def start(self, label: str, target_rate: float, total: int) -> None:
        self._reset(target_rate, total)
        self.line(label)

    def update(self, collector: Collector, now_us: int, waiting: str | None = None) -> None:
        """Called by the runner after each poll; prints what is due (live line, perf line).

        Until the first batch is acknowledged there is nothing to measure: a terminal shows the
        waiting message with a clock, a pipe gets it once; perf lines start 5 s after that batch.
        """
        now = time.monotonic()
        if not collector.batches:
            if self._waiting_since is None:
                self._waiting_since = now
                self._live(f"  {waiting or 'starting the query'}…")
            elif self.tty and now >= self._next_live:
                self._live(f"  {waiting or 'starting the query'}… {now - self._waiting_since:.0f}s")
            self._next_live = now + 1.0
            self._next_perf = now + self.perf_every
            return
        if now >= self._next_perf:
            self._next_perf = now + self.perf_every
            if not self.tty:
                self._live(self._live_text(collector, now_us))
                self._next_live = now + self.live_every
            self.line(self._perf_text(collector))
        if now >= self._next_live:
            self._next_live = now + self.live_every
            self._live(self._live_text(collector, now_us))

    def _live_text(self, collector: Collector, now_us: int) -> str:
        batches = collector.batches
        origin = collector.schedule_start_us or now_us
        elapsed = (now_us - origin) / 1e6
        rate = recent_rate(collector.batches, now_us)
        achieved = "–" if rate is None else f"{rate:,.0f}"
        target = collector.target_rate(now_us, self.target_rate)   # with rateStages: the stage's rate now
        share = "" if rate is None or not target else f" ({rate / target:.0%})"
        lag = max(0, collector.due(now_us) - collector.delivered)
        return (f"  {elapsed:6.1f}s  {achieved} ev/s of {target:,.0f}{share}  lag {lag:,}  "
                f"batches {len(batches)}  delivered {collector.delivered:,}/{self.total:,}")

    def _perf_text(self, collector: Collector) -> str:
        batches = collector.batches[self._reported:]
        self._reported = len(collector.batches)
        if self._ref_ack_us is None:
            self._ref_ack_us = collector.schedule_start_us
        if not batches or self._ref_ack_us is None:
            return "0 events sent, 0.0 events/sec (0.00 MB/sec), no batch acknowledged in this interval."
        events = batches[-1].delivered - self._ref_delivered
        span_s = max(1e-6, (batches[-1].ack_us - self._ref_ack_us) / 1e6)
        size = sum(b.bytes for b in batches)
        latency = merged_latency(batches)
        self._ref_ack_us, self._ref_delivered = batches[-1].ack_us, batches[-1].delivered
        return (f"{events:,} events sent, {events / span_s:,.1f} events/sec ({size / span_s / 2**20:,.2f} MB/sec), "
                f"{latency.mean_us / 1e3:,.1f} ms avg latency, {latency.max_us / 1e3:,.1f} ms max latency.")
