"""The network between a sink and its target, for the conformance suite's network cases: a Toxiproxy proxy
in front of the target, a recording tap behind it, and the cut points of a recorded conversation.

The sink writes to the proxy (`Routed`: the adapter's options with the target's address replaced by the
proxy's); the proxy forwards to the tap, the tap to the target: sink → Toxiproxy → `Tap` → target. The
tap records the sizes of each connection's turns (`connectors.servers.tap.Conversation`), so a write's
conversation gives its cut points (`cut_points`), and it tells when a ``limit_data`` toxic cut a
connection, so the toxic is removed at once: every cut fires once, and the retry gets through.

Toxiproxy places ``limit_data`` at a byte itself; its ``reset_peer`` and ``timeout`` toxics fire at once on
every connection, so the tap adds them when the first connection reaches the cut's byte after the turns
recorded before it (`Tap.trigger`, `Cut.landed`):
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

__all__ = ["CONTEXT", "CUT_KINDS", "Cut", "DOWN", "FULL_SWEEP_ENV", "KINDS", "Network", "Routed", "UP",
           "alike", "context_of", "cut_points", "network_for"]


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
    #: the last `CONTEXT` turns of the recorded conversation up to the point (`context_of`): what makes a
    #: point the same one in another run, where a client may add, drop or merge a round trip before it
    context: tuple[tuple[str, int], ...] = ()

    @property
    def toxic(self) -> str:
        return KINDS[self.kind].toxic

    def landed(self, conversation: Conversation) -> bool:
        """Whether this cut, fired on `conversation`, broke it at the recorded point: the turns up to its byte are
        the recorded ones (`alike`). Byte counts alone can mislead: a client that retries a request of the same
        size earlier in one run (librdkafka's AddPartitionsToTxn under load) puts another round trip there."""
        found = context_of(conversation, self.direction, self.size)
        return found is not None and alike(found, self.context)

    def same_point(self, other: "Cut") -> bool:
        """Whether `other` is this point, at these byte counts or others (another run's conversation may hold it
        elsewhere): the same kind after alike turns."""
        return self.kind == other.kind and alike(self.context, other.context)

    def same_place(self, other: "Cut") -> bool:
        """Whether `other` is this point at about these byte counts: a cut at either fires at the same place."""
        return self.same_point(other) and _near(self.size, other.size) and _near(self.other, other.other)

    def __str__(self) -> str:
        arrow = "sink → target" if self.direction == UP else "target → sink"
        return f"{_VERB[self.toxic]} {self.where} ({arrow} after {self.size} bytes)"


def alike(a: tuple[tuple[str, int], ...], b: tuple[tuple[str, int], ...]) -> bool:
    """Whether two runs of turns are the same exchange: the same directions, each turn's size within 1 %
    (2 bytes at least: Redis's replies to a connection's handshake carry its id, one digit longer from run to run)."""
    return len(a) == len(b) and all(x == y and _near(m, n) for (x, m), (y, n) in zip(a, b))


def _near(m: int, n: int) -> bool:
    return abs(m - n) <= max(2, min(m, n) // 100)


#: turns of a conversation that name a point (`Cut.context`): two round trips, enough to tell the reply to a
#: commit from the reply to the write before it, few enough that a difference in a client's handshake does not
#: make every later point a new one
CONTEXT = 4


def context_of(conversation: Conversation, direction: str, size: int) -> tuple[tuple[str, int], ...] | None:
    """The last `CONTEXT` turns of `conversation` up to its byte `size` in `direction` (counted as
    `Conversation.total`), the turn holding that byte cut there; None if it never carried that many."""
    found = _turn_holding(conversation, direction, size)
    if found is None:
        return None
    index, before = found
    return tuple([*conversation.turns[max(0, index + 1 - CONTEXT):index], (direction, size - before)])


def _turn_holding(conversation: Conversation, direction: str, size: int) -> tuple[int, int] | None:
    """The index of the turn of `conversation` that carried its byte `size` in `direction` (counted from
    `Tap.reset`), with the bytes that direction carried before that turn."""
    sent = {UP: -conversation.base[UP], DOWN: -conversation.base[DOWN]}
    for index, (way, bytes_) in enumerate(conversation.turns):
        if way == direction and sent[way] + bytes_ >= size:
            return index, sent[way]
        sent[way] += bytes_
    return None


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
    return [Cut(cut.direction, cut.size, cut.where, name, cut.other, context_of(conversation, cut.direction, cut.size))
            for round_trip, cut in _boundaries(conversation) if round_trip > skip and cut.size > 0
            for name in at.get(cut.kind, ())]


def _boundaries(conversation: Conversation) -> list[tuple[int, Cut]]:
    """The boundaries of `cut_points`, each with its round trip's number (from 1) and as a `Cut` whose `kind`
    is its place (`Kind.at`)."""
    cuts: list[tuple[int, Cut]] = []
    sent = {UP: -conversation.base[UP], DOWN: -conversation.base[DOWN]}  # counted as the toxics count: from `Tap.reset`
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
                             other=cut.other, accept=cut.landed)  # only where the recorded turns led to it

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
