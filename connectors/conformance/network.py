"""The network between a sink and its target, for the conformance suite's network cases: a Toxiproxy proxy
in front of the target, a recording tap behind it, and the cut points of a recorded conversation.

The sink writes to the proxy (`Routed`: the adapter's options with the target's address replaced by the
proxy's); the proxy forwards to the tap, the tap to the target: sink → Toxiproxy → `Tap` → target. The
tap records the sizes of each connection's turns (`connectors.servers.tap.Conversation`), so a write's
conversation gives its cut points (`cut_points`), and it tells when a ``limit_data`` toxic cut a
connection, so the toxic is removed at once: every cut fires once, and the retry gets through.

Toxiproxy places ``limit_data`` at a byte itself; its ``reset_peer`` and ``timeout`` toxics fire at once on
every connection, so the tap adds them when the first connection reaches the cut's byte (`Tap.trigger`):
a reset is removed once that connection is gone, a stall (``timeout`` 0: nothing gets through) is held
`SinkAdapter.network_stall_s` seconds, long enough for the sink to give up on the connection.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, NamedTuple

from connectors.conformance.adapter import SinkAdapter
from connectors.servers.tap import DOWN, UP, Conversation, Tap

__all__ = ["CUT_KINDS", "Cut", "DOWN", "FULL_SWEEP_ENV", "KINDS", "Network", "Routed", "UP",
           "cut_points", "network_for"]


class Kind(NamedTuple):
    """A kind of cut point: where in a round trip (`at`: ``inside_request``, ``after_request`` or
    ``after_reply``), the Toxiproxy toxic that breaks the connection there, and the direction it goes."""

    at: str
    toxic: str   # limit_data (a close at the byte), reset_peer (a TCP reset), timeout (a stall: nothing passes)
    stream: str  # the direction the toxic is put on


#: every kind of cut point, by name. A close one byte short of each request, right after each request (the
#: last too: applied, its acknowledgement lost) and right after each reply; a reset right after each request;
#: a stall right after each reply (the sink's next request never arrives, and the sink gives up on the
#: connection: a retry by the client library on a new connection does not hide this one) and right after
#: each request (its reply never arrives).
KINDS = {
    "inside_request": Kind("inside_request", "limit_data", UP),
    "after_request": Kind("after_request", "limit_data", UP),
    "after_reply": Kind("after_reply", "limit_data", DOWN),
    "reset_after_request": Kind("after_request", "reset_peer", UP),
    "stall_after_request": Kind("after_request", "timeout", DOWN),
    "stall_after_reply": Kind("after_reply", "timeout", UP),
}
#: every kind; the suite runs an adapter's `SinkAdapter.cut_kinds`, or all with ``IMPULSE_FULL_SWEEP=1``
CUT_KINDS = tuple(KINDS)
FULL_SWEEP_ENV = "IMPULSE_FULL_SWEEP"
_VERB = {"limit_data": "cut", "reset_peer": "reset", "timeout": "stall"}


@dataclass(frozen=True)
class Cut:
    """Break a connection once `size` bytes went in `direction`, the `kind` of `KINDS` way; `where` says
    which point of the conversation that is, for messages."""

    direction: str
    size: int
    where: str
    kind: str  # a key of `KINDS`
    #: bytes the conversation carried the other way before the point: a stall or a reset fires only on a
    #: connection that carried as many (the partition's write, not a client's short-lived metadata connection)
    other: int = 0

    @property
    def toxic(self) -> str:
        return KINDS[self.kind].toxic

    def __str__(self) -> str:
        arrow = "sink → target" if self.direction == UP else "target → sink"
        return f"{_VERB[self.toxic]} {self.where} ({arrow} after {self.size} bytes)"


def cut_points(conversation: Conversation, kinds: tuple[str, ...] = CUT_KINDS, skip: int = 0) -> list[Cut]:
    """Every round-trip boundary of `conversation` after its first `skip` round trips (a client library's
    handshake), one cut point per boundary and kind of `kinds` (keys of `KINDS`) placed there, in order:

    - one byte short of each request (the target never gets it whole: nothing of it may count);
    - right after each request, before its reply (the target got it and may have applied it; the
      acknowledgement is lost) — the last request too;
    - right after each reply but the last, before the next request (the sink heard back; what it sends
      next is lost).

    A request is a run of bytes from the sink before the target answers, a reply the run back.
    """
    at = {}
    for name in kinds:
        at.setdefault(KINDS[name].at, []).append(name)
    return [Cut(cut.direction, cut.size, cut.where, name, cut.other) for round_trip, cut in _boundaries(conversation)
            if round_trip > skip for name in at.get(cut.kind, ())]


def _boundaries(conversation: Conversation) -> list[tuple[int, Cut]]:
    """The boundaries of `cut_points`, each with its round trip's number (from 1) and as a `Cut` whose `kind`
    is its place (`Kind.at`)."""
    cuts: list[tuple[int, Cut]] = []
    sent = {UP: 0, DOWN: 0}
    requests = replies = 0
    last = len(conversation.turns) - 1
    for index, (direction, size) in enumerate(conversation.turns):
        sent[direction] += size
        if direction == UP:
            requests += 1
            if size > 1:
                cuts.append((requests, Cut(UP, sent[UP] - 1, f"inside request {requests} (its last byte not sent)",
                                           "inside_request", sent[DOWN])))
            if index < last:
                cuts.append((requests, Cut(UP, sent[UP], f"after request {requests}"
                                           f"{' (the last)' if index == last - 1 else ''}, before its reply",
                                           "after_request", sent[DOWN])))
        else:
            replies += 1
            if index < last:
                cuts.append((replies, Cut(DOWN, sent[DOWN], f"after reply {replies}, before request {replies + 1}",
                                          "after_reply", sent[UP])))
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

    stall_s: float = 15.0  # how long a stall is held (the adapter's `SinkAdapter.network_stall_s`)

    def arm(self, cut: Cut) -> None:
        """Put `cut` on every connection through the proxy (open ones count their bytes from now)."""
        self.proxy.clear()
        self.tap.disarm()
        self.tap.reset()
        kind = KINDS[cut.kind]
        if kind.toxic == "limit_data":
            self.proxy.add_toxic("limit_data", kind.stream, bytes=cut.size)
        else:  # placed by the tap at the byte: Toxiproxy would fire it at once
            self.tap.trigger(cut.direction, cut.size, lambda: self.proxy.add_toxic(kind.toxic, kind.stream, timeout=0),
                             other=cut.other)

    def await_cut(self, cut: Cut, query_running: Callable[[], bool], timeout: float) -> Conversation | None:
        """Wait until a connection was broken at `cut` (the conversation), the query ended or `timeout` seconds
        passed (None); a stall is then held `stall_s` seconds (less if the query ends); then the toxic is
        removed, so the retry gets through."""
        stop = lambda: not query_running()  # noqa: E731 - a one-line predicate
        try:
            if KINDS[cut.kind].toxic == "limit_data":
                return self.tap.wait_for_cut(cut.direction, cut.size, timeout, stop=stop)
            fired = self.tap.wait_for_trigger(timeout, stop=stop)
            if fired is not None and KINDS[cut.kind].toxic == "timeout":
                _hold(self.stall_s, stop)
            elif fired is not None:  # reset_peer: until the connection is gone
                self.tap.wait_for_cut(cut.direction, cut.size, self.stall_s, stop=stop)
            return fired
        finally:
            self.tap.disarm()
            self.proxy.clear()


def _hold(seconds: float, stop: Callable[[], bool]) -> None:
    """Return after `seconds`, or as soon as `stop()` is true (polled every 50 ms)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not stop():
        time.sleep(0.05)


@contextmanager
def network_for(adapter: SinkAdapter, toxiproxy) -> Iterator[Network]:
    """The proxy (on the `toxiproxy` server) and the tap in front of `adapter`'s target (its
    `SinkAdapter.network_route`), removed on exit."""
    upstream, listen = adapter.network_route()
    with Tap(upstream) as tap:
        proxy = toxiproxy.proxy(tap.address, listen=listen)
        try:
            yield Network(proxy, tap, Routed(adapter, proxy.listen),
                          Routed(adapter, proxy.listen, adapter.network_options), adapter.network_stall_s)
        finally:
            proxy.delete()
