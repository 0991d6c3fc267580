"""A recording TCP relay (`Tap`): forwards every connection to an upstream ``host:port`` and keeps, per
connection, the sizes of what went each way in order (`Conversation`), so a test can find the round-trip
boundaries of a client's conversation with its server and cut the connection at each.

Placed behind a Toxiproxy proxy (client → proxy → tap → server) it also tells when a cut fired: a
connection that ended having carried at least N bytes in one direction (`Tap.wait_for_cut`); and it
places a fault Toxiproxy cannot place at a byte itself (`Tap.trigger`): the first connection to reach N
bytes in one direction runs an action (adding a ``timeout`` or ``reset_peer`` toxic) before that chunk
is forwarded.
Standard library only; one thread per connection and direction.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from connectors.servers.base import LOOPBACK

__all__ = ["Conversation", "Tap", "UP", "DOWN"]

UP, DOWN = "upstream", "downstream"  # client → server, server → client (Toxiproxy's names)


@dataclass
class Conversation:
    """One connection through the tap: ``turns`` are (direction, bytes) runs, consecutive chunks of one
    direction merged, in the order the tap saw them; ``closed`` once both sides ended."""

    turns: list[tuple[str, int]] = field(default_factory=list)
    closed: bool = False
    base: dict[str, int] = field(default_factory=lambda: {UP: 0, DOWN: 0})  # bytes before `Tap.reset`

    def add(self, direction: str, size: int) -> None:
        if self.turns and self.turns[-1][0] == direction:
            self.turns[-1] = (direction, self.turns[-1][1] + size)
        else:
            self.turns.append((direction, size))

    def total(self, direction: str) -> int:
        """Bytes carried in `direction` since the conversation began, or since `Tap.reset` if it was open then."""
        return sum(size for d, size in self.turns if d == direction) - self.base[direction]


class Tap:
    """``with Tap("127.0.0.1:6379") as tap: … tap.address …``: listens on a free loopback port, of `listen` (another
    loopback address, e.g. ``127.0.0.2``: a name a server's TLS certificate does not hold)."""

    def __init__(self, upstream: str, listen: str = LOOPBACK) -> None:
        self.listen = listen
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.conversations: list[Conversation] = []
        self._lock = threading.Condition()
        self._listener: socket.socket | None = None
        self._sockets: set[socket.socket] = set()
        self._trigger: tuple[str, int, int, Callable[[], None], Callable[[Conversation], bool]] | None = None
        self.triggered: Conversation | None = None  # the connection the armed trigger fired on

    @property
    def address(self) -> str:
        return f"{self.listen}:{self._listener.getsockname()[1]}"

    def start(self) -> "Tap":
        self._listener = socket.create_server((self.listen, 0))
        threading.Thread(target=self._accept, name="impulse-tap", daemon=True).start()
        return self

    def stop(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        with self._lock:
            sockets, self._sockets = list(self._sockets), set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    close = stop

    def __enter__(self) -> "Tap":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def reset(self) -> None:
        """Forget the conversations that ended; count the open ones' bytes from now on (as a toxic added
        now counts them)."""
        with self._lock:
            self.conversations = [c for c in self.conversations if not c.closed]
            for conversation in self.conversations:
                conversation.base = {UP: conversation.total(UP) + conversation.base[UP],
                                     DOWN: conversation.total(DOWN) + conversation.base[DOWN]}

    def trigger(self, direction: str, size: int, action: Callable[[], None], other: int = 0,
                accept: Callable[[Conversation], bool] = lambda conversation: True) -> None:
        """Run `action` once, on the first connection whose bytes in `direction` (counted as `Conversation.total`)
        reach `size` having carried at least `other` bytes the other way and that `accept` (given the
        conversation so far, that chunk included) takes, before the chunk holding byte `size` is forwarded;
        `triggered` is then that conversation."""
        with self._lock:
            self._trigger, self.triggered = (direction, size, other, action, accept), None

    def disarm(self) -> None:
        with self._lock:
            self._trigger = None

    def wait_for_trigger(self, timeout: float, stop: Callable[[], bool] = lambda: False) -> Conversation | None:
        """The conversation the armed `trigger` fired on, or None after `timeout` seconds or once `stop()` is true."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self.triggered is None and time.monotonic() < deadline and not stop():
                self._lock.wait(0.05)
            return self.triggered

    def snapshot(self) -> list[Conversation]:
        with self._lock:
            return [Conversation(list(c.turns), c.closed, dict(c.base)) for c in self.conversations]

    def wait_for_cut(self, direction: str, size: int, timeout: float,
                     stop: Callable[[], bool] = lambda: False) -> Conversation | None:
        """The first conversation that ended having carried at least `size` bytes in `direction` (a
        ``limit_data`` toxic of that size cut it), or None after `timeout` seconds or once `stop()` is true."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                for conversation in self.conversations:
                    if conversation.closed and conversation.total(direction) >= size:
                        return conversation
                if time.monotonic() >= deadline or stop():
                    return None
                self._lock.wait(0.05)

    # -- relaying ---------------------------------------------------------------------------------------
    def _accept(self) -> None:
        listener = self._listener
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=10)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            conversation = Conversation()
            with self._lock:
                self.conversations.append(conversation)
                self._sockets |= {client, server}
            ends = [False, False]
            for index, (source, sink, direction) in enumerate(((client, server, UP), (server, client, DOWN))):
                threading.Thread(target=self._pump, args=(source, sink, direction, conversation, ends, index),
                                 daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, direction: str, conversation: Conversation,
              ends: list[bool], index: int) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                with self._lock:
                    conversation.add(direction, len(data))
                    trigger = self._trigger
                    if trigger is not None and trigger[0] == direction and conversation.total(direction) >= trigger[1] \
                            and conversation.total(DOWN if direction == UP else UP) >= trigger[2] \
                            and trigger[4](conversation):
                        self._trigger, action = None, trigger[3]
                    else:
                        action = None
                if action is not None:
                    action()
                    with self._lock:
                        self.triggered = conversation
                        self._lock.notify_all()
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)
            with self._lock:
                ends[index] = True
                if all(ends):
                    conversation.closed = True
                    for sock in (source, sink):
                        self._sockets.discard(sock)
                        sock.close()
                self._lock.notify_all()
