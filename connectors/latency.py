"""A mergeable high-resolution latency histogram: HdrHistogram, 3 significant digits, 0 µs to 1 hour.

Sinks record, per partition on the executors, the time from each event's ``timestamp`` (its
**scheduled** time, for impulse) to the target's acknowledgement; histograms travel in commit
messages as plain dicts (the standard HdrHistogram V2 compressed base64 encoding plus the exact
count, sum and maximum) and are merged on the driver — percentiles are never averaged. Resolution is
0.1 % of the value at every percentile up to p99.99; the encoded form can be read by any
HdrHistogram implementation (Java's HistogramLogAnalyzer, Go's hdrhistogram).

Recording is vectorised: HdrHistogram's slot of every value is computed with numpy and the counts
added at once, with no Python work per value (figures against ``HdrHistogram.record_value``: bench/README.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from hdrh.histogram import HdrHistogram

__all__ = ["LatencyHistogram", "HIGHEST_US", "SIGNIFICANT_DIGITS"]

HIGHEST_US = 3_600_000_000  # 1 hour; a longer latency is recorded as 1 hour (the exact max is kept)
SIGNIFICANT_DIGITS = 3


def _hdr_class() -> "type[HdrHistogram]":
    """hdrhistogram's class, imported when a latency is first recorded or read: every sink's extra installs it,
    and PySpark's data-source lookup imports each sink's module (so this one) whether that extra is there or not."""
    try:
        from hdrh.histogram import HdrHistogram  # noqa: PLC0415 - hdrhistogram, in each sink's extra
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ImportError("the sinks record latencies with hdrhistogram: pip install 'impulse-connectors[kafka]' "
                          "(or [redis], [webhook], [load]: each installs it)") from exc
    return HdrHistogram


def _new() -> HdrHistogram:
    return _hdr_class()(1, HIGHEST_US, SIGNIFICANT_DIGITS)


def _counts_index(hdr: HdrHistogram, us: np.ndarray) -> np.ndarray:
    """HdrHistogram's ``_counts_index_for``, vectorised: the counts slot of each value (int64 µs in range)."""
    _, bit_length = np.frexp((us | hdr.sub_bucket_mask).astype(np.float64))  # exact: values < 2^53
    bucket = bit_length.astype(np.int64) - hdr.unit_magnitude - (hdr.sub_bucket_half_count_magnitude + 1)
    sub_bucket = us >> (bucket + hdr.unit_magnitude)
    return ((bucket + 1) << hdr.sub_bucket_half_count_magnitude) + (sub_bucket - hdr.sub_bucket_half_count)


class LatencyHistogram:
    """Latencies in µs: an HdrHistogram, plus the exact `count`, `total_us` (sum) and `max_us`."""

    __slots__ = ("_hdr", "count", "total_us", "max_us")

    def __init__(self) -> None:
        self._hdr: HdrHistogram | None = None   # created on the first value: an empty one costs nothing
        self.count = 0
        self.total_us = 0
        self.max_us = 0

    @property
    def hdr(self) -> HdrHistogram:
        """The underlying `hdrh.histogram.HdrHistogram` (created when first needed)."""
        if self._hdr is None:
            self._hdr = _new()
        return self._hdr

    def record(self, latencies_us: np.ndarray) -> None:
        """Add latencies (int64 µs; negative ones, from clocks a little apart, count as 0)."""
        if len(latencies_us) == 0:
            return
        latencies_us = np.maximum(np.asarray(latencies_us, dtype=np.int64), 0)
        hdr = self.hdr
        clipped = np.minimum(latencies_us, HIGHEST_US)
        counts = np.ctypeslib.as_array(hdr.counts)
        counts += np.bincount(_counts_index(hdr, clipped), minlength=hdr.counts_len).astype(counts.dtype)
        hdr.total_count += len(clipped)
        hdr.min_value = min(hdr.min_value, int(clipped.min()))
        hdr.max_value = max(hdr.max_value, int(clipped.max()))
        self.count += len(latencies_us)
        self.total_us += int(latencies_us.sum(dtype=np.float64))
        self.max_us = max(self.max_us, int(latencies_us.max()))

    def record_value(self, latency_us: int, count: int = 1) -> None:
        """Add `count` events of one latency (µs)."""
        if count <= 0:
            return
        latency_us = max(0, int(latency_us))
        self.hdr.record_value(min(latency_us, HIGHEST_US), count)
        self.count += count
        self.total_us += latency_us * count
        self.max_us = max(self.max_us, latency_us)

    def merge(self, other: "LatencyHistogram") -> "LatencyHistogram":
        if other.count:
            self.hdr.add(other.hdr)
            self.count += other.count
            self.total_us += other.total_us
            self.max_us = max(self.max_us, other.max_us)
        return self

    def _cumulative(self) -> np.ndarray:
        return np.cumsum(np.frombuffer(self.hdr.counts, dtype=np.uint64, count=self.hdr.counts_len))

    def percentile(self, p: float) -> float:
        """The p-th percentile (0 < p ≤ 100) in µs (the highest value of its bucket), never above `max_us`; 0 when
        empty."""
        if not self.count:
            return 0.0
        rank = max(1, int(np.ceil(self.hdr.get_total_count() * p / 100.0 - 1e-9)))
        index = int(np.searchsorted(self._cumulative(), rank))
        if index >= self.hdr.counts_len:
            return float(self.max_us)
        value = self.hdr.get_highest_equivalent_value(self.hdr.get_value_from_index(index))
        return float(min(value, self.max_us))

    def count_above(self, threshold_us: float) -> int:
        """Events whose latency is certainly above `threshold_us`: those of buckets entirely above it."""
        if not self.count:
            return 0
        if threshold_us >= HIGHEST_US:
            return self.count if self.max_us > threshold_us else 0
        index = self.hdr._counts_index_for(int(threshold_us))  # the bucket holding the threshold
        return int(self.hdr.get_total_count() - self._cumulative()[index])

    def count_at_or_below(self, threshold_us: float) -> int:
        """Events of the buckets up to the one holding `threshold_us` (Prometheus ``le`` buckets)."""
        return self.count - self.count_above(threshold_us)

    @property
    def mean_us(self) -> float:
        return self.total_us / self.count if self.count else 0.0

    def to_dict(self) -> dict:
        """Plain, picklable, JSON-able: ``hdr`` is the HdrHistogram V2 base64 encoding ('' when empty)."""
        encoded = self._hdr.encode() if self.count else b""
        return {"hdr": encoded.decode("ascii") if isinstance(encoded, bytes) else encoded, "count": self.count,
                "total_us": self.total_us, "max_us": self.max_us}

    @classmethod
    def from_dict(cls, data: dict | None) -> "LatencyHistogram":
        out = cls()
        if data and data.get("count"):
            out._hdr = _hdr_class().decode(data["hdr"])
            out.count, out.total_us, out.max_us = int(data["count"]), int(data["total_us"]), int(data["max_us"])
        return out

    def __repr__(self) -> str:
        return (f"LatencyHistogram(count={self.count}, p50={self.percentile(50) / 1e3:.1f} ms, "
                f"p99={self.percentile(99) / 1e3:.1f} ms, max={self.max_us / 1e3:.1f} ms)")
