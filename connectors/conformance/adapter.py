"""What a sink author provides to run the conformance suite against a real target."""

from __future__ import annotations

import argparse
import io
from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.json as pajson

from connectors.readback import CannotReadBack, TargetReader
from connectors.servers.base import free_port

__all__ = ["SinkAdapter", "TargetReader", "CannotReadBack", "Poison", "events_from_json", "unused_port", "host_port", "with_address"]

#: A loopback port where nothing listens (bound and released at once): the servers' `free_port`, for the target
#: options of a stopped server (`SinkAdapter.unreachable_options`).
unused_port = free_port


Event = tuple[int, int]  # (subtask_index, counter)


@dataclass(frozen=True)
class Poison:
    """Rows a target refuses for good, for one namespace (made ready by `SinkAdapter.poison`).

    `columns` (SQL expressions over the impulse columns ``counter``, ``subtask_index``, ``timestamp``) is the
    frame given to the sink; with `options` the rows where `refused` holds are refused by the target;
    `dead_letter` adds the sink's dead-letter target. `read_back` and `read_dead_letters` give the
    ``(subtask_index, counter)`` of every row that landed and every dead letter, duplicates included.
    `words`: words the failure without a dead-letter target must contain (it names the row).
    """

    columns: list[str]
    options: Mapping[str, str]
    dead_letter: Mapping[str, str]
    refused: Callable[[Event], bool]
    read_back: Callable[[], list[Event]]
    read_dead_letters: Callable[[], list[Event]]
    words: tuple[str, ...] = field(default=("row",))
    #: a target without transactions (a webhook): without a dead-letter target, what the sink delivered before the
    #: refused request stays delivered, so only "no dead letter, and the query failed naming the row" is checked
    partial: bool = False


class SinkAdapter(ABC):
    """Binds the suite to one sink and one reachable target.

    Every test works in its own *namespace* (a short unique string such as ``t3f9a1c``): the adapter
    maps it to a key prefix, a topic, a URL path… so tests never see each other's data.
    """

    #: the sink's format name, e.g. ``"redis-sink"``
    format: str
    #: words the error must contain when the target cannot be reached
    unreachable_message: str = "cannot reach"
    #: whether the sink finds a replayed partition in the target and skips it; False for a sink that
    #: resends with stable keys and relies on the target to dedupe (the webhook)
    skips_replays: bool = True
    #: the delivery guarantee the run checks: ``exactly_once`` fails on a duplicate, ``at_least_once``
    #: counts duplicates (a lost event fails both)
    guarantee: str = "exactly_once"
    #: whether the sink takes the protocol's ``faultInjection`` option (Spark's own sinks do not)
    supports_fault_injection: bool = True
    #: bytes of the large value in the unusual-data case (a target with a smaller record limit lowers it)
    large_value_bytes: int = 1 << 20
    #: whether the sink appends per-batch metrics to ``metricsPath`` (`connectors.protocol.batch_summary`)
    reports_metrics: bool = True
    #: the running target, when the caller runs it: anything whose ``restart()`` listens again at the same
    #: address keeping its data (`connectors.servers.RedisServer`, ``KafkaBroker``, the reference receiver);
    #: it makes `restart_target` work. None: the suite skips its restart case.
    target_server = None
    #: writer options the cut sweep adds to `options` (for example smaller requests, one at a time, so a
    #: partition's write makes several round trips on one connection)
    network_options: Mapping[str, str] = {}
    #: seconds the cut sweep stalls a connection (a ``timeout`` toxic: nothing gets through), longer than
    #: the sink (with `network_options`) waits for an answer before it gives up on the connection
    network_stall_s: float = 15.0
    #: the kinds of cut point the cut sweep runs (keys of `connectors.conformance.network.KINDS`; all of
    #: them with ``IMPULSE_FULL_SWEEP=1``): by default a close one byte short of each request, right after
    #: each request and right after each reply
    cut_kinds: tuple[str, ...] = ("inside_request", "after_request", "after_reply")
    #: round trips at the start of a write's connection that are the client library's handshake, not the sink's:
    #: the cut sweep starts after them (cuts them too with ``IMPULSE_FULL_SWEEP=1``)
    network_handshake: int = 0
    #: SQL expressions over impulse's columns added to the rows the sink is given (in the suite's queries and in
    #: the driver process of the kill case alike), e.g. a key column that spreads the rows over many keys
    extra_columns: tuple[str, ...] = ()

    @abstractmethod
    def options(self, namespace: str) -> Mapping[str, str]:
        """Writer options that send the rows of a test to this target, isolated by `namespace`."""

    @classmethod
    def reader(cls, options: Mapping[str, str], receiver=None) -> TargetReader:
        """The one reader of this sink's target (`connectors.readback.TargetReader`) for the writer `options` of a
        run: what the conformance suite (`read_back`) and ``impulse-load --check`` read what landed with.
        `receiver`: the recording reference receiver (`connectors.servers.receiver.Receiver`) the caller runs, for a
        sink whose target only such a receiver can show. Built without contacting the target; `CannotReadBack`
        (or the sink's `connectors.errors.OptionError`) saying why `options` name a target it cannot read.
        Default: none, said so."""
        raise CannotReadBack(f"{cls.format}'s adapter ({cls.__name__}) has no reader of its target")

    def read_back(self, namespace: str) -> list[tuple[int, int]]:
        """``(subtask_index, counter)`` of every record that landed and is visible to a reader, duplicates included.

        The suite writes impulse rows (``counter``, ``subtask_index``, ``timestamp``) with the sink's default
        value encoding (the row as JSON) unless `options` says otherwise. Default: `reader` over
        ``options(namespace)``, its rows parsed as JSON.
        """
        return events_from_json(self.reader(self.options(namespace)).values())

    def frame(self, frame):
        """The DataFrame the sink is given, from the impulse rows (``counter``, ``subtask_index``,
        ``timestamp``). Default: those plus `extra_columns`; a sink that needs other columns (Spark's Kafka sink:
        ``value``) derives them here."""
        return frame.selectExpr("*", *self.extra_columns) if self.extra_columns else frame

    def prepare(self, namespace: str) -> None:
        """Create what a test's namespace needs (a topic…) before the query starts. Default: nothing."""

    def cleanup(self, namespace: str) -> None:
        """Remove what a test wrote. Default: nothing."""

    @abstractmethod
    def unreachable_options(self, namespace: str) -> Mapping[str, str]:
        """Options like `options` but pointing at an address where nothing listens."""

    def network_route(self) -> tuple[str, str | None] | None:
        """Where the network cases put a proxy: ``(upstream, listen)``, the target's ``host:port`` the proxy
        forwards to and the ``host:port`` it must listen on (None: any free port; a Kafka broker listener
        advertises a fixed one). Default None: the network cases are skipped, naming the adapter."""
        return None

    def options_via(self, namespace: str, address: str) -> Mapping[str, str]:
        """`options` with the target's address replaced by `address` (the proxy's ``host:port``); needed
        with `network_route`."""
        raise NotImplementedError(f"{type(self).__name__} has a network_route but no options_via")

    def poison(self, namespace: str) -> "Poison | None":
        """Rows this target refuses for good, made ready in `namespace` (`connectors.conformance.poison.Poison`):
        for the poison-record case. Default None: that case is skipped, naming the adapter."""
        return None

    def bad_options(self) -> list[tuple[Mapping[str, str], str]]:
        """Option overrides that must fail at query start, each with a word the error must contain."""
        return []

    def restart_target(self) -> None:
        """Stop the target and start it again at the same address with the same data, while a query writes
        to it (the suite calls it from another thread of the driver, with a task stalled mid-write).
        Default: `target_server`'s ``restart()``; not supported without one."""
        if self.target_server is None:
            raise NotImplementedError(f"{type(self).__name__} cannot restart its target")
        self.target_server.restart()

    @property
    def restarts_target(self) -> bool:
        """Whether `restart_target` works for this adapter: it has a `target_server`, or overrides the method."""
        return self.target_server is not None or type(self).restart_target is not SinkAdapter.restart_target

    # -- the command line (``python -m connectors.conformance <sink> …``) ----------------------------
    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Add the arguments that name a target of this sink (``--url``…). Default: none."""

    @classmethod
    @contextmanager
    def from_arguments(cls, args: argparse.Namespace) -> Iterator["SinkAdapter"]:
        """The adapter for the target the parsed `args` name, open for the whole run (a default receiver
        may be started here and stopped on exit). Default: ``cls()``."""
        yield cls()


def events_from_json(values: list[bytes]) -> list[tuple[int, int]]:
    """``(subtask_index, counter)`` of rows written as JSON objects, parsed in one vectorised pass."""
    if not values:
        return []
    table = pajson.read_json(io.BytesIO(b"\n".join(values)),
                             parse_options=pajson.ParseOptions(explicit_schema=pa.schema(
                                 [("subtask_index", pa.int64()), ("counter", pa.int64())]),
                                 unexpected_field_behavior="ignore"))
    return list(zip(table.column("subtask_index").to_pylist(), table.column("counter").to_pylist()))


def host_port(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port}"


def with_address(url: str, address: str) -> str:
    """`url` with its host and port replaced by `address` (``host:port``), credentials kept."""
    parts = urlsplit(url)
    credentials = parts.netloc.rpartition("@")[0]
    return parts._replace(netloc=f"{credentials}@{address}" if credentials else address).geturl()
