"""The load harness's use of the reference receiver (`connectors.servers.receiver.Receiver`, which lives
with the test servers): when ``impulse-load`` embeds one, and the options that point the webhook sink at it."""

from __future__ import annotations

from typing import Mapping

from connectors.servers.receiver import ReceivedRequest, Receiver, ReceiverCounts, count_rows

__all__ = ["Receiver", "ReceiverCounts", "ReceivedRequest", "needs_receiver", "embedded_options", "count_rows"]

# What the webhook sink is told when it writes to the embedded receiver (a given option wins).
EMBEDDED_DEFAULTS = {"format": "ndjson", "batchSize": "500"}


def needs_receiver(sink: str, options: Mapping[str, str]) -> bool:
    """The embedded default: webhook-sink with no ``url`` option."""
    return sink == "webhook-sink" and not any(k.lower() == "url" for k in options)


def embedded_options(receiver: "Receiver", options: Mapping[str, str]) -> dict[str, str]:
    """`options` plus the receiver's url (path ``/events``) and `EMBEDDED_DEFAULTS` (NDJSON: rows are counted by line)."""
    given = {k.lower() for k in options}
    out = {"url": f"{receiver.url}/events", **{k: v for k, v in EMBEDDED_DEFAULTS.items() if k.lower() not in given}}
    out.update(options)
    return out
