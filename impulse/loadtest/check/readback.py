"""``--check``'s target read back: what a sink wrote, read independently of the sink (`Readback`).

Targets that can be read back (`readback`; anything else exits 2 before the load): the embedded HTTP
receiver (webhook-sink without ``url``, NDJSON), redis-sink under a ``keyPrefix`` with the row as the value
(no ``valueColumn``), and kafka-sink (every record a ``read_committed`` consumer sees,
`connectors.kafka_topics.read_topic`). The target must hold nothing of the run's kind before it starts
(a fresh ``keyPrefix``, an empty topic): checked before the load.
"""

from __future__ import annotations

from typing import Any, Mapping
from urllib.parse import urlsplit

from connectors.kafka_topics import read_topic
from impulse.loadtest.settings.units import LoadError

__all__ = ["Readback", "ReceiverReadback", "RedisReadback", "KafkaReadback", "readback"]


class Readback:
    """A target's content, read independently of the sink: `prepare` before the load (refuses a target that already
    holds rows of the run's kind), `values` after it (every row as the JSON bytes the sink wrote)."""

    keeps_state = False   # one row per key (update / complete can be checked)
    raw = False           # `values` are the ``value`` column the sink wrote, not whole rows as JSON

    def describe(self) -> str:
        raise NotImplementedError

    def prepare(self) -> None:
        pass

    def values(self) -> list[bytes]:
        raise NotImplementedError


def _option(options: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    return next((str(v) for k, v in options.items() if k.lower() == name.lower()), default)


class ReceiverReadback(Readback):
    """The embedded receiver (``record=True``): the NDJSON rows of the requests it accepted under the sink's path."""

    def __init__(self, receiver, url: str) -> None:
        self.receiver, self.path, self.start = receiver, urlsplit(url).path, 0

    def describe(self) -> str:
        return f"the embedded receiver's rows under {self.path}"

    def prepare(self) -> None:
        self.start = len(self.receiver.accepted_requests)

    def values(self) -> list[bytes]:
        rows: list[bytes] = []
        for request in self.receiver.accepted_requests[self.start:]:
            if request.path.split("?")[0] == self.path:
                rows += [line for line in request.body.split(b"\n") if line.strip()]
        return rows


class RedisReadback(Readback):
    """redis-sink's keys under ``keyPrefix`` (commit records excluded), each read by its type."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.url = _option(options, "url")
        self.prefix = _option(options, "keyPrefix", "")
        self.commit_prefix = _option(options, "commitKeyPrefix", "impulse:commit:")
        self.target = _option(options, "target", "string")
        self.keeps_state = ((self.target == "string" and _option(options, "keyColumn") is not None)
                            or (self.target == "hash" and _option(options, "fieldColumn") is not None))

    def describe(self) -> str:
        return f"Redis {self.target} values under {self.prefix!r}"

    def _client(self):
        import redis  # noqa: PLC0415 - the redis extra's client

        return redis.Redis.from_url(self.url)

    def _keys(self, client) -> list[bytes]:
        commit = self.commit_prefix.encode()
        return [k for k in client.scan_iter(match=f"{self.prefix}*", count=10_000) if not k.startswith(commit)]

    def prepare(self) -> None:
        client = self._client()
        try:
            keys = self._keys(client)
        finally:
            client.close()
        if keys:
            raise LoadError(f"--check: redis-sink's keyPrefix {self.prefix!r} already holds {len(keys):,} keys (e.g. "
                            f"{keys[0].decode(errors='replace')!r}); the check compares everything under it: use a "
                            "fresh keyPrefix")

    def values(self) -> list[bytes]:
        client = self._client()
        try:
            keys = self._keys(client)
            out: list[bytes] = []
            types = client.pipeline(transaction=False)
            for key in keys:
                types.type(key)
            strings = []
            for key, kind in zip(keys, types.execute()):
                if kind == b"string":
                    strings.append(key)
                elif kind == b"list":
                    out += client.lrange(key, 0, -1)
                elif kind == b"hash":
                    out += client.hvals(key)
                elif kind == b"stream":
                    out += [fields[b"value"] for _, fields in client.xrange(key)]
            for i in range(0, len(strings), 10_000):
                out += [v for v in client.mget(strings[i:i + 10_000]) if v is not None]
            return out
        finally:
            client.close()


class KafkaReadback(Readback):
    """kafka-sink's topic, every record a ``read_committed`` consumer sees (`connectors.kafka_topics.read_topic`)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.topic = _option(options, "topic")
        self.config: dict[str, Any] = {k[len("kafka."):]: v for k, v in options.items() if k.lower().startswith("kafka.")}

    def describe(self) -> str:
        return f"the records of topic {self.topic!r}"

    def _read(self) -> list:
        return read_topic(self.config, self.topic)

    def prepare(self) -> None:
        held = len(self._read())
        if held:
            raise LoadError(f"--check: topic {self.topic!r} already holds {held:,} records; the check compares every "
                            "record of the topic: use a new topic (e.g. with --create-topic)")

    def values(self) -> list[bytes]:
        return [m.value() for m in self._read()]


def readback(sink: str, options: Mapping[str, str], mode: str, receiver=None) -> Readback:
    """How `sink` with `options` is read back for ``--check``; `LoadError` (before any load) saying why it cannot be.
    `receiver`: the embedded receiver (recording requests) webhook-sink writes to, if any."""
    if sink == "webhook-sink":
        url = _option(options, "url", "")
        if receiver is None or not getattr(receiver, "record", False) or not url.startswith(receiver.url):
            raise LoadError("--check reads webhook-sink's rows back from the embedded receiver only: leave out the "
                            "url option (an HTTP server of yours cannot be read back)")
        if _option(options, "format", "json") != "ndjson":
            raise LoadError("--check reads the embedded receiver's NDJSON rows: leave out the format option")
        reader: Readback = ReceiverReadback(receiver, url)
    elif sink == "redis-sink":
        if not _option(options, "keyPrefix"):
            raise LoadError("--check reads redis-sink's keys back under its keyPrefix: set -o keyPrefix=NAME: (a "
                            "prefix that holds nothing yet)")
        if _option(options, "valueColumn") is not None or _option(options, "target", "string") not in (
                "string", "list", "hash", "stream"):
            raise LoadError("--check compares whole rows: redis-sink must write each row as its JSON value (no "
                            "valueColumn) to target string, list, hash or stream")
        reader = RedisReadback(options)
    elif sink == "kafka-sink":
        reader = KafkaReadback(options)
    else:
        raise LoadError(f"--check cannot read {sink} back: it reads the embedded receiver (webhook-sink without url), "
                        "redis-sink and kafka-sink")
    if mode != "append" and not reader.keeps_state:
        raise LoadError(f"--check of output mode {mode} compares the final state per key, which only a target keeping "
                        "one row per key holds: redis-sink with target=string and keyColumn=<the key column>, or "
                        "target=hash and fieldColumn=<the key column>")
    return reader

