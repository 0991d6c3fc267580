"""The webhook sink's conformance adapter (see `connectors.conformance.adapter.SinkAdapter`)."""

from __future__ import annotations

import argparse
import json
from contextlib import contextmanager
from typing import Iterator, Mapping
from urllib.parse import urlsplit

from connectors.conformance.adapter import Poison, SinkAdapter, events_from_json, host_port, unused_port, with_address
from connectors.readback import CannotReadBack, TargetReader
from connectors.servers.receiver import Receiver

__all__ = ["WebhookAdapter", "ReceiverReader"]


class WebhookAdapter(SinkAdapter):
    """The webhook sink posting to an HTTP receiver that dedupes by ``Idempotency-Key``.

    `receiver` is the project's reference receiver, `connectors.servers.receiver.Receiver` started with
    ``record=True`` (or anything with its ``url``, ``accepted_requests`` — the first 2xx request per
    key, each with ``path``, ``headers`` and ``body`` — and ``reset()``). Each namespace is a URL path
    (``/<namespace>``; commit notices go to ``/<namespace>/commit``). What "landed" is what such a
    receiver keeps: the sink is at-least-once with stable keys, effectively-once only with a deduping
    receiver. The adapter owns the receiver: `cleanup` forgets everything it recorded.
    """

    format = "webhook-sink"
    unreachable_message = "cannot reach"
    skips_replays = False
    #: four requests per partition of the network cases, one at a time on one connection
    network_options = {"batchSize": "25", "maxInFlight": "1"}

    def __init__(self, receiver, **options: str) -> None:
        self.receiver = self.target_server = receiver  # restarts on the same port, keeping every key it accepted
        self.extra = {k: str(v) for k, v in options.items()}

    @classmethod
    @contextmanager
    def from_arguments(cls, args: argparse.Namespace) -> Iterator["WebhookAdapter"]:
        """The command line's webhook target: the reference receiver, started on a free loopback port."""
        with Receiver(record=True) as receiver:
            yield cls(receiver)

    def options(self, namespace: str) -> Mapping[str, str]:
        parts = urlsplit(self.receiver.url)
        base = f"{parts.scheme}://{parts.netloc}"
        return {"url": f"{base}/{namespace}", "commitUrl": f"{base}/{namespace}/commit", "batchSize": "100",
                "maxInFlight": "4", "retryBackoff": "50ms", **self.extra}

    def network_route(self) -> tuple[str, str | None]:
        return host_port(self.receiver.url), None

    def options_via(self, namespace: str, address: str) -> Mapping[str, str]:
        return {key: with_address(value, address) if key in ("url", "commitUrl") else value
                for key, value in self.options(namespace).items()}

    @classmethod
    def reader(cls, options: Mapping[str, str], receiver=None) -> "ReceiverReader":
        url = next((str(v) for k, v in options.items() if k.lower() == "url"), "")
        if receiver is None or not getattr(receiver, "record", False) or not url.startswith(receiver.url):
            raise CannotReadBack("webhook-sink's rows are read back from the embedded receiver only (a recording "
                                 "reference receiver): leave out the url option (an HTTP server of yours cannot be "
                                 "read back)")
        return ReceiverReader(receiver, url)

    def read_back(self, namespace: str) -> list[tuple[int, int]]:
        reader = ReceiverReader(self.receiver, f"{self.receiver.url.rstrip('/')}/{namespace}")
        return events_from_json(reader.values())

    def poison(self, namespace: str) -> Poison:
        """The receiver answers 422 to a request under ``/<namespace>`` holding a row with ``counter % 10 == 3``
        (as an API refuses a row it cannot accept); ``deadLetterUrl`` is ``/<namespace>-dead``. A webhook has no
        transaction: the requests delivered before the refused one stay delivered (`Poison.partial`)."""
        refused_lane = 3
        self.receiver.refuse_rows(lambda row: isinstance(row, dict) and row.get("counter", -1) % 10 == refused_lane,
                                  f"/{namespace}")
        parts = urlsplit(self.receiver.url)
        dead = f"/{namespace}-dead"

        def dead_letters() -> list[tuple[int, int]]:
            rows = [json.loads(r.body)["row"] for r in self.receiver.accepted_requests if r.path.split("?")[0] == dead]
            return [(row["subtask_index"], row["counter"]) for row in rows]

        return Poison(columns=["counter", "subtask_index", "timestamp"], options=self.options(namespace),
                      dead_letter={"deadLetterUrl": f"{parts.scheme}://{parts.netloc}{dead}"},
                      refused=lambda event: event[1] % 10 == refused_lane, read_back=lambda: self.read_back(namespace),
                      read_dead_letters=dead_letters, words=("the request held row", "deadLetterUrl"), partial=True)

    def cleanup(self, namespace: str) -> None:
        self.receiver.reset()

    def unreachable_options(self, namespace: str) -> Mapping[str, str]:
        return {**self.options(namespace), "url": f"http://127.0.0.1:{unused_port()}/{namespace}",
                "writeRetries": "1", "retryBackoff": "10ms"}

    def bad_options(self) -> list[tuple[Mapping[str, str], str]]:
        return [({"url": "ftp://127.0.0.1/x"}, "url"), ({"method": "GET"}, "method"), ({"retryOn": "5xx,oops"}, "retryOn"),
                ({"batchSize": "0"}, "batchSize"), ({"format": "xml"}, "format"), ({"timeout": "5"}, "timeout"),
                ({"commitUrl": "not a url"}, "commitUrl")]


class ReceiverReader(TargetReader):
    """The rows of the requests a recording receiver accepted (the first 2xx request per ``Idempotency-Key``) under
    `url`'s path since `prepare`: each line of an NDJSON body, each element of a JSON array body, a JSON object body.
    What landed is what a deduping receiver keeps."""

    def __init__(self, receiver, url: str) -> None:
        self.receiver, self.path, self.start = receiver, urlsplit(url).path, 0

    def describe(self) -> str:
        return f"the receiver's rows under {self.path}"

    def prepare(self) -> None:
        self.start = len(self.receiver.accepted_requests)

    def values(self) -> list[bytes]:
        rows: list[bytes] = []
        for request in self.receiver.accepted_requests[self.start:]:
            if request.path.split("?")[0] != self.path:
                continue
            if request.headers.get("Content-Type", "").startswith("application/x-ndjson"):
                rows += [line for line in request.body.split(b"\n") if line.strip()]
            else:
                body = json.loads(request.body)
                rows += [json.dumps(row).encode() for row in (body if isinstance(body, list) else [body])]
        return rows
