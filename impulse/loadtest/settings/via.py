"""What ``--via`` and ``--pipeline-trigger`` say, parsed (`Via`, `PipelineTrigger`): the values of the production
topology (`impulse.loadtest.via.kafka`) that a `LoadConfig` checks before any Spark session exists."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Mapping
from urllib.parse import urlsplit

from impulse.loadtest.settings.kafka_java import java_settings
from impulse.loadtest.settings.units import LoadError, parse_seconds

__all__ = ["Via", "parse_via", "PipelineTrigger", "parse_pipeline_trigger"]

# Spark Kafka source options the harness sets itself
_SOURCE_MANAGED = {"subscribe": "the topic of --via", "subscribepattern": "the topic of --via",
                   "assign": "the topic of --via", "startingoffsets": "the topic's end before the run",
                   "kafka.bootstrap.servers": "the address of --via"}


@dataclass(frozen=True)
class Via:
    """``kafka://HOST:PORT[,HOST:PORT…]/TOPIC`` and its ``--via-option`` settings.

    `client`: Kafka client settings (the options named ``kafka.<setting>``, kept without the prefix), librdkafka's,
    given to the producer (kafka-sink) and the harness's own clients, and to Spark's Kafka source (a Java client)
    with their security settings translated (`impulse.loadtest.settings.kafka_java`). `source`: the other options,
    Spark Kafka source options (``maxOffsetsPerTrigger``, ``minPartitions``, ``failOnDataLoss`` …).
    """

    bootstrap: str
    topic: str
    client: Mapping[str, str] = field(default_factory=dict)
    source: Mapping[str, str] = field(default_factory=dict)

    @property
    def client_config(self) -> dict[str, str]:
        """The harness's own (confluent-kafka) clients' settings."""
        return {"bootstrap.servers": self.bootstrap, **self.client}

    def producer_options(self) -> dict[str, str]:
        """kafka-sink's options for the input topic."""
        return {"kafka.bootstrap.servers": self.bootstrap, "topic": self.topic,
                **{f"kafka.{k}": v for k, v in self.client.items()}}

    def source_options(self, starting: Mapping[int, int]) -> dict[str, str]:
        """Spark's Kafka source options: the topic from the offsets `starting` (``{partition: offset}``)."""
        return {"kafka.bootstrap.servers": self.bootstrap, "subscribe": self.topic,
                "startingOffsets": json.dumps({self.topic: {str(p): o for p, o in sorted(starting.items())}}),
                "kafka.isolation.level": "read_committed", "failOnDataLoss": "true",
                **{f"kafka.{k}": v for k, v in java_settings(self.client).items()}, **self.source}


def parse_via(url: str, options: Mapping[str, str] | None = None) -> Via:
    """`Via` of ``--via URL`` and ``--via-option`` pairs; `LoadError` naming the flag and what is allowed."""
    parts = urlsplit(url.strip())
    topic = parts.path.lstrip("/")
    if parts.scheme != "kafka" or not parts.netloc or not topic or "/" in topic or parts.query:
        raise LoadError(f"--via {url!r}: not kafka://HOST:PORT/TOPIC (e.g. kafka://localhost:9092/events; "
                        "several brokers: kafka://host1:9092,host2:9092/events)")
    client, source = {}, {}
    for key, value in (options or {}).items():
        if key.lower() in _SOURCE_MANAGED:
            raise LoadError(f"--via-option {key}: set by the harness from {_SOURCE_MANAGED[key.lower()]}")
        if key.lower().startswith("kafka."):
            client[key[len("kafka."):]] = value
        else:
            source[key] = value
    java_settings(client)  # a security setting Spark's Kafka source cannot take: refused now
    return Via(parts.netloc, topic, client, source)


@dataclass(frozen=True)
class PipelineTrigger:
    """The pipeline's trigger: ``processingTime`` (`seconds`; 0 = back to back), ``availableNow`` (the pipeline
    starts once the producer is done and stops when it has read everything) or ``realTime`` (batches of
    `seconds`)."""

    kind: str
    seconds: float = 0.0

    @property
    def text(self) -> str:
        if self.kind == "availableNow":
            return "availableNow"
        return f"realTime={self.seconds:g}s" if self.kind == "realTime" else f"{self.seconds:g}s"

    def apply(self, writer):
        """`writer` (a ``DataStreamWriter``) with this trigger."""
        ms = round(self.seconds * 1000)
        if self.kind == "availableNow":
            return writer.trigger(availableNow=True)
        if self.kind == "realTime":
            return writer.trigger(realTime=f"{ms} milliseconds")
        return writer.trigger(processingTime=f"{ms} milliseconds")


def parse_pipeline_trigger(text: str, flag: str = "--pipeline-trigger") -> PipelineTrigger:
    """``'1s'``, ``'500ms'``, ``'0'``, ``'availableNow'``, ``'realTime'`` (5 s batches) or ``'realTime=5 seconds'``."""
    value = str(text).strip()
    if value.lower() == "availablenow":
        return PipelineTrigger("availableNow")
    if value.lower().startswith("realtime"):
        rest = value[len("realtime"):].strip()
        if not rest:
            return PipelineTrigger("realTime", 5.0)
        if not rest.startswith("="):
            raise LoadError(f"{flag} {text!r}: write realTime=DURATION, e.g. realTime=5s")
        return PipelineTrigger("realTime", parse_seconds(rest[1:].strip(), flag))
    try:
        return PipelineTrigger("processingTime", parse_seconds(value, flag, allow_zero=True))
    except LoadError:
        raise LoadError(f"{flag} {text!r}: not a trigger; allowed: a processing-time interval (1s, 500ms, 0 = back "
                        "to back), availableNow, or realTime=DURATION (e.g. realTime=5s)") from None
