"""Conformance adapters for this project's sinks (see `connectors.conformance.adapter.SinkAdapter`)."""

from __future__ import annotations

import io
import socket
from typing import Mapping

import pyarrow as pa
import pyarrow.json as pajson

from connectors.conformance.adapter import SinkAdapter

__all__ = ["RedisAdapter", "events_from_json", "unused_port"]


def unused_port() -> int:
    """A loopback port where nothing listens (bound and released at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def events_from_json(values: list[bytes]) -> list[tuple[int, int]]:
    """``(subtask_index, counter)`` of rows written as JSON objects, parsed in one vectorised pass."""
    if not values:
        return []
    table = pajson.read_json(io.BytesIO(b"\n".join(values)),
                             parse_options=pajson.ParseOptions(explicit_schema=pa.schema(
                                 [("subtask_index", pa.int64()), ("counter", pa.int64())]),
                                 unexpected_field_behavior="ignore"))
    return list(zip(table.column("subtask_index").to_pylist(), table.column("counter").to_pylist()))


class RedisAdapter(SinkAdapter):
    """The Redis sink writing to `target` (default ``list``: appends, where a duplicate would show)."""

    format = "redis-sink"

    def __init__(self, url: str, target: str = "list") -> None:
        import redis

        self.url, self.target = url, target
        self.client = redis.Redis.from_url(url)

    def options(self, namespace: str) -> Mapping[str, str]:
        return {"url": self.url, "target": self.target, "keyPrefix": f"{namespace}:",
                "commitKeyPrefix": f"commit:{namespace}:"}

    def read_back(self, namespace: str) -> list[tuple[int, int]]:
        key = f"{namespace}:"
        if self.target == "list":
            values = self.client.lrange(key, 0, -1)
        elif self.target == "hash":
            values = list(self.client.hgetall(key).values())
        elif self.target == "stream":
            values = [fields[b"value"] for _, fields in self.client.xrange(key)]
        else:
            keys = list(self.client.scan_iter(match=f"{key}*", count=10_000))
            values = [v for i in range(0, len(keys), 10_000) for v in self.client.mget(keys[i:i + 10_000])]
        return events_from_json(values)

    def cleanup(self, namespace: str) -> None:
        for pattern in (f"{namespace}:*", f"commit:{namespace}:*"):
            keys = list(self.client.scan_iter(match=pattern, count=10_000))
            for i in range(0, len(keys), 10_000):
                self.client.delete(*keys[i:i + 10_000])

    def unreachable_options(self, namespace: str) -> Mapping[str, str]:
        return {**self.options(namespace), "url": f"redis://127.0.0.1:{unused_port()}/0"}

    def bad_options(self) -> list[tuple[Mapping[str, str], str]]:
        return [({"target": "set"}, "target"), ({"url": "http://127.0.0.1:1"}, "url"), ({"ttl": "0"}, "ttl"),
                ({"valueColumn": "no_such_column"}, "valueColumn"), ({"listOperation": "insert"}, "listOperation")]
