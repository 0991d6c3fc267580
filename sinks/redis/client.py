"""The Redis sink's client side: redis-py through the gate that names the ``redis`` extra (`import_redis`), a
client of one node (`connect`), and redis-py's errors translated into this project's (`mapped`)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from connectors.errors import DeliveryError, SinkError, TransientError, map_errors
from connectors.redact import redact_url
from connectors.registry import import_extra

__all__ = ["import_redis", "connect", "mapped"]


def import_redis() -> ModuleType:
    """``redis`` (redis-py), through the gate that names the ``redis`` extra."""
    return import_extra("redis", "redis", "the redis sink", "redis-py")


def connect(url: str, timeout_s: float) -> Any:
    """A ``redis.Redis`` client of the node at `url` (it connects on first use), every call bounded by `timeout_s`."""
    redis = import_redis()
    # lib_version given: redis-py otherwise asks importlib.metadata for its own version on every new
    # connection, a scan of sys.path, which is long in a Spark Python worker (figures: bench/README.md).
    try:
        from redis.driver_info import DriverInfo  # noqa: PLC0415 - the redis extra; redis-py ≥ 7: lib_version alone is deprecated
        version = {"driver_info": DriverInfo(lib_version=redis.__version__)}
    except ImportError:
        version = {"lib_version": redis.__version__}
    return redis.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=min(timeout_s, 5.0), **version)


def mapped(url: str):
    """Translate redis-py errors into this project's: connection trouble is transient, the rest is not."""
    return map_errors(lambda exc: _translate(exc, redact_url(url)))


def _translate(exc: Exception, where: str) -> SinkError | None:
    redis = import_redis()
    if isinstance(exc, redis.AuthenticationError):
        return SinkError(f"redis-sink: authentication failed at {where}: {exc}")
    loading = isinstance(exc, redis.BusyLoadingError) or "LOADING" in str(exc)
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError, OSError)) or loading:
        return TransientError(f"redis-sink: lost Redis at {where}: {exc}")
    if isinstance(exc, redis.ResponseError):
        return DeliveryError(f"redis-sink: Redis at {where} refused a command: {exc}")
    if isinstance(exc, redis.RedisError):
        return SinkError(f"redis-sink: Redis at {where}: {exc}")
    return None
