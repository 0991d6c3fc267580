"""impulse: a synthetic, deterministic, resumable event source for Spark Structured Streaming."""

from impulse.source import ImpulseDataSource

__all__ = ["ImpulseDataSource"]
