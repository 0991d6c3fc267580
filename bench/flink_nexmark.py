"""Flink's published Nexmark throughput per core: the one list the Nexmark benchmarks print beside their figures.

Source: the nexmark project's GUIDE_V1.md, "Benchmark Results" (github.com/nexmark/nexmark): Flink 1.13–2.0,
3 worker machines of 8 cores and 32 GB, 8 TaskManagers of one slot, parallelism 8, RocksDB with incremental
checkpoints every 3 minutes, exactly-once, 100 million events per query from its own generator at 10M events/s.
Throughput/Cores: events over (cores used × time). Not measured here, on other hardware; q6 is not supported by
Flink (FLINK-19059), so q4's figure stands for it (the same winning-bid join, averaged per seller instead of per
category).
"""

from __future__ import annotations

SOURCE = "nexmark project, GUIDE_V1.md: Flink 1.13–2.0, 3 × 8-core workers, parallelism 8, RocksDB"

#: events/s per core
FLINK_PER_CORE = {
    "q0": 155_020, "q1": 157_940, "q2": 175_210, "q3": 152_120, "q4": 34_330, "q5": 22_140, "q6": 34_330,
    "q7": 12_330, "q8": 146_140, "q9": 14_240, "q10": 57_810, "q11": 39_700, "q12": 75_670, "q13": 130_730,
    "q14": 161_230, "q15": 72_420, "q16": 18_650, "q17": 116_800, "q18": 53_700, "q19": 44_040, "q20": 18_980,
    "q21": 98_490, "q22": 129_960,
}
