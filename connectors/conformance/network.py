"""The network between a sink and its target, for the conformance suite's network cases: a Toxiproxy proxy
in front of the target, a recording tap behind it, and the cut points of a recorded conversation.

The sink writes to the proxy (`Routed`: the adapter's options with the target's address replaced by the
proxy's); the proxy forwards to the tap, the tap to the target: sink → Toxiproxy → `Tap` → target. The
tap records the sizes of each connection's turns (`connectors.servers.tap.Conversation`), so a write's
conversation gives its cut points (`cut_points`), and it tells when a ``limit_data`` toxic cut a
connection, so the toxic is removed at once: every cut fires once, and the retry gets through.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping

from connectors.conformance.adapter import SinkAdapter
from connectors.servers.tap import DOWN, UP, Conversation, Tap

__all__ = ["CUT_KINDS", "Cut", "DOWN", "Network", "Routed", "UP", "cut_points", "network_for"]

#: the kinds of cut point: one byte short of a request, right after a request, right after a reply
CUT_KINDS = ("inside_request", "after_request", "after_reply")


@dataclass(frozen=True)
class Cut:
    """Cut a connection once `size` bytes went in `direction` (Toxiproxy's ``limit_data``); `where` says
    which point of the conversation that is, for messages."""

    direction: str
    size: int
    where: str
    kind: str  # one of `CUT_KINDS`

    def __str__(self) -> str:
        arrow = "sink → target" if self.direction == UP else "target → sink"
        return f"cut {self.where} ({arrow} after {self.size} bytes)"


def cut_points(conversation: Conversation) -> list[Cut]:
    """Every round-trip boundary of `conversation`, each one cut point, in order:

    - one byte short of each request (the target never gets it whole: nothing of it may count);
    - right after each request, before its reply (the target got it and may have applied it; the
      acknowledgement is lost) — the last request too;
    - right after each reply but the last, before the next request (the sink heard back; what it sends
      next is lost).

    A request is a run of bytes from the sink before the target answers, a reply the run back.
    """
    cuts: list[Cut] = []
    sent = {UP: 0, DOWN: 0}
    requests = replies = 0
    last = len(conversation.turns) - 1
    for index, (direction, size) in enumerate(conversation.turns):
        sent[direction] += size
        if direction == UP:
            requests += 1
            if size > 1:
                cuts.append(Cut(UP, sent[UP] - 1, f"inside request {requests} (its last byte not sent)",
                                "inside_request"))
            if index < last:
                cuts.append(Cut(UP, sent[UP], f"after request {requests}{' (the last)' if index == last - 1 else ''}, "
                                              "before its reply", "after_request"))
        else:
            replies += 1
            if index < last:
                cuts.append(Cut(DOWN, sent[DOWN], f"after reply {replies}, before request {replies + 1}", "after_reply"))
    return cuts


class Routed:
    """`inner` (a `SinkAdapter`), with its sink sent to `address` (a proxy's ``host:port``) and `extra`
    options added; everything else (format, reading back, preparing, cleaning up…) is `inner`'s."""

    def __init__(self, inner: SinkAdapter, address: str, extra: Mapping[str, str] | None = None) -> None:
        self.inner, self.address, self.extra = inner, address, dict(extra or {})

    def options(self, namespace: str) -> Mapping[str, str]:
        return {**self.inner.options_via(namespace, self.address), **self.extra}

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


@dataclass
class Network:
    """A proxy (``connectors.servers.toxiproxy.Proxy``) in front of the tap in front of the target."""

    proxy: object
    tap: Tap
    adapter: Routed       # the sink through the proxy
    cut_adapter: Routed   # the same with the adapter's `SinkAdapter.network_options`, for the cut sweep

    def recorded(self) -> Conversation:
        """The conversation that carried the most bytes from the sink since the last `Tap.reset`: a partition's write."""
        conversations = self.tap.snapshot()
        if not conversations:
            raise AssertionError("the tap recorded no connection: did the sink write through the proxy?")
        return max(conversations, key=lambda c: (c.total(UP), c.total(DOWN)))

    def arm(self, cut: Cut) -> None:
        """Put `cut` on every connection through the proxy (open ones count their bytes from now)."""
        self.proxy.clear()
        self.tap.reset()
        self.proxy.add_toxic("limit_data", cut.direction, bytes=cut.size)

    def await_cut(self, cut: Cut, query_running: Callable[[], bool], timeout: float) -> Conversation | None:
        """Wait until a connection was cut at `cut` (the conversation), the query ended or `timeout` seconds
        passed (None); then remove the toxic, so the retry gets through."""
        try:
            return self.tap.wait_for_cut(cut.direction, cut.size, timeout, stop=lambda: not query_running())
        finally:
            self.proxy.clear()


@contextmanager
def network_for(adapter: SinkAdapter, toxiproxy) -> Iterator[Network]:
    """The proxy (on the `toxiproxy` server) and the tap in front of `adapter`'s target (its
    `SinkAdapter.network_route`), removed on exit."""
    upstream, listen = adapter.network_route()
    with Tap(upstream) as tap:
        proxy = toxiproxy.proxy(tap.address, listen=listen)
        try:
            yield Network(proxy, tap, Routed(adapter, proxy.listen),
                          Routed(adapter, proxy.listen, adapter.network_options))
        finally:
            proxy.delete()
