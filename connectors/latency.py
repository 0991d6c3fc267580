"""A compact, mergeable latency histogram (log-linear buckets, ≤ 3.2 % relative error).

Sinks record, per partition, the time from each event's ``timestamp`` to the target's
acknowledgement; histograms travel in commit messages as plain dicts and are merged on the driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["LatencyHistogram"]

_SUB = 16  # buckets per power of two: bucket width ≤ 1/16 of its lower bound (error ≤ 3.2 % at the midpoint)


def _bucket_of(us: np.ndarray) -> np.ndarray:
    us = np.maximum(us, 1).astype(np.float64)
    return np.floor(np.log2(us) * _SUB).astype(np.int64)


def _value_of(bucket: int) -> float:
    """The midpoint of a bucket, µs."""
    return (2 ** (bucket / _SUB) + 2 ** ((bucket + 1) / _SUB)) / 2


@dataclass
class LatencyHistogram:
    """Counts of latencies (µs) per bucket; exact `count`, `total_us` and `max_us`."""

    buckets: dict[int, int] = field(default_factory=dict)
    count: int = 0
    total_us: int = 0
    max_us: int = 0

    def record(self, latencies_us: np.ndarray) -> None:
        """Add latencies (int64 µs; negative ones, from clocks a little apart, count as 0)."""
        if len(latencies_us) == 0:
            return
        latencies_us = np.maximum(latencies_us, 0)
        keys, counts = np.unique(_bucket_of(latencies_us), return_counts=True)
        for key, n in zip(keys.tolist(), counts.tolist()):
            self.buckets[key] = self.buckets.get(key, 0) + n
        self.count += len(latencies_us)
        self.total_us += int(latencies_us.sum(dtype=np.float64))
        self.max_us = max(self.max_us, int(latencies_us.max()))

    def merge(self, other: "LatencyHistogram") -> "LatencyHistogram":
        for key, n in other.buckets.items():
            self.buckets[key] = self.buckets.get(key, 0) + n
        self.count += other.count
        self.total_us += other.total_us
        self.max_us = max(self.max_us, other.max_us)
        return self

    def percentile(self, p: float) -> float:
        """The p-th percentile (0 < p ≤ 100) in µs, never above `max_us`; 0 when empty."""
        if not self.count:
            return 0.0
        rank = max(1, int(np.ceil(self.count * p / 100.0)))
        seen = 0
        for key in sorted(self.buckets):
            seen += self.buckets[key]
            if seen >= rank:
                return min(_value_of(key), float(self.max_us))
        return float(self.max_us)

    @property
    def mean_us(self) -> float:
        return self.total_us / self.count if self.count else 0.0

    def to_dict(self) -> dict:
        return {"buckets": {str(k): v for k, v in self.buckets.items()}, "count": self.count,
                "total_us": self.total_us, "max_us": self.max_us}

    @classmethod
    def from_dict(cls, data: dict | None) -> "LatencyHistogram":
        if not data:
            return cls()
        return cls({int(k): v for k, v in data["buckets"].items()}, data["count"], data["total_us"], data["max_us"])
